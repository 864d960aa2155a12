"""``OffPolicyTrainer``: an iterator whose every ``next()`` is collect -> update -> (evaluate).

Contract:

* ``next(trainer)`` collects ``collect_env_steps`` env steps (uniformly random actions during
  ``warmup_env_steps``), runs ``utd_ratio`` gradient steps per env step collected after the warm-up
  (fractions carry over to the next iteration, so the long-run ratio is exact), evaluates on ``eval_envs`` every ``eval_every``
  iterations and at the last one, and returns a frozen :class:`~rlcore.stats.EpochStats`.
* Iteration stops once ``max_env_steps`` is reached (never when it is ``None``).
* ``iter(trainer)`` returns the trainer itself and never resets anything: a ``for`` loop that is
  left early and started again continues where it stopped, and several trainers can be advanced
  side by side with ``zip``. The envs are reset once, before the first collection.
* After any ``next()``, :meth:`save_checkpoint` stores algorithm (networks, optimizers, normaliser),
  buffer (its own save format), collector, counters and the RNGs as data (:mod:`rlcore.trainers.checkpoint`),
  plus an env snapshot in a file of its own when the envs pickle. A fresh trainer built the same
  way and given :meth:`load_checkpoint` with ``trust_env_state=True`` yields the same next stats;
  without it (the default: the snapshot is a pickle) the envs are reset with
  :func:`rlcore.trainers.checkpoint.resume_seed` and every env starts a fresh episode.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import OffPolicyAlgorithm
from rlcore.buffers.replay import ReplayBuffer
from rlcore.collect.collector import Collector
from rlcore.collect.evaluate import evaluate
from rlcore.logging import Logger, write_iterations
from rlcore.stats import EpisodeStats, EpochStats, EvalStats, TimeStats, mean_stats
from rlcore.trainers import checkpoint
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig
from rlcore.types import RewardFn

__all__ = [
    "Logger",
    "OffPolicyTrainer",
    "OffPolicyTrainerConfig",
    "OnPolicyTrainer",  # defined in rlcore.onpolicy_trainer
    "OnPolicyTrainerConfig",
]


_CHECKPOINT_KIND = "off-policy"


def _buffer_beta(buffer: Any) -> float | None:
    """The PER ``beta`` of a prioritized buffer, ``None`` for a uniform one."""
    beta = getattr(buffer, "beta", None)
    return None if beta is None else float(beta)


@dataclass(frozen=True, kw_only=True)
class OffPolicyTrainerConfig:
    """Schedule of an :class:`OffPolicyTrainer`."""

    max_env_steps: int | None = None
    """Stop iterating once this many training env steps were collected (``None``: never stop)."""
    collect_env_steps: int = 1
    """Env steps (transitions, summed over the N envs) collected per iteration; at least N per call."""
    utd_ratio: float = 1.0
    """Gradient steps per collected env step (update-to-data ratio)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    n_step: int = 1
    """n of the n-step return the buffer computes."""
    gamma: float = 0.99
    """Discount factor the buffer folds into ``batch.discount``."""
    warmup_env_steps: int = 0
    """Env steps with uniformly random actions and no gradient step at the start."""
    eval_every: int | None = None
    """Evaluate every this many iterations (and at the last one); ``None``: never."""
    eval_episodes: int = 10
    """Episodes per evaluation, spread over the eval envs."""
    per_beta_end: float | None = None
    """Anneal a prioritized buffer's ``beta`` linearly from its initial value to this by ``max_env_steps``."""
    seed: int = 0
    """Seed of the training envs' first reset and of the action sampler; eval envs use ``seed + 10_000``."""

    def __post_init__(self) -> None:
        if self.collect_env_steps < 1:
            raise ValueError(f"collect_env_steps must be >= 1, got {self.collect_env_steps}")
        if self.utd_ratio < 0 or not math.isfinite(self.utd_ratio):
            raise ValueError(f"utd_ratio must be a finite number >= 0, got {self.utd_ratio}")
        if self.batch_size < 1 or self.n_step < 1:
            raise ValueError("batch_size and n_step must be >= 1")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 or None, got {self.eval_every}")
        if self.eval_episodes < 1:
            raise ValueError(f"eval_episodes must be >= 1, got {self.eval_episodes}")
        if self.max_env_steps is not None and self.max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1 or None, got {self.max_env_steps}")
        if self.per_beta_end is not None and self.max_env_steps is None:
            raise ValueError("per_beta_end needs max_env_steps (the annealing horizon)")


