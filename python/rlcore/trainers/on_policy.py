"""``OnPolicyTrainer``: an iterator whose every ``next()`` is sample a rollout -> update -> (evaluate).

Same contract as :class:`rlcore.trainer.OffPolicyTrainer`:

* ``next(trainer)`` samples one rollout of ``num_steps`` vector steps with the
  :class:`~rlcore.rollout.RolloutSampler`, hands it to ``algorithm.update(rollout)`` (VPG, A2C or
  PPO), evaluates on ``eval_envs`` every ``eval_every`` iterations and at the last one, and returns a
  frozen :class:`~rlcore.stats.EpochStats` (``train`` holds the algorithm's stats, e.g. ``PPOStats``).
* Iteration stops once ``max_env_steps`` env steps (valid transitions) were collected.
* ``iter(trainer)`` returns the trainer itself and never resets anything: several trainers can be
  advanced side by side with ``zip``, and a loop left early continues where it stopped. The envs are
  reset once, before the first rollout.
* After any ``next()``, :meth:`save_checkpoint` stores the algorithm (networks, optimizer,
  normalisers, shuffling RNG), the sampler, counters and the RNGs as data
  (:mod:`rlcore.trainers.checkpoint`), plus an env snapshot in a file of its own when the envs pickle; a
  fresh trainer built the same way and given :meth:`load_checkpoint` with ``trust_env_state=True``
  yields the same next stats; without it the envs are reset with
  :func:`rlcore.trainers.checkpoint.resume_seed` and every env starts a fresh episode.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore.algos.actor_critic import OnPolicyAlgorithm
from rlcore.algos.gail import GAIL
from rlcore.collect.evaluate import evaluate
from rlcore.collect.sampler import RolloutSampler
from rlcore.logging import Logger, write_iterations
from rlcore.stats import EpisodeStats, EpochStats, EvalStats, TimeStats
from rlcore.trainers import checkpoint
from rlcore.types import RewardFn

__all__ = ["OnPolicyTrainer", "OnPolicyTrainerConfig"]

_CHECKPOINT_KIND = "on-policy"


@dataclass(frozen=True, kw_only=True)
class OnPolicyTrainerConfig:
    """Schedule of an :class:`OnPolicyTrainer`."""

    max_env_steps: int | None = None
    """Stop iterating once this many training env steps were collected (``None``: never stop)."""
    num_steps: int = 128
    """Vector steps T per rollout (a rollout holds T x N rows)."""
    eval_every: int | None = None
    """Evaluate every this many iterations (and at the last one); ``None``: never."""
    eval_episodes: int = 10
    """Episodes per evaluation, spread over the eval envs."""
    seed: int = 0
    """Seed of the training envs' first reset; eval envs use ``seed + 10_000 + 1_000 * k``."""

    def __post_init__(self) -> None:
        if self.num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {self.num_steps}")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 or None, got {self.eval_every}")
        if self.eval_episodes < 1:
            raise ValueError(f"eval_episodes must be >= 1, got {self.eval_episodes}")
        if self.max_env_steps is not None and self.max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1 or None, got {self.max_env_steps}")


