"""The loop every rlcore trainer shares: the iterator protocol, evaluation on its schedule with its
seeds, the :class:`~rlcore.stats.EpochStats` of an iteration, ``run()``, and checkpoints with the
RNG states (save, load, resume; :mod:`rlcore.trainers.checkpoint`).

A trainer subclasses :class:`Trainer` (the one abstract base of the trainers) and says two things:

* what one iteration does: its ``__next__`` reads top to bottom, collect -> update -> evaluate,
  and ends with ``self.iteration += 1``, ``self._evaluate_if_due(...)`` and
  ``self._epoch_stats(...)``;
* what its state is: :meth:`Trainer._own_state` (what a checkpoint stores beyond the algorithm,
  the shared counters and the RNGs) and :meth:`Trainer._load_own_state` (restore it).

Contract shared by every trainer:

* ``iter(trainer)`` returns the trainer itself and never resets anything: a ``for`` loop that is
  left early and started again continues where it stopped, and several trainers can be advanced
  side by side with ``zip``.
* Evaluation runs every ``config.eval_every`` iterations and at the last one; an evaluation after
  iteration i resets the eval envs with :func:`eval_seed` ``(config.seed, i)`` =
  ``seed + 10_000 + 1_000 * i``.
* After any ``next()``, :meth:`Trainer.save_checkpoint` stores the algorithm, the counters
  (``iteration``, ``grad_steps``, ``evaluations`` and the trainer's own), the trainer's own parts
  (collector, sampler, buffer, env snapshot) and the process RNGs; a fresh trainer built the same
  way and given :meth:`Trainer.load_checkpoint` continues with the same next stats (with
  ``trust_env_state=True`` when the envs have a snapshot).
* :meth:`Trainer.run` with a ``checkpoint_dir`` writes a checkpoint there every
  ``config.checkpoint_every`` env steps (gradient steps offline), at the end, and when SIGINT or
  SIGTERM arrives (then it raises :class:`~rlcore.trainers.signals.RunInterrupted`); a second
  signal aborts at once. A checkpoint write is atomic: a kill during one leaves the previous one.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from rlcore.collect.evaluate import evaluate
from rlcore.errors import ApiUsageError, CheckpointError, InvalidValueError
from rlcore.logging import Logger
from rlcore.stats import CollectStats, EpisodeStats, EpochStats, EvalStats, TimeStats
from rlcore.trainers import checkpoint
from rlcore.trainers.signals import RunInterrupted, StopSignals
from rlcore.types import Policy, StatefulPolicy

__all__ = ["IterationClock", "OwnState", "RunInterrupted", "Trainer", "at_least", "eval_seed"]


def eval_seed(seed: int, iteration: int) -> int:
    """Reset seed of the eval envs for an evaluation after iteration ``iteration``:
    ``(seed + 10_000 + 1_000 * iteration) mod 2**31``, apart from the training envs' ``seed`` and
    from :func:`rlcore.trainers.checkpoint.resume_seed`. A function of the iteration alone, so a
    run stopped and resumed evaluates with the seeds of the uninterrupted run (an extra evaluation
    at the stop changes nothing after it)."""
    return (seed + 10_000 + 1_000 * iteration) % 2**31


def at_least(name: str, value: float | None, minimum: float, *, optional: bool = False) -> None:
    """Check one config field: ``value >= minimum`` (or ``None`` when ``optional``).

    Raises:
        InvalidValueError: it is not (a ``ValueError``); the message names the field.
    """
    if value is None and optional:
        return
    if value is None or not value >= minimum:
        raise InvalidValueError(
            f"{name} must be >= {minimum}{' or None' if optional else ''}, got {value}"
        )


class IterationClock:
    """Wall-clock marks of one iteration (``time.perf_counter`` seconds): built at its start,
    :meth:`collected` after collecting, :meth:`updated` after the gradient steps. A mark that is
    never set stays at the one before (an offline trainer collects nothing: 0 s)."""

    def __init__(self) -> None:
        self.start = self.collected_at = self.updated_at = time.perf_counter()

    def collected(self) -> None:
        """Collection has ended."""
        self.collected_at = self.updated_at = time.perf_counter()

    def updated(self) -> None:
        """The gradient steps have ended."""
        self.updated_at = time.perf_counter()


@dataclass(frozen=True)
class OwnState:
    """What a checkpoint stores of one trainer beyond the algorithm, the shared counters and the
    RNGs (:meth:`Trainer._own_state`)."""

    parts: Mapping[str, Any] = field(default_factory=dict)
    """Further entries of ``trainer.pt`` (tensors, numpy arrays, plain values), e.g. ``"collector"``."""
    counters: Mapping[str, Any] = field(default_factory=dict)
    """Further entries of ``counters.json`` (JSON scalars)."""
    buffer: Any | None = None
    """The buffer to save in its own format, or ``None``."""
    env_state: Any | None = None
    """The env snapshot (pickled into its own file, read back only when trusted), or ``None``."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """Further JSON-able entries of ``checkpoint.json``'s ``info`` (never read back by the trainer)."""


