"""``OfflineTrainer``: gradient steps on a fixed dataset (behaviour cloning), evaluated on envs."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore.collect.evaluate import evaluate
from rlcore.logging import Logger
from rlcore.stats import EpisodeStats, EpochStats, EvalStats, TimeStats, mean_stats
from rlcore.trainers import checkpoint as ckpt_format

_CHECKPOINT_KIND = "offline"


@dataclass(frozen=True, kw_only=True)
class OfflineTrainerConfig:
    """Schedule of an :class:`OfflineTrainer`."""

    max_grad_steps: int | None = None
    """Stop iterating after this many gradient steps (``None``: never stop)."""
    grad_steps_per_iteration: int = 1_000
    """Gradient steps per ``next()``."""
    batch_size: int = 256
    """Transitions per gradient step."""
    eval_every: int | None = None
    """Evaluate every this many iterations (and at the last one); ``None``: never."""
    eval_episodes: int = 10
    """Episodes per evaluation, spread over the eval envs."""
    seed: int = 0
    """Eval envs are reset with ``seed + 10_000 + 1_000 * k`` at the k-th evaluation."""

    def __post_init__(self) -> None:
        if self.max_grad_steps is not None and self.max_grad_steps < 1:
            raise ValueError(f"max_grad_steps must be >= 1 or None, got {self.max_grad_steps}")
        if self.grad_steps_per_iteration < 1 or self.batch_size < 1:
            raise ValueError("grad_steps_per_iteration and batch_size must be >= 1")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 or None, got {self.eval_every}")
        if self.eval_episodes < 1:
            raise ValueError(f"eval_episodes must be >= 1, got {self.eval_episodes}")


class OfflineTrainer:
    """Learning from a fixed buffer as an iterator of :class:`~rlcore.stats.EpochStats`.

    Same contract as the other trainers: each ``next()`` runs ``grad_steps_per_iteration``
    gradient steps on uniform samples of ``buffer`` (fewer at the end, to stop exactly at
    ``max_grad_steps``), evaluates every ``eval_every`` iterations and at the last one, and returns
    frozen stats (``env_steps`` stays 0: no env is stepped for training; ``train`` holds the mean of
    the algorithm's stats, e.g. :class:`~rlcore.algos.bc.BCStats`). ``iter()`` returns the trainer
    and never resets; trainers can be advanced side by side with ``zip``.

    Args:
        algorithm: ``update(batch) -> stats``, ``act(obs, *, deterministic)``, ``state_dict()``,
            ``load_state_dict()`` (e.g. :class:`~rlcore.algos.bc.BC`).
        buffer: the dataset (``sample(B)``, ``__len__``), e.g. ``rlcore.ReplayBuffer.load(path)``.
        config: the schedule.
        eval_envs: vector env for deterministic evaluation (``None``: none).

    Raises:
        ValueError: ``eval_every`` without ``eval_envs``, or an empty buffer.
    """

    def __init__(
        self,
        algorithm: Any,
        buffer: Any,
        *,
        config: OfflineTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
    ) -> None:
        if config.eval_every is not None and eval_envs is None:
            raise ValueError("config.eval_every is set but no eval_envs were given")
        if len(buffer) == 0:
            raise ValueError("OfflineTrainer needs a non-empty buffer")
        self.algorithm = algorithm
        self.buffer = buffer
        self.config = config
        self.eval_envs = eval_envs
        self.iteration = 0
        self.grad_steps = 0
        self._evaluations = 0
        space = eval_envs.single_action_space if eval_envs is not None else None
        self._clip = (space.low, space.high) if isinstance(space, gym.spaces.Box) else None

    @property
    def done(self) -> bool:
        """True once ``max_grad_steps`` is reached."""
        return self.config.max_grad_steps is not None and self.grad_steps >= self.config.max_grad_steps

    def __iter__(self) -> Iterator[EpochStats]:
        return self

    def _greedy(self, obs: Any) -> np.ndarray:
        act = self.algorithm.act(obs, deterministic=True)
        return act if self._clip is None else np.clip(act, *self._clip)

    def evaluate(self) -> EvalStats:
        """Run ``eval_episodes`` deterministic episodes on the eval envs.

        Raises:
            RuntimeError: the trainer has no eval envs.
        """
        if self.eval_envs is None:
            raise RuntimeError("this trainer has no eval_envs")
        self._evaluations += 1
        seed = self.config.seed + 10_000 + 1_000 * self._evaluations
        return evaluate(self._greedy, self.eval_envs, self.config.eval_episodes, seed=seed)

    def __next__(self) -> EpochStats:
        c = self.config
        if self.done:
            raise StopIteration
        start = time.perf_counter()
        n = c.grad_steps_per_iteration
        if c.max_grad_steps is not None:
            n = min(n, c.max_grad_steps - self.grad_steps)
        stats = [self.algorithm.update(self.buffer.sample(c.batch_size)) for _ in range(n)]
        self.grad_steps += n
        t_update = time.perf_counter()
        self.iteration += 1
        eval_stats = None
        if c.eval_every is not None and (self.iteration % c.eval_every == 0 or self.done):
            eval_stats = self.evaluate()
        end = time.perf_counter()
        return EpochStats(
            iteration=self.iteration,
            env_steps=0,
            grad_steps=self.grad_steps,
            rollout=EpisodeStats.from_episodes((), (), ()),
            train=mean_stats(stats),
            eval=eval_stats,
            time=TimeStats(
                env_steps=0,
                grad_steps=self.grad_steps,
                episodes=0,
                collect_s=0.0,
                update_s=t_update - start,
                eval_s=end - t_update,
                iteration_s=end - start,
                env_steps_per_s=0.0,
            ),
        )

    def run(self, logger: Logger | None = None) -> EpochStats | None:
        """Iterate until ``max_grad_steps``, writing every iteration to ``logger``; return the last stats.

        Raises:
            ValueError: ``max_grad_steps`` is ``None``.
        """
        if self.config.max_grad_steps is None:
            raise ValueError("run() needs config.max_grad_steps")
        last = None
        for stats in self:
            if logger is not None:
                logger.write(stats)
            last = stats
        return last

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint into the directory ``path`` (:mod:`rlcore.trainers.checkpoint`): algorithm and
        RNG states in ``trainer.pt``, counters in ``counters.json`` (the dataset is not copied: it
        lives at its own path). Returns ``path``.

        Raises:
            CheckpointError: the algorithm's state holds something a checkpoint cannot store.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        return ckpt_format.save(
            path,
            trainer=_CHECKPOINT_KIND,
            state={"algorithm": self.algorithm.state_dict(), "rng": ckpt_format.capture_rng()},
            counters={
                "iteration": self.iteration,
                "grad_steps": self.grad_steps,
                "evaluations": self._evaluations,
            },
            info={"config": dataclasses.asdict(self.config)},
        )

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint`; nothing from the files runs as code.

        Args:
            trust_env_state: accepted for the common trainer signature; an offline checkpoint has
                no env snapshot.

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: an old-format checkpoint (the message says how to convert a trusted
                one), a ``trainer.pt`` that holds more than data, or a checkpoint of another trainer.
        """
        ckpt = ckpt_format.load(path, trainer=_CHECKPOINT_KIND, trust_env_state=trust_env_state)
        algorithm, rng = ckpt.part("algorithm"), ckpt.part("rng")
        iteration, grad_steps = int(ckpt.counter("iteration")), int(ckpt.counter("grad_steps"))
        evaluations = int(ckpt.counter("evaluations"))
        self.algorithm.load_state_dict(algorithm)
        self.iteration, self.grad_steps, self._evaluations = iteration, grad_steps, evaluations
        ckpt_format.restore_rng(rng)
