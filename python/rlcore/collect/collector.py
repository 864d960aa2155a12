"""Step a gymnasium vector env with a policy and write whole vector steps into a replay buffer.

Autoreset modes (``envs.metadata["autoreset_mode"]``, gymnasium >= 1.0):

* ``NEXT_STEP`` (default): the step after a done returns the reset observation with reward 0 and
  ignores the action. That row is not a transition: it is passed to ``buffer.add`` with
  ``mask[i] = False``, and the true final observation was already stored as ``obs_next`` of the
  done step (CASES.md #6).
* ``SAME_STEP``: the done step returns the reset observation; the true final observation is in
  ``info["final_obs"]`` and is what the buffer receives as ``obs_next``.
* ``DISABLED``: the collector resets done envs itself with ``options={"reset_mask": done}``.

``terminated`` and ``truncated`` are passed through separately (truncation bootstraps, termination
does not). Episode returns are computed from the env's reward even when ``reward_fn`` replaces the
stored reward."""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.envs.stepping import copy_obs, info_at, set_obs_row
from rlcore.stats import CollectStats
from rlcore.types import Policy, RewardFn

__all__ = ["Collector"]


"""``policy(obs) -> act``: a NumPy batch of N observations to N actions."""


"""``reward_fn(obs, act, obs_next, rew) -> rew``: float ``[N]`` rewards to store instead of ``rew``."""


