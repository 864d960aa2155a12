"""The training loop of recurrent off-policy agents (:class:`~rlcore.algos.r2d2.R2D2`): collect
with the policy's recurrent state carried across steps and stored with every transition (extra
column ``h``), learn on sequences (``buffer.sample_sequences``), feed sequence priorities back,
evaluate the greedy policy.

Each ``next(trainer)`` collects ``iteration_env_steps`` env steps, taking one gradient step every
``train_every_env_steps`` env steps once ``learning_starts`` env steps are stored, and evaluates
when ``eval_every_env_steps`` have passed since the last evaluation; it yields a frozen
:class:`RecurrentEpochStats`. The recurrent state is reset to zeros at every episode start (after
a NEXT_STEP reset row; the stepper marks it, see :mod:`rlcore.envs.stepping`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore.algos.common import check_fields
from rlcore.algos.r2d2 import R2D2, R2D2Stats
from rlcore.envs.stepping import EnvStepper
from rlcore.stats import EpisodeStats, EvalStats

__all__ = ["RecurrentEpochStats", "RecurrentTrainer", "RecurrentTrainerConfig", "evaluate_recurrent"]


@dataclass(frozen=True, kw_only=True)
class RecurrentTrainerConfig:
    """Schedule of :class:`RecurrentTrainer`."""

    max_env_steps: int = 200_000
    """Training env steps (transitions) in all."""
    iteration_env_steps: int = 1_000
    """Env steps collected by one ``next(trainer)``."""
    learning_starts: int = 5_000
    """Env steps stored before the first gradient step."""
    train_every_env_steps: int = 8
    """Env steps per gradient step."""
    batch_size: int = 32
    """Sequences per gradient step."""
    n_step: int = 3
    """n of the n-step return inside each sequence."""
    gamma: float = 0.99
    """Discount."""
    eval_every_env_steps: int = 10_000
    """Env steps between evaluations."""
    eval_episodes: int = 5
    """Greedy episodes per evaluation (one per eval env)."""
    per_beta_end: float | None = None
    """Prioritized buffers: anneal beta linearly from its start to this value over the run."""
    seed: int = 0
    """Seed of the training envs (``seed, seed + 1, ...``) and of the eval envs (``seed + 10_000``)."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            widths=(),
            counts=("max_env_steps", "iteration_env_steps", "train_every_env_steps", "batch_size", "n_step",
                    "eval_every_env_steps", "eval_episodes"),
            counts_from_zero=("learning_starts",),
            unit_interval=("gamma",),
        )


@dataclass(frozen=True)
class RecurrentEpochStats:
    """What one ``next(trainer)`` yields."""

    iteration: int
    """1-based index of the iteration."""
    env_steps: int
    """Cumulative training env steps."""
    grad_steps: int
    """Cumulative gradient steps."""
    rollout: EpisodeStats
    """Training episodes that ended in this iteration."""
    train: R2D2Stats | None
    """The last gradient step's stats of this iteration (``None`` during warm-up)."""
    eval: EvalStats | None
    """Greedy evaluation, when one ran in this iteration."""
    duration_s: float
    """Wall-clock seconds of the iteration."""


def evaluate_recurrent(algo: R2D2, envs: gym.vector.VectorEnv, *, seed: int) -> EvalStats:
    """One greedy episode per sub-env of ``envs`` (reset with ``seed``), the state carried over
    the episode; returns their statistics."""
    stepper = EnvStepper(envs)
    stepper.reset(seed=seed)
    n = stepper.num_envs
    state = algo.initial_state(n)
    done = np.zeros(n, bool)
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    while not done.all():
        act, state = algo.act(stepper.obs, state, deterministic=True)
        step = stepper.step(act)
        for ep in step.episodes:
            if not done[ep.env]:
                done[ep.env] = True
                returns[ep.env], lengths[ep.env] = ep.ret, ep.length
        state = np.where(step.transition_N[:, None], state, 0.0).astype(np.float32)
    return EvalStats.from_episodes(returns.tolist(), lengths.tolist(), [])


