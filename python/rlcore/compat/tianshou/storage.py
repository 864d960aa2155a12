"""The Tianshou buffer API over an rlcore buffer, shared by every Tianshou compat class: ``add`` with
buffer ids, indexing, ``sample_indices``, ``next``/``prev``, the flags and views."""


from __future__ import annotations

import json
from typing import Any

import numpy as np
from tianshou.data import Batch

from rlcore.buffers.prioritized import INDEX_ROW_MASK as _ROW_MASK
from rlcore.buffers.prioritized import PrioritizedReplayBuffer as _CorePER
from rlcore.buffers.replay import ReplayBuffer as _CoreBuffer
from rlcore.errors import DTypeError, EmptyBufferError, InvalidValueError, SaveFileError, ShapeError

_F32_EPS = float(np.finfo(np.float32).eps)


_STEP_KEYS = ("obs", "act", "rew", "terminated", "truncated", "obs_next")


class BufferIdError(InvalidValueError, IndexError):
    """``add(batch, buffer_ids)`` named an env id outside ``[0, buffer_num)``.

    Both an ``IndexError`` (what Tianshou's vector buffers raise for an id past the end) and a
    ``ValueError`` (what Tianshou's single ``ReplayBuffer`` raises for ids other than ``[0]``).
    """


def _leaves(fields: dict[str, Any], prefix: str = "") -> list[tuple[str, np.ndarray]]:
    """``(name, array)`` for every array of ``fields``, dict observations key by key."""
    out: list[tuple[str, np.ndarray]] = []
    for k, v in fields.items():
        name = f"{prefix}{k}"
        out += _leaves(v, f"{name}.") if isinstance(v, dict) else [(name, v)]
    return out


def _arrays(x: Any) -> Any:
    """A Batch (dict observation) as a dict of arrays; anything else as an array."""
    if isinstance(x, Batch):
        return {k: _arrays(v) for k, v in x.items()}
    return np.asarray(x)


