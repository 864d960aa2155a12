"""Tianshou's hindsight buffers (single and vector) on the rlcore core, relabeling in an overlay."""


from __future__ import annotations

from typing import Any

import numpy as np
import tianshou.data as _ts

from rlcore.buffers.replay import ReplayBuffer as _CoreBuffer
from rlcore.compat.tianshou.storage import (
    _CoreStorage,
)


class _HERMixin:
    """Tianshou's HER (Andrychowicz et al. 2017, "future" strategy, online) over the core.

    ``sample_indices`` draws rows uniformly, then rewrites the goals of the sampled episodes
    exactly as Tianshou's ``HERReplayBuffer.rewrite_transitions``: rows grouped by the row
    ``terminal = next^(horizon-1)(t)``; each group's window runs from its earliest sampled row
    to ``terminal``; a fraction ``int(groups * (1 - 1/future_k))`` of the groups (chosen without
    replacement) gets the goal achieved after step ``future_t = t + round(u * (terminal - t))``
    of the group's latest sampled row t; ``desired_goal`` of ``obs`` and ``obs_next`` and
    ``rew = compute_reward_fn(achieved_goal of obs_next, goal)`` change on the whole window.
    The changes are an overlay read by ``__getitem__`` and ``rew`` until the next sample/add.
    """

    _core: _CoreBuffer
    compute_reward_fn: Any
    horizon: int
    future_p: float
    _rng: np.random.Generator
    _rew: np.ndarray
    _ovl_pos: np.ndarray
    _ovl_rows: np.ndarray
    _ovl_goal: Any

    def _init_her(self, compute_reward_fn: Any, horizon: int, future_k: float, random_seed: int) -> None:
        d = self.__dict__
        d["compute_reward_fn"] = compute_reward_fn
        d["horizon"] = int(horizon)
        d["future_p"] = 1 - 1 / future_k
        d["_rng"] = np.random.default_rng(random_seed)
        d["_rew"] = np.zeros(self._core.capacity, np.float32)  # the reward column, overlay applied
        d["_ovl_pos"] = np.full(self._core.capacity, -1, np.int64)
        d["_ovl_rows"] = np.array([], np.int64)
        d["_ovl_goal"] = None

    def _restore_cache(self) -> None:
        rows = self._ovl_rows
        if rows.size:
            self._rew[rows] = self._core.rew[rows]
            self._ovl_pos[rows] = -1
            self.__dict__["_ovl_rows"] = np.array([], np.int64)

    @property
    def rew(self) -> np.ndarray:
        """float32 [maxsize]: the rewards, relabeled where the last sample rewrote them."""
        return self._rew

    def add(
        self, batch: Any, buffer_ids: Any = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        out = super().add(batch, buffer_ids)  # type: ignore[misc]
        self._restore_cache()  # only after a successful add: a refused one changes nothing
        self._rew[out[0]] = self._core.rew[out[0]]
        return out

    def reset(self, keep_statistics: bool = False) -> None:
        self._restore_cache()
        super().reset(keep_statistics)  # type: ignore[misc]

    def sample_indices(self, batch_size: int | None) -> np.ndarray:
        self._restore_cache()
        idx = super().sample_indices(batch_size)  # type: ignore[misc]
        if idx.size:
            self._rewrite(idx)
        return idx

    def sample(self, batch_size: int | None) -> tuple[Any, np.ndarray]:
        idx = self.sample_indices(batch_size)
        return self[idx], idx  # type: ignore[index]

    def _rewrite(self, idx: np.ndarray) -> None:
        core = self._core
        seg = core.segment_len
        _, end, _ = core.episode_bounds(idx)
        last = end - 1 + seg * ((end % seg) == 0)  # the episode's newest transition row
        to_last = (last - idx) % seg
        span = np.minimum(self.horizon - 1, to_last)
        terminal = idx - idx % seg + (idx % seg + span) % seg
        offset = np.round(self._rng.uniform(size=idx.size) * span).astype(np.int64)
        future_t = idx - idx % seg + (idx % seg + offset) % seg
        groups, inverse = np.unique(terminal, return_inverse=True)
        n_groups = groups.size
        # per group: the earliest sampled row opens the window, the latest one picks the goal
        first = np.full(n_groups, -1, np.int64)
        close = np.full(n_groups, -1, np.int64)
        order = np.argsort(-span, kind="stable")  # earliest (farthest from terminal) first
        first[inverse[order[::-1]]] = order[::-1]
        close[inverse[order]] = order
        relabel = np.zeros(n_groups, bool)
        relabel[self._rng.choice(n_groups, size=int(n_groups * self.future_p), replace=False)] = True
        if not relabel.any():
            return
        views = self._column_views()  # type: ignore[attr-defined]
        ag_v = views["obs"]["achieved_goal"]
        # windows are written group by group in time order of their first rows, a later window
        # overwriting an earlier one where they overlap (Tianshou writes every group's window,
        # relabeled or not, so an unrelabeled later window restores the stored goal)
        t0 = idx[first]
        newest = core.last_index()[t0 // seg]
        age = (newest - t0) % seg
        g_order = np.argsort(-age, kind="stable")
        lens = span[first[g_order]] + 1  # window length of each group, in write order
        starts = np.repeat(t0[g_order], lens)
        step = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        rows = starts - starts % seg + (starts % seg + step) % seg
        ft = future_t[close[g_order]]
        goal_rows = ft - ft % seg + (ft % seg + 1) % seg  # the achieved goal after step ft
        goals = ag_v[np.repeat(goal_rows, lens)]
        flags = np.repeat(relabel[g_order], lens)
        _, last_pos = np.unique(rows[::-1], return_index=True)  # the last write of every row
        keep = rows.size - 1 - last_pos
        keep = keep[flags[keep]]
        rows, goals = rows[keep], goals[keep]
        if rows.size == 0:
            return
        nxt = rows - rows % seg + (rows % seg + 1) % seg
        self._ovl_pos[rows] = np.arange(rows.size)
        rew = np.asarray(self.compute_reward_fn(ag_v[nxt], goals), dtype=np.float32).reshape(-1)
        self._rew[rows] = rew
        self.__dict__["_ovl_rows"] = rows
        self.__dict__["_ovl_goal"] = goals

    def __getitem__(self, index: Any) -> Any:
        out = super().__getitem__(index)  # type: ignore[misc]
        if self._ovl_rows.size == 0 or isinstance(index, slice) or np.isscalar(index) or len(out) == 0:
            return out
        idx = np.asarray(index, dtype=np.int64)
        pos = self._ovl_pos[idx]
        hit = pos >= 0
        if hit.any():
            goal = self._ovl_goal[pos[hit]]
            out.obs.desired_goal[hit] = goal
            out.obs_next.desired_goal[hit] = goal
            out.rew[hit] = self._rew[idx[hit]]
        return out

    def __getstate__(self) -> dict[str, Any]:
        self._restore_cache()
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc,assignment]
        return state

    def save_hdf5(self, path: str, compression: str | None = None) -> None:
        raise NotImplementedError("HER buffers hold a Python compute_reward_fn: save them with pickle")

    @classmethod
    def load_hdf5(cls, path: str, device: str | None = None) -> Any:
        raise NotImplementedError("HER buffers hold a Python compute_reward_fn: load them with pickle")


class HERReplayBuffer(_HERMixin, _CoreStorage, _ts.HERReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``HERReplayBuffer`` (one env) over the core (see :class:`_HERMixin`).

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        size: transitions to keep.
        compute_reward_fn: vectorised ``f(achieved_goal [M, G], desired_goal [M, G]) -> [M]``.
        horizon: the maximum episode length.
        future_k: relabel probability ``1 - 1/future_k`` per sampled episode (Tianshou's).

    Raises:
        NotImplementedError: stack_num > 1 or save_only_last_obs.
    """

    def __init__(
        self,
        size: int,
        compute_reward_fn: Any,
        horizon: int,
        future_k: float = 8.0,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        self._init_storage(
            size,
            1,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
        )
        self._init_her(compute_reward_fn, horizon, future_k, random_seed)


class HERVectorReplayBuffer(_HERMixin, _CoreStorage, _ts.HERVectorReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``HERVectorReplayBuffer`` over the core: ``buffer_num`` envs with
    ``ceil(total_size / buffer_num)`` transitions each (arguments as :class:`HERReplayBuffer`)."""

    _vector = True

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        compute_reward_fn: Any,
        horizon: int,
        future_k: float = 8.0,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if buffer_num < 1:
            raise ValueError(f"buffer_num must be >= 1, got {buffer_num}")
        self._init_storage(
            int(np.ceil(total_size / buffer_num)),
            buffer_num,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
        )
        self._init_her(compute_reward_fn, horizon, future_k, random_seed)
