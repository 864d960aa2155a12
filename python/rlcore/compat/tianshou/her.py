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
        if self.stack_num > 1:
            raise NotImplementedError("rlcore.compat.tianshou HER buffers support stack_num=1 only")
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

    def rewrite_transitions(self, indices: np.ndarray) -> None:
        """Relabel the episodes of ``indices`` (int [B], rows of this buffer) as a sample of
        them would (Tianshou's method). The relabeling of the previous sample is dropped first
        (Tianshou's keeps it only when a sample precedes; calling it twice loses the stored goals).

        Raises:
            IndexError: an index outside the buffer.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self._core.capacity):
            raise IndexError(f"indices must lie in [0, {self._core.capacity}), got {idx.min()}..{idx.max()}")
        self._restore_cache()
        if idx.size:
            self._rewrite(idx)

    def _draw_uniform(self, n: int) -> np.ndarray:
        """float64 [n] in [0, 1): the future offset of each sampled row, as a fraction of its span."""
        return self._rng.uniform(size=n)

    def _draw_groups(self, n_groups: int, k: int) -> np.ndarray:
        """int [k]: which of the ``n_groups`` sampled episodes get relabeled (no repeats)."""
        return self._rng.choice(n_groups, size=k, replace=False)

    def _rewrite(self, idx: np.ndarray) -> None:
        # Tianshou's vector buffer relabels each sub-buffer on its own (its own count of
        # relabeled episodes, int(groups * future_p) per sub-buffer), sub-buffers in order
        core = self._core
        seg = core.segment_len
        newest = core.last_index()
        env = idx // seg
        parts = []
        for e in np.unique(env):
            rows = idx[env == e]
            age = (newest[e] - rows) % seg
            parts.append(self._rewrite_env(rows[np.argsort(-age, kind="stable")]))
        rows = np.concatenate([p[0] for p in parts])
        if rows.size == 0:
            return
        goals = np.concatenate([p[1] for p in parts])
        ag_v = self._column_views()["obs"]["achieved_goal"]  # type: ignore[attr-defined]
        nxt = rows - rows % seg + (rows % seg + 1) % seg
        self._ovl_pos[rows] = np.arange(rows.size)
        rew = np.asarray(self.compute_reward_fn(ag_v[nxt], goals), dtype=np.float32).reshape(-1)
        self._rew[rows] = rew
        self.__dict__["_ovl_rows"] = rows
        self.__dict__["_ovl_goal"] = goals

    def _rewrite_env(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The relabeled rows of one env's sampled ``rows`` (oldest first) and their new goals.

        As Tianshou's ``rewrite_transitions``: row t's window is t, next(t), ... (horizon rows,
        repeating the episode's newest row at its end), ``terminal`` its last row; rows with
        the same terminal form a group (one episode, or one horizon-long stretch of it), whose
        window is that of its oldest row and whose goal is the one achieved after step
        ``t + round(u * (terminal - t))`` of its newest row t. Where windows overlap (horizon
        shorter than the episode) the later group's window wins, for the goal and the reward
        alike. Tianshou writes its [horizon, groups] window array with NumPy fancy assignment
        whose order among repeated rows follows the index array's memory order for its rewards
        (and 1-D goals), which is this rule, but C order for goals of more than one dimension:
        there it keeps the reward of one goal next to another goal; rlcore does not.
        """
        core = self._core
        seg = core.segment_len

        def ring(r: np.ndarray, k: np.ndarray) -> np.ndarray:
            return r - r % seg + (r % seg + k) % seg

        _, end, _ = core.episode_bounds(rows)
        last = end - 1 + seg * ((end % seg) == 0)  # the episode's newest transition row
        span = np.minimum(self.horizon - 1, (last - rows) % seg)
        terminal = ring(rows, span)
        future_t = ring(rows, np.round(self._draw_uniform(rows.size) * span).astype(np.int64))
        first = np.sort(np.unique(terminal, return_index=True)[1])  # groups are runs of rows
        close = np.append(first[1:] - 1, rows.size - 1)
        n_groups = first.size
        relabel = np.zeros(n_groups, bool)
        relabel[self._draw_groups(n_groups, int(n_groups * self.future_p))] = True
        steps = np.minimum(np.arange(self.horizon)[None, :], span[first][:, None])  # [groups, horizon]
        window = ring(np.broadcast_to(rows[first][:, None], steps.shape), steps).ravel()
        group = np.repeat(np.arange(n_groups), self.horizon)
        _, last_pos = np.unique(window[::-1], return_index=True)  # the last write of every row
        keep = window.size - 1 - last_pos
        keep = keep[relabel[group[keep]]]
        ag_v = self._column_views()["obs"]["achieved_goal"]  # type: ignore[attr-defined]
        goal_rows = ring(future_t[close], np.ones(n_groups, np.int64))  # achieved after step t'
        return window[keep], ag_v[goal_rows][group[keep]]

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
