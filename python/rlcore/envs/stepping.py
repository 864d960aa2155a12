"""THE env stepper: one place that steps a vector env for the collector, the rollout sampler,
evaluation and the expert recorder.

It drives any :class:`~rlcore.envs.backends.VecBackend` (``send(act, env_ids)`` / ``recv()``): a
gymnasium ``SyncVectorEnv`` or ``AsyncVectorEnv`` (all envs per step) or EnvPool, also in
asynchronous mode (``batch_size < N``: each step sends actions to the envs that are waiting and
returns the ``batch_size`` envs that finished first, in any order; ``Step.env_ids`` names them).

:class:`EnvStepper` owns everything that must be right at every vector step and is the same for all
of them:

* **Autoreset** (``envs.metadata["autoreset_mode"]``, gymnasium >= 1.0):

  - ``NEXT_STEP`` (default): the step after a done returns the reset observation with reward 0, no
    flags, and ignores the action. That row is **not a transition** (``Step.transition_N`` is False
    there); the true final observation was the ``obs_next`` of the done step (a truncated
    episode bootstraps from it).
  - ``SAME_STEP``: the done step returns the reset observation; the true final observation is in
    ``info["final_obs"]`` and becomes ``Step.obs_next`` of that row. Every row is a transition.
  - ``DISABLED``: the stepper resets done envs itself (``options={"reset_mask": done}``) after the
    step; the observation the done step returned is the final one. Every row is a transition.

* **Episode accounting**: undiscounted returns (the env's own reward, float64) and lengths (in
  transitions) of every sub-env's current episode; each finished episode comes back once, in
  ``Step.episodes``, with its success.
* **Success**, extracted in one place (:func:`episode_success`): ``info["is_success"]`` of the done
  step (NEXT_STEP, DISABLED) or ``info["final_info"]["is_success"]`` (SAME_STEP), honouring the
  vector env's ``_is_success`` mask; ``None`` when the env does not report it.
* **Own copies**: the observation the next step starts from (:attr:`EnvStepper.obs`) and
  ``Step.obs_next`` are the stepper's own arrays, never the env's: vector envs made with
  ``copy=False`` (or shared memory) rewrite the array they returned at their next step or reset
  (``SyncVectorEnv(copy=False)`` returns one internal array and rewrites it). The stepper never
  writes into an array it handed out.
* **Snapshots** for checkpoints: :meth:`EnvStepper.state_dict` / :meth:`EnvStepper.load_state_dict`.
* **Resets** of all envs go through the backend's ``reset``: concurrent on ``AsyncVectorEnv`` and
  EnvPool (resetting N envs costs about one reset), sequential on ``SyncVectorEnv`` (N resets).

Observations may be a NumPy array ``[N, *O]`` or a dict of such arrays (dict observation spaces).
Dimension letters: N envs, K envs of one step (N in lock-step), O observation shape.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.envs.backends import VecBackend, as_backend
from rlcore.errors import ApiUsageError, CheckpointError
from rlcore.stats import CollectStats
from rlcore.types import RewardFn

__all__ = [
    "EnvStepper",
    "SteppedEnvs",
    "EnvsResetWarning",
    "Episode",
    "Step",
    "autoreset_mode",
    "collect_stats",
    "copy_obs",
    "episode_success",
    "info_at",
    "obs_rows",
    "set_obs_row",
]


class EnvsResetWarning(RuntimeWarning):
    """A restored stepper could not continue its envs where they were (no env snapshot: none was
    saved, or it was not trusted), so it reset them; everything else was restored."""


def obs_rows(obs: Any, idx: np.ndarray) -> Any:
    """The rows ``idx`` of a batch of observations (a new array, or a dict of them)."""
    if isinstance(obs, Mapping):
        return {k: v[idx] for k, v in obs.items()}
    return obs[idx]


def copy_obs(obs: Any) -> Any:
    """A copy the caller owns: vector envs made with ``copy=False`` overwrite the arrays they
    returned at the next step (one internal array, rewritten in place)."""
    if isinstance(obs, Mapping):
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    return np.array(obs, copy=True)


def set_obs_row(dst: Any, i: int, src: Any) -> None:
    """Write one env's observation ``src`` into row ``i`` of the batch ``dst``."""
    if isinstance(dst, Mapping):
        for k in dst:
            dst[k][i] = src[k]
    else:
        dst[i] = src


