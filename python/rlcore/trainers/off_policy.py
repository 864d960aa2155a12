"""``OffPolicyTrainer``: an iterator whose every ``next()`` is collect -> update -> (evaluate).

Contract:

* ``next(trainer)`` collects ``collect_env_steps`` env steps (uniformly random actions during
  ``warmup_env_steps``), runs ``utd_ratio`` gradient steps per env step collected after the warm-up
  (fractions carry over to the next iteration, so the long-run ratio is exact), evaluates on ``eval_envs`` every ``eval_every``
  iterations and at the last one, and returns a frozen :class:`~rlcore.stats.EpochStats`.
* Iteration stops once ``max_env_steps`` is reached (never when it is ``None``).
* ``iter(trainer)`` returns the trainer itself and never resets anything: a ``for`` loop that is
  left early and started again continues where it stopped, and several trainers can be advanced
  side by side with ``zip``. The envs are reset once, before the first collection (the loop,
  evaluation, stats, ``run`` and checkpoints are :mod:`rlcore.trainers.loop`'s).
* After any ``next()``, :meth:`save_checkpoint` stores algorithm (networks, optimizers, normaliser),
  buffer (its own save format), collector, counters and the RNGs as data (:mod:`rlcore.trainers.checkpoint`),
  plus an env snapshot in a file of its own when the envs pickle. A fresh trainer built the same
  way and given :meth:`load_checkpoint` with ``trust_env_state=True`` yields the same next stats;
  without it (the default: the snapshot is a pickle) the envs are reset with
  :func:`rlcore.trainers.checkpoint.resume_seed` and every env starts a fresh episode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import OffPolicyAlgorithm
from rlcore.buffers.replay import ReplayBuffer
from rlcore.collect.collector import Collector
from rlcore.errors import InvalidValueError
from rlcore.stats import EpochStats, mean_stats
from rlcore.trainers import checkpoint
from rlcore.trainers.loop import IterationClock, OwnState, Trainer, at_least
from rlcore.types import Policy, RewardFn, StatefulPolicy

__all__ = ["OffPolicyTrainer", "OffPolicyTrainerConfig", "UpdateBudget", "hand_back_priorities"]




def hand_back_priorities(buffer: Any, batch: Any, stats: Any) -> None:
    """After ``stats = algorithm.update(batch)``: give a prioritized buffer the new priorities of
    ``batch``'s rows (``stats.priorities``; ``batch.weights`` is set only by prioritized sampling).
    The one place where priorities flow back, for the local and the distributed off-policy
    trainer."""
    if batch.weights is not None and stats.priorities is not None:
        buffer.update_priorities(batch.indices, stats.priorities)


@dataclass(frozen=True, kw_only=True)
class OffPolicyTrainerConfig:
    """Schedule of an :class:`OffPolicyTrainer`.

    Raises:
        InvalidValueError: a field out of range, or ``per_beta_end`` without ``max_env_steps``
            (a ``ValueError``).
    """

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
    """Seed of the training envs' first reset and of the action sampler; eval envs use ``seed + 10_000 + 1_000 * i`` after iteration i."""
    checkpoint_every: int | None = None
    """With ``run(checkpoint_dir=...)``: write a checkpoint whenever the env steps pass a multiple
    of this (besides the one at the end and on SIGINT/SIGTERM); ``None``: only those."""

    def __post_init__(self) -> None:
        at_least("collect_env_steps", self.collect_env_steps, 1)
        if self.utd_ratio < 0 or not math.isfinite(self.utd_ratio):
            raise InvalidValueError(f"utd_ratio must be a finite number >= 0, got {self.utd_ratio}")
        at_least("batch_size", self.batch_size, 1)
        at_least("n_step", self.n_step, 1)
        if not 0.0 <= self.gamma <= 1.0:
            raise InvalidValueError(f"gamma must be in [0, 1], got {self.gamma}")
        at_least("warmup_env_steps", self.warmup_env_steps, 0)
        at_least("eval_every", self.eval_every, 1, optional=True)
        at_least("eval_episodes", self.eval_episodes, 1)
        at_least("checkpoint_every", self.checkpoint_every, 1, optional=True)
        at_least("max_env_steps", self.max_env_steps, 1, optional=True)
        if self.per_beta_end is not None and self.max_env_steps is None:
            raise InvalidValueError("per_beta_end needs max_env_steps (the annealing horizon)")


