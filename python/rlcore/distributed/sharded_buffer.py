"""The client of a sharded replay buffer: the local buffer's API over Ray shard actors, with
episode-sticky routing and sampling in proportion to each shard's transitions or priority mass;
and its :class:`PrefetchingSampler`, one sample request in flight while the learner updates."""

from __future__ import annotations

import collections
import functools
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlcore.batch import SequenceBatch, TransitionBatch, state_names
from rlcore.buffers.prioritized import INDEX_ROW_MASK as _ROW_MASK
from rlcore.buffers.prioritized import checked_priority_update, checked_sequence_update
from rlcore.distributed.ray_setup import _ray, _remote
from rlcore.distributed.shard import BufferFactory, BufferShard
from rlcore.distributed.shard_files import _read_tree, _write_tree, open_shard_dirs, save_shard_dirs
from rlcore.distributed.writer import ShardedAddResult, ShardWriter
from rlcore.errors import ApiUsageError, EmptyBufferError, InvalidValueError, SaveFileError

__all__ = ["PendingSample", "ShardedReplayBuffer"]


def _concat(parts: list[Any], out: Any = None) -> Any:
    if isinstance(parts[0], Mapping):
        return {k: _concat([p[k] for p in parts], None if out is None else out[k]) for k in parts[0]}
    if out is not None:
        return np.concatenate(parts, out=out)
    if len(parts) == 1:
        # arrays that Ray deserialised without a copy are read-only; torch wants writable ones
        return parts[0] if parts[0].flags.writeable else parts[0].copy()
    return np.concatenate(parts)


class PendingSample:
    """A sample request in flight (from :meth:`ShardedReplayBuffer.sample_async`)."""

    def __init__(
        self, client: ShardedReplayBuffer, refs: list[Any], counts: np.ndarray, beta: float | None
    ) -> None:
        self._client = client
        self._refs = refs
        self._counts = counts
        self._beta = beta

    def result(self, out: TransitionBatch | None = None) -> TransitionBatch:
        """Wait for the shards' parts and assemble the batch (see ``ShardedReplayBuffer.sample``).

        Raises:
            ApiUsageError: the request was for several batches (use :meth:`results`).
        """
        if self._counts.shape[0] != 1:
            raise ApiUsageError(f"this request holds {self._counts.shape[0]} batches; use results()")
        return self._client._assemble(_ray().get(self._refs), self._beta, 0, out)

    def results(self) -> list[TransitionBatch]:
        """Wait for the shards' parts and assemble every batch of the request."""
        replies = _ray().get(self._refs)
        return [self._client._assemble(replies, self._beta, j, None) for j in range(self._counts.shape[0])]