class OffPolicyTrainer:
    """Off-policy training loop as an iterator of :class:`~rlcore.stats.EpochStats`.

    Args:
        algorithm: implements :class:`~rlcore.algos.common.OffPolicyAlgorithm` (DQN, DDPG, TD3, SAC).
        buffer: an rlcore replay buffer (``add``, ``sample``, ``__len__``; ``update_priorities`` and
            ``beta`` when prioritized; ``save``/``restore`` for checkpoints).
        envs: training vector env.
        config: the schedule.
        eval_envs: separate vector env for deterministic evaluation (``None``: no evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` for the stored rewards.

    Example::

        trainer = OffPolicyTrainer(sac, buffer, envs, config=cfg, eval_envs=eval_envs)
        for stats in trainer:
            print(stats.env_steps, stats.eval)
    """

    def __init__(
        self,
        algorithm: OffPolicyAlgorithm,
        buffer: Any,
        envs: gym.vector.VectorEnv,
        *,
        config: OffPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
    ) -> None:
        if config.eval_every is not None and eval_envs is None:
            raise ValueError("config.eval_every is set but no eval_envs were given")
        self.algorithm = algorithm
        self.buffer = buffer
        self.config = config
        self.collector = Collector(envs, buffer, reward_fn=reward_fn)
        self.eval_envs = eval_envs
        self.iteration = 0
        self.grad_steps = 0
        self._grad_credit = 0.0
        self._beta_start = _buffer_beta(buffer)
        self._evaluations = 0
        self._batch: Any = None  # reused NumPy arrays the buffer samples into (sample(out=...))
        self._batch_t: Any = None  # the same memory as torch tensors (CPU algorithms only)

    @property
    def env_steps(self) -> int:
        """Cumulative training env steps (transitions)."""
        return self.collector.env_steps

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` is reached."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def __iter__(self) -> Iterator[EpochStats]:
        return self

    def _explore(self, obs: Any) -> np.ndarray:
        return self.algorithm.act(obs, deterministic=False)

    def _greedy(self, obs: Any) -> np.ndarray:
        return self.algorithm.act(obs, deterministic=True)

    def _sample(self) -> Any:
        """Sample one batch; from the second call on, into the same arrays (no allocation).

        On a CPU algorithm the arrays are also handed to ``update`` as torch tensors sharing their
        memory (``self._batch_t``), so no per-step conversion happens either. The arrays are
        overwritten by the next sample: ``update`` must not keep references to the batch.
        """
        c = self.config
        if self._batch is None:
            batch = self.buffer.sample(c.batch_size, n_step=c.n_step, gamma=c.gamma)
            if not isinstance(self.buffer, ReplayBuffer):  # another buffer type: plain sampling
                return batch
            self._batch = batch
            if torch.device(self.algorithm.device).type == "cpu":
                self._batch_t = batch.to_torch("cpu")
            return batch
        return self.buffer.sample(c.batch_size, n_step=c.n_step, gamma=c.gamma, out=self._batch)

    def evaluate(self) -> EvalStats:
        """Run ``eval_episodes`` deterministic episodes on the eval envs (reset with fresh seeds).

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
        if self.collector.needs_reset:
            self.collector.reset(seed=c.seed)
        start = time.perf_counter()

        # Collect.
        warm = self.env_steps < c.warmup_env_steps
        n_collect = c.collect_env_steps
        if c.max_env_steps is not None:
            n_collect = min(n_collect, c.max_env_steps - self.env_steps)
        collected = self.collector.collect(n_collect, policy=None if warm else self._explore)
        t_collect = time.perf_counter()

        # Update.
        algo_stats: list[Any] = []
        steps_past_warmup = min(collected.env_steps, self.env_steps - c.warmup_env_steps)
        if steps_past_warmup > 0 and len(self.buffer) >= c.batch_size:
            self._grad_credit += c.utd_ratio * steps_past_warmup
            n_grad = int(self._grad_credit)
            self._grad_credit -= n_grad
            for _ in range(n_grad):
                batch = self._sample()
                algo_stats.append(
                    self.algorithm.update(self._batch_t if self._batch_t is not None else batch)
                )
                if batch.weights is not None and self.algorithm.priorities is not None:
                    self.buffer.update_priorities(batch.indices, self.algorithm.priorities)
            self.grad_steps += n_grad
        if c.per_beta_end is not None and self._beta_start is not None and c.max_env_steps is not None:
            frac = min(1.0, self.env_steps / c.max_env_steps)
            self.buffer.beta = self._beta_start + frac * (c.per_beta_end - self._beta_start)
        t_update = time.perf_counter()

        # Evaluate.
        self.iteration += 1
        eval_stats = None
        if c.eval_every is not None and (self.iteration % c.eval_every == 0 or self.done):
            eval_stats = self.evaluate()
        end = time.perf_counter()

        return EpochStats(
            iteration=self.iteration,
            env_steps=self.env_steps,
            grad_steps=self.grad_steps,
            rollout=EpisodeStats.from_episodes(
                collected.episode_returns, collected.episode_lengths, collected.episode_successes
            ),
            train=algo_stats[0] if len(algo_stats) == 1 else mean_stats(algo_stats),
            eval=eval_stats,
            time=TimeStats(
                env_steps=self.env_steps,
                grad_steps=self.grad_steps,
                episodes=self.collector.episodes,
                collect_s=t_collect - start,
                update_s=t_update - t_collect,
                eval_s=end - t_update,
                iteration_s=end - start,
                env_steps_per_s=collected.env_steps / max(t_update - start, 1e-9),
            ),
        )

    def run(self, logger: Logger | None = None) -> EpochStats | None:
        """Iterate until ``max_env_steps``, writing every iteration to ``logger``; return the last stats.

        Raises:
            ValueError: ``max_env_steps`` is ``None`` (the loop would never end).
        """
        return write_iterations(self, self.config.max_env_steps, logger)

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint into the directory ``path`` (:mod:`rlcore.trainers.checkpoint`): algorithm,
        collector and RNG states in ``trainer.pt``, counters in ``counters.json``, the buffer with
        ``buffer.save``, and the sub-envs in ``env_state.pkl`` when they pickle. Returns ``path``.

        Raises:
            CheckpointError: a state holds something a checkpoint cannot store, or the buffer has
                no ``save``.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        collector = self.collector.state_dict()
        env_state = collector.pop("envs")
        return checkpoint.save(
            path,
            trainer=_CHECKPOINT_KIND,
            state={
                "algorithm": self.algorithm.state_dict(),
                "collector": collector,
                "rng": checkpoint.capture_rng(),
            },
            counters={
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "grad_steps": self.grad_steps,
                "grad_credit": self._grad_credit,
                "evaluations": self._evaluations,
                "buffer_beta": _buffer_beta(self.buffer),
            },
            buffer=self.buffer,
            env_state=env_state,
            info={
                "config": dataclasses.asdict(self.config),
                "buffer_capacity": getattr(self.buffer, "capacity", None),
            },
        )

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint` into this trainer (built with the same algorithm, buffer
        type and env constructors). Nothing from the files runs as code, except the env snapshot
        when ``trust_env_state=True``.

        Args:
            trust_env_state: unpickle the env snapshot (``env_state.pkl``) to continue every env
                exactly where it was: the next stats equal those of an uninterrupted run. Only for
                checkpoints you trust. Without it the envs are reset with
                ``rlcore.trainers.checkpoint.resume_seed(config.seed, iteration)`` and every env starts a
                fresh episode (a ``RuntimeWarning`` says so); the buffer cuts the unfinished
                episodes there, and everything else (algorithm, buffer, counters, RNGs) is restored.

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: an old-format checkpoint (the message says how to convert a trusted
                one), a ``trainer.pt`` that holds more than data, or a checkpoint of another trainer.
            SaveFileError: the buffer save is corrupt or does not fit this trainer's buffer.
        """
        ckpt = checkpoint.load(path, trainer=_CHECKPOINT_KIND, trust_env_state=trust_env_state)
        algorithm, collector, rng = ckpt.part("algorithm"), dict(ckpt.part("collector")), ckpt.part("rng")
        iteration, grad_steps = int(ckpt.counter("iteration")), int(ckpt.counter("grad_steps"))
        grad_credit, evaluations = float(ckpt.counter("grad_credit")), int(ckpt.counter("evaluations"))
        beta = ckpt.counter("buffer_beta")
        ckpt.restore_buffer(self.buffer)
        self.algorithm.load_state_dict(algorithm)
        self.iteration, self.grad_steps = iteration, grad_steps
        self._grad_credit, self._evaluations = grad_credit, evaluations
        collector["envs"] = ckpt.env_state
        self.collector.load_state_dict(collector, seed=checkpoint.resume_seed(self.config.seed, iteration))
        checkpoint.restore_rng(rng)
        if beta is not None:
            self.buffer.beta = float(beta)

    @classmethod
    def resume(
        cls,
        path: str | Path,
        algorithm: OffPolicyAlgorithm,
        buffer: Any,
        envs: gym.vector.VectorEnv,
        *,
        config: OffPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
        trust_env_state: bool = False,
    ) -> OffPolicyTrainer:
        """Build a trainer from fresh objects and load the checkpoint at ``path`` into it
        (:meth:`load_checkpoint`, with ``trust_env_state``)."""
        trainer = cls(algorithm, buffer, envs, config=config, eval_envs=eval_envs, reward_fn=reward_fn)
        trainer.load_checkpoint(path, trust_env_state=trust_env_state)
        return trainer