def _buffer_beta(buffer: Any) -> float | None:
    """The PER ``beta`` of a prioritized buffer, ``None`` for a uniform one."""
    beta = getattr(buffer, "beta", None)
    return None if beta is None else float(beta)


class UpdateBudget:
    """How many gradient steps an off-policy iteration owes, and the PER ``beta`` it anneals: the
    one schedule of the local and the distributed off-policy trainer.

    * Gradient credit: ``utd_ratio`` gradient steps per env step collected after the warm-up; the
      fraction left over carries to the next iteration, so the long-run ratio is exact.
    * β annealing (Schaul et al. 2016, sec. 3.4): with ``config.per_beta_end``, a prioritized
      buffer's ``beta`` goes linearly from its value at construction to ``per_beta_end`` by
      ``max_env_steps``.

    Args:
        config: the schedule (``utd_ratio``, ``warmup_env_steps``, ``per_beta_end``, ``max_env_steps``).
        buffer: the replay buffer (its ``beta`` when prioritized).
    """

    def __init__(self, config: OffPolicyTrainerConfig, buffer: Any) -> None:
        self.config = config
        self.buffer = buffer
        self.credit = 0.0
        """The fraction of a gradient step owed (in ``[0, 1)`` between iterations); checkpointed."""
        self.beta_start = _buffer_beta(buffer)

    def grad_steps(self, collected: int, env_steps: int) -> int:
        """The gradient steps owed after collecting ``collected`` env steps, ``env_steps`` in all
        (0 while nothing collected is past ``warmup_env_steps``)."""
        past_warmup = min(collected, env_steps - self.config.warmup_env_steps)
        if past_warmup <= 0:
            return 0
        self.credit += self.config.utd_ratio * past_warmup
        n_grad = int(self.credit)
        self.credit -= n_grad
        return n_grad

    def anneal_beta(self, env_steps: int) -> None:
        """Set a prioritized buffer's ``beta`` for ``env_steps`` (no-op without ``per_beta_end``
        or on a uniform buffer)."""
        c = self.config
        if c.per_beta_end is not None and self.beta_start is not None and c.max_env_steps is not None:
            frac = min(1.0, env_steps / c.max_env_steps)
            self.buffer.beta = self.beta_start + frac * (c.per_beta_end - self.beta_start)

    def counters(self) -> dict[str, float | None]:
        """The checkpoint counters: the credit and the buffer's current ``beta``."""
        return {"grad_credit": self.credit, "buffer_beta": _buffer_beta(self.buffer)}

    def restore(self, grad_credit: float, buffer_beta: float | None) -> None:
        """Put back what :meth:`counters` returned (``beta`` only on a prioritized buffer)."""
        self.credit = float(grad_credit)
        if buffer_beta is not None and _buffer_beta(self.buffer) is not None:
            self.buffer.beta = float(buffer_beta)