class ShardedReplayBuffer:
    """A replay buffer split over ``num_shards`` :class:`BufferShard` actors, with the local buffer's
    API.

    Args:
        make_buffer: builds one shard's buffer: ``make_buffer(num_envs=num_envs, seed=seed_s)``, e.g.
            ``functools.partial(rlcore.HERReplayBuffer, 100_000, distance_threshold=0.05)``. Each
            shard holds that many rows; the total capacity is ``num_shards`` times it.
        num_shards: S >= 1.
        num_envs: N, env streams that write into the buffer altogether (the client's own ``add``
            takes all N; collectors get disjoint ranges through :meth:`writer`).
        chunk_rows: rows queued before the client's own ``add`` sends a chunk.
        seed: seeds the shards (``seed + s``) and the client's shard-allocation generator.
        actor_options: Ray options of the shard actors (default ``num_cpus=0``: shards are mostly
            idle; set ``{"num_cpus": 1}`` to spread them over a cluster).

    Raises:
        ImportError: Ray is not installed. Ray must be initialised first (:func:`init_ray`).
        InvalidValueError: num_shards < 1 or num_envs < 1.

    Sampling: shard s gets ``b_s ~ Multinomial(B, w_s / sum w)`` of the batch, with ``w_s`` its
    transition count (uniform) or priority mass (PER) as reported with the previous reply (the very
    first call asks). Within a shard the core samples as locally (stratified under PER). Under PER
    the shards' weights ``(p_i / min_shard p)^-beta`` are rescaled by
    ``(min_global p / min_shard p)^beta``, which gives ``(p_i / min_global p)^-beta`` as in one
    buffer (Schaul et al. 2016, sec. 3.4).

    ``batch.indices`` are global: the shard's own index plus ``shard * shard_capacity`` (int64;
    a prioritized shard's index carries the generation of its transition above its row, so the
    global index names the transition too); pass them back to :meth:`update_priorities`, which
    routes each to its shard, where a stale one (its row overwritten since) is skipped and
    counted. ``column``/``prev``/``next`` and
    other row queries of the local buffer are not offered (the rows live in other processes).
    """

    def __init__(
        self,
        make_buffer: BufferFactory,
        *,
        num_shards: int,
        num_envs: int = 1,
        chunk_rows: int = 256,
        seed: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
    ) -> None:
        ray = _ray()
        if num_shards < 1 or num_envs < 1:
            raise InvalidValueError(f"num_shards and num_envs must be >= 1, got {num_shards}, {num_envs}")
        if not ray.is_initialized():
            raise ApiUsageError(
                "Ray is not initialised: call rlcore.distributed.init_ray() (or ray.init) first"
            )
        options = {"num_cpus": 0, **dict(actor_options or {})}
        actor = _remote(BufferShard).options(**options)
        self.shards = [
            actor.remote(make_buffer, num_envs, None if seed is None else seed + s) for s in range(num_shards)
        ]
        self.num_shards = int(num_shards)
        self.num_envs = int(num_envs)
        self.chunk_rows = int(chunk_rows)
        infos = ray.get([s.info.remote() for s in self.shards])
        self._info = infos[0]
        self.shard_capacity = int(self._info["capacity"])
        self._beta = self._info["beta"]
        self._rng = np.random.default_rng(seed)
        self._stats: np.ndarray | None = None  # [S, 3]: transitions, mass, min priority
        self._seq_stats: dict[tuple[int, int, bool], np.ndarray] = {}  # the same of sequence starts
        self._lock = threading.Lock()
        self._writer: ShardWriter | None = None

    # -- construction helpers ---------------------------------------------------------------

    def writer(self, first_env: int, num_envs: int, *, chunk_rows: int | None = None) -> ShardWriter:
        """A :class:`ShardWriter` for env streams ``first_env .. first_env + num_envs - 1``.

        Raises:
            InvalidValueError: the range is not inside ``[0, self.num_envs)``.
        """
        if first_env < 0 or num_envs < 1 or first_env + num_envs > self.num_envs:
            raise InvalidValueError(
                f"writer envs [{first_env}, {first_env + num_envs}) are not inside [0, {self.num_envs}); "
                "build the ShardedReplayBuffer with num_envs = all env streams of all writers"
            )
        return ShardWriter(self.shards, first_env, num_envs, chunk_rows=chunk_rows or self.chunk_rows)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as another client of the *same* shards (actor handles, no data); use
        :meth:`state_dict` for a copy of the data."""
        return (_client_of, (self.shards, self.num_envs, self.chunk_rows, self._info, self._beta))

    # -- properties ---------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Total rows over all shards."""
        return self.shard_capacity * self.num_shards

    @property
    def prioritized(self) -> bool:
        return bool(self._info["prioritized"])

    @property
    def alpha(self) -> float | None:
        return self._info["alpha"]

    @property
    def eps(self) -> float | None:
        return self._info["eps"]

    @property
    def beta(self) -> float | None:
        """PER importance exponent (``None`` for uniform shards); setting it sets every shard's."""
        return self._beta

    @beta.setter
    def beta(self, beta: float) -> None:
        if not self.prioritized:
            raise ApiUsageError("beta is only defined for prioritized buffers")
        if not (beta >= 0 and math.isfinite(beta)):
            raise InvalidValueError(f"beta must be finite and >= 0, got {beta}")
        if beta != self._beta:
            for s in self.shards:
                s.set_beta.remote(float(beta))
            self._beta = float(beta)

    # -- writing ------------------------------------------------------------------------------

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
        """Add one vector step of all N envs (as ``ReplayBuffer.add``); rows are queued and sent
        in chunks of ``chunk_rows`` rows (:meth:`flush` sends at once; ``sample`` and ``len`` flush
        first).

        Raises:
            ShapeError: per-env arrays are not ``[N]``; core errors of earlier chunks.
        """
        with self._lock:
            if self._writer is None:
                self._writer = self.writer(0, self.num_envs)
            return self._writer.add(obs, act, rew, terminated, truncated, obs_next, mask=mask, **extras)

    def flush(self, *, wait: bool = False) -> None:
        """Send the rows queued by :meth:`add`; ``wait=True`` waits until they are stored."""
        with self._lock:
            if self._writer is not None:
                self._writer.flush(wait=wait)

    # -- sampling -----------------------------------------------------------------------------

    def _refresh_stats(self) -> np.ndarray:
        ray = _ray()
        self._stats = np.array(ray.get([s.stats.remote() for s in self.shards]), dtype=np.float64)
        return self._stats

    def sample_async(
        self, batch_size: int, *, n_step: int = 1, gamma: float = 0.99, num_batches: int = 1
    ) -> PendingSample:
        """Send one sample request to the shards (one Ray call per shard) and return at once;
        ``.result()`` gives the batch (``.results()`` the ``num_batches`` batches, each drawn
        independently). Requests from one client are served in order, after its earlier adds and
        priority updates.

        Raises:
            InvalidValueError: batch_size < 1, n_step < 1, gamma outside [0, 1] or
                num_batches < 1.
            EmptyBufferError: no shard holds a transition.
        """
        if batch_size < 1 or n_step < 1 or not 0.0 <= gamma <= 1.0 or num_batches < 1:
            raise InvalidValueError(
                "need batch_size >= 1, n_step >= 1, gamma in [0, 1] and num_batches >= 1; got "
                f"{batch_size}, {n_step}, {gamma}, {num_batches}"
            )
        self.flush()
        stats = self._stats
        if stats is None or stats[:, 1].sum() <= 0:
            stats = self._refresh_stats()
        mass_S = stats[:, 1]
        if mass_S.sum() <= 0:
            raise EmptyBufferError("the sharded buffer holds no transition yet; add some before sampling")
        with self._lock:
            counts = self._rng.multinomial(batch_size, mass_S / mass_S.sum(), size=num_batches)  # [k, S]
        refs = [
            s.sample.remote(counts[:, i].tolist(), n_step, float(gamma)) for i, s in enumerate(self.shards)
        ]
        return PendingSample(self, refs, counts, self._beta)

    def sample(
        self,
        batch_size: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        out: TransitionBatch | None = None,
    ) -> TransitionBatch:
        """Sample ``batch_size`` transitions over all shards, as ``ReplayBuffer.sample`` (or
        ``PrioritizedReplayBuffer.sample``/``HERReplayBuffer.sample``) on one buffer holding all.

        Args:
            batch_size: B >= 1, as ``ReplayBuffer.sample``.
            n_step: n >= 1, as ``ReplayBuffer.sample``.
            gamma: discount in [0, 1], as ``ReplayBuffer.sample``.
            out: preallocated batch to copy into (same shapes and dtypes as a returned batch).

        Returns:
            TransitionBatch with global ``indices`` (``shard * shard_capacity`` plus the shard's
            index).

        Raises:
            InvalidValueError, EmptyBufferError: as :meth:`sample_async`; the core's errors of a
                shard (e.g. a HER ``compute_reward`` failure) are re-raised.
        """
        return self.sample_async(batch_size, n_step=n_step, gamma=gamma).result(out)

    def _assemble(
        self, replies: list[Any], beta: float | None, j: int, out: TransitionBatch | None
    ) -> TransitionBatch:
        """Batch ``j`` of the shards' sample replies (each ``(batches, stats)``) as one
        TransitionBatch; the replies' stats become the shards' current ones."""
        self._stats = np.array([r[1] for r in replies], dtype=np.float64)
        parts = [(s, r[0][j]) for s, r in enumerate(replies) if r[0][j] is not None]
        return self._join(TransitionBatch, parts, self._stats[:, 2], beta, out)

    def _join(
        self,
        cls: type[Any],
        parts: list[tuple[int, tuple[Any, ...]]],
        pmin_S: np.ndarray,
        beta: float | None,
        out: Any,
    ) -> Any:
        """One ``cls`` batch (TransitionBatch or SequenceBatch) from the shards' parts
        ``[(shard, fields)]``: each field's rows in shard order (into ``out``'s arrays when given;
        dicts key by key), indices made global (``shard * shard_capacity`` plus the shard's own;
        -1, a sequence's padding, stays -1), PER weights rescaled to the smallest priority of all
        shards (``pmin_S [S]``: each shard's smallest) as one buffer holding all would weight them."""
        values: dict[str, Any] = {}
        for k, name in enumerate(cls._fields):
            rows = [p[k] for _, p in parts]
            if name in ("indices", "start_indices"):
                rows = [
                    np.where(r >= 0, r + s * self.shard_capacity, -1) for (s, _), r in zip(parts, rows, strict=True)
                ]
            elif name == "weights":
                if rows[0] is None:
                    values[name] = None
                    continue
                pmin = pmin_S.min()
                rows = [
                    w if not beta or pmin == pmin_S[s] else (w * (pmin / pmin_S[s]) ** beta).astype(np.float32)
                    for (s, _), w in zip(parts, rows, strict=True)
                ]
            values[name] = _concat(rows, None if out is None else getattr(out, name))
        return cls(**values)

    def prefetch(
        self, batch_size: int, *, n_step: int = 1, gamma: float = 0.99, batches_per_request: int = 1
    ) -> PrefetchingSampler:
        """A :class:`PrefetchingSampler` over this buffer."""
        return PrefetchingSampler(
            self, batch_size, n_step=n_step, gamma=gamma, batches_per_request=batches_per_request
        )

    # -- sequences ----------------------------------------------------------------------------

    def sample_sequences(
        self,
        batch_size: int,
        seq_len: int,
        *,
        burn_in: int = 0,
        n_step: int = 1,
        gamma: float = 0.99,
        pad: bool = True,
        state: str | Sequence[str] = (),
        out: SequenceBatch | None = None,
    ) -> SequenceBatch:
        """Sample ``batch_size`` sequences over all shards, as ``ReplayBuffer.sample_sequences``
        on one buffer holding all (every shard's episodes stay whole in it: routing is
        episode-sticky).

        Shard s gets ``b_s ~ Multinomial(B, m_s / sum m)`` of the batch, with ``m_s`` its mass of
        eligible starts for these ``(seq_len, burn_in, pad)`` (``ReplayBuffer.sequence_start_mass``:
        their count, or their priority mass under PER) as reported with the previous reply of the
        same arguments (the first call asks), so each start's probability is the one of a single
        buffer: ``1 / E`` uniform, ``p_t / sum_{eligible} p`` prioritized. Importance weights are
        rescaled to the smallest priority of all shards, as :meth:`sample` does.

        Returns:
            SequenceBatch whose ``indices`` (-1 stays -1 on padding) and ``start_indices`` are
            global (``shard * shard_capacity + row``): pass them to
            :meth:`update_sequence_priorities`.

        Raises:
            InvalidValueError: batch_size < 1, seq_len < 1, burn_in < 0, n_step < 1 or gamma
                outside [0, 1].
            DTypeError: a ``state`` that is not str(s).
            EmptyBufferError: no shard has an eligible start; the shards' own errors (e.g. a
                ``state`` name that is no extra column) are re-raised.
        """
        names = state_names(state)
        if batch_size < 1 or seq_len < 1 or burn_in < 0 or n_step < 1 or not 0.0 <= gamma <= 1.0:
            raise InvalidValueError(
                "need batch_size >= 1, seq_len >= 1, burn_in >= 0, n_step >= 1 and gamma in [0, 1]; got "
                f"{batch_size}, {seq_len}, {burn_in}, {n_step}, {gamma}"
            )
        ray = _ray()
        self.flush()
        key = (int(seq_len), int(burn_in), bool(pad))
        stats = self._seq_stats.get(key)
        if stats is None or stats[:, 1].sum() <= 0:
            stats = np.array(
                ray.get([s.sequence_stats.remote(*key) for s in self.shards]), dtype=np.float64
            )
        mass_S = stats[:, 1]
        if mass_S.sum() <= 0:
            raise EmptyBufferError(
                f"no shard holds a sequence start for seq_len={seq_len}, burn_in={burn_in}, pad={pad}"
            )
        with self._lock:
            counts = self._rng.multinomial(batch_size, mass_S / mass_S.sum())
        refs = [
            s.sample_sequences.remote(int(counts[i]), *key[:2], int(n_step), float(gamma), key[2], names)
            for i, s in enumerate(self.shards)
        ]
        replies = ray.get(refs)
        stats = self._seq_stats[key] = np.array([r[1] for r in replies], dtype=np.float64)
        parts = [(s, r[0]) for s, r in enumerate(replies) if r[0] is not None]
        return self._join(SequenceBatch, parts, stats[:, 2], self._beta, out)

    # -- priorities ---------------------------------------------------------------------------

    def shard_of(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(shard, local index)`` int64 ``[B]`` of global indices: a global index is the
        shard's own index plus ``shard * shard_capacity`` (the generation bits an index of a
        prioritized shard carries above bit ``INDEX_ROW_BITS`` stay as they are)."""
        idx = np.asarray(indices, dtype=np.int64)
        row = idx & _ROW_MASK
        shard = row // self.shard_capacity
        return shard, idx - shard * self.shard_capacity

    def update_priorities(self, indices: Any, priorities: Any, *, wait: bool = False) -> int | None:
        """Set ``(p + eps)^alpha`` as the priorities of global ``indices`` ``[B]`` (int64) with
        ``priorities`` ``[B]`` (float), each sent to its shard (one call per shard involved).
        The whole update is converted and checked at the call, as
        ``PrioritizedReplayBuffer.update_priorities`` does (the core's own checks, against the
        global capacity), before any shard gets its part, so a refused update changes no shard.

        Returns ``None`` at once; with ``wait=True``, waits and returns how many rows were skipped
        because they were overwritten meanwhile (as the local buffer does).

        Raises:
            ApiUsageError: the shards are not prioritized buffers.
            DTypeError: non-integer indices or non-numeric priorities.
            ShapeError: the arrays are not both ``[B]``.
            InvalidValueError: an index outside ``[0, capacity)``; a negative, NaN or infinite
                priority, or one whose ``(p + eps)^alpha`` exceeds ``MAX_PRIORITY``.
        """
        alpha, eps = self._per_params("update_priorities")
        idx, prio = checked_priority_update(indices, priorities, alpha=alpha, eps=eps, rows=self.capacity)
        return self._send_priorities(idx, prio, wait)

    def update_sequence_priorities(
        self,
        start_indices: Any,
        td_errors: Any,
        *,
        mask: Any = None,
        eta: Any = 0.9,
        wait: bool = False,
    ) -> int | None:
        """``PrioritizedReplayBuffer.update_sequence_priorities`` for global ``start_indices``
        ``[B]`` (a batch's ``start_indices``), ``td_errors`` ``[B, T]`` and ``mask`` ``[B, T]``:
        each sequence's priority (R2D2's mixture, computed at the call by the core, with the
        local method's conversions and checks) is sent to its shard (one call per shard
        involved). A refused update changes no shard.

        Returns ``None`` at once; with ``wait=True``, waits and returns how many start rows were
        skipped (overwritten meanwhile).

        Raises:
            ApiUsageError: the shards are not prioritized buffers.
            ShapeError: ``start_indices`` is not ``[B]`` or ``td_errors``/``mask`` not ``[B, T]``.
            DTypeError: non-integer indices, bool TD errors, a float mask, a non-number eta.
            InvalidValueError: an index outside ``[0, capacity)``, a non-finite TD error, eta
                outside [0, 1], a sequence without a valid step, a priority above
                ``MAX_PRIORITY`` after ``(p + eps)^alpha``.
        """
        alpha, eps = self._per_params("update_sequence_priorities")
        idx, prio = checked_sequence_update(
            start_indices, td_errors, mask, eta, alpha=alpha, eps=eps, rows=self.capacity
        )
        return self._send_priorities(idx, prio, wait)

    def _per_params(self, what: str) -> tuple[float, float]:
        """``(alpha, eps)`` of the shards, or ApiUsageError for uniform shards."""
        if self.alpha is None or self.eps is None:
            raise ApiUsageError(f"{what} needs a prioritized buffer")
        return self.alpha, self.eps

    def _send_priorities(self, idx: np.ndarray, prio: np.ndarray, wait: bool) -> int | None:
        """Send each shard its part of a checked update; with ``wait``, the rows skipped."""
        shard_B, row_B = self.shard_of(idx)
        refs = []
        for s in np.unique(shard_B):
            sel = shard_B == s
            refs.append(self.shards[int(s)].update_priorities.remote(row_B[sel], prio[sel]))
        if not wait:
            return None
        return int(sum(_ray().get(refs)))

    # -- size, state, lifetime ----------------------------------------------------------------

    def __len__(self) -> int:
        """Stored transitions over all shards (after flushing this client's queued rows)."""
        self.flush(wait=True)
        return int(sum(_ray().get([s.len.remote() for s in self.shards])))

    def shard_sizes(self) -> list[int]:
        """Stored transitions per shard."""
        self.flush(wait=True)
        return [int(n) for n in _ray().get([s.len.remote() for s in self.shards])]

    def state_dict(self) -> dict[str, Any]:
        """``{"config": {...}, "shards": [shard state_dict, ...]}``: a deep copy of every shard
        (after flushing this client's queued rows)."""
        self.flush(wait=True)
        return {
            "config": {"kind": "sharded", "num_shards": self.num_shards, "num_envs": self.num_envs},
            "shards": _ray().get([s.state_dict.remote() for s in self.shards]),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` into the shards (same number of shards and streams; each
        shard validates before changing anything).

        Raises:
            SaveFileError: a different shard count or stream count, or a shard's state that does
                not fit.
        """
        cfg = state.get("config", {})
        if cfg.get("num_shards") != self.num_shards or cfg.get("num_envs") != self.num_envs:
            raise SaveFileError(
                f"state has num_shards={cfg.get('num_shards')}, num_envs={cfg.get('num_envs')}; this "
                f"buffer has {self.num_shards}, {self.num_envs}"
            )
        self.flush(wait=True)
        _ray().get([s.load_state_dict.remote(st) for s, st in zip(self.shards, state["shards"], strict=True)])
        self._stats = None

    def save(self, path: str | Path) -> None:
        """Save every shard into the directory ``path`` (after flushing this client's queued rows):
        ``sharded.json`` plus one ``buffer.save`` folder per shard (:func:`save_shard_dirs`). Each
        shard saves on its own node and sends the files to this process, which writes them, so the
        save lands here even when the shards run on other machines.

        Raises:
            OSError: ``path`` cannot be written (a previous save there stays intact).
        """
        self.flush(wait=True)
        trees = _ray().get([s.save_files.remote() for s in self.shards])
        writers = [functools.partial(_write_tree, files=tree) for tree in trees]
        save_shard_dirs(path, num_envs=self.num_envs, writers=writers)

    def restore(self, path: str | Path) -> None:
        """Copy a :meth:`save` into the shards (same shard and stream counts; each shard restores
        with ``buffer.restore``, which validates the whole save before changing anything). Only
        plain files are read; no file is unpickled.

        Raises:
            SaveFileError: not a sharded save, other counts, a link or a path that leaves the save,
                or a shard's save that is corrupt or does not fit (shards before it are restored).
        """
        root = Path(path)
        with open_shard_dirs(root) as (manifest, folders):  # no save removes them meanwhile
            if manifest["num_shards"] != self.num_shards or manifest["num_envs"] != self.num_envs:
                raise SaveFileError(
                    f"{root} has num_shards={manifest['num_shards']}, num_envs={manifest['num_envs']}; this "
                    f"buffer has {self.num_shards}, {self.num_envs}"
                )
            trees = [_read_tree(folder) for folder in folders]
        self.flush(wait=True)
        _ray().get([s.restore_files.remote(t) for s, t in zip(self.shards, trees, strict=True)])
        self._stats = None

    def clear(self) -> None:
        """Empty every shard (memory stays allocated, as ``ReplayBuffer.clear``); queued rows of
        this client are sent first and cleared too."""
        self.flush(wait=True)
        _ray().get([s.clear.remote() for s in self.shards])
        self._stats = None

    def close(self) -> None:
        """Kill the shard actors (their data is gone)."""
        ray = _ray()
        for s in self.shards:
            ray.kill(s)
        self.shards = []

    def __repr__(self) -> str:
        return (
            f"ShardedReplayBuffer(kind={self._info['kind']}, num_shards={self.num_shards}, "
            f"shard_capacity={self.shard_capacity}, num_envs={self.num_envs})"
        )


def _client_of(
    shards: list[Any], num_envs: int, chunk_rows: int, info: dict[str, Any], beta: float | None
) -> ShardedReplayBuffer:
    self = ShardedReplayBuffer.__new__(ShardedReplayBuffer)
    self.shards = list(shards)
    self.num_shards = len(shards)
    self.num_envs = num_envs
    self.chunk_rows = chunk_rows
    self._info = info
    self.shard_capacity = int(info["capacity"])
    self._beta = beta
    self._rng = np.random.default_rng()
    self._stats = None
    self._lock = threading.Lock()
    self._writer = None
    return self


class PrefetchingSampler:
    """Keeps one sample request in flight: ``next()`` waits for the pending batch, sends the next
    request, and returns the batch, so the shards sample while the learner updates.

    With ``batches_per_request = k`` each request asks every shard for k batches in one Ray call,
    which divides the per-call cost (submission, transfer, deserialisation in the learner's
    process) by k.

    The batch a learner gets was drawn before the priority updates of the previous 1 to 2k - 1
    batches reached the shards (priority staleness, as in Ape-X, Horgan et al. 2018, sec. 3).
    """

    def __init__(
        self,
        buffer: ShardedReplayBuffer,
        batch_size: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        batches_per_request: int = 1,
    ) -> None:
        if batches_per_request < 1:
            raise InvalidValueError(f"batches_per_request must be >= 1, got {batches_per_request}")
        self.buffer = buffer
        self.batch_size, self.n_step, self.gamma = int(batch_size), int(n_step), float(gamma)
        self.batches_per_request = int(batches_per_request)
        self._pending: PendingSample | None = None
        self._ready: collections.deque[TransitionBatch] = collections.deque()

    def __iter__(self) -> Iterator[TransitionBatch]:
        return self

    def __next__(self) -> TransitionBatch:
        if not self._ready:
            pending = self._pending or self._request()
            self._ready.extend(pending.results())
            self._pending = self._request()
        return self._ready.popleft()

    def _request(self) -> PendingSample:
        return self.buffer.sample_async(
            self.batch_size, n_step=self.n_step, gamma=self.gamma, num_batches=self.batches_per_request
        )

    def discard(self) -> None:
        """Drop the request in flight and the batches not yet handed out."""
        self._pending = None
        self._ready.clear()
