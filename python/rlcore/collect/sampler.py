"""On-policy rollouts: a ``[T, N]`` :class:`Rollout` and the :class:`RolloutSampler` that fills it.

The sampler is separate from the algorithm::

    rollout = sampler.sample(policy, envs, num_steps)   # T = num_steps vector steps of N envs
    stats = algo.update(rollout)

Stepping, autoreset, episode accounting and env snapshots are
:class:`~rlcore.envs.stepping.EnvStepper`'s. What each autoreset mode means for a rollout:

* ``NEXT_STEP`` (default): the step after a done returns the reset observation with reward 0 and
  ignores the action. That row is kept in the ``[T, N]`` grid (every env steps together) but marked
  ``valid = False``: it is no transition, the algorithms leave it out of every loss and it is not
  counted as an env step. Its ``obs`` is the true final observation o_L of the episode that just
  ended, so the value the policy computed for it *is* V(o_L): it becomes ``final_value`` of the done
  row (truncation bootstraps from it, CASES.md #6).
* ``SAME_STEP``: the done step returns the reset observation; the true final observation is in
  ``info["final_obs"]``, and the sampler evaluates ``policy.value`` on it for truncated rows. Every
  row is valid.
* ``DISABLED``: the stepper resets done envs itself; the observation the done step returned is the
  final one. Every row is valid.

Backends: any lock-step :class:`~rlcore.envs.backends.VecBackend` (gymnasium Sync/Async, EnvPool
with ``batch_size == N``) through the ``send``/``recv`` protocol. Asynchronous partial batches
(EnvPool ``batch_size < N``) are refused: a ``[T, N]`` rollout needs every env to step T times
under one policy, and the envs that would be in flight at the end of a rollout would act with the
policy of the previous update (not built yet).

Dimension letters: T time (vector steps), N envs, O observation shape, A action shape."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.batch import Rollout
from rlcore.envs.backends import VecBackend
from rlcore.envs.stepping import EnvStepper, Episode, collect_stats
from rlcore.errors import ApiUsageError, InvalidValueError
from rlcore.stats import CollectStats
from rlcore.types import ActorCriticPolicy, RewardFn

__all__ = ["RolloutSampler"]


class RolloutSampler:
    """Steps a vector env with an :class:`ActorCriticPolicy` for ``T`` vector steps.

    The sampler's stepper owns the env's current observations between calls (its own copy, so envs
    that rewrite the array they returned, ``copy=False`` or shared memory, give right rollouts:
    CASES.md #15), so consecutive rollouts continue the same episodes. It does not reset at
    construction: call :meth:`reset` once (the trainer does).

    Args:
        envs: a gymnasium ``VectorEnv`` with N sub-envs and a ``Box`` observation space, or a
            lock-step :class:`~rlcore.envs.backends.VecBackend` (EnvPool).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` whose output becomes
            ``rollout.rew`` (learned rewards: GAIL, preference models); ``obs_next`` is the true next
            observation (the final one at a done step), ``act`` the action the env received. Episode
            statistics always use the env's reward.

    Raises:
        InvalidValueError: a ``Dict`` observation space (flatten it with a wrapper first).
        ApiUsageError: an asynchronous backend (``batch_size < N``).
    """

    def __init__(self, envs: gym.vector.VectorEnv | VecBackend, *, reward_fn: RewardFn | None = None) -> None:
        if isinstance(envs.single_observation_space, gym.spaces.Dict):
            raise InvalidValueError(
                "RolloutSampler needs array observations; wrap dict envs with "
                "gymnasium.wrappers.vector.FlattenObservation"
            )
        self.envs = envs
        self.reward_fn = reward_fn
        self.stepper = EnvStepper(envs)
        if not self.stepper.lock_step:
            raise ApiUsageError(
                f"on-policy rollouts need lock-step envs: got batch_size={self.stepper.batch_size} "
                f"of {self.stepper.num_envs} envs (make_vec(..., async_batch=None))"
            )
        self.num_envs = self.stepper.num_envs
        self.autoreset_mode = self.stepper.autoreset_mode
        space = envs.single_action_space
        self._clip: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(space, gym.spaces.Box):
            self._clip = (space.low.astype(np.float32), space.high.astype(np.float32))

    @property
    def obs(self) -> np.ndarray | None:
        """The observations the next rollout starts from (own copy; ``None`` before :meth:`reset`)."""
        return self.stepper.obs

    @property
    def env_steps(self) -> int:
        """Transitions (valid rows) sampled since construction."""
        return self.stepper.env_steps

    @property
    def episodes(self) -> int:
        """Episodes finished since construction."""
        return self.stepper.episodes

    @property
    def needs_reset(self) -> bool:
        """True until :meth:`reset` was called once."""
        return self.stepper.needs_reset

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``) and forget partial episodes."""
        self.stepper.reset(seed=seed)

    def sample(
        self,
        policy: ActorCriticPolicy,
        envs: gym.vector.VectorEnv | VecBackend | None = None,
        num_steps: int = 128,
    ) -> tuple[Rollout, CollectStats]:
        """Run ``num_steps`` vector steps and return the rollout and its episode statistics.

        Args:
            policy: samples actions and values.
            envs: must be the sampler's env when given (the argument exists so the call reads
                ``sampler.sample(policy, envs, num_steps)``).
            num_steps: T (> 0).

        Raises:
            ApiUsageError: :meth:`reset` was never called (a ``RuntimeError``).
            InvalidValueError: ``num_steps <= 0`` or another env than the sampler's (a ``ValueError``).
        """
        if envs is not None and envs is not self.envs:
            raise InvalidValueError("sample(): envs must be the env this sampler was built with")
        if self.stepper.needs_reset:
            raise ApiUsageError("RolloutSampler.sample() before reset(): call sampler.reset(seed=...) once")
        if num_steps <= 0:
            raise InvalidValueError(f"num_steps must be > 0, got {num_steps}")
        start = time.perf_counter()
        T, N = num_steps, self.num_envs
        first = np.asarray(self.stepper.obs)
        obs_TNO = np.empty((T, *first.shape), dtype=first.dtype)
        act_TNA: np.ndarray | None = None
        rew_TN = np.zeros((T, N), dtype=np.float32)
        env_rew_TN = np.zeros((T, N), dtype=np.float32)
        term_TN = np.zeros((T, N), dtype=bool)
        trunc_TN = np.zeros((T, N), dtype=bool)
        valid_TN = np.ones((T, N), dtype=bool)
        log_prob_TN = np.zeros((T, N), dtype=np.float32)
        value_TN = np.zeros((T, N), dtype=np.float32)
        final_value_TN = np.zeros((T, N), dtype=np.float32)
        ended: list[Episode] = []
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP

        for t in range(T):
            obs = self.stepper.obs
            act, log_prob_N, value_N = policy.act_value(obs)
            if act_TNA is None:
                act_TNA = np.empty((T, *np.shape(act)), dtype=np.asarray(act).dtype)
            env_act = act if self._clip is None else np.clip(act, *self._clip)
            step = self.stepper.step(env_act)
            valid_N = step.transition_N

            # V(final observation) of truncated rows, which bootstrap from it (CASES.md #6).
            if next_step and t > 0:
                # A reset row's obs is the final observation of the done row before it.
                fill = ~valid_N & trunc_TN[t - 1]
                final_value_TN[t - 1, fill] = value_N[fill]
            if not next_step:
                cut = np.flatnonzero(np.asarray(step.truncated_N) & valid_N)
                if cut.size:
                    final_value_TN[t, cut] = policy.value(np.asarray(step.obs_next)[cut])

            rew_N = np.asarray(step.rew_N, dtype=np.float32)
            learn_rew_N = rew_N
            if self.reward_fn is not None:
                learn_rew_N = np.asarray(self.reward_fn(obs, env_act, step.obs_next, rew_N), dtype=np.float32)
            obs_TNO[t] = obs
            act_TNA[t] = act
            valid_TN[t] = valid_N
            rew_TN[t] = np.where(valid_N, learn_rew_N, 0.0)
            env_rew_TN[t] = np.where(valid_N, rew_N, 0.0)
            term_TN[t] = np.asarray(step.terminated_N) & valid_N
            trunc_TN[t] = np.asarray(step.truncated_N) & valid_N
            log_prob_TN[t] = log_prob_N
            value_TN[t] = value_N
            ended += step.episodes

        last_value_N = np.asarray(policy.value(self.stepper.obs), dtype=np.float32)
        if next_step:
            # A truncation at the last step: the next observation is the final one.
            fill = self.stepper.next_is_reset_N & trunc_TN[T - 1]
            final_value_TN[T - 1, fill] = last_value_N[fill]
        assert act_TNA is not None
        rollout = Rollout(
            obs=obs_TNO,
            act=act_TNA,
            rew=rew_TN,
            terminated=term_TN,
            truncated=trunc_TN,
            valid=valid_TN,
            log_prob=log_prob_TN,
            value=value_TN,
            final_value=final_value_TN,
            last_value=last_value_N,
            env_rew=env_rew_TN,
        )
        stats = collect_stats(
            ended, env_steps=rollout.num_transitions, vector_steps=T, duration_s=time.perf_counter() - start
        )
        return rollout, stats

    def state_dict(self) -> dict[str, Any]:
        """Current observations, pending NEXT_STEP resets, partial episodes and counters (numpy
        arrays and plain values), plus ``"envs"``: a deep copy of the sub-envs when they allow it
        (classic control does, MuJoCo does not), else ``None``
        (:meth:`rlcore.envs.stepping.EnvStepper.state_dict`).
        """
        return self.stepper.state_dict()

    def load_state_dict(self, state: dict[str, Any], *, seed: int | None = None) -> None:
        """Restore :meth:`state_dict`; without ``state["envs"]`` (``None``) reset the envs with
        ``seed`` (warns): partial episodes are dropped and every env starts a fresh episode."""
        self.stepper.load_state_dict(state, seed=seed)
