"""Replay across processes and machines on Ray (Ape-X shape): buffer shards, remote collectors and a
prefetching learner (DESIGN.md, "Scale beyond one machine").

Pieces:

* :class:`BufferShard` — a Ray actor that owns one rlcore buffer (plain, HER or prioritized) and
  serves ``add_chunk``, ``sample``, ``update_priorities``, ``state_dict``/``load_state_dict`` and
  ``len``.
* :class:`ShardedReplayBuffer` — a client with the local buffer's Python API (``add``, ``sample``,
  ``update_priorities``, ``beta``, ``state_dict``/``load_state_dict``, ``len``). Rows are
  buffered into chunks of whole vector steps (``chunk_rows`` rows) and sent with one call per
  shard. Routing is *episode-sticky*: every episode of an env goes, whole, to one shard and the
  env's next episode to the next shard, so n-step windows and HER goals never cross shards and the
  shards fill evenly. ``sample`` draws each shard's share of the batch from a multinomial over the
  shards' transition counts (uniform replay) or priority masses (PER), so every stored transition
  has the same probability as in one local buffer holding them all.
* :class:`CollectorWorker` — a Ray actor running :class:`rlcore.collector.Collector` on its own
  vector env with a CPU copy of the policy; it pulls new weights from a :class:`WeightStore`.
* :class:`DistributedTrainer` — the learner loop: keeps one collect call in flight per collector,
  restarts dead collectors, and keeps one sample request in flight while the update runs
  (:class:`PrefetchingSampler`).

Ray is imported lazily: ``import rlcore`` and ``import rlcore.distributed`` work without it; using
any of the pieces raises an ``ImportError`` that names ``pip install rlcore[ray]``.

Example::

    import functools, rlcore
    from rlcore.distributed import ShardedReplayBuffer, init_ray

    init_ray()  # local Ray listening on 127.0.0.1 only
    buf = ShardedReplayBuffer(
        functools.partial(rlcore.PrioritizedReplayBuffer, 100_000, alpha=0.6),
        num_shards=2, num_envs=8,
    )
    buf.add(obs, act, rew, terminated, truncated, obs_next)  # one vector step of 8 envs
    batch = buf.sample(256, n_step=3, gamma=0.99)
    buf.update_priorities(batch.indices, td_abs)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
import os
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlcore.batch import TransitionBatch
from rlcore.errors import ApiUsageError, EmptyBufferError, InvalidValueError, SaveFileError, ShapeError

__all__ = [
    "BufferShard",
    "CollectorWorker",
    "DistributedConfig",
    "DistributedTrainer",
    "PrefetchingSampler",
    "ShardWriter",
    "ShardedReplayBuffer",
    "WeightStore",
    "init_ray",
    "policy_weights",
    "save_shard_dirs",
    "shard_factory_like",
    "trainer_from_cli",
]

BufferFactory = Callable[..., Any]
"""``make_buffer(num_envs=int, seed=int | None) -> ReplayBuffer``: builds one shard's buffer inside
its actor (e.g. ``functools.partial(rlcore.ReplayBuffer, 100_000)``). It is pickled with
cloudpickle, so it may close over anything picklable; build unpicklable things (a MuJoCo env for
``compute_reward``) inside it."""


def _ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "rlcore.distributed needs Ray: pip install rlcore[ray]  (or pip install 'ray==2.60.0')"
        ) from e
    return ray


def _remote(cls: type, **options: Any) -> Any:
    """``ray.remote(cls)`` with ``options``, created once per class."""
    key = (cls, tuple(sorted(options.items())))
    if key not in _REMOTE_CLASSES:
        _REMOTE_CLASSES[key] = _ray().remote(**options)(cls) if options else _ray().remote(cls)
    return _REMOTE_CLASSES[key]


_REMOTE_CLASSES: dict[Any, Any] = {}


_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (``ray._private.ray_constants``) that keeps a node on the loopback address: unset,
Ray on Linux turns a requested ``127.0.0.1`` into the machine's routable address and its servers
listen there."""


def init_ray(address: str | None = None, *, num_cpus: int | None = None, **kwargs: Any) -> None:
    """Start or join Ray unless it is already initialised.

    Args:
        address: ``None`` starts a local Ray whose every server listens on 127.0.0.1 only (no
            dashboard, nothing reachable from other machines); ``"auto"`` or ``"HOST:PORT"`` joins
            an existing cluster as Ray would (see docs/distributed.md on token authentication).
        num_cpus: logical CPUs of a local Ray (ignored when joining a cluster).
        kwargs: passed to ``ray.init``.

    Raises:
        ImportError: Ray is not installed.
        ApiUsageError: a local Ray came up on another address than the loopback (it is shut down).
    """
    if address is not None:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, **kwargs)
        return
    # Ray resolves "127.0.0.1" to the routable address unless this switch is off when it starts;
    # the raylet and workers it spawns inherit it from the environment. Ray reads it into a module
    # constant at import, so a Ray imported earlier gets the constant set for the call too.
    previous = os.environ.get(_LOOPBACK_ENV)
    os.environ[_LOOPBACK_ENV] = "0"
    ray = _ray()
    if ray.is_initialized():
        _restore_env(_LOOPBACK_ENV, previous)
        return
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    saved = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None and saved is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            configure_logging=False,
            **kwargs,
        )
    finally:
        if constants is not None and saved is not None:
            constants.ENABLE_RAY_CLUSTER = saved
        _restore_env(_LOOPBACK_ENV, previous)
    host = str(ray.get_runtime_context().gcs_address).rsplit(":", 1)[0].strip("[]")
    if host not in ("127.0.0.1", "::1", "localhost"):
        ray.shutdown()
        raise ApiUsageError(
            f"the local Ray started on {host}, not on the loopback address; start Ray yourself "
            f"(ray.init) or set {_LOOPBACK_ENV}=0 in the environment before Python starts"
        )


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


