"""Step a vector env with a policy and write each step's rows into a replay buffer in one call.

Stepping, autoreset, episode accounting and env snapshots are :class:`~rlcore.envs.stepping.EnvStepper`'s
(all autoreset modes; see there). What the collector adds: it writes every vector step into the
buffer in one ``add`` call, NEXT_STEP reset rows with ``mask[i] = False`` (they are no transitions;
the true final observation was already stored as ``obs_next`` of the done step), and
``obs_next`` of a done row is the true final observation in every mode.

Asynchronous envs (EnvPool with ``batch_size < N``, :func:`rlcore.envs.make_vec` with
``async_batch``): each step the policy acts on the envs the last ``recv`` returned, and the rows of
the envs that come back go into the buffer with one ``add(..., env_ids=ids)``; the buffer keeps
each env's stream, episode index and n-step windows exactly as lock-step adds would.

A :class:`~rlcore.types.StatefulPolicy` (a recurrent policy's
:class:`~rlcore.collect.recurrent.RecurrentActor`) is driven through ``act(obs, env_ids)`` and
``observe(step)``; the extra columns ``observe`` returns (the state each action was chosen from)
are written with the step's rows in the same ``add`` call.

``terminated`` and ``truncated`` are passed through separately (truncation bootstraps, termination
does not). Episode returns are computed from the env's reward even when ``reward_fn`` replaces the
stored reward."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore.envs.backends import VecBackend
from rlcore.envs.stepping import Episode, SteppedEnvs, collect_stats
from rlcore.errors import ApiUsageError, InvalidValueError
from rlcore.stats import CollectStats
from rlcore.types import Policy, RewardFn, StatefulPolicy

__all__ = ["Collector"]


class Collector(SteppedEnvs):
    """Runs a vector env with a policy and writes each vector step into a buffer in one ``add`` call.

    Args:
        envs: a gymnasium ``VectorEnv`` (``SyncVectorEnv``, ``AsyncVectorEnv``, or anything with the
            same API) with N sub-envs, or a :class:`~rlcore.envs.backends.VecBackend` (EnvPool,
            lock-step or asynchronous).
        buffer: an rlcore buffer (``add(obs, act, rew, terminated, truncated, obs_next, *, mask,
            env_ids)``), or ``None`` to only step the env (evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` whose output is stored
            instead of the env reward (learned rewards); ``obs_next`` is the true next observation.

    The collector does not reset at construction; call :meth:`reset` (the trainer does this once,
    explicitly, before the first collection). The observation it holds between steps (``obs``)
    is its stepper's own copy, so envs that rewrite the array they returned (``copy=False``, shared
    memory) store right transitions.
    """

    def __init__(
        self,
        envs: gym.vector.VectorEnv | VecBackend,
        buffer: Any | None = None,
        *,
        reward_fn: RewardFn | None = None,
    ) -> None:
        super().__init__(envs, reward_fn=reward_fn)
        self.buffer = buffer
        self.action_space = self.stepper.action_space

    @property
    def env_steps(self) -> int:
        """Transitions written since construction."""
        return self.stepper.env_steps

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``) and the action-space sampler.

        The envs reset concurrently on ``AsyncVectorEnv`` and EnvPool (N resets cost about one),
        one after another on ``SyncVectorEnv``."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)

    def collect(self, n_env_steps: int, *, policy: Policy | StatefulPolicy | None = None) -> CollectStats:
        """Step until at least ``n_env_steps`` transitions were written (N per vector step at most;
        ``batch_size`` per step for asynchronous envs).

        Args:
            n_env_steps: transitions to collect (> 0).
            policy: ``policy(obs) -> act`` (``[K, *O]`` to ``[K, *A]``: the envs that are waiting,
                all N in lock-step), or a :class:`~rlcore.types.StatefulPolicy` (reset by the
                caller after the envs' reset; its ``observe`` columns are stored with the rows);
                ``None`` samples uniformly from the action space (the first K rows of a batched
                sample).

        Raises:
            ApiUsageError: :meth:`reset` was never called (a ``RuntimeError``).
            InvalidValueError: ``n_env_steps <= 0`` (a ``ValueError``).
        """
        if self.stepper.needs_reset:
            raise ApiUsageError(
                "Collector.collect() before reset(): call collector.reset(seed=...) once first"
            )
        if n_env_steps <= 0:
            raise InvalidValueError(f"n_env_steps must be > 0, got {n_env_steps}")
        start = time.perf_counter()
        ended: list[Episode] = []
        written = vector_steps = 0
        stepper = self.stepper
        stateful = isinstance(policy, StatefulPolicy)
        extras: Mapping[str, np.ndarray] = {}
        while written < n_env_steps:
            if policy is None:
                act = self.action_space.sample()
                if not stepper.lock_step:
                    act = act[: len(stepper.ready_ids)]
            elif stateful:
                act = policy.act(stepper.ready_obs, stepper.ready_ids)  # type: ignore[union-attr]
            else:
                act = policy(stepper.ready_obs)  # type: ignore[operator]
            step = stepper.step(act)
            if stateful:
                extras = policy.observe(step)  # type: ignore[union-attr]
            rew_N = step.rew_N
            if self.reward_fn is not None:
                rew_N = np.asarray(self.reward_fn(step.obs, step.act, step.obs_next, step.rew_N))
            if self.buffer is not None:
                mask = None if step.transition_N.all() else step.transition_N
                rows = (step.obs, step.act, rew_N, step.terminated_N, step.truncated_N, step.obs_next)
                if step.lock_step:  # buffers of whole vector steps (the distributed writer) take no env_ids
                    self.buffer.add(*rows, mask=mask, **extras)
                else:
                    self.buffer.add(*rows, mask=mask, env_ids=step.env_ids, **extras)
            ended += step.episodes
            written += step.transitions
            vector_steps += 1
        return collect_stats(
            ended, env_steps=written, vector_steps=vector_steps, duration_s=time.perf_counter() - start
        )

    def state_dict(self) -> dict[str, Any]:
        """The stepper's state (:meth:`rlcore.envs.stepping.EnvStepper.state_dict`: observation,
        pending resets, partial episodes, counters and ``"envs"``, the sub-envs' snapshot or
        ``None``) plus ``"action_rng"``, the action sampler's numpy ``bit_generator.state`` dict."""
        state = self.stepper.state_dict()
        state["action_rng"] = self.action_space.np_random.bit_generator.state
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, seed: int | None = None) -> bool:
        """Restore :meth:`state_dict`; return True when the envs continue exactly where they were.

        With ``state["envs"]`` (the sub-envs and pending autoresets) the envs continue exactly where
        they were. Without it (``None``: envs that do not copy, or an env snapshot that was not
        trusted) the envs are reset with ``seed`` (warns): partial episodes are dropped and the next
        episode of every env starts fresh; counters and the action sampler's RNG are restored either way.
        """
        exact = self.stepper.load_state_dict(state, seed=seed)
        if not exact and seed is not None:
            self.action_space.seed(seed)  # as reset() does; the saved RNG state follows
        self.action_space.np_random.bit_generator.state = state["action_rng"]
        return exact
