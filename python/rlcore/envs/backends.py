"""The vector-env worker protocol the stepper drives: ``send(act, env_ids)`` / ``recv()``.

EnvPool's API, adopted for every backend (:class:`VecBackend`)::

    backend.reset(seed=s)                       # all N envs, concurrently where the backend can
    backend.send(act_KA, env_ids_K)             # actions for the envs that are waiting
    obs, rew, terminated, truncated, info, env_ids = backend.recv()   # the envs that finished

* :class:`GymVectorBackend` (gymnasium ``SyncVectorEnv`` / ``AsyncVectorEnv``, any autoreset mode):
  every call covers all N envs in order (``batch_size == N``). ``AsyncVectorEnv`` steps and resets
  its sub-envs in parallel worker processes (``send`` is its ``step_async``); ``SyncVectorEnv`` steps
  and resets them one after another (a reset of N envs costs N resets).
* :class:`EnvPoolBackend` (``envpool.make(..., env_type="gymnasium")``): EnvPool's C++ thread pool
  steps and resets envs in parallel; with ``batch_size < N`` each ``recv`` returns the first
  ``batch_size`` envs to finish, in any order (asynchronous collection). Its autoreset is gymnasium's
  NEXT_STEP: the step after a done returns the reset observation with reward 0 and ignores the
  action (the stepper marks that row as no transition). Its dict-of-arrays ``info`` holds
  ``is_success`` (Fetch tasks), ``env_id`` and ``elapsed_step``.

:func:`as_backend` wraps a gymnasium vector env and passes a backend through. Dimension letters:
N envs, K envs of one call, O observation shape, A action shape.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.errors import ApiUsageError, InvalidValueError

__all__ = ["EnvPoolBackend", "GymVectorBackend", "VecBackend", "as_backend"]

#: what ``recv`` returns: ``(obs, rew_K, terminated_K, truncated_K, info, env_ids_K)``
Received = tuple[Any, np.ndarray, np.ndarray, np.ndarray, Mapping[str, Any], np.ndarray]


@runtime_checkable
class VecBackend(Protocol):
    """N envs stepped through ``send``/``recv``.

    Attributes:
        num_envs: N.
        batch_size: envs per ``recv`` (N: lock-step; fewer: asynchronous).
        autoreset_mode: gymnasium's autoreset mode of the envs.
        single_observation_space, single_action_space: one env's spaces.
        action_space: the batched action space of all N envs (``[N, *A]`` samples).
        envs: the gymnasium ``VectorEnv`` underneath, or ``None`` (EnvPool).
    """

    num_envs: int
    batch_size: int
    autoreset_mode: AutoresetMode
    single_observation_space: gym.Space[Any]
    single_action_space: gym.Space[Any]
    action_space: gym.Space[Any]
    envs: gym.vector.VectorEnv | None

    def reset(self, *, seed: int | None = None) -> Any:
        """Reset all N envs; return their observations ``[N, *O]`` in env order."""
        ...

    def send(self, act: Any, env_ids: np.ndarray) -> None:
        """Start a step of the envs ``env_ids`` (int64 ``[K]``) with actions ``act`` ``[K, *A]``."""
        ...

    def recv(self) -> Received:
        """Wait for ``batch_size`` envs to finish their step; their results, rows in ``env_ids`` order."""
        ...

    def close(self) -> None:
        """Release the envs."""
        ...


def _autoreset_mode(envs: Any) -> AutoresetMode:
    mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return AutoresetMode(mode) if isinstance(mode, str) else mode


class GymVectorBackend:
    """A gymnasium ``VectorEnv`` as a :class:`VecBackend`: all N envs per call, in env order.

    Args:
        envs: ``SyncVectorEnv``, ``AsyncVectorEnv`` (or a wrapper of one), any autoreset mode.

    ``send`` must list every env in order (``env_ids == arange(N)``); an unwrapped
    ``AsyncVectorEnv`` starts its workers there (``step_async``) and ``recv`` waits for them.
    """

    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        self.envs: gym.vector.VectorEnv | None = envs
        self._envs = envs
        self.num_envs = int(envs.num_envs)
        self.batch_size = self.num_envs
        self.autoreset_mode = _autoreset_mode(envs)
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.action_space = envs.action_space
        self._all = np.arange(self.num_envs, dtype=np.int64)
        self._split = isinstance(envs, gym.vector.AsyncVectorEnv)
        self._pending: Any = None

    def reset(self, *, seed: int | None = None) -> Any:
        obs, _ = self._envs.reset(seed=seed)
        return obs

    def send(self, act: Any, env_ids: np.ndarray) -> None:
        if len(env_ids) != self.num_envs:
            raise ApiUsageError(
                f"a gymnasium vector env steps all {self.num_envs} envs per call; got actions for "
                f"{len(env_ids)} (use the EnvPool backend for partial batches)"
            )
        if self._split:
            self._envs.step_async(act)  # type: ignore[attr-defined]
        else:
            self._pending = act

    def recv(self) -> Received:
        if self._split:
            obs, rew, term, trunc, info = self._envs.step_wait()  # type: ignore[attr-defined]
        else:
            act, self._pending = self._pending, None
            obs, rew, term, trunc, info = self._envs.step(act)
        return obs, np.asarray(rew), np.asarray(term), np.asarray(trunc), info, self._all

    def close(self) -> None:
        self._envs.close()


class EnvPoolBackend:
    """An EnvPool env (``env_type="gymnasium"``) as a :class:`VecBackend` (and, for code that
    steps all envs at once, with gymnasium's ``VectorEnv`` surface: ``reset``/``step``/spaces/
    ``metadata``).

    Args:
        pool: ``envpool.make(env_id, env_type="gymnasium", num_envs=N, batch_size=B, seed=s)``;
            ``N`` must be a multiple of ``B`` (a ``recv`` waits for ``B`` envs, so a reset's
            first observations arrive in ``N / B`` whole batches).

    EnvPool seeds env i with ``seed + i`` once, at construction (:func:`rlcore.envs.make_vec`'s
    ``seed``); ``reset(seed=...)`` cannot reseed it and ignores the seed.

    Raises:
        InvalidValueError: ``N`` is not a multiple of ``B``.
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.envs: gym.vector.VectorEnv | None = None
        self.num_envs = int(pool.config["num_envs"])
        self.batch_size = int(pool.config["batch_size"]) or self.num_envs
        if self.num_envs % self.batch_size:
            raise InvalidValueError(
                f"EnvPool: num_envs={self.num_envs} must be a multiple of batch_size={self.batch_size}"
            )
        self.autoreset_mode = AutoresetMode.NEXT_STEP
        self.metadata = {**pool.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        with warnings.catch_warnings():  # EnvPool's Box bounds are float64 cast to float32
            warnings.simplefilter("ignore")
            self.single_observation_space = pool.observation_space
            self.single_action_space = pool.action_space
            self.observation_space = gym.vector.utils.batch_space(
                self.single_observation_space, self.num_envs
            )
            self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._in_flight = 0
        self._all = np.arange(self.num_envs, dtype=np.int64)

    def _recv(self) -> Received:
        obs, rew, term, trunc, info = self.pool.recv()
        self._in_flight -= self.batch_size
        ids = np.asarray(info["env_id"], dtype=np.int64)
        return obs, np.asarray(rew), np.asarray(term), np.asarray(trunc), info, ids

    def reset(self, *, seed: int | None = None) -> Any:
        """Reset all N envs in parallel (EnvPool's threads); ``seed`` is ignored (see the class)."""
        while self._in_flight > 0:  # drain the steps still running (N - B of them in async mode)
            self._recv()
        self.pool.async_reset()
        self._in_flight = self.num_envs
        obs_N: Any = None
        for _ in range(self.num_envs // self.batch_size):
            obs, _, _, _, _, ids = self._recv()
            if obs_N is None:
                obs_N = _empty_like_rows(obs, self.num_envs)
            _scatter(obs_N, ids, obs)
        return obs_N

    def send(self, act: Any, env_ids: np.ndarray) -> None:
        self.pool.send(np.asarray(act), np.asarray(env_ids, dtype=np.int32))
        self._in_flight += len(env_ids)

    def recv(self) -> Received:
        if self._in_flight < self.batch_size:
            raise ApiUsageError(
                f"EnvPool recv() with {self._in_flight} envs stepping waits forever for "
                f"batch_size={self.batch_size}; send actions for the envs recv() returned first"
            )
        return self._recv()

    # gymnasium VectorEnv surface (lock-step), for code that steps all envs at once
    def step(self, act: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Mapping[str, Any]]:
        """Step all N envs (``batch_size == N`` only): ``(obs, rew, terminated, truncated, info)``."""
        if self.batch_size != self.num_envs:
            raise ApiUsageError("step() steps all envs at once; an async EnvPool uses send()/recv()")
        self.send(act, self._all)
        obs, rew, term, trunc, info, _ = self.recv()
        return obs, rew, term, trunc, info

    def close(self) -> None:
        self.pool.close()


def _empty_like_rows(obs: Any, n: int) -> Any:
    if isinstance(obs, Mapping):
        return {k: np.empty((n, *np.shape(v)[1:]), np.asarray(v).dtype) for k, v in obs.items()}
    a = np.asarray(obs)
    return np.empty((n, *a.shape[1:]), a.dtype)


def _scatter(dst: Any, ids: np.ndarray, src: Any) -> None:
    if isinstance(dst, Mapping):
        for k in dst:
            dst[k][ids] = src[k]
    else:
        dst[ids] = src


def as_backend(envs: Any) -> VecBackend:
    """``envs`` itself when it is a :class:`VecBackend` (it has ``send``, ``recv`` and
    ``batch_size``), an :class:`EnvPoolBackend` of a raw EnvPool env (``envpool.make(...,
    env_type="gymnasium")``), else a :class:`GymVectorBackend` of a gymnasium vector env."""
    if all(hasattr(envs, a) for a in ("send", "recv", "batch_size")):
        return envs  # type: ignore[no-any-return]
    if hasattr(envs, "async_reset") and hasattr(envs, "config"):
        return EnvPoolBackend(envs)
    return GymVectorBackend(envs)