class OnPolicyTrainer:
    """On-policy training loop as an iterator of :class:`~rlcore.stats.EpochStats`.

    Args:
        algorithm: implements :class:`~rlcore.algos.actor_critic.OnPolicyAlgorithm` (VPG, A2C, PPO).
        envs: training vector env (N sub-envs).
        config: the schedule.
        eval_envs: separate vector env for deterministic evaluation (``None``: no evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` for the rewards learned from.

    Example::

        trainer = OnPolicyTrainer(ppo, envs, config=OnPolicyTrainerConfig(max_env_steps=30_000))
        for stats in trainer:
            print(stats.env_steps, stats.rollout.return_mean, stats.train.approx_kl)
    """

    def __init__(
        self,
        algorithm: OnPolicyAlgorithm,
        envs: gym.vector.VectorEnv,
        *,
        config: OnPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
    ) -> None:
        if config.eval_every is not None and eval_envs is None:
            raise ValueError("config.eval_every is set but no eval_envs were given")
        self.algorithm = algorithm
        self.config = config
        self.sampler = RolloutSampler(envs, reward_fn=reward_fn)
        self.eval_envs = eval_envs
        self.iteration = 0
        self.grad_steps = 0
        self._evaluations = 0
        space = envs.single_action_space
        self._clip = (space.low, space.high) if isinstance(space, gym.spaces.Box) else None

    @property
    def env_steps(self) -> int:
        """Cumulative training env steps (valid transitions)."""
        return self.sampler.env_steps

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` is reached."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def __iter__(self) -> Iterator[EpochStats]:
        return self

    def _greedy(self, obs: Any) -> np.ndarray:
        act = self.algorithm.act(obs, deterministic=True)
        return act if self._clip is None else np.clip(act, *self._clip)

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
        if self.sampler.needs_reset:
            self.sampler.reset(seed=c.seed)
        start = time.perf_counter()

        # Sample a rollout.
        rollout, collected = self.sampler.sample(self.algorithm, self.sampler.envs, c.num_steps)
        t_collect = time.perf_counter()

        # Update.
        algo_stats = self.algorithm.update(rollout)
        self.grad_steps += int(getattr(algo_stats, "grad_steps", 1))
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
            train=algo_stats,
            eval=eval_stats,
            time=TimeStats(
                env_steps=self.env_steps,
                grad_steps=self.grad_steps,
                episodes=self.sampler.episodes,
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
        sampler and RNG states in ``trainer.pt``, counters in ``counters.json``, the sub-envs in
        ``env_state.pkl`` when they pickle. Returns ``path``.

        Raises:
            CheckpointError: a state holds something a checkpoint cannot store.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        sampler = self.sampler.state_dict()
        env_state = sampler.pop("envs")
        return checkpoint.save(
            path,
            trainer=_CHECKPOINT_KIND,
            state={
                "algorithm": self.algorithm.state_dict(),
                "sampler": sampler,
                "rng": checkpoint.capture_rng(),
            },
            counters={
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "grad_steps": self.grad_steps,
                "evaluations": self._evaluations,
            },
            env_state=env_state,
            info={"config": dataclasses.asdict(self.config)},
        )

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint` into this trainer (built with the same constructors).
        Nothing from the files runs as code, except the env snapshot when ``trust_env_state=True``.

        Args:
            trust_env_state: unpickle the env snapshot (``env_state.pkl``) so the next stats equal
                those of an uninterrupted run; only for checkpoints you trust. Without it the envs are
                reset with ``rlcore.trainers.checkpoint.resume_seed(config.seed, iteration)`` and every env
                starts a fresh episode (a ``RuntimeWarning`` says so).

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: an old-format checkpoint (the message says how to convert a trusted
                one), a ``trainer.pt`` that holds more than data, or a checkpoint of another trainer.
        """
        ckpt = checkpoint.load(path, trainer=_CHECKPOINT_KIND, trust_env_state=trust_env_state)
        algorithm, sampler, rng = ckpt.part("algorithm"), dict(ckpt.part("sampler")), ckpt.part("rng")
        iteration, grad_steps = int(ckpt.counter("iteration")), int(ckpt.counter("grad_steps"))
        evaluations = int(ckpt.counter("evaluations"))
        self.algorithm.load_state_dict(algorithm)
        self.iteration, self.grad_steps, self._evaluations = iteration, grad_steps, evaluations
        sampler["envs"] = ckpt.env_state
        self.sampler.load_state_dict(sampler, seed=checkpoint.resume_seed(self.config.seed, iteration))
        checkpoint.restore_rng(rng)

    @classmethod
    def resume(
        cls,
        path: str | Path,
        algorithm: OnPolicyAlgorithm,
        envs: gym.vector.VectorEnv,
        *,
        config: OnPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
        trust_env_state: bool = False,
    ) -> OnPolicyTrainer:
        """Build a trainer from fresh objects and load the checkpoint at ``path`` into it
        (:meth:`load_checkpoint`, with ``trust_env_state``)."""
        trainer = cls(algorithm, envs, config=config, eval_envs=eval_envs, reward_fn=reward_fn)
        trainer.load_checkpoint(path, trust_env_state=trust_env_state)
        return trainer


class GAILTrainer(OnPolicyTrainer):
    """The GAIL loop (Ho & Ermon 2016, Algorithm 1) as an iterator of :class:`~rlcore.stats.EpochStats`.

    An :class:`~rlcore.onpolicy_trainer.OnPolicyTrainer` whose sampler replaces the env reward with
    :meth:`rlcore.algos.gail.GAIL.reward` (``reward_fn``); each ``next()`` samples a rollout, takes
    the discriminator steps and the PPO update (:meth:`~rlcore.algos.gail.GAIL.update`; ``train`` is a
    :class:`~rlcore.algos.gail.GAILStats`) and evaluates on the env reward. Episode statistics
    (``rollout``, ``eval``) always use the env's own reward. Same iterator, ``zip`` and checkpoint
    contract as the on-policy trainer.
    """

    def __init__(
        self,
        gail: GAIL,
        envs: gym.vector.VectorEnv,
        *,
        config: OnPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
    ) -> None:
        super().__init__(gail, envs, config=config, eval_envs=eval_envs, reward_fn=gail.reward)