# ---------------------------------------------------------------------------------------------
# files of a save, moved between processes


def _plain_part(name: str) -> bool:
    return name not in ("", ".", "..") and "\\" not in name


def _read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as ``{relative posix path: bytes}``.

    Raises:
        SaveFileError: ``root`` is missing, or holds a symlink or anything but files and folders.
    """
    if not root.is_dir():
        raise SaveFileError(f"{root} is missing or not a directory")
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink() or not (p.is_dir() or p.is_file()):
                raise SaveFileError(f"{p} is a link or special file: a buffer save holds plain files only")
        for name in filenames:
            p = Path(dirpath) / name
            files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files


def _write_tree(root: Path, files: Mapping[str, bytes], *, fsync: bool = False) -> None:
    """Write ``{relative posix path: bytes}`` under ``root`` (created; must not exist).

    Raises:
        SaveFileError: a path is absolute or leaves ``root`` (``..``, empty parts, backslashes).
    """
    for rel in files:
        parts = rel.split("/")
        if not all(_plain_part(part) for part in parts):
            raise SaveFileError(f"a buffer save names the file {rel!r}, which is not a plain relative path")
    root.mkdir(parents=True)
    for rel, data in files.items():
        p = root.joinpath(*rel.split("/"))
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


_SHARDED_FORMAT = "rlcore-sharded-buffer"
_SHARDED_VERSION = 1
_SHARDED_MANIFEST = "sharded.json"


def save_shard_dirs(path: str | Path, *, num_envs: int, writers: Sequence[Callable[[Path], None]]) -> None:
    """Write a sharded buffer's save: ``writers[s](dir)`` writes shard s as a buffer save into a
    fresh ``shards-<id>/shard-SSS`` folder of ``path``; then ``sharded.json`` (format, shard and
    stream counts, the folder) replaces the previous one atomically, and only the folder the
    previous manifest named is removed (DESIGN.md, "Durability").

    Raises:
        OSError: ``path`` cannot be written (a previous save there stays intact).
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    previous = None
    try:
        previous = _read_shard_manifest(root)
    except SaveFileError:
        previous = None
    data = root / f"shards-{uuid.uuid4().hex[:12]}"
    names = [f"shard-{s:03d}" for s in range(len(writers))]
    try:
        data.mkdir()
        for name, write in zip(names, writers, strict=True):
            write(data / name)
        manifest = {
            "format": _SHARDED_FORMAT,
            "version": _SHARDED_VERSION,
            "num_shards": len(writers),
            "num_envs": int(num_envs),
            "data_dir": data.name,
            "shards": names,
        }
        tmp = root / f"{_SHARDED_MANIFEST}.tmp-{uuid.uuid4().hex[:8]}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, root / _SHARDED_MANIFEST)
    except BaseException:
        shutil.rmtree(data, ignore_errors=True)
        raise
    if previous is not None and previous["data_dir"] != data.name:
        shutil.rmtree(root / previous["data_dir"], ignore_errors=True)


def _read_shard_manifest(root: Path) -> dict[str, Any]:
    mpath = root / _SHARDED_MANIFEST
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SaveFileError(f"{root}: no {_SHARDED_MANIFEST} (not a sharded buffer save)") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SaveFileError(f"{mpath} is unreadable or corrupt: {e}") from e
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != _SHARDED_FORMAT
        or manifest.get("version") != _SHARDED_VERSION
    ):
        raise SaveFileError(f"{mpath} is not a sharded rlcore buffer manifest of version {_SHARDED_VERSION}")
    names = manifest.get("shards")
    if not isinstance(names, list) or len(names) != manifest.get("num_shards"):
        raise SaveFileError(f"{mpath} lists {names!r} for num_shards={manifest.get('num_shards')!r}")
    for name in [manifest.get("data_dir"), *names]:
        if not isinstance(name, str) or "/" in name or not _plain_part(name):
            raise SaveFileError(f"{mpath} names a folder that is not a plain name: {name!r}")
    return manifest


# ---------------------------------------------------------------------------------------------
# shard


def _stack(steps: list[Any]) -> Any:
    if isinstance(steps[0], Mapping):
        return {k: np.stack([s[k] for s in steps]) for k in steps[0]}
    return np.stack(steps)


def _take(x: Any, sel: np.ndarray | int) -> Any:
    if isinstance(x, Mapping):
        return {k: v[sel] for k, v in x.items()}
    return x[sel]


def _copy(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: np.array(v) for k, v in x.items()}
    return np.array(x)


def _pad(x: Any, first: int, total: int) -> Any:
    """``[T, n, ...]`` -> ``[T, total, ...]`` with ``x`` at columns ``first:first + n``, zeros elsewhere."""
    if isinstance(x, Mapping):
        return {k: _pad(v, first, total) for k, v in x.items()}
    x = np.asarray(x)
    if x.shape[1] == total:
        return x
    out = np.zeros((x.shape[0], total, *x.shape[2:]), dtype=x.dtype)
    out[:, first : first + x.shape[1]] = x
    return out


