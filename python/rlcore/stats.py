"""Typed, frozen statistics returned by collectors and trainers, and their flattening for loggers.

Algorithm statistics (``DQNStats``, ``SACStats``, ...) live beside their algorithms; this module holds
what the collector and the trainer report. :func:`flatten_stats` turns an :class:`EpochStats` into the
namespaced metric dict the loggers write (``rollout/``, ``train/``, ``eval/``, ``time/``).

A stats field declared with :func:`not_logged` (e.g. the PER priorities an off-policy ``update`` hands
back) travels with the record but is neither logged by :func:`flatten_stats` nor averaged by
:func:`mean_stats`; :func:`logged_fields` lists the others.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import numpy as np

__all__ = [
    "CollectStats",
    "EpisodeStats",
    "EpochStats",
    "EvalStats",
    "TimeStats",
    "flatten_stats",
    "logged_fields",
    "mean_stats",
    "not_logged",
]


def not_logged(default: Any = None) -> Any:
    """A stats dataclass field that is carried but never logged nor averaged.

    It defaults to ``default``, is left out of ``repr`` and ``==``, and is marked
    ``metadata={"log": False}``, which :func:`flatten_stats` and :func:`mean_stats` skip (the mean of
    several records gets ``default`` there). Use it for per-sample arrays such as PER priorities.
    """
    return dataclasses.field(default=default, repr=False, compare=False, metadata={"log": False})


def logged_fields(stats: Any) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of a stats dataclass (class or instance) that are logged and averaged: all but
    those declared with :func:`not_logged`.

    Raises:
        TypeError: ``stats`` is not a dataclass.
    """
    return tuple(f for f in dataclasses.fields(stats) if f.metadata.get("log", True))


@dataclass(frozen=True)
class CollectStats:
    """What one ``Collector.collect`` call did."""

    env_steps: int
    """Transitions written (rows of NEXT_STEP autoreset are not transitions and are not counted)."""
    vector_steps: int
    """Calls to ``envs.step``."""
    episode_returns: tuple[float, ...]
    """Undiscounted return of each episode that ended during the call, with the env's own reward."""
    episode_lengths: tuple[int, ...]
    """Length in env steps of each episode that ended during the call."""
    episode_successes: tuple[float, ...]
    """``info["is_success"]`` at the last step of each ended episode (empty if the env has none)."""
    duration_s: float
    """Wall-clock seconds spent in the call."""


@dataclass(frozen=True)
class EpisodeStats:
    """Summary of a set of finished episodes (NaN means: no episode finished)."""

    episodes: int
    """Number of finished episodes."""
    return_mean: float
    """Mean undiscounted return."""
    return_std: float
    """Standard deviation of the returns."""
    length_mean: float
    """Mean episode length in env steps."""
    success_rate: float
    """Mean of ``is_success`` over the episodes that report it (NaN when none does)."""

    @classmethod
    def from_episodes(
        cls, returns: Sequence[float], lengths: Sequence[int], successes: Sequence[float]
    ) -> Self:
        """Summarise per-episode lists."""
        nan = float("nan")
        return cls(
            episodes=len(returns),
            return_mean=float(np.mean(returns)) if returns else nan,
            return_std=float(np.std(returns)) if returns else nan,
            length_mean=float(np.mean(lengths)) if lengths else nan,
            success_rate=float(np.mean(successes)) if successes else nan,
        )


@dataclass(frozen=True)
class EvalStats(EpisodeStats):
    """Deterministic-policy evaluation on separate envs."""


@dataclass(frozen=True)
class TimeStats:
    """Counters and wall-clock timings of one trainer iteration."""

    env_steps: int
    """Cumulative env steps (transitions) collected for training since the start."""
    grad_steps: int
    """Cumulative gradient steps since the start."""
    episodes: int
    """Cumulative finished training episodes."""
    collect_s: float
    """Seconds collecting in this iteration."""
    update_s: float
    """Seconds sampling and updating in this iteration."""
    eval_s: float
    """Seconds evaluating in this iteration (0 when no evaluation ran)."""
    iteration_s: float
    """Seconds of the whole iteration."""
    env_steps_per_s: float
    """Env steps of this iteration divided by its wall-clock time (collection plus updates)."""


@dataclass(frozen=True)
class EpochStats:
    """What one ``next(trainer)`` yields: a fully populated, frozen record of the iteration."""

    iteration: int
    """1-based index of the iteration."""
    env_steps: int
    """Cumulative training env steps after this iteration."""
    grad_steps: int
    """Cumulative gradient steps after this iteration."""
    rollout: EpisodeStats
    """Training episodes that ended in this iteration."""
    train: Any
    """The algorithm's stats (e.g. ``SACStats``) averaged over this iteration's gradient steps;
    ``None`` when no gradient step ran (warm-up)."""
    eval: EvalStats | None
    """Evaluation of this iteration, or ``None`` when none was due."""
    time: TimeStats
    """Counters and timings."""


S = TypeVar("S")


def mean_stats(stats: Sequence[S]) -> S | None:
    """Field-wise mean of a sequence of stats dataclasses of one type; ``None`` for an empty sequence.

    Fields declared with :func:`not_logged` are not averaged: the mean record gets their default.

    Raises:
        TypeError: the items are not dataclasses of one type.
    """
    if not stats:
        return None
    cls = type(stats[0])
    if not dataclasses.is_dataclass(cls) or any(type(s) is not cls for s in stats):
        raise TypeError("mean_stats expects dataclass instances of a single type")
    fields = [f.name for f in logged_fields(cls)]
    means = {name: float(np.mean([getattr(s, name) for s in stats])) for name in fields}
    return cls(**means)  # type: ignore[return-value]


def _put(out: dict[str, float], prefix: str, obj: Any) -> None:
    if obj is None:
        return
    for f in logged_fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
            out[f"{prefix}/{f.name}"] = float(value)


def flatten_stats(stats: EpochStats) -> dict[str, float]:
    """Namespaced metrics of an iteration: ``rollout/*``, ``train/*``, ``eval/*``, ``time/*``.

    NaN entries (no episode finished, no success signal), ``None`` sections and fields declared with
    :func:`not_logged` are left out.
    """
    out: dict[str, float] = {"time/iteration": float(stats.iteration)}
    _put(out, "rollout", stats.rollout)
    _put(out, "train", stats.train)
    _put(out, "eval", stats.eval)
    _put(out, "time", stats.time)
    return out