class Collector:
    """Runs a vector env with a policy and writes each vector step into a buffer in one ``add`` call.

    Args:
        envs: a gymnasium ``VectorEnv`` (``SyncVectorEnv``, ``AsyncVectorEnv``, or anything with the
            same API) with N sub-envs.
        buffer: an rlcore buffer (``add(obs, act, rew, terminated, truncated, obs_next, *, mask)``),
            or ``None`` to only step the env (evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` whose output is stored
            instead of the env reward (learned rewards); ``obs_next`` is the true next observation.

    The collector does not reset at construction; call :meth:`reset` (the trainer does this once,
    explicitly, before the first collection). The observation it holds between steps (``obs``)
    is its own copy, so envs that rewrite the array they returned (``copy=False``, shared
    memory) store right transitions (CASES.md #15).
    """

    def __init__(
        self, envs: gym.vector.VectorEnv, buffer: Any | None = None, *, reward_fn: RewardFn | None = None
    ) -> None:
        self.envs = envs
        self.buffer = buffer
        self.reward_fn = reward_fn
        self.num_envs = int(envs.num_envs)
        mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode) if isinstance(mode, str) else mode
        self.obs: Any = None
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
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``) and the action-space sampler."""
        obs, _ = self.envs.reset(seed=seed)
        self.obs = copy_obs(obs)  # our own: a vector env made with copy=False rewrites its array
        if seed is not None:
            self.envs.action_space.seed(seed)
        self._reset_row_N[:] = False
        self._ep_return_N[:] = 0.0
        self._ep_length_N[:] = 0

    def collect(self, n_env_steps: int, *, policy: Policy | None = None) -> CollectStats:
        """Step until at least ``n_env_steps`` transitions were written (N per vector step at most).

        Args:
            n_env_steps: transitions to collect (> 0).
            policy: ``policy(obs) -> act``; ``None`` samples uniformly from the action space.

        Raises:
            RuntimeError: :meth:`reset` was never called.
            ValueError: ``n_env_steps <= 0``.
        """
        if self.obs is None:
            raise RuntimeError(
                "Collector.collect() before reset(): call collector.reset(seed=...) once first"
            )
        if n_env_steps <= 0:
            raise ValueError(f"n_env_steps must be > 0, got {n_env_steps}")
        start = time.perf_counter()
        returns: list[float] = []
        lengths: list[int] = []
        successes: list[float] = []
        written = vector_steps = 0
        while written < n_env_steps:
            obs = self.obs
            act = self.envs.action_space.sample() if policy is None else policy(obs)
            obs_next, rew_N, term_N, trunc_N, info = self.envs.step(act)
            vector_steps += 1
            transition_N = ~self._reset_row_N
            done_N = (term_N | trunc_N) & transition_N
            done_idx = np.flatnonzero(done_N)

            # The observation that follows each transition (read only during this step).
            next_obs = obs_next
            if self.autoreset_mode == AutoresetMode.SAME_STEP and done_idx.size:
                next_obs = copy_obs(obs_next)
                for i in done_idx:
                    set_obs_row(next_obs, int(i), info["final_obs"][i])

            rew_N = np.asarray(rew_N)
            stored_rew_N = (
                rew_N if self.reward_fn is None else np.asarray(self.reward_fn(obs, act, next_obs, rew_N))
            )
            if self.buffer is not None:
                mask = None if transition_N.all() else transition_N
                self.buffer.add(obs, act, stored_rew_N, term_N, trunc_N, next_obs, mask=mask)

            self._ep_return_N += np.where(transition_N, rew_N, 0.0)
            self._ep_length_N += transition_N
            for i in done_idx:
                returns.append(float(self._ep_return_N[i]))
                lengths.append(int(self._ep_length_N[i]))
                info_i = info["final_info"] if self.autoreset_mode == AutoresetMode.SAME_STEP else info
                success = info_at(info_i, "is_success", int(i))
                if success is not None:
                    successes.append(float(success))
            self._ep_return_N[done_idx] = 0.0
            self._ep_length_N[done_idx] = 0
            # The observation the next step starts from, as our own copy: a vector env made with
            # copy=False (or shared memory) rewrites the array it returned at its next step or
            # reset (CASES.md #15). DISABLED resets only after everything above read obs_next.
            if self.autoreset_mode == AutoresetMode.DISABLED and done_idx.size:
                obs_next, _ = self.envs.reset(options={"reset_mask": done_N})
            self.obs = copy_obs(obs_next)
            n = int(transition_N.sum())
            written += n
            # NEXT_STEP: the next row of a done env is its reset and carries no transition.
            self._reset_row_N = (
                done_N if self.autoreset_mode == AutoresetMode.NEXT_STEP else np.zeros_like(done_N)
            )

        self.env_steps += written
        self.episodes += len(returns)
        return CollectStats(
            env_steps=written,
            vector_steps=vector_steps,
            episode_returns=tuple(returns),
            episode_lengths=tuple(lengths),
            episode_successes=tuple(successes),
            duration_s=time.perf_counter() - start,
        )

    def state_dict(self) -> dict[str, Any]:
        """The collector's own state, the action sampler's RNG, and (when they copy) the sub-envs.

        Everything but ``"envs"`` is numpy arrays and plain values (``"action_rng"`` is the numpy
        ``bit_generator.state`` dict). ``"envs"`` is a deep copy of a ``SyncVectorEnv``'s sub-envs
        and its pending autoresets, ``(sub_envs, autoreset_N)``, when they allow it (classic-control
        envs do; MuJoCo envs do not), else ``None``. It is the one part that only a pickle can store:
        trainers write it to its own checkpoint file, read back only on request
        (:mod:`rlcore.trainers.checkpoint`, ``trust_env_state``).
        """
        envs_copy: Any = None
        sub_envs = getattr(self.envs, "envs", None)
        if sub_envs is not None:
            try:
                envs_copy = copy.deepcopy((sub_envs, getattr(self.envs, "_autoreset_envs", None)))
            except Exception:  # noqa: BLE001 - any copying failure means "not restorable"
                envs_copy = None
        return {
            "obs": copy_obs(self.obs) if self.obs is not None else None,
            "reset_row": self._reset_row_N.copy(),
            "ep_return": self._ep_return_N.copy(),
            "ep_length": self._ep_length_N.copy(),
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "action_rng": self.envs.action_space.np_random.bit_generator.state,
            "envs": envs_copy,
        }

    def load_state_dict(self, state: Mapping[str, Any], *, seed: int | None = None) -> None:
        """Restore :meth:`state_dict`.

        With ``state["envs"]`` (the sub-envs and pending autoresets) the envs continue exactly where
        they were. Without it (``None``: envs that do not copy, or an env snapshot that was not
        trusted) the envs are reset with ``seed`` (warns): partial episodes are dropped and the next
        episode of every env starts fresh; counters and the action sampler's RNG are restored either way.
        """
        self.env_steps = int(state["env_steps"])
        self.episodes = int(state["episodes"])
        self.envs.action_space.np_random.bit_generator.state = state["action_rng"]
        if state.get("envs") is not None and hasattr(self.envs, "envs"):
            sub_envs, autoreset = copy.deepcopy(state["envs"])
            self.envs.envs = sub_envs
            if autoreset is not None:
                setattr(self.envs, "_autoreset_envs", autoreset)  # noqa: B010 - private SyncVectorEnv state
            self.obs = copy_obs(state["obs"])
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
            rng_state = state["action_rng"]
            self.reset(seed=seed)
            self.envs.action_space.np_random.bit_generator.state = rng_state