class BufferShard:
    """One rlcore buffer in a Ray actor (created by :class:`ShardedReplayBuffer`, not directly).

    Args:
        make_buffer: ``make_buffer(num_envs=num_envs, seed=seed)`` builds the buffer.
        num_envs: env streams of the whole sharded buffer; every shard has a segment per stream.
        seed: seed of this shard's buffer.

    Under PER the shard keeps its total priority mass and its smallest positive priority: exactly
    (a scan of ``priorities`` over all rows) after adds and loads, incrementally after
    ``update_priorities``; the core exposes neither (see the module's core API request).
    """

    def __init__(self, make_buffer: BufferFactory, num_envs: int, seed: int | None) -> None:
        self.buffer = make_buffer(num_envs=num_envs, seed=seed)
        self.num_envs = int(num_envs)
        self._rows = np.arange(self.buffer.capacity, dtype=np.int64)
        self._mass = 0.0
        self._pmin = math.inf
        self._scan_needed = bool(self.buffer.prioritized)

    def info(self) -> dict[str, Any]:
        """Kind, capacity, num_envs and PER parameters of the buffer."""
        b = self.buffer
        return {
            "kind": b._kind,
            "capacity": int(b.capacity),
            "num_envs": int(b.num_envs),
            "prioritized": bool(b.prioritized),
            "alpha": b.alpha,
            "beta": b.beta,
            "eps": b.eps,
        }

    def _scan(self) -> None:
        p = self.buffer.priorities(self._rows)
        pos = p[p > 0]
        self._mass = float(p.sum())
        self._pmin = float(pos.min()) if pos.size else math.inf
        self._scan_needed = False

    def stats(self) -> tuple[int, float, float]:
        """``(transitions, priority mass, smallest positive priority)``; mass = transitions and
        min = 1 for a uniform buffer."""
        n = len(self.buffer)
        if not self.buffer.prioritized:
            return n, float(n), 1.0
        if self._scan_needed:
            self._scan()
        return n, self._mass, self._pmin

    def add_chunk(
        self,
        first_env: int,
        obs: Any,
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: Any,
        mask: np.ndarray,
        extras: Mapping[str, np.ndarray],
    ) -> int:
        """Add T vector steps of env streams ``first_env .. first_env + n - 1``: every array is
        ``[T, n, ...]``, ``mask`` bool ``[T, n]`` (False: not a row of this shard). Returns the
        number of rows written.

        Raises:
            ShapeError, DTypeError, InvalidValueError: as ``ReplayBuffer.add`` (steps before the
                bad one are kept).
        """
        total = self.num_envs
        obs, obs_next = _pad(obs, first_env, total), _pad(obs_next, first_env, total)
        act, rew = _pad(act, first_env, total), _pad(rew, first_env, total)
        terminated, truncated = _pad(terminated, first_env, total), _pad(truncated, first_env, total)
        mask = _pad(np.asarray(mask, dtype=bool), first_env, total)
        extras = {k: _pad(v, first_env, total) for k, v in extras.items()}
        add = self.buffer.add
        for t in range(mask.shape[0]):
            m = mask[t]
            add(
                _take(obs, t),
                act[t],
                rew[t],
                terminated[t],
                truncated[t],
                _take(obs_next, t),
                mask=None if m.all() else m,
                **{k: v[t] for k, v in extras.items()},
            )
        self._scan_needed = bool(self.buffer.prioritized)
        return int(mask.sum())

    def sample(
        self, sizes: list[int], n_step: int, gamma: float
    ) -> tuple[list[tuple[Any, ...] | None], tuple[int, float, float]]:
        """One batch per entry of ``sizes``: ``([batch fields, or None for size 0], stats())``."""
        sample = self.buffer.sample
        fields = [tuple(sample(b, n_step=n_step, gamma=gamma)) if b > 0 else None for b in sizes]
        return fields, self.stats()

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> int:
        """As ``PrioritizedReplayBuffer.update_priorities``; keeps the priority mass exact."""
        if self._scan_needed:
            return self.buffer.update_priorities(indices, priorities)
        rows = np.unique(np.asarray(indices, dtype=np.int64))
        old = self.buffer.priorities(rows)
        skipped = self.buffer.update_priorities(indices, priorities)
        new = self.buffer.priorities(rows)
        self._mass += float((new - old).sum())
        if (old == self._pmin).any():
            self._scan_needed = True  # the smallest priority may have gone up
        elif (new > 0).any():
            self._pmin = min(self._pmin, float(new[new > 0].min()))
        return skipped

    def set_beta(self, beta: float) -> None:
        self.buffer.beta = beta

    def len(self) -> int:
        return len(self.buffer)

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.buffer.load_state_dict(state)
        self._scan_needed = bool(self.buffer.prioritized)

    def save_files(self) -> dict[str, bytes]:
        """The files of ``buffer.save`` (written to a temporary folder on this actor's node) as
        ``{relative path: bytes}``, so the driver can write them where it saves."""
        with tempfile.TemporaryDirectory(prefix="rlcore-shard-") as tmp:
            self.buffer.save(Path(tmp) / "save")
            return _read_tree(Path(tmp) / "save")

    def restore_files(self, files: Mapping[str, bytes]) -> None:
        """Write the files of a save (as :meth:`save_files` returns them) to a temporary folder
        and ``buffer.restore`` it: nothing changes unless the whole save is valid.

        Raises:
            SaveFileError: a path leaves the folder, or the save is corrupt or does not fit.
        """
        with tempfile.TemporaryDirectory(prefix="rlcore-shard-") as tmp:
            root = Path(tmp) / "save"
            _write_tree(root, files)
            self.buffer.restore(root)
        self._scan_needed = bool(self.buffer.prioritized)

    def clear(self) -> None:
        self.buffer.clear()
        self._scan_needed = bool(self.buffer.prioritized)


# ---------------------------------------------------------------------------------------------
# writer


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
    :class:`~rlcore.collector.Collector` writes into it as into a buffer.

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
            Errors of earlier chunks (see the class docstring).
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
            Errors of chunks sent earlier (see the class docstring).
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