class OffPolicyTrainer(Trainer):
    """Off-policy training loop as an iterator of :class:`~rlcore.stats.EpochStats`.

    Args:
        algorithm: implements :class:`~rlcore.algos.common.OffPolicyAlgorithm` (DQN, DDPG, TD3, SAC).
        buffer: an rlcore replay buffer (``add``, ``sample``, ``__len__``; ``update_priorities`` and
            ``beta`` when prioritized; ``save``/``restore`` for checkpoints).
        envs: training vector env.
        config: the schedule.
        eval_envs: separate vector env for deterministic evaluation (``None``: no evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` for the stored rewards.

    Raises:
        InvalidValueError: ``config.eval_every`` without ``eval_envs``.

    Example::

        trainer = OffPolicyTrainer(sac, buffer, envs, config=cfg, eval_envs=eval_envs)
        for stats in trainer:
            print(stats.env_steps, stats.eval)
    """

    checkpoint_kind = "off-policy"

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
        super().__init__(algorithm, config, eval_envs)
        self.buffer = buffer
        self.collector = Collector(envs, buffer, reward_fn=reward_fn)
        self.budget = UpdateBudget(config, buffer)
        self._batch: Any = None  # reused NumPy arrays the buffer samples into (sample(out=...))
        self._batch_t: Any = None  # the same memory as torch tensors (CPU algorithms only)

    @property
    def env_steps(self) -> int:  # type: ignore[override]
        """Cumulative training env steps (transitions)."""
        return self.collector.env_steps

    @property
    def episodes(self) -> int:  # type: ignore[override]
        """Cumulative finished training episodes."""
        return self.collector.episodes

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` is reached."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def _explore(self, obs: Any) -> np.ndarray:
        return self.algorithm.act(obs, deterministic=False)

    def _collect_policy(self, warm: bool) -> Policy | StatefulPolicy | None:
        """The policy of this iteration's collection: uniformly random actions (``None``) during
        the warm-up, then the algorithm's exploring ``act``."""
        return None if warm else self._explore

    def _reset_envs(self) -> None:
        """Reset the training envs once, before the first collection (seeded with ``config.seed``)."""
        self.collector.reset(seed=self.config.seed)

    def _gradient_step(self) -> Any:
        """Sample a batch, update the algorithm on it, hand new priorities back; the update's stats."""
        batch = self._sample()
        stats = self.algorithm.update(self._batch_t if self._batch_t is not None else batch)
        hand_back_priorities(self.buffer, batch, stats)
        return stats

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

    def __next__(self) -> EpochStats:
        c = self.config
        if self.done:
            raise StopIteration
        if self.collector.needs_reset:
            self._reset_envs()
        clock = IterationClock()

        # Collect.
        warm = self.env_steps < c.warmup_env_steps
        n_collect = c.collect_env_steps
        if c.max_env_steps is not None:
            n_collect = min(n_collect, c.max_env_steps - self.env_steps)
        collected = self.collector.collect(n_collect, policy=self._collect_policy(warm))
        clock.collected()

        # Update.
        algo_stats: list[Any] = []
        if len(self.buffer) >= c.batch_size:
            n_grad = self.budget.grad_steps(collected.env_steps, self.env_steps)
            for _ in range(n_grad):
                algo_stats.append(self._gradient_step())
            self.grad_steps += n_grad
        self.budget.anneal_beta(self.env_steps)
        clock.updated()

        # Evaluate.
        self.iteration += 1
        eval_stats = self._evaluate_if_due(last=self.done)
        train = algo_stats[0] if len(algo_stats) == 1 else mean_stats(algo_stats)
        return self._epoch_stats(clock, collected, train=train, eval_stats=eval_stats)

    # ------------------------------------------------------------------ checkpoints

    def _own_state(self) -> OwnState:
        """The collector (its env snapshot apart), the gradient-step credit, the PER ``beta`` and
        the buffer."""
        collector = self.collector.state_dict()
        env_state = collector.pop("envs")
        return OwnState(
            parts={"collector": collector},
            counters={"env_steps": self.env_steps, **self.budget.counters()},
            buffer=self.buffer,
            env_state=env_state,
            info={"buffer_capacity": getattr(self.buffer, "capacity", None)},
        )

    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        collector = dict(ckpt.part("collector"))
        grad_credit, beta = float(ckpt.counter("grad_credit")), ckpt.counter("buffer_beta")
        ckpt.restore_buffer(self.buffer)
        collector["envs"] = ckpt.env_state
        exact = self.collector.load_state_dict(collector, seed=checkpoint.resume_seed(self.config.seed, iteration))
        self._envs_restored(ckpt, exact)
        self.budget.restore(grad_credit, beta)

    def _envs_restored(self, ckpt: checkpoint.Checkpoint, exact: bool) -> None:
        """Called by :meth:`_load_own_state` once the collector is restored: ``exact`` when the envs
        continue where they were, False when they were reset (a subclass restores what follows the
        envs, e.g. a recurrent policy's state)."""

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
