"""On-policy rollouts: a ``[T, N]`` :class:`Rollout` and the :class:`RolloutSampler` that fills it.

The sampler is separate from the algorithm::

    rollout = sampler.sample(policy, envs, num_steps)   # T = num_steps vector steps of N envs
    stats = algo.update(rollout)

Autoreset modes (``envs.metadata["autoreset_mode"]``, gymnasium >= 1.0), as in
:mod:`rlcore.collector`:

* ``NEXT_STEP`` (default): the step after a done returns the reset observation with reward 0 and
  ignores the action. That row is kept in the ``[T, N]`` grid (every env steps together) but marked
  ``valid = False``: it is no transition, the algorithms leave it out of every loss and it is not
  counted as an env step. Its ``obs`` is the true final observation o_L of the episode that just
  ended, so the value the policy computed for it *is* V(o_L): it becomes ``final_value`` of the done
  row (truncation bootstraps from it, CASES.md #6).
* ``SAME_STEP``: the done step returns the reset observation; the true final observation is in
  ``info["final_obs"]``, and the sampler evaluates ``policy.value`` on it for truncated rows. Every
  row is valid.
* ``DISABLED``: the sampler resets done envs itself; the observation the done step returned is the
  final one. Every row is valid.

Dimension letters: T time (vector steps), N envs, O observation shape, A action shape."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.batch import Rollout
from rlcore.stats import CollectStats
from rlcore.types import ActorCriticPolicy, RewardFn

__all__ = ["RolloutSampler"]


class RolloutSampler:
    """Steps a gymnasium vector env with an :class:`ActorCriticPolicy` for ``T`` vector steps.

    The sampler owns the env's current observations between calls (its own copy, so envs that
    rewrite the array they returned, ``copy=False`` or shared memory, give right rollouts:
    CASES.md #15), so consecutive rollouts continue the same episodes. It does not reset at construction: call :meth:`reset` once (the trainer does).

    Args:
        envs: a gymnasium ``VectorEnv`` with N sub-envs and a ``Box`` observation space.
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` whose output becomes
            ``rollout.rew`` (learned rewards: GAIL, preference models); ``obs_next`` is the true next
            observation (the final one at a done step), ``act`` the action the env received. Episode
            statistics always use the env's reward.

    Raises:
        ValueError: a ``Dict`` observation space (flatten it with a wrapper first).
    """

    def __init__(self, envs: gym.vector.VectorEnv, *, reward_fn: RewardFn | None = None) -> None:
        if isinstance(envs.single_observation_space, gym.spaces.Dict):
            raise ValueError(
                "RolloutSampler needs array observations; wrap dict envs with "
                "gymnasium.wrappers.vector.FlattenObservation"
            )
        self.envs = envs
        self.reward_fn = reward_fn
        self.num_envs = int(envs.num_envs)
        mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode) if isinstance(mode, str) else mode
        space = envs.single_action_space
        self._clip: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(space, gym.spaces.Box):
            self._clip = (space.low.astype(np.float32), space.high.astype(np.float32))
        self.obs: np.ndarray | None = None
        self._reset_row_N = np.zeros(self.num_envs, dtype=bool)
        self._ep_return_N = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_length_N = np.zeros(self.num_envs, dtype=np.int64)
        self.env_steps = 0
        self.episodes = 0

    @property
    def needs_reset(self) -> bool:
        """True until :meth:`reset` was called once."""
        return self.obs is None

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``) and forget partial episodes."""
        obs, _ = self.envs.reset(seed=seed)
        self.obs = np.array(obs, copy=True)  # our own: a vector env made with copy=False rewrites its array
        self._reset_row_N[:] = False
        self._ep_return_N[:] = 0.0
        self._ep_length_N[:] = 0

    def sample(
        self, policy: ActorCriticPolicy, envs: gym.vector.VectorEnv | None = None, num_steps: int = 128
    ) -> tuple[Rollout, CollectStats]:
        """Run ``num_steps`` vector steps and return the rollout and its episode statistics.

        Args:
            policy: samples actions and values.
            envs: must be the sampler's env when given (the argument exists so the call reads
                ``sampler.sample(policy, envs, num_steps)``).
            num_steps: T (> 0).

        Raises:
            RuntimeError: :meth:`reset` was never called.
            ValueError: ``num_steps <= 0`` or another env than the sampler's.
        """
        if envs is not None and envs is not self.envs:
            raise ValueError("sample(): envs must be the env this sampler was built with")
        if self.obs is None:
            raise RuntimeError("RolloutSampler.sample() before reset(): call sampler.reset(seed=...) once")
        if num_steps <= 0:
            raise ValueError(f"num_steps must be > 0, got {num_steps}")
        start = time.perf_counter()
        T, N = num_steps, self.num_envs
        obs_TNO = np.empty((T, *np.shape(self.obs)), dtype=np.asarray(self.obs).dtype)
        act_TNA: np.ndarray | None = None
        rew_TN = np.zeros((T, N), dtype=np.float32)
        env_rew_TN = np.zeros((T, N), dtype=np.float32)
        term_TN = np.zeros((T, N), dtype=bool)
        trunc_TN = np.zeros((T, N), dtype=bool)
        valid_TN = np.ones((T, N), dtype=bool)
        log_prob_TN = np.zeros((T, N), dtype=np.float32)
        value_TN = np.zeros((T, N), dtype=np.float32)
        final_value_TN = np.zeros((T, N), dtype=np.float32)
        returns: list[float] = []
        lengths: list[int] = []
        successes: list[float] = []
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP

        for t in range(T):
            obs = self.obs
            act, log_prob_N, value_N = policy.act_value(obs)
            if act_TNA is None:
                act_TNA = np.empty((T, *np.shape(act)), dtype=np.asarray(act).dtype)
            env_act = act if self._clip is None else np.clip(act, *self._clip)
            obs_next, rew_N, term_N, trunc_N, info = self.envs.step(env_act)

            valid_N = ~self._reset_row_N
            if next_step and t > 0:
                # The reset row's obs is the final observation of the done row before it.
                fill = self._reset_row_N & trunc_TN[t - 1]
                final_value_TN[t - 1, fill] = value_N[fill]
            done_N = (term_N | trunc_N) & valid_N
            done_idx = np.flatnonzero(done_N)

            # The true observation after this step (the final one at a done step).
            true_next = obs_next
            if self.autoreset_mode == AutoresetMode.SAME_STEP and done_idx.size:
                true_next = np.array(obs_next, copy=True)
                for i in done_idx:
                    true_next[i] = info["final_obs"][i]
            if self.autoreset_mode != AutoresetMode.NEXT_STEP:
                cut = np.flatnonzero(np.asarray(trunc_N) & valid_N)
                if cut.size:
                    final_value_TN[t, cut] = policy.value(np.asarray(true_next)[cut])

            rew_N = np.asarray(rew_N, dtype=np.float32)
            learn_rew_N = rew_N
            if self.reward_fn is not None:
                learn_rew_N = np.asarray(self.reward_fn(obs, env_act, true_next, rew_N), dtype=np.float32)
            obs_TNO[t] = obs
            act_TNA[t] = act
            valid_TN[t] = valid_N
            rew_TN[t] = np.where(valid_N, learn_rew_N, 0.0)
            env_rew_TN[t] = np.where(valid_N, rew_N, 0.0)
            term_TN[t] = np.asarray(term_N) & valid_N
            trunc_TN[t] = np.asarray(trunc_N) & valid_N
            log_prob_TN[t] = log_prob_N
            value_TN[t] = value_N

            self._ep_return_N += env_rew_TN[t]
            self._ep_length_N += valid_N
            for i in done_idx:
                returns.append(float(self._ep_return_N[i]))
                lengths.append(int(self._ep_length_N[i]))
                info_i = info["final_info"] if self.autoreset_mode == AutoresetMode.SAME_STEP else info
                if "is_success" in info_i and info_i.get("_is_success", np.ones(N, bool))[i]:
                    successes.append(float(info_i["is_success"][i]))
            self._ep_return_N[done_idx] = 0.0
            self._ep_length_N[done_idx] = 0
            self._reset_row_N = done_N if next_step else np.zeros_like(done_N)
            # The observation the next step starts from, as our own copy: a vector env made with
            # copy=False (or shared memory) rewrites the array it returned at its next step or
            # reset (CASES.md #15). DISABLED resets only after everything above read obs_next.
            if self.autoreset_mode == AutoresetMode.DISABLED and done_idx.size:
                obs_next, _ = self.envs.reset(options={"reset_mask": done_N})
            self.obs = np.array(obs_next, copy=True)

        last_value_N = np.asarray(policy.value(self.obs), dtype=np.float32)
        if next_step:
            # A truncation at the last step: the next observation is the final one.
            fill = self._reset_row_N & trunc_TN[T - 1]
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
        n = rollout.num_transitions
        self.env_steps += n
        self.episodes += len(returns)
        stats = CollectStats(
            env_steps=n,
            vector_steps=T,
            episode_returns=tuple(returns),
            episode_lengths=tuple(lengths),
            episode_successes=tuple(successes),
            duration_s=time.perf_counter() - start,
        )
        return rollout, stats

    def state_dict(self) -> dict[str, Any]:
        """Current observations, pending NEXT_STEP resets, partial episodes and counters (numpy
        arrays and plain values), plus ``"envs"``: a deep copy of the sub-envs when they allow it
        (classic control does, MuJoCo does not), else ``None``, with the same rules as
        :meth:`rlcore.collector.Collector.state_dict`.
        """
        envs_copy: Any = None
        sub_envs = getattr(self.envs, "envs", None)
        if sub_envs is not None:
            try:
                envs_copy = copy.deepcopy((sub_envs, getattr(self.envs, "_autoreset_envs", None)))
            except Exception:  # noqa: BLE001 - any copying failure means "not restorable"
                envs_copy = None
        return {
            "obs": None if self.obs is None else np.array(self.obs, copy=True),
            "reset_row": self._reset_row_N.copy(),
            "ep_return": self._ep_return_N.copy(),
            "ep_length": self._ep_length_N.copy(),
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "envs": envs_copy,
        }

    def load_state_dict(self, state: dict[str, Any], *, seed: int | None = None) -> None:
        """Restore :meth:`state_dict`; without ``state["envs"]`` (``None``) reset the envs with
        ``seed`` (warns): partial episodes are dropped and every env starts a fresh episode."""
        self.env_steps = int(state["env_steps"])
        self.episodes = int(state["episodes"])
        if state.get("envs") is not None and hasattr(self.envs, "envs"):
            sub_envs, autoreset = copy.deepcopy(state["envs"])
            self.envs.envs = sub_envs
            if autoreset is not None:
                setattr(self.envs, "_autoreset_envs", autoreset)  # noqa: B010 - private SyncVectorEnv state
            self.obs = np.array(state["obs"], copy=True)
            self._reset_row_N = state["reset_row"].copy()
            self._ep_return_N = state["ep_return"].copy()
            self._ep_length_N = state["ep_length"].copy()
        else:
            warnings.warn(
                "no env snapshot to restore (none was saved, e.g. MuJoCo envs, or it was not loaded: a "
                "checkpoint's env snapshot is a pickle, loaded only with trust_env_state=True / "
                f"--trust-env-state): the envs are reset (seed {seed}) and every env starts a fresh "
                "episode (partial episodes are dropped)",
                RuntimeWarning,
                stacklevel=2,
            )
            self.reset(seed=seed)