# ---------------------------------------------------------------------------------------------
# client


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

    ``batch.indices`` are global: ``shard * shard_capacity + row`` (int64); pass them back to
    :meth:`update_priorities`, which routes each to its shard. ``column``/``prev``/``next`` and
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
            batch_size, n_step, gamma: as ``ReplayBuffer.sample``.
            out: preallocated batch to copy into (same shapes and dtypes as a returned batch).

        Returns:
            TransitionBatch with global ``indices`` (``shard * shard_capacity + row``).

        Raises:
            InvalidValueError, EmptyBufferError: as :meth:`sample_async`; the core's errors of a
                shard (e.g. a HER ``compute_reward`` failure) are re-raised.
        """
        return self.sample_async(batch_size, n_step=n_step, gamma=gamma).result(out)

    def _assemble(
        self, replies: list[Any], beta: float | None, j: int, out: TransitionBatch | None
    ) -> TransitionBatch:
        self._stats = np.array([r[1] for r in replies], dtype=np.float64)
        parts = [(s, r[0][j]) for s, r in enumerate(replies) if r[0][j] is not None]
        fields = [[p[1][k] for p in parts] for k in range(10)]
        o = out
        indices = _concat(
            [p[7] + s * self.shard_capacity for s, p in parts], None if o is None else o.indices
        )
        weights = None
        if fields[8][0] is not None:
            pmin_S = self._stats[:, 2]
            pmin = pmin_S.min()
            scaled = []
            for s, w in zip((p[0] for p in parts), fields[8], strict=True):
                f = (pmin / pmin_S[s]) ** beta if beta else 1.0
                scaled.append(w if f == 1.0 else (w * f).astype(np.float32))
            weights = _concat(scaled, None if o is None else o.weights)
        extras = {
            k: _concat([e[k] for e in fields[9]], None if o is None else o.extras[k]) for k in fields[9][0]
        }
        return TransitionBatch(
            obs=_concat(fields[0], None if o is None else o.obs),
            act=_concat(fields[1], None if o is None else o.act),
            rew=_concat(fields[2], None if o is None else o.rew),
            obs_next=_concat(fields[3], None if o is None else o.obs_next),
            terminated=_concat(fields[4], None if o is None else o.terminated),
            truncated=_concat(fields[5], None if o is None else o.truncated),
            discount=_concat(fields[6], None if o is None else o.discount),
            indices=indices,
            weights=weights,
            extras=extras,
        )

    def prefetch(
        self, batch_size: int, *, n_step: int = 1, gamma: float = 0.99, batches_per_request: int = 1
    ) -> PrefetchingSampler:
        """A :class:`PrefetchingSampler` over this buffer."""
        return PrefetchingSampler(
            self, batch_size, n_step=n_step, gamma=gamma, batches_per_request=batches_per_request
        )

    # -- priorities ---------------------------------------------------------------------------

    def shard_of(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(shard, row)`` int64 ``[B]`` of global indices."""
        idx = np.asarray(indices, dtype=np.int64)
        return idx // self.shard_capacity, idx % self.shard_capacity

    def update_priorities(self, indices: Any, priorities: Any, *, wait: bool = False) -> int | None:
        """Set ``(|p| + eps)^alpha`` as the priorities of global ``indices`` ``[B]`` (int64) with
        ``priorities`` ``[B]`` (float), each sent to its shard (one call per shard involved).

        Returns ``None`` at once; with ``wait=True``, waits and returns how many rows were skipped
        because they were overwritten meanwhile (as the local buffer does).

        Raises:
            ShapeError: the arrays are not both ``[B]``.
            InvalidValueError: an index outside ``[0, capacity)``; with ``wait=True`` also the
                core's errors (negative or NaN priorities).
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1) if np.ndim(indices) else np.asarray([indices])
        prio = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if idx.shape != prio.shape:
            raise ShapeError(f"update_priorities: {idx.shape[0]} indices but {prio.shape[0]} priorities")
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            raise InvalidValueError(f"update_priorities: indices must be in [0, {self.capacity})")
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
        writers = [functools.partial(_write_tree, files=tree, fsync=True) for tree in trees]
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
        manifest = _read_shard_manifest(root)
        if manifest["num_shards"] != self.num_shards or manifest["num_envs"] != self.num_envs:
            raise SaveFileError(
                f"{root} has num_shards={manifest['num_shards']}, num_envs={manifest['num_envs']}; this "
                f"buffer has {self.num_shards}, {self.num_envs}"
            )
        trees = [_read_tree(root / manifest["data_dir"] / name) for name in manifest["shards"]]
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


# ---------------------------------------------------------------------------------------------
# weights and collectors


def policy_weights(algorithm: Any) -> dict[str, dict[str, Any]]:
    """CPU ``state_dict`` of every ``torch.nn.Module`` attribute of ``algorithm`` except target
    networks (names containing ``target``): what a collector's copy needs to act."""
    import torch

    out = {}
    for name, value in vars(algorithm).items():
        if isinstance(value, torch.nn.Module) and "target" not in name:
            out[name] = {k: v.detach().to("cpu", copy=True) for k, v in value.state_dict().items()}
    return out


def _load_policy_weights(algorithm: Any, weights: Mapping[str, Mapping[str, Any]]) -> None:
    for name, state in weights.items():
        getattr(algorithm, name).load_state_dict(state)


class WeightStore:
    """A Ray actor holding the newest policy weights and their version (learner grad steps)."""

    def __init__(self) -> None:
        self.version = -1
        self.weights: Any = None
        self.env_steps = 0

    def put(self, version: int, weights: Any, env_steps: int = 0) -> None:
        self.version, self.weights, self.env_steps = int(version), weights, int(env_steps)

    def get_if_newer(self, version: int) -> tuple[int, Any, int] | None:
        """``(version, weights, env_steps)`` when newer than ``version``, else ``None``."""
        if self.version > version:
            return self.version, self.weights, self.env_steps
        return None