class Trainer(ABC):
    """The shared part of every trainer (module docstring): a subclass calls ``super().__init__``
    (which sets the attributes below) and implements ``__next__``, :attr:`done`, :meth:`_own_state`
    and :meth:`_load_own_state`.

    Attributes:
        algorithm: the learner (``act``, ``update``, ``state_dict``, ``load_state_dict``).
        config: the trainer's config (``seed``, ``eval_every``, ``eval_episodes`` and its horizon).
        eval_envs: vector env for deterministic evaluation, or ``None``.
        iteration: iterations done (the next stats' ``iteration`` is one more).
        grad_steps: gradient steps done.
        env_steps: training env steps (transitions) collected (0 for an offline trainer).
        episodes: training episodes finished (0 for an offline trainer).
    """

    checkpoint_kind: ClassVar[str]
    """The ``trainer`` field of this trainer's checkpoints (``load`` refuses another kind's)."""
    horizon: ClassVar[str] = "max_env_steps"
    """The config field at which :meth:`run` stops."""
    progress: ClassVar[str] = "env_steps"
    """The counter that :attr:`horizon` and ``config.checkpoint_every`` are measured in."""

    algorithm: Any
    config: Any
    eval_envs: gym.vector.VectorEnv | None
    iteration: int
    grad_steps: int
    env_steps: int
    episodes: int
    _evaluations: int
    _eval_clip: tuple[np.ndarray, np.ndarray] | None

    def __init__(
        self,
        algorithm: Any,
        config: Any,
        eval_envs: gym.vector.VectorEnv | None,
        *,
        clip_eval_actions: bool = False,
    ) -> None:
        """Set the shared attributes (the counters at 0); a subclass calls it first.

        Args:
            clip_eval_actions: clip the greedy action to a ``Box`` action space's bounds during
                evaluation (the on-policy and offline trainers do: a Gaussian policy's mean can
                leave the bounds; the off-policy actors bound their own actions).

        Raises:
            InvalidValueError: ``config.eval_every`` is set but there are no ``eval_envs``.
        """
        if config.eval_every is not None and eval_envs is None:
            raise InvalidValueError("config.eval_every is set but no eval_envs were given")
        self.algorithm = algorithm
        self.config = config
        self.eval_envs = eval_envs
        self.iteration = 0
        self.grad_steps = 0
        self._evaluations = 0
        space = eval_envs.single_action_space if eval_envs is not None else None
        self._eval_clip = None
        if clip_eval_actions and isinstance(space, gym.spaces.Box):
            self._eval_clip = (space.low, space.high)

    # ------------------------------------------------------------------ what a trainer says

    @abstractmethod
    def __next__(self) -> EpochStats:
        """One iteration (see the subclass)."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """True once the trainer's horizon is reached."""

    @abstractmethod
    def _own_state(self) -> OwnState:
        """What a checkpoint stores of this trainer beyond the algorithm, ``iteration``,
        ``grad_steps``, ``evaluations`` and the RNGs."""

    @abstractmethod
    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        """Restore :meth:`_own_state` from ``ckpt`` (the checkpoint's ``iteration`` is given for
        :func:`~rlcore.trainers.checkpoint.resume_seed`). Read every entry before changing anything,
        then restore the buffer (all or nothing), then the rest."""

    # ------------------------------------------------------------------ the shared loop

    def __iter__(self) -> Iterator[EpochStats]:
        return self

    def _greedy(self, obs: Any) -> np.ndarray:
        act = self.algorithm.act(obs, deterministic=True)
        return act if self._eval_clip is None else np.clip(act, *self._eval_clip)

    def _eval_policy(self) -> Policy | StatefulPolicy:
        """The policy :meth:`evaluate` runs: the algorithm's deterministic ``act`` (clipped to the
        action bounds when asked); a trainer whose policy carries state returns a fresh one."""
        return self._greedy

    def evaluate(self) -> EvalStats:
        """Run ``config.eval_episodes`` deterministic episodes on the eval envs, reset with
        :func:`eval_seed` of the current iteration.

        Raises:
            ApiUsageError: the trainer has no eval envs (a ``RuntimeError``).
        """
        if self.eval_envs is None:
            raise ApiUsageError("this trainer has no eval_envs")
        self._evaluations += 1
        seed = eval_seed(self.config.seed, self.iteration)
        return evaluate(self._eval_policy(), self.eval_envs, self.config.eval_episodes, seed=seed)

    def _eval_due(self, *, last: bool) -> bool:
        """Whether the iteration just counted evaluates: every ``config.eval_every`` iterations
        and at the ``last`` one (never when ``eval_every`` is ``None``)."""
        every = self.config.eval_every
        return every is not None and (self.iteration % every == 0 or last)

    def _evaluate_if_due(self, *, last: bool) -> EvalStats | None:
        """:meth:`evaluate` when :meth:`_eval_due`, else ``None``."""
        return self.evaluate() if self._eval_due(last=last) else None

    def _epoch_stats(
        self,
        clock: IterationClock,
        collected: CollectStats | None,
        *,
        train: Any,
        eval_stats: EvalStats | None,
    ) -> EpochStats:
        """The stats of the iteration just counted: its finished training episodes (``collected``;
        ``None`` when nothing was collected), the algorithm's ``train`` stats, ``eval_stats``,
        the cumulative counters and the timings of ``clock`` (evaluation ends now)."""
        end = time.perf_counter()
        rollout = EpisodeStats.from_episodes(
            collected.episode_returns if collected else (),
            collected.episode_lengths if collected else (),
            collected.episode_successes if collected else (),
        )
        new_env_steps = collected.env_steps if collected else 0
        return EpochStats(
            iteration=self.iteration,
            env_steps=self.env_steps,
            grad_steps=self.grad_steps,
            rollout=rollout,
            train=train,
            eval=eval_stats,
            time=TimeStats(
                env_steps=self.env_steps,
                grad_steps=self.grad_steps,
                episodes=self.episodes,
                collect_s=clock.collected_at - clock.start,
                update_s=clock.updated_at - clock.collected_at,
                eval_s=end - clock.updated_at,
                iteration_s=end - clock.start,
                env_steps_per_s=new_env_steps / max(clock.updated_at - clock.start, 1e-9),
            ),
        )

    def run(
        self, logger: Logger | None = None, *, checkpoint_dir: str | Path | None = None
    ) -> EpochStats | None:
        """Iterate until the horizon (``config.max_env_steps``; ``max_grad_steps`` offline), writing
        every iteration to ``logger``; return the last stats (``None`` when already done).

        With ``checkpoint_dir``, the run survives being stopped: it writes a checkpoint there
        (:meth:`save_checkpoint`) whenever its progress (env steps; gradient steps offline) passes
        a multiple of ``config.checkpoint_every``, once more at the end, and when SIGINT or SIGTERM
        arrives, after the iteration in progress, before raising :class:`RunInterrupted`. A
        second signal aborts at once (the checkpoint being written, if any, is left unfinished
        and the previous one stays loadable). Signals are caught only on the main thread.

        Raises:
            InvalidValueError: the horizon is ``None`` (the loop would never end; a ``ValueError``).
            RunInterrupted: SIGINT or SIGTERM arrived (a ``KeyboardInterrupt``; its
                ``checkpoint`` holds the trainer as it was after the last full iteration).
        """
        horizon = getattr(self.config, self.horizon)
        if horizon is None:
            raise InvalidValueError(
                f"run() needs config.{self.horizon}; iterate the trainer yourself for an endless run"
            )
        every = getattr(self.config, "checkpoint_every", None) if checkpoint_dir is not None else None
        last: EpochStats | None = None
        with StopSignals(enabled=checkpoint_dir is not None) as signals:
            saved_at = getattr(self, self.progress)
            for stats in self:
                if logger is not None:
                    logger.write(stats)
                last = stats
                progress = getattr(self, self.progress)
                if signals.caught is not None and not self.done:
                    assert checkpoint_dir is not None
                    self.save_checkpoint(checkpoint_dir)
                    raise RunInterrupted(signals.caught, checkpoint_dir, self.env_steps, self.grad_steps)
                if every is not None and progress // every > saved_at // every and not self.done:
                    assert checkpoint_dir is not None
                    self.save_checkpoint(checkpoint_dir)
                    saved_at = progress
            if checkpoint_dir is not None and last is not None:
                self.save_checkpoint(checkpoint_dir)
        return last

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint into the directory ``path`` (:mod:`rlcore.trainers.checkpoint`): the
        algorithm, the trainer's own parts (collector or sampler) and the RNG states in
        ``trainer.pt``, the counters in ``counters.json``, the buffer (if the trainer has one) in its
        own save format, the env snapshot in ``env_state.pkl`` when the envs pickle. Returns ``path``.

        Raises:
            CheckpointError: a state holds something a checkpoint cannot store, or the buffer has
                no ``save``.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        own = self._own_state()
        return checkpoint.save(
            path,
            trainer=self.checkpoint_kind,
            state={"algorithm": self.algorithm.state_dict(), **own.parts, "rng": checkpoint.capture_rng()},
            counters={
                "iteration": self.iteration,
                "grad_steps": self.grad_steps,
                "evaluations": self._evaluations,
                **own.counters,
            },
            buffer=own.buffer,
            env_state=own.env_state,
            info={"config": dataclasses.asdict(self.config), **own.info},
        )

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint` into this trainer (built with the same algorithm, buffer
        type and env constructors). Nothing from the files runs as code, except the env snapshot
        when ``trust_env_state=True``.

        Args:
            trust_env_state: unpickle the env snapshot (``env_state.pkl``) to continue every env
                exactly where it was: the next stats equal those of an uninterrupted run. Only for
                checkpoints you trust. Without it the envs are reset with
                ``rlcore.trainers.checkpoint.resume_seed(config.seed, iteration)`` and every env starts
                a fresh episode (a ``RuntimeWarning`` says so); a replay buffer cuts the unfinished
                episodes there, and everything else (algorithm, buffer, counters, RNGs) is restored.
                Trainers without an env snapshot accept and ignore it.

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: a damaged checkpoint, a ``trainer.pt`` that holds more than data, a
                trusted ``env_state.pkl`` that is not an env snapshot, a checkpoint of another
                trainer, one that lacks an entry this trainer needs, or an algorithm state that
                does not fit this trainer's algorithm (nothing changed then).
            SaveFileError: the buffer save is corrupt or does not fit this trainer's buffer
                (nothing changed then).
        """
        ckpt = checkpoint.load(path, trainer=self.checkpoint_kind, trust_env_state=trust_env_state)
        if ckpt.env_state is not None:  # checked before anything of this trainer changes
            checkpoint.check_env_snapshot(ckpt.env_state, path)
        algorithm, rng = ckpt.part("algorithm"), ckpt.part("rng")
        iteration, grad_steps = int(ckpt.counter("iteration")), int(ckpt.counter("grad_steps"))
        evaluations = int(ckpt.counter("evaluations"))
        # The algorithm is tried first and put back as it was if its state does not fit, so that
        # a refused checkpoint changes nothing (buffer, counters and envs come after it).
        before, rng_before = copy.deepcopy(self.algorithm.state_dict()), checkpoint.capture_rng()
        try:
            self.algorithm.load_state_dict(algorithm)
        except Exception as e:  # noqa: BLE001 - whatever a state_dict that does not fit raises
            self.algorithm.load_state_dict(before)
            raise CheckpointError(
                f"{path}: the algorithm's state does not fit this trainer's {type(self.algorithm).__name__} "
                f"(another algorithm, network shape or configuration?): {type(e).__name__}: "
                f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            ) from e
        try:
            checkpoint.restore_rng(rng)  # checks the stored states; set again below
            self._load_own_state(ckpt, iteration)
        except BaseException:
            checkpoint.restore_rng(rng_before)
            self.algorithm.load_state_dict(before)
            raise
        self.iteration, self.grad_steps, self._evaluations = iteration, grad_steps, evaluations
        checkpoint.restore_rng(rng)  # last: whatever restoring the envs drew is undone
