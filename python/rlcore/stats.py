"""Typed, frozen statistics returned by collectors and trainers, and their flattening for loggers.

Algorithm statistics (``DQNStats``, ``SACStats``, ...) live beside their algorithms; this module holds
what the collector and the trainer report. :func:`flatten_stats` turns an :class:`EpochStats` into the
namespaced metric dict the loggers write (``rollout/``, ``train/``, ``eval/``, ``time/``).
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
    "mean_stats",
]


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

    Raises:
        TypeError: the items are not dataclasses of one type.
    """
    if not stats:
        return None
    cls = type(stats[0])
    if not dataclasses.is_dataclass(cls) or any(type(s) is not cls for s in stats):
        raise TypeError("mean_stats expects dataclass instances of a single type")
    fields = [f.name for f in dataclasses.fields(cls)]
    means = {name: float(np.mean([getattr(s, name) for s in stats])) for name in fields}
    return cls(**means)  # type: ignore[return-value]


def _put(out: dict[str, float], prefix: str, obj: Any) -> None:
    if obj is None:
        return
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
            out[f"{prefix}/{f.name}"] = float(value)


def flatten_stats(stats: EpochStats) -> dict[str, float]:
    """Namespaced metrics of an iteration: ``rollout/*``, ``train/*``, ``eval/*``, ``time/*``.

    NaN entries (no episode finished, no success signal) and ``None`` sections are left out.
    """
    out: dict[str, float] = {"time/iteration": float(stats.iteration)}
    _put(out, "rollout", stats.rollout)
    _put(out, "train", stats.train)
    _put(out, "eval", stats.eval)
    _put(out, "time", stats.time)
    return out