def info_at(info: Mapping[str, Any], key: str, i: int) -> Any | None:
    """``info[key][i]`` of a vector-env info dict, or ``None`` when env i did not report ``key``."""
    if key not in info:
        return None
    mask = info.get("_" + key)
    if mask is not None and not mask[i]:
        return None
    return info[key][i]


def autoreset_mode(envs: gym.vector.VectorEnv) -> AutoresetMode:
    """The vector env's autoreset mode (``NEXT_STEP`` when its metadata does not say)."""
    mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return AutoresetMode(mode) if isinstance(mode, str) else mode


def episode_success(info: Mapping[str, Any], i: int, mode: AutoresetMode) -> float | None:
    """``is_success`` of the episode that env ``i`` ended at the step that returned ``info``:
    from ``info["final_info"]`` under ``SAME_STEP`` (``info`` itself is the reset's by then), from
    ``info`` otherwise; ``None`` when env ``i`` did not report it."""
    if mode == AutoresetMode.SAME_STEP:
        info = info.get("final_info", {})
    success = info_at(info, "is_success", i)
    return None if success is None else float(success)


class Episode(NamedTuple):
    """One finished episode of one sub-env."""

    env: int
    """Index of the sub-env that ran it."""
    ret: float
    """Undiscounted return with the env's own reward."""
    length: int
    """Length in transitions (env steps)."""
    success: float | None
    """``is_success`` at its last step; ``None`` when the env does not report it."""


class Step(NamedTuple):
    """What one :meth:`EnvStepper.step` did. Arrays are ``[K, ...]``, row k for env
    ``env_ids[k]`` (``K = N`` and ``env_ids = arange(N)`` in lock-step); none of them is the
    env's own array, and the stepper never writes into them afterwards."""

    obs: Any
    """Observation each env acted on (the stepper's copy)."""
    act: Any
    """The action passed to ``envs.step``."""
    rew_N: np.ndarray
    """The env's reward as it returned it (0 on NEXT_STEP reset rows)."""
    terminated_N: np.ndarray
    """``terminated`` as the env returned it."""
    truncated_N: np.ndarray
    """``truncated`` as the env returned it."""
    obs_next: Any
    """The true next observation of each row: the final observation where an episode ended (all
    modes), the reset observation on NEXT_STEP reset rows."""
    transition_N: np.ndarray
    """bool: rows that are transitions (False only on NEXT_STEP reset rows)."""
    done_N: np.ndarray
    """bool: transitions that ended an episode (terminated or truncated)."""
    info: Mapping[str, Any]
    """The env's info dict of this step."""
    transitions: int
    """Number of transition rows (``transition_N.sum()``)."""
    episodes: tuple[Episode, ...]
    """The episodes that ended at this step, in row order."""
    env_ids: np.ndarray
    """int64 ``[K]``: the env of each row."""
    lock_step: bool
    """True when the rows are all N envs in env order (``env_ids == arange(N)``)."""


def collect_stats(
    episodes: Sequence[Episode], *, env_steps: int, vector_steps: int, duration_s: float
) -> CollectStats:
    """A :class:`~rlcore.stats.CollectStats` of ``episodes`` (successes of the episodes that report one)."""
    return CollectStats(
        env_steps=env_steps,
        vector_steps=vector_steps,
        episode_returns=tuple(e.ret for e in episodes),
        episode_lengths=tuple(e.length for e in episodes),
        episode_successes=tuple(e.success for e in episodes if e.success is not None),
        duration_s=duration_s,
    )