class RecurrentTrainer:
    """Recurrent off-policy training (module docstring) as an iterator of :class:`RecurrentEpochStats`.

    Args:
        algorithm: the learner (``act(obs, state)``, ``update(SequenceBatch)``).
        buffer: a ``ReplayBuffer`` or ``PrioritizedReplayBuffer`` with ``num_envs`` = the envs' count.
        envs: training vector env.
        config: the schedule.
        eval_envs: vector env for evaluation (``None``: no evaluation).
    """

    def __init__(
        self,
        algorithm: R2D2,
        buffer: Any,
        envs: gym.vector.VectorEnv,
        *,
        config: RecurrentTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
    ) -> None:
        self.algorithm, self.buffer, self.config, self.eval_envs = algorithm, buffer, config, eval_envs
        self.stepper = EnvStepper(envs)
        self.stepper.reset(seed=config.seed)
        self.state = algorithm.initial_state(self.stepper.num_envs)
        self.env_steps = 0
        self.iteration = 0
        self._since_update = 0
        self._last_eval = 0
        self._beta0 = getattr(buffer, "beta", None)

    def __iter__(self) -> Iterator[RecurrentEpochStats]:
        return self

    def __next__(self) -> RecurrentEpochStats:
        c, algo, buf = self.config, self.algorithm, self.buffer
        if self.env_steps >= c.max_env_steps:
            raise StopIteration
        t0 = time.perf_counter()
        self.iteration += 1
        stop = min(c.max_env_steps, self.env_steps + c.iteration_env_steps)
        returns: list[float] = []
        lengths: list[int] = []
        train: R2D2Stats | None = None
        seq_len = algo.config.seq_len
        while self.env_steps < stop:
            h_in = self.state
            act, self.state = algo.act(self.stepper.obs, h_in)
            step = self.stepper.step(act)
            buf.add(step.obs, step.act, step.rew_N, step.terminated_N, step.truncated_N, step.obs_next,
                    mask=step.transition_N, h=h_in)
            # a reset row's observation starts a new episode: its state starts at zero
            self.state = np.where(step.transition_N[:, None], self.state, 0.0).astype(np.float32)
            self.env_steps += step.transitions
            self._since_update += step.transitions
            returns += [e.ret for e in step.episodes]
            lengths += [e.length for e in step.episodes]
            while self.env_steps >= c.learning_starts and self._since_update >= c.train_every_env_steps:
                self._since_update -= c.train_every_env_steps
                train = self._learn(seq_len)
        evaluation = None
        if self.eval_envs is not None and (
            self.env_steps - self._last_eval >= c.eval_every_env_steps or self.env_steps >= c.max_env_steps
        ):
            self._last_eval = self.env_steps
            evaluation = evaluate_recurrent(algo, self.eval_envs, seed=c.seed + 10_000 + self.iteration)
        return RecurrentEpochStats(
            iteration=self.iteration,
            env_steps=self.env_steps,
            grad_steps=algo.grad_steps,
            rollout=EpisodeStats.from_episodes(returns, lengths, []),
            train=train,
            eval=evaluation,
            duration_s=time.perf_counter() - t0,
        )

    def _learn(self, seq_len: int) -> R2D2Stats:
        c, algo, buf = self.config, self.algorithm, self.buffer
        prioritized = getattr(buf, "prioritized", False)
        if prioritized and c.per_beta_end is not None and self._beta0 is not None:
            frac = min(1.0, self.env_steps / c.max_env_steps)
            buf.beta = self._beta0 + frac * (c.per_beta_end - self._beta0)
        batch = buf.sample_sequences(
            c.batch_size, seq_len, burn_in=algo.config.burn_in, n_step=c.n_step, gamma=c.gamma, state="h"
        )
        stats = algo.update(batch)
        if prioritized:
            buf.update_sequence_priorities(batch.start_indices, stats.td_abs, mask=stats.td_mask,
                                           eta=algo.config.priority_eta)
        return stats

    def run(self, on_iteration: Callable[[RecurrentEpochStats], None] | None = None) -> RecurrentEpochStats | None:
        """Iterate to the end; ``on_iteration`` gets every record. Returns the last one."""
        last = None
        for stats in self:
            if on_iteration is not None:
                on_iteration(stats)
            last = stats
        return last
