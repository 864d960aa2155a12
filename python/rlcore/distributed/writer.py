"""Routing a vector env's steps to shards: whole episodes per shard, chunks of whole vector steps
per Ray call (episode-sticky, so n-step windows and HER goals never cross shards)."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlcore.distributed.ray_setup import _ray
from rlcore.distributed.shard import _copy, _stack, _take
from rlcore.errors import InvalidValueError, ShapeError


@dataclass(frozen=True)
class ShardedAddResult:
    """What ``ShardedReplayBuffer.add`` / ``ShardWriter.add`` returns (rows are written later, in
    chunks, so there are no row indices).

    Attributes:
        done_envs: int64 ``[D]`` envs whose episode ended at this step.
        episode_returns: float64 ``[D]`` their returns (sum of the stored rewards).
        episode_lengths: int64 ``[D]`` their lengths.
    """

    done_envs: np.ndarray
    episode_returns: np.ndarray
    episode_lengths: np.ndarray


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_NO_DONE = ShardedAddResult(
    _frozen(np.zeros(0, np.int64)), _frozen(np.zeros(0)), _frozen(np.zeros(0, np.int64))
)


class ShardWriter:
    """Buffers vector steps of env streams ``first_env .. first_env + num_envs - 1`` and sends them
    to the shards in chunks of about ``chunk_rows`` rows (one call per shard that gets rows).

    Made by :meth:`ShardedReplayBuffer.writer`; picklable (it holds actor handles), so it can be
    handed to a collector actor. Has the local buffer's ``add`` signature, so a
    :class:`~rlcore.collect.collector.Collector` writes into it as into a buffer.

    Routing: each env's episode goes whole to one shard; when it ends (terminated or truncated) the
    env's next episode goes to the next shard (round robin, env i starting at shard i mod S).

    At most ``max_inflight`` chunks are in flight; the writer then waits for the oldest, so a fast
    collector cannot flood a slow shard, and input errors (bad shapes or dtypes found by the core)
    surface at the next ``add``/``flush`` as the core's typed errors.
    """

    def __init__(
        self,
        shards: list[Any],
        first_env: int,
        num_envs: int,
        *,
        chunk_rows: int = 256,
        max_inflight: int = 4,
    ) -> None:
        if num_envs < 1 or first_env < 0:
            raise InvalidValueError(f"num_envs must be >= 1 and first_env >= 0, got {num_envs}, {first_env}")
        if chunk_rows < 1 or max_inflight < 1:
            raise InvalidValueError(
                f"chunk_rows and max_inflight must be >= 1, got {chunk_rows}, {max_inflight}"
            )
        self.shards = list(shards)
        self.first_env = int(first_env)
        self.num_envs = int(num_envs)
        self.chunk_rows = int(chunk_rows)
        self.max_inflight = int(max_inflight)
        self._route_N = (self.first_env + np.arange(self.num_envs)) % len(self.shards)
        self._all_N = np.ones(self.num_envs, bool)
        self._all_N.flags.writeable = False
        self._reset_pending()
        self._ret_N = np.zeros(self.num_envs)
        self._len_N = np.zeros(self.num_envs, dtype=np.int64)
        self._inflight: collections.deque[Any] = collections.deque()
        self.rows_sent = 0

    def __getstate__(self) -> dict[str, Any]:
        # pending rows and in-flight refs stay with this writer; a copy starts empty
        return {
            "shards": self.shards,
            "first_env": self.first_env,
            "num_envs": self.num_envs,
            "chunk_rows": self.chunk_rows,
            "max_inflight": self.max_inflight,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["shards"],
            state["first_env"],
            state["num_envs"],
            chunk_rows=state["chunk_rows"],
            max_inflight=state["max_inflight"],
        )

    def _reset_pending(self) -> None:
        self._steps: list[tuple[Any, ...]] = []
        self._shard_TN: list[np.ndarray] = []
        self._pending_rows = 0

    def add(
        self,
        obs: Any,
        act: Any,
        rew: Any,
        terminated: Any,
        truncated: Any,
        obs_next: Any,
        *,
        mask: Any = None,
        **extras: Any,
    ) -> ShardedAddResult:
        """Queue one vector step of N = ``num_envs`` envs (shapes as ``ReplayBuffer.add``:
        ``obs``/``obs_next`` ``[N, *O]`` or dicts of such, ``act`` ``[N, *A]``, ``rew``,
        ``terminated``, ``truncated``, ``mask`` ``[N]``); sends a chunk when ``chunk_rows`` rows
        are queued. The arrays are copied.

        Raises:
            ShapeError: ``rew``/``terminated``/``truncated``/``mask`` are not ``[N]``.
            RlcoreError: an error of an earlier chunk, raised here (see the class docstring).
        """
        n = self.num_envs
        rew_N = np.array(rew, copy=True)
        term_N = np.array(terminated, dtype=bool)
        trunc_N = np.array(truncated, dtype=bool)
        mask_N = self._all_N if mask is None else np.array(mask, dtype=bool)
        if not rew_N.shape == term_N.shape == trunc_N.shape == mask_N.shape == (n,):
            raise ShapeError(
                f"rew, terminated, truncated and mask must have shape [{n}] (one per env of this writer), "
                f"got {rew_N.shape}, {term_N.shape}, {trunc_N.shape}, {mask_N.shape}"
            )
        self._steps.append(
            (_copy(obs), np.array(act), rew_N, term_N, trunc_N, _copy(obs_next), mask_N, _copy(extras))
        )
        self._shard_TN.append(self._route_N.copy())
        done_N = (term_N | trunc_N) & mask_N
        if mask is None:
            self._ret_N += rew_N
            self._len_N += 1
            self._pending_rows += n
        else:
            self._ret_N += rew_N * mask_N
            self._len_N += mask_N
            self._pending_rows += int(mask_N.sum())
        if done_N.any():
            done = np.flatnonzero(done_N)
            result = ShardedAddResult(done, self._ret_N[done], self._len_N[done])
            self._ret_N[done] = 0.0
            self._len_N[done] = 0
            self._route_N[done] = (self._route_N[done] + 1) % len(self.shards)
        else:
            result = _NO_DONE
        if self._pending_rows >= self.chunk_rows:
            self.flush()
        return result

    def flush(self, *, wait: bool = False) -> None:
        """Send the queued steps (one ``add_chunk`` call per shard that gets rows); with
        ``wait=True`` also wait until every chunk sent so far is in its shard.

        Raises:
            RlcoreError: an error of a chunk sent earlier, raised here (see the class docstring).
        """
        ray = _ray()
        if self._steps:
            obs, act, rew, term, trunc, obs_next, mask, extras = (
                _stack(list(f)) for f in zip(*self._steps, strict=True)
            )
            shard_TN = np.stack(self._shard_TN)
            self._reset_pending()
            for s, shard in enumerate(self.shards):
                mask_s = mask & (shard_TN == s)
                steps = np.flatnonzero(mask_s.any(axis=1))
                if steps.size == 0:
                    continue
                ref = shard.add_chunk.remote(
                    self.first_env,
                    _take(obs, steps),
                    act[steps],
                    rew[steps],
                    term[steps],
                    trunc[steps],
                    _take(obs_next, steps),
                    mask_s[steps],
                    {k: v[steps] for k, v in extras.items()},
                )
                self._inflight.append(ref)
                self.rows_sent += int(mask_s.sum())
        limit = 0 if wait else self.max_inflight
        while len(self._inflight) > limit:
            ray.get(self._inflight.popleft())

    def route(self) -> np.ndarray:
        """int64 ``[N]``: the shard that each env's current episode goes to."""
        return self._route_N.copy()
