"""``OnPolicyTrainer``: an iterator whose every ``next()`` is sample a rollout -> update -> (evaluate).

Same contract as :class:`rlcore.trainers.OffPolicyTrainer`:

* ``next(trainer)`` samples one rollout of ``num_steps`` vector steps with the
  :class:`~rlcore.collect.sampler.RolloutSampler`, hands it to ``algorithm.update(rollout)`` (VPG, A2C or
  PPO), evaluates on ``eval_envs`` every ``eval_every`` iterations and at the last one, and returns a
  frozen :class:`~rlcore.stats.EpochStats` (``train`` holds the algorithm's stats, e.g. ``PPOStats``).
* Iteration stops once ``max_env_steps`` env steps (valid transitions) were collected.
* ``iter(trainer)`` returns the trainer itself and never resets anything: several trainers can be
  advanced side by side with ``zip``, and a loop left early continues where it stopped. The envs are
  reset once, before the first rollout (the loop, evaluation, stats, ``run`` and checkpoints are
  :mod:`rlcore.trainers.loop`'s).
* GAIL is this trainer with GAIL's learned reward:
  ``OnPolicyTrainer(gail, envs, config=..., reward_fn=gail.reward)``.
* After any ``next()``, :meth:`save_checkpoint` stores the algorithm (networks, optimizer,
  normalisers, shuffling RNG), the sampler, counters and the RNGs as data
  (:mod:`rlcore.trainers.checkpoint`), plus an env snapshot in a file of its own when the envs pickle; a
  fresh trainer built the same way and given :meth:`load_checkpoint` with ``trust_env_state=True``
  yields the same next stats; without it the envs are reset with
  :func:`rlcore.trainers.checkpoint.resume_seed` and every env starts a fresh episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

from rlcore.algos.actor_critic import OnPolicyAlgorithm
from rlcore.collect.sampler import RolloutSampler
from rlcore.stats import EpochStats
from rlcore.trainers import checkpoint
from rlcore.trainers.loop import IterationClock, OwnState, Trainer, at_least
from rlcore.types import RewardFn

__all__ = ["OnPolicyTrainer", "OnPolicyTrainerConfig"]


@dataclass(frozen=True, kw_only=True)
class OnPolicyTrainerConfig:
    """Schedule of an :class:`OnPolicyTrainer`.

    Raises:
        InvalidValueError: a field out of range (a ``ValueError``).
    """

    max_env_steps: int | None = None
    """Stop iterating once this many training env steps were collected (``None``: never stop)."""
    num_steps: int = 128
    """Vector steps T per rollout (a rollout holds T x N rows)."""
    eval_every: int | None = None
    """Evaluate every this many iterations (and at the last one); ``None``: never."""
    eval_episodes: int = 10
    """Episodes per evaluation, spread over the eval envs."""
    seed: int = 0
    """Seed of the training envs' first reset; eval envs use ``seed + 10_000 + 1_000 * i`` after iteration i."""
    checkpoint_every: int | None = None
    """With ``run(checkpoint_dir=...)``: write a checkpoint whenever the env steps pass a multiple
    of this (besides the one at the end and on SIGINT/SIGTERM); ``None``: only those."""

    def __post_init__(self) -> None:
        at_least("num_steps", self.num_steps, 1)
        at_least("eval_every", self.eval_every, 1, optional=True)
        at_least("eval_episodes", self.eval_episodes, 1)
        at_least("checkpoint_every", self.checkpoint_every, 1, optional=True)
        at_least("max_env_steps", self.max_env_steps, 1, optional=True)


class OnPolicyTrainer(Trainer):
    """On-policy training loop as an iterator of :class:`~rlcore.stats.EpochStats`.

    Args:
        algorithm: implements :class:`~rlcore.algos.actor_critic.OnPolicyAlgorithm` (VPG, A2C, PPO,
            or :class:`~rlcore.algos.gail.GAIL` with ``reward_fn=gail.reward``).
        envs: training vector env (N sub-envs).
        config: the schedule.
        eval_envs: separate vector env for deterministic evaluation (``None``: no evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` for the rewards learned
            from (``rollout``/``eval`` episode stats keep the env's own reward).

    Raises:
        InvalidValueError: ``config.eval_every`` without ``eval_envs``.

    Example::

        trainer = OnPolicyTrainer(ppo, envs, config=OnPolicyTrainerConfig(max_env_steps=30_000))
        for stats in trainer:
            print(stats.env_steps, stats.rollout.return_mean, stats.train.approx_kl)
    """

    checkpoint_kind = "on-policy"

    def __init__(
        self,
        algorithm: OnPolicyAlgorithm,
        envs: gym.vector.VectorEnv,
        *,
        config: OnPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
    ) -> None:
        super().__init__(algorithm, config, eval_envs, clip_eval_actions=True)
        self.sampler = RolloutSampler(envs, reward_fn=reward_fn)

    @property
    def env_steps(self) -> int:  # type: ignore[override]
        """Cumulative training env steps (valid transitions)."""
        return self.sampler.env_steps

    @property
    def episodes(self) -> int:  # type: ignore[override]
        """Cumulative finished training episodes."""
        return self.sampler.episodes

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` is reached."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def __next__(self) -> EpochStats:
        c = self.config
        if self.done:
            raise StopIteration
        if self.sampler.needs_reset:
            self.sampler.reset(seed=c.seed)
        clock = IterationClock()

        # Sample a rollout.
        rollout, collected = self.sampler.sample(self.algorithm, self.sampler.envs, c.num_steps)
        clock.collected()

        # Update.
        algo_stats = self.algorithm.update(rollout)
        self.grad_steps += int(getattr(algo_stats, "grad_steps", 1))
        clock.updated()

        # Evaluate.
        self.iteration += 1
        eval_stats = self._evaluate_if_due(last=self.done)
        return self._epoch_stats(clock, collected, train=algo_stats, eval_stats=eval_stats)

    # ------------------------------------------------------------------ checkpoints

    def _own_state(self) -> OwnState:
        """The sampler (its env snapshot apart)."""
        sampler = self.sampler.state_dict()
        env_state = sampler.pop("envs")
        return OwnState(parts={"sampler": sampler}, counters={"env_steps": self.env_steps}, env_state=env_state)

    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        sampler = dict(ckpt.part("sampler"))
        sampler["envs"] = ckpt.env_state
        self.sampler.load_state_dict(sampler, seed=checkpoint.resume_seed(self.config.seed, iteration))

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