class CollectorWorker:
    """A Ray actor that steps its own vector env with a CPU copy of the policy and writes whole
    vector steps into a :class:`ShardWriter` (chunks of ``writer.chunk_rows`` rows).

    Args:
        make_envs: ``make_envs() -> gymnasium VectorEnv`` (built inside the actor).
        make_policy: ``make_policy() -> algorithm`` with ``act(obs, deterministic=...)`` (built
            on CPU inside the actor); weights come from ``weights``.
        writer: where rows go.
        weights: a :class:`WeightStore` actor.
        seed: seed of the first env reset; a restarted actor adds ``1_000 * restarts`` so it does
            not replay the same episodes.
    """

    def __init__(
        self,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        writer: ShardWriter,
        weights: Any,
        seed: int,
    ) -> None:
        import torch

        from rlcore.collector import Collector

        torch.set_num_threads(1)
        ray = _ray()
        with warnings.catch_warnings():  # Ray 2.60 warns about its own use of a deprecated API here
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarts = 1 if ray.get_runtime_context().was_current_actor_reconstructed else 0
        self.envs = make_envs()
        self.algorithm = make_policy()
        self.writer = writer
        self.weights = weights
        self.version = -1
        self.collector = Collector(self.envs, writer)
        self.collector.reset(seed=seed + 1_000 * self.restarts)

    def collect(self, n_env_steps: int, *, random: bool = False) -> tuple[Any, int, int]:
        """Pull newer weights, collect ``n_env_steps`` transitions (uniform random actions when
        ``random``), and wait until they are stored. Returns ``(CollectStats, weight version,
        restarted)``."""
        ray = _ray()
        if not random:
            new = ray.get(self.weights.get_if_newer.remote(self.version))
            if new is not None:
                self.version, weights, env_steps = new
                _load_policy_weights(self.algorithm, weights)
                if hasattr(self.algorithm, "explore_env_steps"):
                    self.algorithm.explore_env_steps = env_steps  # DQN's epsilon follows the global steps
        policy = None if random else (lambda obs: self.algorithm.act(obs, deterministic=False))
        stats = self.collector.collect(n_env_steps, policy=policy)
        self.writer.flush(wait=True)
        restarted, self.restarts = self.restarts, 0
        return stats, self.version, restarted

    def reset(self, seed: int) -> None:
        """Reset the envs with ``seed`` (fresh episodes), as a resumed trainer does."""
        self.collector.reset(seed=seed)

    def pid(self) -> int:
        return os.getpid()


# ---------------------------------------------------------------------------------------------
# learner loop


@dataclass(frozen=True, kw_only=True)
class DistributedConfig:
    """Topology and schedule of a :class:`DistributedTrainer` (the training schedule itself is an
    :class:`~rlcore.trainer.OffPolicyTrainerConfig`)."""

    num_collectors: int = 2
    """K collector actors, each with its own vector env."""
    collect_env_steps: int = 200
    """Env steps (transitions) per collect call of one collector."""
    weight_sync_every: int = 100
    """Publish the learner's weights every this many gradient steps; collectors pull them before
    their next collect call."""
    prefetch: bool = True
    """Keep one sample request in flight while the update runs."""
    batches_per_request: int = 4
    """Batches per prefetched sample request: one Ray call per shard serves this many gradient
    steps (on 2 loaded cores, 4 cut the wait per step from 1.4-3.2 ms to 0.5-1.0 ms for 1-4
    shards; docs/distributed.md), at the price of priorities up to 2k - 1 batches stale."""
    chunk_rows: int = 256
    """Rows per chunk a collector sends to the shards."""
    max_collector_restarts: int = 10
    """How often Ray restarts a dead collector actor (-1: always)."""
    eval_every_env_steps: int | None = None
    """Evaluate whenever the env steps pass a multiple of this (and at the end) instead of every
    ``config.eval_every`` iterations (an iteration takes one or more collect calls)."""

    def __post_init__(self) -> None:
        if self.num_collectors < 1 or self.collect_env_steps < 1 or self.weight_sync_every < 1:
            raise ValueError("num_collectors, collect_env_steps and weight_sync_every must be >= 1")
        if self.chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {self.chunk_rows}")
        if self.eval_every_env_steps is not None and self.eval_every_env_steps < 1:
            raise ValueError(f"eval_every_env_steps must be >= 1 or None, got {self.eval_every_env_steps}")


_CHECKPOINT_KIND = "distributed"