class EnvStepper:
    """Steps a vector env and keeps what one step needs to know about the ones before.

    Args:
        envs: a gymnasium ``VectorEnv`` (``SyncVectorEnv``, ``AsyncVectorEnv`` or anything with the
            same API) with N sub-envs, in any autoreset mode, or a
            :class:`~rlcore.envs.backends.VecBackend` (EnvPool: NEXT_STEP autoreset, lock-step or
            asynchronous).

    The stepper does not reset at construction: call :meth:`reset` once first.

    Attributes:
        backend: the :class:`~rlcore.envs.backends.VecBackend` it drives.
        obs: the latest observation of every env ``[N, *O]`` (the stepper's own copy), ``None``
            before the first :meth:`reset`; in lock-step, what the next step starts from.
        ready_ids: int64 ``[K]``: the envs the next :meth:`step` sends actions to, in the order
            its ``act`` rows must follow (all N after a reset; the envs the last step returned).
        env_steps: transitions stepped since construction (restored by :meth:`load_state_dict`).
        episodes: episodes finished since construction (restored by :meth:`load_state_dict`).
    """

    def __init__(self, envs: gym.vector.VectorEnv | VecBackend) -> None:
        self.envs = envs
        self.backend = as_backend(envs)
        self.num_envs = int(self.backend.num_envs)
        self.batch_size = int(self.backend.batch_size)
        self.autoreset_mode = self.backend.autoreset_mode
        if self.batch_size < self.num_envs and self.autoreset_mode != AutoresetMode.NEXT_STEP:
            raise ApiUsageError("asynchronous stepping needs NEXT_STEP autoreset")
        self.obs: Any = None
        self.env_steps = 0
        self.episodes = 0
        self._all = np.arange(self.num_envs, dtype=np.int64)
        self.ready_ids = self._all
        self._act_N: np.ndarray | None = None
        self._next_is_reset_N = np.zeros(self.num_envs, dtype=bool)
        self._ep_return_N = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_length_N = np.zeros(self.num_envs, dtype=np.int64)

    @property
    def lock_step(self) -> bool:
        """True when every step covers all N envs in env order (``batch_size == N``)."""
        return self.batch_size == self.num_envs

    @property
    def ready_obs(self) -> Any:
        """The observations of :attr:`ready_ids` ``[K, *O]`` (:attr:`obs` itself in lock-step)."""
        return self.obs if self.lock_step else obs_rows(self.obs, self.ready_ids)

    @property
    def action_space(self) -> gym.Space[Any]:
        """The batched action space of all N envs (random actions: the first K rows of a sample)."""
        return self.backend.action_space

    @property
    def needs_reset(self) -> bool:
        """True until :meth:`reset` (or :meth:`load_state_dict`) was called once."""
        return self.obs is None

    @property
    def next_is_reset_N(self) -> np.ndarray:
        """bool ``[N]``: the rows of the next step that are NEXT_STEP resets, not transitions (a copy)."""
        return self._next_is_reset_N.copy()

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``; EnvPool is seeded at construction)
        and forget partial episodes. Concurrent on ``AsyncVectorEnv`` and EnvPool, sequential on
        ``SyncVectorEnv``."""
        obs = self.backend.reset(seed=seed)
        self.obs = copy_obs(obs)
        self.ready_ids = self._all
        self._next_is_reset_N[:] = False
        self._ep_return_N[:] = 0.0
        self._ep_length_N[:] = 0

    def step(self, act: Any, *, env_ids: np.ndarray | None = None) -> Step:
        """Send ``act`` (``[K, *A]``, row k for env ``ready_ids[k]``; ``[N, *A]`` in lock-step) and
        account for the envs that come back.

        Args:
            env_ids: asynchronous envs only: send to these ready envs (row k of ``act`` for
                ``env_ids[k]``) and hold the other ready envs back; they stay ready, with their
                observations, for a later step. ``None``: every ready env.

        Raises:
            ApiUsageError: :meth:`reset` was never called; ``env_ids`` in lock-step, not a subset
                of the ready envs, or leaving fewer than ``batch_size`` envs in flight (the
                ``recv`` would wait forever).
        """
        if self.obs is None:
            raise ApiUsageError("EnvStepper.step() before reset(): call reset(seed=...) once first")
        if env_ids is not None and self.lock_step:
            raise ApiUsageError("env_ids holds envs back, which lock-step envs cannot do")
        if not self.lock_step:
            return self._step_async(act, env_ids)
        mode = self.autoreset_mode
        obs = self.obs
        self.backend.send(act, self._all)
        env_obs, rew_N, term_N, trunc_N, info, _ = self.backend.recv()
        transition_N = ~self._next_is_reset_N
        done_N = (term_N | trunc_N) & transition_N
        done_idx = np.flatnonzero(done_N)

        # The true next observation of every row, and the one the next step starts from; both ours.
        if done_idx.size and mode == AutoresetMode.SAME_STEP:
            obs_next = copy_obs(env_obs)
            for i in done_idx:
                set_obs_row(obs_next, int(i), info["final_obs"][i])
            self.obs = copy_obs(env_obs)
        elif done_idx.size and mode == AutoresetMode.DISABLED:
            obs_next = copy_obs(env_obs)  # before the reset rewrites a copy=False env's array
            assert self.backend.envs is not None  # only gymnasium envs run without autoreset
            env_obs, _ = self.backend.envs.reset(options={"reset_mask": done_N})
            self.obs = copy_obs(env_obs)
        else:
            self.obs = obs_next = copy_obs(env_obs)

        episodes = self._account(self._all, rew_N, transition_N, done_N, info)
        # NEXT_STEP: the next row of a done env is its reset and carries no transition.
        self._next_is_reset_N = done_N if mode == AutoresetMode.NEXT_STEP else np.zeros_like(done_N)
        transitions = int(transition_N.sum())
        self.env_steps += transitions
        self.episodes += len(episodes)
        return Step(
            obs,
            act,
            rew_N,
            term_N,
            trunc_N,
            obs_next,
            transition_N,
            done_N,
            info,
            transitions,
            episodes,
            self._all,
            True,
        )

    def _step_async(self, act: Any, env_ids: np.ndarray | None) -> Step:
        """One asynchronous step (NEXT_STEP autoreset): actions to the ready envs (or to
        ``env_ids`` of them, the others held), then the rows of the ``batch_size`` envs that
        finished; each row's ``obs`` and ``act`` are those the env stepped from."""
        send = self.ready_ids
        held = self.ready_ids[:0]
        if env_ids is not None:
            send = np.asarray(env_ids, dtype=np.int64).reshape(-1)
            is_ready = np.zeros(self.num_envs, bool)
            is_ready[self.ready_ids] = True
            if not is_ready[send].all() or len(np.unique(send)) != len(send):
                raise ApiUsageError(f"env_ids {send.tolist()} must be distinct ready envs {self.ready_ids.tolist()}")
            is_ready[send] = False
            held = np.flatnonzero(is_ready)
            in_flight = self.num_envs - len(held)
            if in_flight < self.batch_size:
                raise ApiUsageError(
                    f"holding {len(held)} envs back leaves {in_flight} in flight, fewer than batch_size="
                    f"{self.batch_size}: the next recv would wait forever"
                )
        if send.size:
            act = np.asarray(act)
            if self._act_N is None:
                self._act_N = np.zeros((self.num_envs, *act.shape[1:]), dtype=act.dtype)
            self._act_N[send] = act
            self.backend.send(act, send)
        env_obs, rew_K, term_K, trunc_K, info, ids = self.backend.recv()
        obs = obs_rows(self.obs, ids)
        act_K = self._act_N[ids]
        transition_K = ~self._next_is_reset_N[ids]
        done_K = (term_K | trunc_K) & transition_K
        obs_next = copy_obs(env_obs)
        if isinstance(self.obs, Mapping):
            for k in self.obs:
                self.obs[k][ids] = obs_next[k]
        else:
            self.obs[ids] = obs_next
        episodes = self._account(ids, rew_K, transition_K, done_K, info)
        self._next_is_reset_N[ids] = done_K
        self.ready_ids = np.concatenate([held, ids]) if held.size else ids
        transitions = int(transition_K.sum())
        self.env_steps += transitions
        self.episodes += len(episodes)
        return Step(
            obs,
            act_K,
            rew_K,
            term_K,
            trunc_K,
            obs_next,
            transition_K,
            done_K,
            info,
            transitions,
            episodes,
            ids,
            False,
        )

    def _account(
        self, ids: np.ndarray, rew_K: np.ndarray, transition_K: np.ndarray, done_K: np.ndarray, info: Any
    ) -> tuple[Episode, ...]:
        """Episode accounting of rows ``ids``: env reward, transitions only; the ended episodes."""
        self._ep_return_N[ids] += np.where(transition_K, rew_K, 0.0)
        self._ep_length_N[ids] += transition_K
        rows = np.flatnonzero(done_K)
        if not rows.size:
            return ()
        envs = ids[rows]
        episodes = tuple(
            Episode(
                int(e),
                float(self._ep_return_N[e]),
                int(self._ep_length_N[e]),
                episode_success(info, int(k), self.autoreset_mode),
            )
            for k, e in zip(rows, envs, strict=True)
        )
        self._ep_return_N[envs] = 0.0
        self._ep_length_N[envs] = 0
        return episodes

    def state_dict(self) -> dict[str, Any]:
        """The current observation, pending NEXT_STEP resets, partial episodes and counters (numpy
        arrays and plain values), plus ``"envs"``: a deep copy of a ``SyncVectorEnv``'s sub-envs and
        its pending autoresets, ``(sub_envs, autoreset_N)``, when they allow it (classic-control envs
        do; MuJoCo envs do not), else ``None``. ``"envs"`` is the one part only a pickle can store:
        trainers write it to a checkpoint file of its own, read back only on request
        (:mod:`rlcore.trainers.checkpoint`, ``trust_env_state``)."""
        envs_copy: Any = None
        gym_envs = self.backend.envs
        sub_envs = getattr(gym_envs, "envs", None)
        if sub_envs is not None:
            try:
                envs_copy = copy.deepcopy((sub_envs, getattr(gym_envs, "_autoreset_envs", None)))
            except Exception:  # noqa: BLE001 - any copying failure means "not restorable"
                envs_copy = None
        return {
            "obs": None if self.obs is None else copy_obs(self.obs),
            "reset_row": self._next_is_reset_N.copy(),
            "ep_return": self._ep_return_N.copy(),
            "ep_length": self._ep_length_N.copy(),
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "envs": envs_copy,
        }

    def load_state_dict(self, state: Mapping[str, Any], *, seed: int | None = None) -> bool:
        """Restore :meth:`state_dict`; return True when the envs continue exactly where they were.

        With ``state["envs"]`` (the sub-envs and pending autoresets) everything is restored. Without
        it (``None``: envs that do not copy, or an env snapshot that was not trusted) the envs are
        reset with ``seed`` (warns with one line, :class:`EnvsResetWarning`, and returns False):
        partial episodes are dropped and every env starts a fresh episode; the counters are
        restored either way.

        Raises:
            CheckpointError: ``state["envs"]`` is not a snapshot of as many sub-envs as these
                envs have (nothing changed then).
        """
        self.env_steps = int(state["env_steps"])
        self.episodes = int(state["episodes"])
        gym_envs = self.backend.envs
        if state.get("envs") is not None and hasattr(gym_envs, "envs"):
            snapshot = state["envs"]
            n_envs = len(gym_envs.envs)  # type: ignore[union-attr]
            if not (isinstance(snapshot, tuple | list) and len(snapshot) == 2 and len(snapshot[0]) == n_envs):
                raise CheckpointError(
                    f"the env snapshot is not {n_envs} sub-envs and their pending autoresets; it was "
                    "saved for other envs, or is not an env snapshot"
                )
            sub_envs, autoreset = copy.deepcopy(snapshot)
            gym_envs.envs = sub_envs  # type: ignore[union-attr]
            if autoreset is not None:
                setattr(gym_envs, "_autoreset_envs", autoreset)  # noqa: B010 - private SyncVectorEnv state
            self.obs = copy_obs(state["obs"])
            self._next_is_reset_N = np.array(state["reset_row"], dtype=bool)
            self._ep_return_N = np.array(state["ep_return"], dtype=np.float64)
            self._ep_length_N = np.array(state["ep_length"], dtype=np.int64)
            return True
        warnings.warn(
            "no env snapshot to restore (none saved, or not loaded: pass trust_env_state=True for a "
            f"checkpoint you trust), so every env starts a fresh episode from a reset with seed {seed}",
            EnvsResetWarning,
            stacklevel=3,
        )
        self.reset(seed=seed)
        return False