class _CoreStorage:
    """What the four Tianshou classes share. (A mixin because Tianshou's classes must stay the
    real bases for the Collector's ``isinstance`` checks.)"""

    _core: _CoreBuffer
    _prioritized: bool = False
    _vector: bool = False

    def _init_storage(
        self,
        size: int,
        buffer_num: int,
        *,
        stack_num: int,
        save_only_last_obs: bool,
        ignore_obs_next: bool,
        sample_avail: bool,
        random_seed: int,
        extra_rows: int | None,
        alpha: float | None = None,
        beta: float | None = None,
        weight_norm: bool = True,
    ) -> None:
        if save_only_last_obs:
            raise NotImplementedError(
                "rlcore.compat.tianshou buffers do not support save_only_last_obs (store whole "
                "observations, or frame-stacked observations from an env wrapper)"
            )
        if isinstance(stack_num, bool) or not isinstance(stack_num, (int, np.integer)):
            raise DTypeError(f"stack_num must be an int, got {stack_num!r}")
        if stack_num < 1:
            raise InvalidValueError(f"stack_num must be >= 1, got {stack_num}")
        d = self.__dict__  # Tianshou's __setattr__ forwards reserved names; write the dict directly
        d["options"] = {
            "stack_num": int(stack_num),
            "ignore_obs_next": ignore_obs_next,
            "save_only_last_obs": False,
            "sample_avail": sample_avail,
        }
        d["stack_num"] = int(stack_num)
        d["_sample_avail"] = bool(sample_avail)
        d["buffer_num"] = int(buffer_num)
        d["_size_per_env"] = int(size)
        d["extra_rows"] = int(size) // 8 + 2 if extra_rows is None else int(extra_rows)
        d["_seed"] = int(random_seed)
        d["_alpha"], d["_beta"], d["_weight_norm"] = alpha, beta, weight_norm
        d["_core"] = self._make_core()
        d["maxsize"] = self._core.capacity
        d["_done"] = np.zeros(self.maxsize, bool)
        d["_views"] = None
        if alpha is not None:
            self.options.update(alpha=alpha, beta=beta)

    def _make_core(self) -> _CoreBuffer:
        rows = (self._size_per_env + self.extra_rows) * self.buffer_num
        if self._prioritized:
            return _CorePER(
                rows,
                num_envs=self.buffer_num,
                alpha=self._alpha,
                beta=self._beta,
                eps=_F32_EPS,
                seed=self._seed,
            )
        return _CoreBuffer(rows, num_envs=self.buffer_num, seed=self._seed)

    @property
    def core(self) -> _CoreBuffer:
        """The :class:`rlcore.ReplayBuffer` holding the steps."""
        return self._core

    def __getattr__(self, key: str) -> Any:
        # Tianshou forwards unknown attributes to its storage Batch; here there is none
        raise AttributeError(f"{type(self).__name__} has no attribute {key!r}")

    def __len__(self) -> int:
        return len(self._core)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(maxsize={self.maxsize}, buffer_num={self.buffer_num}, len={len(self)})"

    # -- layout -------------------------------------------------------------------------------

    @property
    def subbuffer_edges(self) -> np.ndarray:
        """int [buffer_num + 1]: first row of each env's segment, then ``maxsize``."""
        return np.arange(self.buffer_num + 1) * self._core.segment_len

    @property
    def last_index(self) -> np.ndarray:
        """int64 [buffer_num]: newest transition row of each env (its segment start if none)."""
        last = self._core.last_index()
        return np.where(last < 0, self.subbuffer_edges[:-1], last)

    def _column_views(self) -> dict[str, Any]:
        if self._views is None:
            core = self._core
            self.__dict__["_views"] = {
                "obs": core.column("obs"),
                "act": core.act,
                "rew": core.rew,
                "terminated": core.terminated.view(bool),
                "truncated": core.truncated.view(bool),
                "flags": core.column("flags"),
            }
        return self._views

    # whole-buffer arrays, as Tianshou's algorithms index them (rows without a transition hold
    # stale values; prev/next/sample never return such rows)

    @property
    def rew(self) -> np.ndarray:
        """float32 [maxsize] read-only view of the rewards."""
        return self._column_views()["rew"]

    @property
    def terminated(self) -> np.ndarray:
        """bool [maxsize] read-only view of the termination flags."""
        return self._column_views()["terminated"]

    @property
    def truncated(self) -> np.ndarray:
        """bool [maxsize] read-only view of the truncation flags."""
        return self._column_views()["truncated"]

    @property
    def done(self) -> np.ndarray:
        """bool [maxsize]: ``terminated | truncated`` (kept up to date by ``add``)."""
        return self._done

    @property
    def obs(self) -> Any:
        """[maxsize, *O] read-only view of the observations (a Batch of views for dicts)."""
        obs = self._column_views()["obs"]
        return Batch(obs) if isinstance(obs, dict) else obs

    @property
    def act(self) -> np.ndarray:
        """[maxsize, *A] read-only view of the actions."""
        return self._column_views()["act"]

    # -- writing ------------------------------------------------------------------------------

    def add(
        self, batch: Any, buffer_ids: np.ndarray | list[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Add R steps, one per env in ``buffer_ids`` (default: every env; a non-vector buffer
        also takes a single unstacked step without ``buffer_ids``).

        Every argument is checked before anything is written: a refused add leaves the buffer
        exactly as it was.

        Args:
            batch: a Batch with ``obs``, ``act``, ``rew``, ``terminated``, ``truncated`` and
                ``obs_next`` of leading dimension R (``obs``/``obs_next`` may be Batches of
                arrays); ``terminated``/``truncated`` bool (or 0/1 integers); other keys are
                ignored.
            buffer_ids: R distinct integer env ids in ``[0, buffer_num)``, any order.

        Returns:
            ``(insertion_idx, ep_return, ep_len, ep_start_idx)``, arrays [R]: the row written
            for each step, the episode return (float64) and length (int) where the step ended
            an episode (0 elsewhere), and the row where each step's episode starts.

        Raises:
            BufferIdError: an id outside ``[0, buffer_num)`` (an ``IndexError`` and a
                ``ValueError``; Tianshou wraps negative ids around, this buffer refuses them).
            rlcore.errors.InvalidValueError: duplicate ids (Tianshou would write two
                successive steps of one env from one batch; refused here), a missing key, or
                flags other than 0/1.
            rlcore.errors.ShapeError: ``buffer_ids`` not 1-D, or a field whose leading
                dimension is not R; data that does not fit the columns of the first add.
            rlcore.errors.DTypeError: non-integer ``buffer_ids``, non-bool/integer flags, or
                data whose dtype does not fit the columns.
        """
        step = self._checked_step(batch, buffer_ids)
        return self._write(*step)

    def _buffer_ids(self, buffer_ids: Any) -> np.ndarray:
        """``buffer_ids`` as int64 [R], checked: 1-D, integers, in range, distinct."""
        ids = np.asarray(buffer_ids)
        if ids.ndim != 1:
            raise ShapeError(
                f"add: buffer_ids must be a 1-D sequence of env ids, got shape {list(ids.shape)}"
            )
        if ids.size == 0:
            return np.zeros(0, np.int64)
        if not np.issubdtype(ids.dtype, np.integer):
            raise DTypeError(f"add: buffer_ids must be integers, got dtype {ids.dtype}")
        n = self.buffer_num
        bad = ids[(ids < 0) | (ids >= n)]
        if bad.size:
            raise BufferIdError(
                f"add: buffer_ids must lie in [0, {n}) (this buffer has {n} env segment(s)), got {bad.tolist()}"
            )
        ids = ids.astype(np.int64)
        uniq, counts = np.unique(ids, return_counts=True)
        if uniq.size != ids.size:
            raise InvalidValueError(
                f"add: buffer_ids must be distinct (one step per env per add), got {uniq[counts > 1].tolist()} "
                "more than once; add an env's successive steps in successive calls"
            )
        return ids

    def _checked_step(self, batch: Any, buffer_ids: Any) -> tuple[Any, ...]:
        """The arguments of :meth:`add` as ``(ids, obs, act, rew, term, trunc, obs_next)``
        arrays with leading dimension R, after every check that needs no stored column (the
        core checks the rest before it writes)."""
        missing = [k for k in _STEP_KEYS if k not in batch.get_keys()]
        if missing:
            raise InvalidValueError(
                f"add: the batch has no {', '.join(missing)}; rlcore.compat.tianshou buffers need "
                f"{', '.join(_STEP_KEYS)} in every added batch"
            )
        stacked = self._vector or buffer_ids is not None
        ids = np.arange(self.buffer_num) if buffer_ids is None else self._buffer_ids(buffer_ids)

        def rows(x: Any) -> Any:
            if isinstance(x, dict):
                return {k: rows(v) for k, v in x.items()}
            x = np.asarray(x)
            return x if stacked else x[None]

        fields = {
            "obs": rows(_arrays(batch.obs)),
            "act": rows(batch.act),
            "rew": rows(batch.rew),
            "terminated": rows(batch.terminated),
            "truncated": rows(batch.truncated),
            "obs_next": rows(_arrays(batch.obs_next)),
        }
        for name, x in _leaves(fields):
            if x.ndim == 0 or x.shape[0] != len(ids):
                got = "a scalar" if x.ndim == 0 else f"leading dimension {x.shape[0]}"
                raise ShapeError(
                    f"add: {name} has {got}, but the add is for {len(ids)} env(s) "
                    f"(buffer_ids {ids.tolist()}); every field needs one row per env"
                )
        for name in ("terminated", "truncated"):
            flag = fields[name]
            if flag.dtype != np.bool_:
                if not np.issubdtype(flag.dtype, np.integer):
                    raise DTypeError(f"add: {name} must be bool (or 0/1 integers), got dtype {flag.dtype}")
                if ((flag != 0) & (flag != 1)).any():
                    raise InvalidValueError(
                        f"add: {name} must hold 0 or 1 only, got {np.unique(flag).tolist()}"
                    )
                fields[name] = flag.astype(bool)
        return ids, *fields.values()

    def _write(
        self, ids: np.ndarray, obs: Any, act: Any, rew: Any, term: Any, trunc: Any, obs_next: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Write checked steps (see :meth:`_checked_step`) into the core; :meth:`add`'s return."""
        n = self.buffer_num
        if len(ids) == 0:
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, np.int64)
        mask = None
        if len(ids) != n or (ids != np.arange(n)).any():

            def full(x: Any) -> Any:
                if isinstance(x, dict):
                    return {k: full(v) for k, v in x.items()}
                out = np.zeros((n, *x.shape[1:]), x.dtype)
                out[ids] = x
                return out

            obs, obs_next, act, rew, term, trunc = map(full, (obs, obs_next, act, rew, term, trunc))
            mask = np.zeros(n, bool)
            mask[ids] = True
        res = self._core.add(obs, act, rew, term, trunc, obs_next, mask=mask)
        idx = res.indices[ids] & _ROW_MASK  # rows (a prioritized core's indices carry a generation)
        self._done[idx] = (term | trunc)[ids]
        start = self._core.episode_bounds(idx)[0]
        ep_ret = np.zeros(len(ids))
        ep_len = np.zeros(len(ids), dtype=int)
        if len(res.done_envs):
            where = np.empty(n, dtype=np.int64)
            where[ids] = np.arange(len(ids))
            pos = where[res.done_envs]
            ep_ret[pos] = res.episode_returns
            ep_len[pos] = res.episode_lengths
        return idx, ep_ret, ep_len, start

    def reset(self, keep_statistics: bool = False) -> None:
        """Forget every stored step (memory and columns are kept)."""
        self._core.clear()
        self._done[:] = False

    def update(self, buffer: Any) -> np.ndarray:
        raise NotImplementedError("rlcore.compat.tianshou buffers cannot absorb another buffer")

    def set_batch(self, batch: Any) -> None:
        raise NotImplementedError(
            "rlcore.compat.tianshou buffers own their storage; set_batch is not supported"
        )

    def set_array_at_key(
        self, seq: np.ndarray, key: str, index: Any = None, default_value: float | None = None
    ) -> None:
        raise NotImplementedError(
            f"rlcore.compat.tianshou buffers store obs/act/rew/terminated/truncated only; cannot add key {key!r}"
        )

    # -- reading ------------------------------------------------------------------------------

    def _all_indices(self) -> np.ndarray:
        """int64: every transition row, env by env, oldest first."""
        if len(self) == 0:
            return np.array([], dtype=np.int64)
        seg = self._core.segment_len
        last = self._core.last_index()
        starts = np.arange(self.buffer_num) * seg
        order = starts[:, None] + (last[:, None] - starts[:, None] + 1 + np.arange(seg)) % seg
        order = order[last >= 0].reshape(-1)
        flags = self._column_views()["flags"]
        return order[(flags[order] & 1) > 0]

    def _stacks_whole(self) -> bool:
        """Sampling draws only rows with ``stack_num - 1`` earlier steps in their episode
        (Tianshou's ``sample_avail`` with ``stack_num > 1``; prioritized buffers ignore it, as
        Tianshou's do)."""
        return self.stack_num > 1 and self._sample_avail and not self._prioritized

    def _stack_rows(self, idx: np.ndarray) -> np.ndarray:
        """int64 ``[B, stack_num]``: the rows of each stack, oldest first, ending at ``idx``;
        the first step of an episode repeats where the episode has fewer steps (Tianshou's
        ``get(index, key, stack_num)``: ``prev`` stops at an episode start)."""
        rows = np.empty((len(idx), self.stack_num), dtype=np.int64)
        rows[:, -1] = idx
        for j in range(self.stack_num - 1, 0, -1):
            rows[:, j - 1] = self._core.prev(rows[:, j])
        return rows

    def sample_indices(self, batch_size: int | None) -> np.ndarray:
        """int64 rows: ``batch_size`` > 0 random (uniform, or by priority), 0 (or None on a
        vector buffer) every stored row in time order, < 0 none; None on a single buffer
        ``len(self)`` random rows (as Tianshou). With ``stack_num > 1`` and ``sample_avail``,
        only rows with ``stack_num - 1`` earlier steps in their episode: uniform over them in
        one core call (the last steps of ``sample_sequences(B, stack_num, pad=False)``)."""
        if batch_size is None:
            batch_size = 0 if self._vector else len(self)
        if batch_size > 0 and len(self) > 0:
            if self._stacks_whole():
                return self._core.sample_sequences(batch_size, self.stack_num, pad=False).indices[:, -1]
            return self._hand_out(self._core.sample(batch_size).indices)
        if batch_size == 0:
            idx = self._all_indices()
            if self._stacks_whole() and idx.size:
                rows = self._stack_rows(idx)
                idx = idx[rows[:, 0] != rows[:, 1]]  # all stack_num rows distinct
            return idx
        return np.array([], dtype=np.int64)

    def prev(self, index: int | np.ndarray) -> Any:
        """Row of the previous step of the same episode (the row itself at an episode start)."""
        if np.isscalar(index):
            return int(self._core.prev(np.array([index]))[0])
        return self._core.prev(np.asarray(index))

    def next(self, index: int | np.ndarray) -> Any:
        """Row of the next step of the same episode (the row itself at an episode end or at
        the newest step of a running episode)."""
        if np.isscalar(index):
            return int(self._core.next(np.array([index]))[0])
        return self._core.next(np.asarray(index))

    def unfinished_index(self) -> np.ndarray:
        """int64 [U]: newest row of every env whose episode is still running."""
        return self._core.unfinished_index()

    def _next_rows(self, idx: np.ndarray) -> np.ndarray:
        seg = self._core.segment_len
        return idx - idx % seg + (idx % seg + 1) % seg

    def _gather(self, idx: np.ndarray) -> Any:
        """The Batch of rows ``idx``; with ``stack_num > 1`` ``obs`` and ``obs_next`` are stacks
        ``[B, stack_num, *O]`` over :meth:`_stack_rows` (``obs_next`` of each stacked step, as
        Tianshou's buffers that store ``obs_next``)."""
        v = self._column_views()
        rows = idx if self.stack_num == 1 else self._stack_rows(idx)
        nxt = self._next_rows(rows)
        obs_v = v["obs"]
        if isinstance(obs_v, dict):
            obs = {k: a[rows] for k, a in obs_v.items()}
            obs_next = {k: a[nxt] for k, a in obs_v.items()}
        else:
            obs, obs_next = obs_v[rows], obs_v[nxt]
        term, trunc = v["terminated"][idx], v["truncated"][idx]
        return Batch(
            obs=obs,
            act=v["act"][idx],
            rew=v["rew"][idx],
            terminated=term,
            truncated=trunc,
            done=term | trunc,
            obs_next=obs_next,
            info=Batch(),
            policy=Batch(),
        )

    def __getitem__(self, index: Any) -> Any:
        """The steps at rows ``index`` (int, array or slice; ``buffer[:]`` is every stored step
        in time order) as a Batch with ``obs``, ``act``, ``rew``, ``terminated``,
        ``truncated``, ``done``, ``obs_next`` (and ``weight`` for prioritized buffers)."""
        if isinstance(index, slice):
            idx = self._all_indices() if index == slice(None) else self._all_indices()[index]
        elif np.isscalar(index):
            return self[np.array([index])][0]
        else:
            idx = np.asarray(index, dtype=np.int64)
        if len(self) == 0:
            return Batch()
        out = self._gather(idx)
        if self._prioritized:
            out.weight = self._weights_at(idx)
        return out

    def sample(self, batch_size: int | None) -> tuple[Any, np.ndarray]:
        """``(buffer[indices], indices)`` for ``indices = sample_indices(batch_size)``; for
        batch_size > 0 one core call gathers everything.

        Raises:
            rlcore.errors.EmptyBufferError: batch_size > 0 on an empty buffer.
        """
        if batch_size is None or batch_size <= 0:
            idx = self.sample_indices(batch_size)
            return self[idx], idx
        if len(self) == 0:
            raise EmptyBufferError("cannot sample: the buffer holds no transition yet")
        if self.stack_num > 1:
            idx = self.sample_indices(batch_size)
            return self[idx], idx
        tb = self._core.sample(batch_size)
        out = Batch(
            obs=tb.obs,
            act=tb.act,
            rew=tb.rew,
            terminated=tb.terminated,
            truncated=tb.truncated,
            done=tb.terminated | tb.truncated,
            obs_next=tb.obs_next,
            info=Batch(),
            policy=Batch(),
        )
        if self._prioritized:
            out.weight = tb.weights / tb.weights.max() if self._weight_norm else tb.weights
        return out, self._hand_out(tb.indices)

    def _hand_out(self, indices: np.ndarray) -> np.ndarray:
        """The rows of a core sample's ``indices``, which Tianshou indexes its arrays by. A
        prioritized core's indices name transitions (a generation above the row): each row's
        latest one is kept, so that :meth:`update_weight` of rows sampled here names the
        transition that was sampled and skips one the ring has overwritten since."""
        if not self._prioritized:
            return indices
        rows = indices & _ROW_MASK
        keys = self.__dict__.get("_sampled")
        if keys is None:
            keys = self.__dict__["_sampled"] = np.full(self._core.capacity, -1, np.int64)
        keys[rows] = indices
        return rows

    def _sampled_indices(self, rows: np.ndarray) -> np.ndarray:
        """The core index each row was last handed out by :meth:`sample` for (the bare row for
        rows never sampled or out of range, which the core checks)."""
        keys = self.__dict__.get("_sampled")
        if keys is None:
            return rows
        ok = (rows >= 0) & (rows < keys.shape[0])
        known = np.where(ok, keys[np.where(ok, rows, 0)], -1)
        return np.where(known >= 0, known, rows)

    def _weights_at(self, idx: np.ndarray) -> np.ndarray:
        prio = self._core.priorities(idx)
        w = np.zeros_like(prio)
        pos = prio > 0
        if self._weight_norm:
            w[pos] = prio[pos] ** -float(self._core.beta or 0.0)
            return w / w.max() if w.max() > 0 else w
        stored = self._core.priorities(self._all_indices())
        w[pos] = (prio[pos] / stored[stored > 0].min()) ** -float(self._core.beta or 0.0)
        return w

    def hasnull(self) -> bool:
        """Whether a stored observation, action or reward is NaN."""
        if len(self) == 0:
            return False
        v = self._column_views()
        live = (v["flags"] & 9) > 0  # transition rows and final-observation rows
        cols = list(v["obs"].values()) if isinstance(v["obs"], dict) else [v["obs"]]
        cols += [v["act"], v["rew"]]
        return any(np.isnan(c[live]).any() for c in cols if np.issubdtype(c.dtype, np.floating))

    # -- state --------------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_views"] = None  # views share the core's memory; rebuilt after loading
        state.pop("_sampled", None)  # hand-outs of this buffer's samples, not data
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def save_hdf5(self, path: str, compression: str | None = None) -> None:
        """Save to an HDF5 file: the core's arrays plus the configuration (JSON attribute)."""
        import h5py

        state = self._core.state_dict()
        with h5py.File(path, "w") as f:
            f.attrs["rlcore_compat"] = json.dumps(
                {
                    "class": type(self).__name__,
                    "dict": {
                        k: v for k, v in self.__dict__.items() if k.startswith("_") is False or k in _SCALARS
                    },
                    "core": {"config": state["config"], "schema": state["schema"]},
                }
            )
            grp = f.create_group("arrays")
            for name, arr in state["arrays"].items():
                grp.create_dataset(name.replace("/", "|"), data=arr, compression=compression)
            f.create_dataset("done", data=self._done, compression=compression)

    @classmethod
    def load_hdf5(cls, path: str, device: str | None = None) -> Any:
        """Load a buffer from an HDF5 file (``device`` is ignored: numpy storage): one written
        by :meth:`save_hdf5`, or one written by Tianshou's own ``save_hdf5`` of the matching
        Tianshou class (``ReplayBuffer``, ``PrioritizedReplayBuffer``, ``VectorReplayBuffer``,
        ``PrioritizedVectorReplayBuffer``), whose stored steps are added in time order. Nothing in
        the file is unpickled or run; Tianshou's priorities (a pickled segment tree) are not
        read: every loaded transition starts at the maximum priority.

        Raises:
            rlcore.errors.SaveFileError: the file is missing, truncated or not HDF5, holds a
                buffer of another class, or holds anything but the fields these formats have
                (the message names the file).
        """
        import h5py

        try:
            with h5py.File(path, "r") as f:
                if "rlcore_compat" in f.attrs:
                    return cls._load_own_hdf5(path, f)
                return cls._load_tianshou_hdf5(path, f)
        except SaveFileError:
            raise
        except Exception as e:  # noqa: BLE001 - h5py and a damaged file raise anything
            raise SaveFileError(f"{path} is not a readable buffer file: {type(e).__name__}: {e}") from e

    @classmethod
    def _load_own_hdf5(cls, path: str, f: Any) -> Any:
        """A file of :meth:`save_hdf5`: the constructor's arguments are checked and the buffer is
        built by the constructor, never by writing the file's entries into ``__dict__``."""
        meta = json.loads(f.attrs["rlcore_compat"])
        if not isinstance(meta, dict) or meta.get("class") != cls.__name__:
            got = meta.get("class") if isinstance(meta, dict) else None
            raise SaveFileError(f"{path} holds a {got!r}, not a {cls.__name__}")
        saved = meta.get("dict")
        if not isinstance(saved, dict):
            raise SaveFileError(f"{path}: its configuration is not an object")

        def field(name: str, kinds: tuple[type, ...]) -> Any:
            v = saved.get(name)
            if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
                raise SaveFileError(f"{path}: {name}={v!r} is not a {' or '.join(k.__name__ for k in kinds)}")
            return v

        options = field("options", (dict,))
        kwargs: dict[str, Any] = dict(
            stack_num=field("stack_num", (int,)),
            ignore_obs_next=bool(options.get("ignore_obs_next", False)),
            sample_avail=bool(options.get("sample_avail", False)),
            random_seed=field("_seed", (int,)),
            extra_rows=field("extra_rows", (int,)),
        )
        args: list[Any] = [field("_size_per_env", (int,))]
        if cls._vector:
            n = field("buffer_num", (int,))
            args = [args[0] * n, n]
        if cls._prioritized:
            args += [field("_alpha", (int, float)), field("_beta", (int, float))]
            kwargs["weight_norm"] = field("_weight_norm", (bool,))
        try:
            buf = cls(*args, **kwargs)
        except (ValueError, TypeError) as e:
            raise SaveFileError(f"{path}: its configuration describes no {cls.__name__}: {e}") from e
        if not ({"arrays", "done"} <= set(f.keys())):
            raise SaveFileError(f"{path} lacks its 'arrays' or 'done'")
        arrays = {name.replace("|", "/"): np.asarray(ds) for name, ds in f["arrays"].items()}
        done = np.asarray(f["done"])
        if done.shape != buf._done.shape:
            raise SaveFileError(f"{path}: 'done' has shape {done.shape}, expected {buf._done.shape}")
        core = meta.get("core")
        if not isinstance(core, dict):
            raise SaveFileError(f"{path}: its core state is not an object")
        buf._core.load_state_dict({**core, "arrays": arrays})
        buf._done[:] = done.astype(bool)
        return buf

    @classmethod
    def _load_tianshou_hdf5(cls, path: str, f: Any) -> Any:
        """A file of Tianshou's own ``save_hdf5``: its plain datasets only (``_meta``'s step
        arrays, sizes, insertion index, per-buffer offsets and last indices), steps re-added
        in time order."""
        if "_meta" not in f or "maxsize" not in f.attrs:
            raise SaveFileError(f"{path} is neither an rlcore compat nor a Tianshou buffer file")
        vector = "buffer_num" in f.attrs
        prioritized = "_alpha" in f.attrs
        if vector != cls._vector or prioritized != cls._prioritized:
            kind = ("Prioritized" if prioritized else "") + ("Vector" if vector else "") + "ReplayBuffer"
            raise SaveFileError(f"{path} holds a Tianshou {kind}, not a {cls.__name__}")

        def plain(name: str) -> np.ndarray:
            ds = f[name]
            if not isinstance(ds, h5py_dataset()) or ds.attrs.get("__data_type__") != "ndarray":
                raise SaveFileError(f"{path}: {name} is not a plain array")
            return np.asarray(ds)

        meta = {k: plain(f"_meta/{k}") for k in _STEP_KEYS if k in f["_meta"]}
        missing = [k for k in _STEP_KEYS if k not in meta]
        if missing:
            raise SaveFileError(f"{path}: _meta lacks {missing}")
        maxsize = int(f.attrs["maxsize"])
        options = dict(f["options"].attrs) if "options" in f else {}
        kwargs: dict[str, Any] = dict(stack_num=int(options.get("stack_num", 1)))
        if vector:
            n = int(f.attrs["buffer_num"])
            offsets, lengths, last = plain("_offset"), plain("_lengths"), plain("last_index")
            if not (offsets.shape == lengths.shape == last.shape == (n,)):
                raise SaveFileError(f"{path}: _offset, _lengths and last_index must be [{n}]")
            size = maxsize // n
            order = [
                (e, (offsets[e] + (last[e] - offsets[e] - np.arange(lengths[e])[::-1]) % size).astype(np.int64))
                for e in range(n)
            ]
            args: list[Any] = [maxsize, n]
        else:
            size, n = maxsize, 1
            count, head = int(f.attrs["_size"]), int(f.attrs["_insertion_idx"])
            order = [(0, (head - count + np.arange(count)) % maxsize)]
            args = [maxsize]
        if prioritized:
            args += [float(f.attrs["_alpha"]), float(f.attrs["_beta"])]
            kwargs["weight_norm"] = bool(f.attrs.get("_weight_norm", True))
        for k, a in meta.items():
            if a.shape[:1] != (maxsize,):
                raise SaveFileError(f"{path}: _meta/{k} has {a.shape[:1]} rows, maxsize is {maxsize}")
        buf = cls(*args, **kwargs)
        for e, rows in order:
            if rows.size and (rows.min() < 0 or rows.max() >= maxsize):
                raise SaveFileError(f"{path}: its indices lie outside [0, {maxsize})")
            for r in rows:
                step = Batch(
                    obs=meta["obs"][r : r + 1],
                    act=meta["act"][r : r + 1],
                    rew=meta["rew"][r : r + 1],
                    terminated=meta["terminated"][r : r + 1].astype(bool),
                    truncated=meta["truncated"][r : r + 1].astype(bool),
                    obs_next=meta["obs_next"][r : r + 1],
                    info=Batch(),
                )
                buf.add(step, buffer_ids=[e])
        return buf


def h5py_dataset() -> type:
    """``h5py.Dataset`` (h5py is imported only by the HDF5 methods)."""
    import h5py

    return h5py.Dataset


_SCALARS = ("_size_per_env", "_seed", "_alpha", "_beta", "_weight_norm")
