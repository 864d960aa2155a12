"""Tianshou 2.0 replay buffers backed by the rlcore core.

Swap one class, keep the Collector and the algorithm::

    from rlcore.compat.tianshou import VectorReplayBuffer

    buf = VectorReplayBuffer(20_000, buffer_num=len(train_envs))
    collector = Collector(algorithm, train_envs, buf, exploration_noise=True)

Each class subclasses the Tianshou class of the same name (the Collector's and algorithms'
``isinstance`` checks pass) and implements what the Collector, the trainers and the algorithms
call: ``add(batch, buffer_ids)`` returning ``(insertion_idx, ep_return, ep_len, ep_start_idx)``
(arrays [R], zeros for unfinished episodes), ``sample(B)`` -> ``(Batch, indices)``,
``sample_indices(B)`` (B > 0 random, B = 0 all in time order, B < 0 none), ``__getitem__``,
``prev``/``next`` (clamped at episode ends), ``unfinished_index``, ``get_buffer_indices``, the
whole-buffer arrays ``rew``/``terminated``/``truncated``/``done`` (length ``maxsize``, as
``compute_nstep_return`` reads them), ``update_weight``, ``set_beta``, ``hasnull``, ``reset``,
pickling and ``save_hdf5``/``load_hdf5``.

Indices are rows of the core's storage: each env owns a contiguous segment of
``maxsize // buffer_num`` rows (``subbuffer_edges``), an episode of L steps occupies L + 1 rows
(the extra row holds its final observation, so ``obs_next`` of every row is the observation of
the row after it and is never stored twice).

Differences from Tianshou's buffers (deliberate):

- ``maxsize`` counts rows: ``size`` transitions per env plus ``extra_rows`` (default
  ``size // 8 + 2``) rows for final observations.
- Only ``obs``, ``act``, ``rew``, ``terminated``, ``truncated`` (and ``obs_next``) are stored;
  ``info`` and ``policy`` come back as empty ``Batch()`` and extra keys are dropped, so
  algorithms that read stored ``info``/``policy`` entries are not supported; ``rew`` is float32.
- ``add`` checks every argument before it writes and refuses with a typed error what
  Tianshou would store silently or half-way: duplicate ``buffer_ids`` (Tianshou stores two
  successive steps of that env; here one step per env per add), negative ids (Tianshou wraps
  them around), non-integer ids, fields whose leading dimension is not the number of ids, and
  flags that are not bool or 0/1 integers. A refused add leaves the buffer as it was.
- ``stack_num > 1``, ``save_only_last_obs``, ``update(buffer)``, ``set_batch`` and
  ``set_array_at_key`` (episode hooks that add keys) raise ``NotImplementedError``.
- Randomness: the core owns its generator (``random_seed``); HER's relabeling draws from a
  NumPy generator seeded with ``random_seed`` (Tianshou uses the global one).
- HER: Tianshou's semantics (per sampled batch, each episode is relabeled as a whole with
  probability ``1 - 1/future_k`` from the latest sampled step's future, within ``horizon``)
  are reproduced, but the relabeled goals and rewards live in an overlay (and a float32 copy of
  the reward column) that ``__getitem__``/``rew`` read until the next sample or add; the core's
  storage is never written.
- Prioritized: ``weight_norm=False`` returns Schaul et al.'s weights ``(p_i / p_min)^-beta``
  with ``p = (|delta| + eps)^alpha`` on both sides; Tianshou divides ``p_i`` by an un-powered
  minimum. With the default ``weight_norm=True`` both normalise by the batch maximum and agree.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rlcore.compat import _missing

try:
    import tianshou.data as _ts
    from tianshou.data import Batch, to_numpy
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise _missing("tianshou", "tianshou", _err) from _err

from rlcore.buffers import PrioritizedReplayBuffer as _CorePER
from rlcore.buffers import ReplayBuffer as _CoreBuffer
from rlcore.errors import DTypeError, EmptyBufferError, InvalidValueError, ShapeError

__all__ = [
    "BufferIdError",
    "HERReplayBuffer",
    "HERVectorReplayBuffer",
    "PrioritizedReplayBuffer",
    "PrioritizedVectorReplayBuffer",
    "ReplayBuffer",
    "VectorReplayBuffer",
]

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
        if stack_num != 1 or save_only_last_obs:
            raise NotImplementedError(
                "rlcore.compat.tianshou buffers support stack_num=1 and save_only_last_obs=False only "
                "(stack frames in an env wrapper instead)"
            )
        d = self.__dict__  # Tianshou's __setattr__ forwards reserved names; write the dict directly
        d["options"] = {
            "stack_num": 1,
            "ignore_obs_next": ignore_obs_next,
            "save_only_last_obs": False,
            "sample_avail": sample_avail,
        }
        d["stack_num"] = 1
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
        idx = res.indices[ids]
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

    def sample_indices(self, batch_size: int | None) -> np.ndarray:
        """int64 rows: ``batch_size`` > 0 random (uniform, or by priority), 0 (or None on a
        vector buffer) every stored row in time order, < 0 none; None on a single buffer
        ``len(self)`` random rows (as Tianshou)."""
        if batch_size is None:
            batch_size = 0 if self._vector else len(self)
        if batch_size > 0 and len(self) > 0:
            return self._core.sample(batch_size).indices
        if batch_size == 0:
            return self._all_indices()
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
        v = self._column_views()
        nxt = self._next_rows(idx)
        obs_v = v["obs"]
        if isinstance(obs_v, dict):
            obs = {k: a[idx] for k, a in obs_v.items()}
            obs_next = {k: a[nxt] for k, a in obs_v.items()}
        else:
            obs, obs_next = obs_v[idx], obs_v[nxt]
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
        return out, tb.indices

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
        """Load a buffer written by :meth:`save_hdf5` (``device`` is ignored: numpy storage).

        Raises:
            rlcore.errors.SaveFileError: the file does not hold a buffer of this class.
        """
        import h5py

        from rlcore.errors import SaveFileError

        with h5py.File(path, "r") as f:
            meta = json.loads(f.attrs["rlcore_compat"])
            if meta["class"] != cls.__name__:
                raise SaveFileError(f"{path} holds a {meta['class']}, not a {cls.__name__}")
            arrays = {name.replace("|", "/"): np.asarray(ds) for name, ds in f["arrays"].items()}
            done = np.asarray(f["done"])
        buf = cls.__new__(cls)
        buf.__dict__.update(meta["dict"])
        buf.__dict__["_core"] = buf._make_core()
        buf._core.load_state_dict({**meta["core"], "arrays": arrays})
        buf.__dict__["_done"] = done
        buf.__dict__["_views"] = None
        return buf


_SCALARS = ("_size_per_env", "_seed", "_alpha", "_beta", "_weight_norm")


class ReplayBuffer(_CoreStorage, _ts.ReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``ReplayBuffer`` (one env) backed by the rlcore core (see the module docstring).

    Args:
        size: transitions to keep.
        stack_num, save_only_last_obs: must be 1 / False.
        ignore_obs_next, sample_avail: accepted; every observation is stored once anyway.
        random_seed: seed of the core's generator.
        extra_rows: rows for episodes' final observations (default ``size // 8 + 2``).

    Raises:
        NotImplementedError: stack_num > 1 or save_only_last_obs.
    """

    def __init__(
        self,
        size: int,
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


class VectorReplayBuffer(_CoreStorage, _ts.VectorReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``VectorReplayBuffer`` backed by the rlcore core: ``buffer_num`` envs, each
    with ``ceil(total_size / buffer_num)`` transitions (plus ``extra_rows``) of its own.

    Raises:
        NotImplementedError: stack_num > 1 or save_only_last_obs.
        ValueError: buffer_num < 1.
    """

    _vector = True

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
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


class _PrioritizedMixin:
    """Prioritized replay (Schaul et al. 2016): ``update_weight``, ``set_beta``, ``get_weight``."""

    _prioritized = True
    _core: Any

    def update_weight(self, index: np.ndarray, new_weight: Any) -> None:
        """Set the priorities of rows ``index`` to ``(|new_weight| + eps)^alpha``
        (eps = float32 machine epsilon, as Tianshou); rows overwritten since they were sampled
        are skipped."""
        self._core.update_priorities(np.asarray(index), np.abs(to_numpy(new_weight)).reshape(-1))

    def set_beta(self, beta: float) -> None:
        """Set the importance-sampling exponent beta (>= 0)."""
        self._core.beta = beta

    def get_weight(self, index: int | np.ndarray) -> Any:
        """Importance-sampling weights of rows ``index`` (see the module docstring)."""
        return self._weights_at(np.atleast_1d(np.asarray(index)))  # type: ignore[attr-defined]


class PrioritizedReplayBuffer(_PrioritizedMixin, _CoreStorage, _ts.PrioritizedReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``PrioritizedReplayBuffer`` backed by the core's sum tree; ``sample`` adds
    ``weight`` [B] float32 to the batch.

    Args:
        size, stack_num, ...: as :class:`ReplayBuffer`.
        alpha: priority exponent (> 0).
        beta: importance-sampling exponent (>= 0).
        weight_norm: divide the weights by the batch maximum (Tianshou's default).

    Raises:
        ValueError: alpha <= 0 or beta < 0.
    """

    def __init__(
        self,
        size: int,
        alpha: float,
        beta: float,
        weight_norm: bool = True,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if alpha <= 0 or beta < 0:
            raise ValueError(f"need alpha > 0 and beta >= 0, got alpha={alpha}, beta={beta}")
        self._init_storage(
            size,
            1,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
            alpha=alpha,
            beta=beta,
            weight_norm=weight_norm,
        )


class PrioritizedVectorReplayBuffer(_PrioritizedMixin, _CoreStorage, _ts.PrioritizedVectorReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``PrioritizedVectorReplayBuffer`` backed by one core sum tree over all envs
    (arguments as :class:`PrioritizedReplayBuffer` and :class:`VectorReplayBuffer`)."""

    _vector = True

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        alpha: float,
        beta: float,
        weight_norm: bool = True,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if alpha <= 0 or beta < 0 or buffer_num < 1:
            raise ValueError(f"need alpha > 0, beta >= 0, buffer_num >= 1; got {alpha}, {beta}, {buffer_num}")
        self._init_storage(
            int(np.ceil(total_size / buffer_num)),
            buffer_num,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
            alpha=alpha,
            beta=beta,
            weight_norm=weight_norm,
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

    Args:
        size: transitions to keep.
        compute_reward_fn: vectorised ``f(achieved_goal [M, G], desired_goal [M, G]) -> [M]``.
        horizon: the maximum episode length.
        future_k: relabel probability ``1 - 1/future_k`` per sampled episode (Tianshou's).
        others: as :class:`ReplayBuffer`.

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