class SteppedEnvs:
    """What the :class:`~rlcore.collect.collector.Collector` and the
    :class:`~rlcore.collect.sampler.RolloutSampler` share: an :class:`EnvStepper` over ``envs``,
    the optional learned reward ``reward_fn(obs, act, obs_next, rew) -> rew``, and the stepper's
    counters and reset, read through.

    Args:
        envs: a gymnasium ``VectorEnv`` or a :class:`~rlcore.envs.backends.VecBackend`.
        reward_fn: stored (or put in the rollout) instead of the env reward when given.
    """

    def __init__(self, envs: gym.vector.VectorEnv | VecBackend, *, reward_fn: RewardFn | None = None) -> None:
        self.envs = envs
        self.reward_fn = reward_fn
        self.stepper = EnvStepper(envs)
        self.num_envs = self.stepper.num_envs
        self.autoreset_mode = self.stepper.autoreset_mode

    @property
    def obs(self) -> Any:
        """The observation the next step starts from (the stepper's own copy; ``None`` before
        :meth:`reset`)."""
        return self.stepper.obs

    @property
    def episodes(self) -> int:
        """Episodes finished since construction."""
        return self.stepper.episodes

    @property
    def needs_reset(self) -> bool:
        """True until :meth:`reset` was called once."""
        return self.stepper.needs_reset

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs, seeded with ``seed, seed+1, ...`` (concurrently on
        ``AsyncVectorEnv`` and EnvPool, one after another on ``SyncVectorEnv``)."""
        self.stepper.reset(seed=seed)