class DistributedTrainer:
    """Off-policy training with remote collectors and a sharded buffer, as an iterator of
    :class:`~rlcore.stats.EpochStats` (same contract as :class:`~rlcore.trainer.OffPolicyTrainer`).

    Each ``next()``: wait until at least one collect call has finished, hand those collectors their
    next call at once (so they step while the learner updates; they are at most one call ahead),
    run ``utd_ratio`` gradient steps per env step collected after the warm-up (prefetching the next
    batch during each update), send the new priorities back, publish the weights every
    ``weight_sync_every`` gradient steps, and evaluate every ``eval_every`` iterations (or every
    ``dist.eval_every_env_steps`` env steps) and at the end.

    A collector actor that dies is restarted by Ray (``max_collector_restarts``); its call in
    flight is lost and its env steps are asked for again (``collector_failures`` counts lost calls,
    ``collector_restarts`` restarted actors that reported back), and rows it had already stored
    stay in the shards. The restarted actor starts fresh episodes (new seed) and pulls the newest
    weights. A collector still restarting is asked again after 0.5 s, without blocking the learner.

    Raises (from ``next()``):
        ray.exceptions.RayActorError: a collector died more than ``max_collector_restarts`` times.

    Args:
        algorithm: the learner (``update``, ``act``, ``priorities``).
        buffer: the :class:`ShardedReplayBuffer` (``num_envs`` = K times the envs per collector).
        make_envs: builds one collector's vector env (called inside each collector actor).
        make_policy: builds a CPU copy of the algorithm (called inside each collector actor).
        config: the schedule (``collect_env_steps`` of it is ignored; see ``dist``).
        dist: topology.
        eval_envs: local vector env for deterministic evaluation.
    """

    def __init__(
        self,
        algorithm: Any,
        buffer: ShardedReplayBuffer,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        *,
        config: Any,
        dist: DistributedConfig,
        eval_envs: Any | None = None,
    ) -> None:
        ray = _ray()
        if config.eval_every is not None and eval_envs is None:
            raise ValueError("config.eval_every is set but no eval_envs were given")
        if buffer.num_envs % dist.num_collectors:
            raise ValueError(
                f"buffer.num_envs={buffer.num_envs} must be num_collectors={dist.num_collectors} times "
                "the envs per collector"
            )
        self.algorithm = algorithm
        self.buffer = buffer
        self.config = config
        self.dist = dist
        self.eval_envs = eval_envs
        self.weights = _remote(WeightStore).options(num_cpus=0).remote()
        per = buffer.num_envs // dist.num_collectors
        actor = _remote(CollectorWorker).options(
            num_cpus=0, max_restarts=dist.max_collector_restarts, max_task_retries=0
        )
        self.collectors = [
            actor.remote(
                make_envs,
                make_policy,
                buffer.writer(k * per, per, chunk_rows=dist.chunk_rows),
                self.weights,
                config.seed + 100 * k,
            )
            for k in range(dist.num_collectors)
        ]
        self.iteration = 0
        self.grad_steps = 0
        self.env_steps = 0
        self.episodes = 0
        self.collector_restarts = 0
        self.collector_failures = 0
        self._failures_K = [0] * dist.num_collectors
        self._retry_at: dict[int, float] = {}
        self._submitted = 0
        self._grad_credit = 0.0
        self._evaluations = 0
        self._inflight: dict[Any, tuple[int, int]] = {}
        self._started = False
        self._beta_start = buffer.beta
        self._sampler = (
            buffer.prefetch(
                config.batch_size,
                n_step=config.n_step,
                gamma=config.gamma,
                batches_per_request=dist.batches_per_request,
            )
            if dist.prefetch
            else None
        )
        self._ray = ray
        self._publish()

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` were collected."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def __iter__(self) -> DistributedTrainer:
        return self

    def _publish(self) -> None:
        ray = _ray()
        ray.get(
            self.weights.put.remote(self.grad_steps, ray.put(policy_weights(self.algorithm)), self.env_steps)
        )

    def _submit(self, k: int) -> None:
        c = self.config
        n = self.dist.collect_env_steps
        if c.max_env_steps is not None:
            n = min(n, c.max_env_steps - self._submitted)
            if n <= 0:
                return
        random = self._submitted < c.warmup_env_steps
        self._submitted += n
        ref = self.collectors[k].collect.remote(n, random=random)
        self._inflight[ref] = (k, n)

    def _next_batch(self) -> TransitionBatch:
        c = self.config
        if self._sampler is not None:
            return next(self._sampler)
        return self.buffer.sample(c.batch_size, n_step=c.n_step, gamma=c.gamma)

    def evaluate(self) -> Any:
        """Deterministic episodes on the eval envs (see ``OffPolicyTrainer.evaluate``)."""
        from rlcore.collector import evaluate

        if self.eval_envs is None:
            raise RuntimeError("this trainer has no eval_envs")
        self._evaluations += 1
        seed = self.config.seed + 10_000 + 1_000 * self._evaluations
        return evaluate(
            lambda o: self.algorithm.act(o, deterministic=True),
            self.eval_envs,
            self.config.eval_episodes,
            seed=seed,
        )

    def __next__(self) -> Any:
        from rlcore.stats import EpisodeStats, EpochStats, TimeStats, mean_stats

        ray, c = self._ray, self.config
        if self.done and not self._inflight and not self._retry_at:
            raise StopIteration
        start = time.perf_counter()
        if not self._started:  # the first next(), also of a resumed trainer
            self._started = True
            for k in range(len(self.collectors)):
                self._submit(k)
        now = time.monotonic()
        for k, at in list(self._retry_at.items()):
            if at <= now:
                del self._retry_at[k]
                self._submit(k)
        if not self._inflight and not self._retry_at:
            raise StopIteration
        # wait for a collect call, but not past the next retry of a restarting collector
        timeout = max(0.0, min(self._retry_at.values()) - now) if self._retry_at else None
        ready: list[Any] = []
        if self._inflight:
            ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=timeout)
            rest = [r for r in self._inflight if r not in ready]
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0] if rest else []
        elif timeout:
            time.sleep(timeout)
        returns: list[float] = []
        lengths: list[int] = []
        successes: list[float] = []
        collected = 0
        for ref in ready:
            k, n = self._inflight.pop(ref)
            try:
                stats, _, restarted = ray.get(ref)
            except ray.exceptions.ActorUnavailableError:
                # restarting (or unreachable for a moment): ask again shortly; not another death
                self._submitted -= n
                self._retry_at[k] = time.monotonic() + 0.5
                continue
            except ray.exceptions.RayActorError:
                # The actor died mid-call: Ray restarts it; this call's steps are lost and owed again.
                self._submitted -= n
                self.collector_failures += 1
                self._failures_K[k] += 1
                limit = self.dist.max_collector_restarts
                if 0 <= limit < self._failures_K[k]:
                    raise
            else:
                self.collector_restarts += restarted
                collected += stats.env_steps
                returns += stats.episode_returns
                lengths += stats.episode_lengths
                successes += stats.episode_successes
            self._submit(k)
        self.env_steps += collected
        self.episodes += len(returns)
        t_collect = time.perf_counter()

        algo_stats: list[Any] = []
        past_warmup = min(collected, self.env_steps - c.warmup_env_steps)
        if past_warmup > 0:
            self._grad_credit += c.utd_ratio * past_warmup
            n_grad = int(self._grad_credit)
            self._grad_credit -= n_grad
            for _ in range(n_grad):
                batch = self._next_batch()
                algo_stats.append(self.algorithm.update(batch))
                if batch.weights is not None and self.algorithm.priorities is not None:
                    self.buffer.update_priorities(batch.indices, self.algorithm.priorities)
                self.grad_steps += 1
                if self.grad_steps % self.dist.weight_sync_every == 0:
                    self._publish()
        if c.per_beta_end is not None and self._beta_start is not None and c.max_env_steps is not None:
            frac = min(1.0, self.env_steps / c.max_env_steps)
            self.buffer.beta = self._beta_start + frac * (c.per_beta_end - self._beta_start)
        t_update = time.perf_counter()

        self.iteration += 1
        eval_stats = None
        last = self.done and not self._inflight
        every = self.dist.eval_every_env_steps
        if every is not None:
            due = self.env_steps // every > (self.env_steps - collected) // every
        else:
            due = c.eval_every is not None and self.iteration % c.eval_every == 0
        if self.eval_envs is not None and (due or (last and (every is not None or c.eval_every is not None))):
            eval_stats = self.evaluate()
        end = time.perf_counter()
        return EpochStats(
            iteration=self.iteration,
            env_steps=self.env_steps,
            grad_steps=self.grad_steps,
            rollout=EpisodeStats.from_episodes(tuple(returns), tuple(lengths), tuple(successes)),
            train=mean_stats(algo_stats),
            eval=eval_stats,
            time=TimeStats(
                env_steps=self.env_steps,
                grad_steps=self.grad_steps,
                episodes=self.episodes,
                collect_s=t_collect - start,
                update_s=t_update - t_collect,
                eval_s=end - t_update,
                iteration_s=end - start,
                env_steps_per_s=collected / max(end - start, 1e-9),
            ),
        )

    def run(self, logger: Any | None = None) -> Any:
        """Iterate until ``max_env_steps``, writing every iteration to ``logger``; return the last
        stats.

        Raises:
            ValueError: ``max_env_steps`` is ``None``.
        """
        if self.config.max_env_steps is None:
            raise ValueError("run() needs config.max_env_steps")
        last = None
        for stats in self:
            if logger is not None:
                logger.write(stats)
            last = stats
        return last

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint into the directory ``path`` (:mod:`rlcore.checkpoint`): algorithm and
        RNG states in ``trainer.pt``, counters in ``counters.json``, every shard with
        :meth:`ShardedReplayBuffer.save` (the collectors' envs live in their actors and are not
        saved). Collect calls still in flight keep writing while the shards save, so the saved
        shards can hold rows that ``env_steps`` does not count yet (as after a collector restart);
        :meth:`close` first for shards exactly as of the last ``next()``. Returns ``path``.

        Raises:
            CheckpointError: the algorithm's state holds something a checkpoint cannot store.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        from rlcore import checkpoint

        return checkpoint.save(
            path,
            trainer=_CHECKPOINT_KIND,
            state={"algorithm": self.algorithm.state_dict(), "rng": checkpoint.capture_rng()},
            counters={
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "episodes": self.episodes,
                "grad_steps": self.grad_steps,
                "grad_credit": self._grad_credit,
                "evaluations": self._evaluations,
                "buffer_beta": self.buffer.beta,
            },
            buffer=self.buffer,
            info={
                "config": dataclasses.asdict(self.config),
                "dist": dataclasses.asdict(self.dist),
                "shard_capacity": self.buffer.shard_capacity,
            },
        )

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint` into this freshly built trainer: algorithm, shards,
        counters and RNGs; the new weights are published, and every collector resets its envs with
        ``rlcore.checkpoint.resume_seed(config.seed, iteration) + 100 * k`` (fresh episodes: the
        envs ran in actors and have no snapshot). Nothing from the files runs as code.

        Args:
            trust_env_state: accepted for the common trainer signature (there is no env snapshot).

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: an old-format checkpoint (the message says how to convert a trusted
                one), a ``trainer.pt`` that holds more than data, or a checkpoint of another trainer.
            SaveFileError: a shard's save is corrupt or does not fit.
            ApiUsageError: the trainer has already started iterating.
        """
        from rlcore import checkpoint

        if self._started:
            raise ApiUsageError("load_checkpoint needs a freshly built DistributedTrainer (before next())")
        ckpt = checkpoint.load(path, trainer=_CHECKPOINT_KIND, trust_env_state=trust_env_state)
        algorithm, rng = ckpt.part("algorithm"), ckpt.part("rng")
        counters = {
            k: ckpt.counter(k)
            for k in ("iteration", "env_steps", "episodes", "grad_steps", "grad_credit", "evaluations")
        }
        beta = ckpt.counter("buffer_beta")
        ckpt.restore_buffer(self.buffer)
        self.algorithm.load_state_dict(algorithm)
        self.iteration, self.env_steps = int(counters["iteration"]), int(counters["env_steps"])
        self.episodes, self.grad_steps = int(counters["episodes"]), int(counters["grad_steps"])
        self._grad_credit, self._evaluations = float(counters["grad_credit"]), int(counters["evaluations"])
        self._submitted = self.env_steps
        if beta is not None and self.buffer.prioritized:
            self.buffer.beta = float(beta)
        seed = checkpoint.resume_seed(self.config.seed, self.iteration)
        self._ray.get([c.reset.remote(seed + 100 * k) for k, c in enumerate(self.collectors)])
        checkpoint.restore_rng(rng)
        self._publish()

    @classmethod
    def resume(
        cls,
        path: str | Path,
        algorithm: Any,
        buffer: ShardedReplayBuffer,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        *,
        config: Any,
        dist: DistributedConfig,
        eval_envs: Any | None = None,
        trust_env_state: bool = False,
    ) -> DistributedTrainer:
        """Build a trainer from fresh objects and load the checkpoint at ``path`` into it
        (:meth:`load_checkpoint`)."""
        trainer = cls(
            algorithm, buffer, make_envs, make_policy, config=config, dist=dist, eval_envs=eval_envs
        )
        trainer.load_checkpoint(path, trust_env_state=trust_env_state)
        return trainer

    def close(self) -> None:
        """Kill the collector and weight-store actors (the buffer's shards stay)."""
        ray = self._ray
        for a in self.collectors:
            ray.kill(a, no_restart=True)
        ray.kill(self.weights)
        self.collectors = []
        self._inflight.clear()


# ---------------------------------------------------------------------------------------------
# command line (``rlcore train ... --distributed``)


def _her_shard_buffer(
    env_id: str | None, capacity: int, cfg: Mapping[str, Any], *, num_envs: int, seed: int | None
) -> Any:
    """A HER shard; a Python ``compute_reward`` is rebuilt from ``env_id`` inside the shard (env
    methods such as MuJoCo's do not pickle)."""
    import rlcore

    compute_reward = None
    if cfg["distance_threshold"] is None:
        import gymnasium as gym

        if env_id is None:
            raise ApiUsageError("a HER shard with a Python compute_reward needs env_id to rebuild it")
        if env_id not in gym.registry:
            import gymnasium_robotics  # type: ignore[import-untyped]

            gym.register_envs(gymnasium_robotics)
        compute_reward = getattr(gym.make(env_id).unwrapped, "compute_reward")  # noqa: B009
    per = {k: cfg[k] for k in ("alpha", "beta", "eps")} if cfg.get("prioritized") else {}
    return rlcore.HERReplayBuffer(
        capacity,
        num_envs=num_envs,
        seed=seed,
        strategy=cfg["strategy"],
        future_k=cfg["future_k"],
        compute_reward=compute_reward,
        distance_threshold=cfg["distance_threshold"],
        goal_keys=tuple(cfg["goal_keys"]),
        prioritized=bool(cfg.get("prioritized")),
        **per,
    )


def shard_factory_like(
    buffer: Any,
    *,
    num_shards: int,
    num_envs: int,
    env_id: str | None = None,
    shard_capacity: int | None = None,
) -> BufferFactory:
    """A picklable ``make_buffer`` for shards of the same kind and parameters as the local
    ``buffer``, together holding its capacity plus 1,000 rows per env stream (terminal rows and
    uneven episode routing), split over ``num_shards`` (or ``shard_capacity`` rows each: the shards
    of a run being resumed).

    Raises:
        ApiUsageError: a HER buffer with a Python ``compute_reward`` and no ``env_id`` to rebuild
            it from.
    """
    import rlcore

    cfg = buffer._config()
    capacity = -(-(cfg["capacity"] + 1_000 * num_envs) // num_shards)
    capacity = -(-capacity // num_envs) * num_envs if shard_capacity is None else int(shard_capacity)
    if cfg["kind"] == "her":
        if cfg["distance_threshold"] is None and env_id is None:
            raise ApiUsageError(
                "a HER buffer with a Python compute_reward needs env_id to rebuild it in the shards"
            )
        return functools.partial(_her_shard_buffer, env_id, capacity, cfg)
    if cfg["kind"] == "prioritized":
        return functools.partial(
            rlcore.PrioritizedReplayBuffer, capacity, alpha=cfg["alpha"], beta=cfg["beta"], eps=cfg["eps"]
        )
    return functools.partial(rlcore.ReplayBuffer, capacity)


def _resumed_shard_capacity(args: Any) -> int | None:
    """The shard capacity of the run ``--resume`` points to (``None``: not resuming, or unknown)."""
    from rlcore import checkpoint
    from rlcore.errors import RlcoreError

    if getattr(args, "resume", None) is None:
        return None
    try:
        capacity = checkpoint.read_info(args.resume).get("shard_capacity")
    except (FileNotFoundError, RlcoreError):
        return None  # load_resume reports it
    return capacity if isinstance(capacity, int) else None


def trainer_from_cli(
    args: Any,
    algorithm: Any,
    buffer: Any,
    make_envs: Callable[[], Any],
    make_policy: Callable[[], Any],
    *,
    config: Any,
    eval_envs: Any,
    envs_per_collector: int,
) -> DistributedTrainer:
    """The :class:`DistributedTrainer` of ``rlcore train ... --distributed`` (``args``: the parsed
    ``--num-collectors``, ``--num-shards``, ``--ray-address``, ``--env``, ``--seed``), with shards
    like the local ``buffer`` and evaluation about as often in env steps as the local run.

    Raises:
        rlcore.cli.UsageError: bad counts, or Ray is not installed.
    """
    from rlcore.cli import UsageError

    k, s = args.num_collectors, args.num_shards
    if k < 1 or s < 1:
        raise UsageError(f"--num-collectors and --num-shards must be >= 1, got {k} and {s}")
    try:
        init_ray(args.ray_address)
    except ImportError as e:
        raise UsageError(str(e)) from e
    streams = k * envs_per_collector
    sharded = ShardedReplayBuffer(
        shard_factory_like(
            buffer,
            num_shards=s,
            num_envs=streams,
            env_id=args.env,
            shard_capacity=_resumed_shard_capacity(args),
        ),
        num_shards=s,
        num_envs=streams,
        seed=args.seed,
    )
    every = None if config.eval_every is None else config.eval_every * config.collect_env_steps
    dist = DistributedConfig(num_collectors=k, eval_every_env_steps=every)
    return DistributedTrainer(
        algorithm, sharded, make_envs, make_policy, config=config, dist=dist, eval_envs=eval_envs
    )
