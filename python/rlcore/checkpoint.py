"""The checkpoint directory of every rlcore trainer: data that loads without running code.

Layout (format version 2)::

    DIR/checkpoint.json          what the directory is: format, version, trainer kind, the generation
                                 folder, which parts it holds; written last (temp file, fsync, rename)
    DIR/gen-<id>/trainer.pt      algorithm (networks, optimizers, normalisers, schedules, RNGs),
                                 collector or sampler state and the process RNG states, as tensors
                                 and plain values: read with ``torch.load(weights_only=True)``
    DIR/gen-<id>/counters.json   the trainer's counters (iteration, env steps, gradient steps, ...)
    DIR/gen-<id>/buffer/         the replay buffer in its own save format (``buffer.save``; a
                                 sharded buffer writes one such save per shard)
    DIR/gen-<id>/env_state.pkl   optional: the pickled sub-envs (an exact resume of env state); read
                                 only when the caller passes ``trust_env_state=True``

Nothing else is ever unpickled on load. Numpy arrays inside a state (observations, RNG states of
other bit generators) are stored as tensors tagged with their dtype and come back as numpy arrays;
numpy scalars come back as numpy scalars; anything that is not a tensor, array or plain value
(``None``, bool, int, float, str, bytes, dict, list, tuple, set, torch dtype/device/size) is
refused when saving, so every checkpoint written here loads.

A save writes a fresh generation folder, then replaces ``checkpoint.json``, then removes only the
folder the replaced manifest named: a crash mid-save leaves the previous checkpoint loadable
(DESIGN.md, "Durability").

Checkpoints written before format 2 (``trainer.pt`` and ``buffer.pkl`` as unrestricted pickles)
are refused with a :class:`~rlcore.errors.CheckpointError`. One command converts a trusted one,
and it is the only place that unpickles them::

    python -m rlcore.checkpoint convert OLD_DIR NEW_DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import random
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlcore.errors import CheckpointError

__all__ = [
    "FORMAT",
    "VERSION",
    "Checkpoint",
    "capture_rng",
    "convert",
    "from_plain",
    "is_checkpoint",
    "load",
    "main",
    "numpy_rng_from_plain",
    "numpy_rng_to_plain",
    "python_rng_from_plain",
    "python_rng_to_plain",
    "read_info",
    "restore_rng",
    "resume_seed",
    "save",
    "to_plain",
]

FORMAT = "rlcore-checkpoint"
"""``format`` field of ``checkpoint.json``."""
VERSION = 2
"""Format version written and read here (1: the old pickle layout, refused)."""

MANIFEST = "checkpoint.json"
TRAINER_FILE = "trainer.pt"
COUNTERS_FILE = "counters.json"
BUFFER_DIR = "buffer"
ENV_STATE_FILE = "env_state.pkl"
_OLD_FILES = ("trainer.pt", "buffer.pkl", "meta.json")
_NDARRAY = "__rlcore_ndarray__"
_RESUME_SALT = 0x52455355  # "RESU": keeps resume seeds apart from every other seed stream

CONVERT_HINT = "python -m rlcore.checkpoint convert OLD_DIR NEW_DIR"


def _convert_advice(path: Path) -> str:
    return (
        f"if it is an rlcore checkpoint you trust, convert it once with "
        f"`python -m rlcore.checkpoint convert {path} NEW_DIR` and load NEW_DIR"
    )


# ------------------------------------------------------------------------------ plain values

_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes)
_TORCH_VALUES = (torch.dtype, torch.device, torch.Size)


def to_plain(obj: Any, where: str = "state") -> Any:
    """``obj`` with every numpy array and scalar replaced by a tagged tensor, so that
    ``torch.load(weights_only=True)`` reads it back; :func:`from_plain` undoes it.

    Tensors (``nn.Parameter`` as plain tensors), torch dtypes/devices/sizes, ``None``, bool, int,
    float, complex, str and bytes pass through; dict, ``OrderedDict``, list, tuple and set are walked.

    Raises:
        CheckpointError: ``obj`` holds anything else (an enum, a dataclass, a callable, an object
            array, ...); the message names where (``where`` plus the keys leading to it).
    """
    kind = type(obj)
    if isinstance(obj, torch.Tensor):
        return obj.detach() if isinstance(obj, torch.nn.Parameter) else obj
    if isinstance(obj, np.ndarray | np.generic):
        return _array_to_plain(obj, where)
    if kind in _PLAIN_TYPES or isinstance(obj, _TORCH_VALUES):
        return obj
    if kind is dict or kind is collections.OrderedDict:
        out = kind()
        for key, value in obj.items():
            if type(key) not in _PLAIN_TYPES:
                raise CheckpointError(
                    f"{where}: key {key!r} is a {type(key).__qualname__}, not a plain value"
                )
            out[key] = to_plain(value, f"{where}.{key}")
        return out
    if kind is list or kind is tuple:
        return kind(to_plain(v, f"{where}[{i}]") for i, v in enumerate(obj))
    if kind is set:
        return {to_plain(v, f"{where}{{}}") for v in obj}
    raise CheckpointError(
        f"{where}: a {kind.__module__}.{kind.__qualname__} cannot be stored in a checkpoint (only tensors, "
        "numpy arrays and plain values: None, bool, int, float, str, bytes, dict, list, tuple); convert it "
        "in the state_dict that returned it"
    )


def _array_to_plain(arr: np.ndarray | np.generic, where: str) -> dict[str, Any]:
    a = np.asarray(arr)
    if a.dtype.byteorder not in ("=", "|"):
        a = a.astype(a.dtype.newbyteorder("="))
    try:
        tensor = torch.from_numpy(np.array(a, copy=True, order="C"))
    except TypeError as e:
        raise CheckpointError(
            f"{where}: a numpy array of dtype {a.dtype} cannot be stored as a tensor ({e})"
        ) from e
    return {_NDARRAY: tensor, "dtype": str(a.dtype), "scalar": isinstance(arr, np.generic)}


def from_plain(obj: Any) -> Any:
    """Undo :func:`to_plain`: tagged tensors become numpy arrays (or scalars) of their dtype again.

    Raises:
        CheckpointError: a tagged entry is malformed.
    """
    kind = type(obj)
    if kind is dict and _NDARRAY in obj:
        tensor, dtype = obj[_NDARRAY], obj.get("dtype")
        if not isinstance(tensor, torch.Tensor):
            raise CheckpointError(f"a stored numpy array holds a {type(tensor).__qualname__}, not a tensor")
        arr = tensor.numpy()
        if str(arr.dtype) != dtype:
            raise CheckpointError(f"a stored numpy array says dtype {dtype!r} but holds {arr.dtype}")
        return arr[()] if obj.get("scalar") else arr
    if kind is dict or kind is collections.OrderedDict:
        return kind((k, from_plain(v)) for k, v in obj.items())
    if kind is list or kind is tuple:
        return kind(from_plain(v) for v in obj)
    return obj


# ------------------------------------------------------------------------------ RNG states


def numpy_rng_to_plain(state: Mapping[str, Any]) -> dict[str, Any]:
    """A numpy ``bit_generator.state`` (or ``np.random.get_state(legacy=False)``) as plain ints and
    tagged arrays (MT19937's ``key``, SFC64's ``state``, ...); :func:`numpy_rng_from_plain` inverts it.

    Raises:
        CheckpointError: ``state`` is not a numpy bit-generator state.
    """
    if not isinstance(state, Mapping) or "bit_generator" not in state:
        raise CheckpointError(f"not a numpy bit-generator state: {type(state).__qualname__}")
    return to_plain(dict(state), "numpy rng")


def numpy_rng_from_plain(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The ``bit_generator.state`` dict that :func:`numpy_rng_to_plain` stored."""
    state = from_plain(dict(plain))
    if "bit_generator" not in state:
        raise CheckpointError("the stored numpy RNG state has no 'bit_generator'")
    return state


def python_rng_to_plain(state: tuple[Any, ...]) -> dict[str, Any]:
    """``random.getstate()`` (version, 625 ints, gauss_next) as a dict of plain values."""
    version, internal, gauss_next = state
    return {"version": int(version), "internal": [int(x) for x in internal], "gauss_next": gauss_next}


def python_rng_from_plain(plain: Mapping[str, Any]) -> tuple[Any, ...]:
    """The tuple for ``random.setstate`` that :func:`python_rng_to_plain` stored."""
    return (int(plain["version"]), tuple(int(x) for x in plain["internal"]), plain["gauss_next"])


def capture_rng() -> dict[str, Any]:
    """The process-wide RNG states as plain values: torch CPU (uint8 tensor), every CUDA device's
    (list of uint8 tensors, empty without CUDA), numpy's global generator and Python's ``random``."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else [],
        "numpy": numpy_rng_to_plain(np.random.get_state(legacy=False)),  # noqa: NPY002 - the global stream
        "python": python_rng_to_plain(random.getstate()),
    }


def restore_rng(plain: Mapping[str, Any]) -> None:
    """Set the RNG states :func:`capture_rng` returned (entries missing from ``plain`` are left
    alone; CUDA states beyond this machine's devices are ignored).

    Raises:
        CheckpointError: an entry has the wrong type.
    """
    try:
        if plain.get("torch") is not None:
            torch.set_rng_state(plain["torch"])
        cuda = list(plain.get("cuda") or [])
        if cuda and torch.cuda.is_available():
            for device, state in enumerate(cuda[: torch.cuda.device_count()]):
                torch.cuda.set_rng_state(state, device)
        if plain.get("numpy") is not None:
            np.random.set_state(numpy_rng_from_plain(plain["numpy"]))  # noqa: NPY002 - the global stream
        if plain.get("python") is not None:
            random.setstate(python_rng_from_plain(plain["python"]))
    except (TypeError, ValueError, KeyError, RuntimeError) as e:
        raise CheckpointError(f"a stored RNG state is malformed: {e!r}") from e


def resume_seed(seed: int, iteration: int) -> int:
    """The reset seed of envs rebuilt on resume without an env snapshot: a deterministic function
    of the run's ``seed`` and the ``iteration`` the checkpoint was taken at, in ``[0, 2**31)``, far
    from the run's own seed streams (first reset ``seed``, evaluations ``seed + 10_000 + ...``)."""
    seq = np.random.SeedSequence([int(seed) % 2**64, int(iteration) % 2**64, _RESUME_SALT])
    return int(seq.generate_state(1, np.uint32)[0] >> 1)


# ------------------------------------------------------------------------------ save / load


@dataclass(frozen=True)
class Checkpoint:
    """What :func:`load` read (nothing in the trainer has changed yet)."""

    path: Path
    """The checkpoint directory."""
    data_dir: Path
    """The generation folder ``checkpoint.json`` names."""
    trainer: str
    """Kind of trainer that wrote it (``"off-policy"``, ``"on-policy"``, ``"offline"``, ``"distributed"``)."""
    state: dict[str, Any]
    """``trainer.pt`` with numpy arrays restored (algorithm, collector/sampler, ``rng``)."""
    counters: dict[str, Any]
    """``counters.json``."""
    has_buffer: bool
    """The checkpoint holds a ``buffer/`` save."""
    has_env_state: bool
    """The checkpoint holds an env snapshot (``env_state.pkl``)."""
    env_state: Any | None
    """The unpickled env snapshot when ``trust_env_state=True`` was given, else ``None``."""

    def part(self, name: str) -> Any:
        """``state[name]``.

        Raises:
            CheckpointError: ``trainer.pt`` has no such entry.
        """
        if name not in self.state:
            raise CheckpointError(f"{self.data_dir / TRAINER_FILE} has no {name!r} entry")
        return self.state[name]

    def counter(self, name: str) -> Any:
        """``counters[name]``.

        Raises:
            CheckpointError: ``counters.json`` has no such counter.
        """
        if name not in self.counters:
            raise CheckpointError(f"{self.data_dir / COUNTERS_FILE} has no {name!r} counter")
        return self.counters[name]

    def restore_buffer(self, buffer: Any) -> None:
        """Copy the checkpoint's buffer into ``buffer`` with ``buffer.restore`` (all or nothing).

        Raises:
            CheckpointError: the checkpoint holds no buffer, or ``buffer`` has no ``restore``.
            SaveFileError: the buffer save is missing, corrupt or does not fit ``buffer``.
        """
        if not self.has_buffer:
            raise CheckpointError(f"{self.path} holds no buffer")
        if not callable(getattr(buffer, "restore", None)):
            raise CheckpointError(
                f"a {type(buffer).__qualname__} has no restore(path): checkpoints need an rlcore buffer"
            )
        buffer.restore(self.data_dir / BUFFER_DIR)


def is_checkpoint(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a checkpoint of this format or of the old one (which :func:`load`
    refuses): something to load rather than a place to write a new one."""
    root = Path(path)
    return (root / MANIFEST).is_file() or any((root / f).exists() for f in _OLD_FILES)


def read_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``info`` a trainer stored in ``checkpoint.json`` (its config, buffer capacity, ...),
    read as JSON only.

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint.
        CheckpointError: an old-format checkpoint or a damaged manifest (as :func:`load`).
    """
    root = Path(path)
    manifest = _read_manifest(root)
    if manifest is None:
        if any((root / f).exists() for f in _OLD_FILES):
            raise CheckpointError(f"{root} is a checkpoint of rlcore's old format; {_convert_advice(root)}")
        raise FileNotFoundError(f"no checkpoint in {root} (expected {MANIFEST})")
    info = manifest.get("info")
    return dict(info) if isinstance(info, dict) else {}


def _plain_name(name: Any) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_manifest(root: Path) -> dict[str, Any] | None:
    """The parsed ``checkpoint.json``, or ``None`` when there is none."""
    mpath = root / MANIFEST
    try:
        text = mpath.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{mpath} cannot be read: {e}") from e
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{mpath} is corrupt: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{mpath} is not an rlcore checkpoint manifest")
    if manifest.get("version") != VERSION:
        raise CheckpointError(
            f"{mpath} has format version {manifest.get('version')!r}; this rlcore reads version {VERSION}"
        )
    if not _plain_name(manifest.get("data_dir")):
        raise CheckpointError(
            f"{mpath} names a data folder that is not a plain name: {manifest.get('data_dir')!r}"
        )
    return manifest


def save(
    path: str | os.PathLike[str],
    *,
    trainer: str,
    state: Mapping[str, Any],
    counters: Mapping[str, Any],
    buffer: Any | None = None,
    env_state: Any | None = None,
    info: Mapping[str, Any] | None = None,
) -> Path:
    """Write a checkpoint into the directory ``path`` (created if needed) and return it.

    Args:
        trainer: kind of the trainer (checked again by :func:`load`).
        state: goes to ``trainer.pt``: tensors, numpy arrays and plain values (:func:`to_plain`).
        counters: goes to ``counters.json``: ints, floats, bools, strings or ``None``.
        buffer: saved with ``buffer.save(GEN/buffer)`` (its own format), or ``None``.
        env_state: pickled into ``env_state.pkl`` when it pickles (else left out, as if ``None``).
        info: JSON-able extras for ``checkpoint.json`` (e.g. the trainer's config), never read back.

    Raises:
        CheckpointError: ``state`` or ``counters`` hold something a checkpoint cannot store (checked
            before anything is written), or ``buffer`` has no ``save``.
        OSError: the directory cannot be written (the previous checkpoint stays intact).
    """
    plain = {"format": FORMAT, "version": VERSION, "trainer": trainer, **to_plain(dict(state))}
    for key, value in counters.items():
        if type(value) not in (type(None), bool, int, float, str):
            raise CheckpointError(f"counter {key!r} is a {type(value).__qualname__}, not a JSON scalar")
    if buffer is not None and not callable(getattr(buffer, "save", None)):
        raise CheckpointError(
            f"a {type(buffer).__qualname__} has no save(path): checkpoints need an rlcore buffer"
        )
    env_blob: bytes | None = None
    if env_state is not None:
        try:
            env_blob = pickle.dumps(env_state, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - any pickling failure means "no env snapshot"
            env_blob = None

    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    previous = None
    try:
        previous = _read_manifest(root)
    except CheckpointError:
        previous = None  # a damaged manifest is replaced; its folder is left alone
    gen = root / f"gen-{uuid.uuid4().hex[:12]}"
    gen.mkdir()
    try:
        torch.save(plain, gen / TRAINER_FILE)
        _fsync_file(gen / TRAINER_FILE)
        with open(gen / COUNTERS_FILE, "w", encoding="utf-8") as f:
            json.dump(dict(counters), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        if env_blob is not None:
            with open(gen / ENV_STATE_FILE, "wb") as f:
                f.write(env_blob)
                f.flush()
                os.fsync(f.fileno())
        if buffer is not None:
            buffer.save(gen / BUFFER_DIR)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "trainer": trainer,
            "data_dir": gen.name,
            "buffer": buffer is not None,
            "env_state": env_blob is not None,
            "torch": torch.__version__,
            "info": dict(info or {}),
        }
        _write_json_atomic(root / MANIFEST, manifest)
    except BaseException:
        shutil.rmtree(gen, ignore_errors=True)
        raise
    if previous is not None and previous["data_dir"] != gen.name:
        shutil.rmtree(root / previous["data_dir"], ignore_errors=True)
    return root


def load(
    path: str | os.PathLike[str], *, trainer: str | None = None, trust_env_state: bool = False
) -> Checkpoint:
    """Read the checkpoint at ``path`` without changing anything else.

    ``trainer.pt`` is read with ``torch.load(weights_only=True)``; ``buffer/`` is left for
    :meth:`Checkpoint.restore_buffer`; ``env_state.pkl`` is unpickled only with
    ``trust_env_state=True`` (unpickling runs code from the file: pass it only for a checkpoint you
    trust); without it :attr:`Checkpoint.env_state` is ``None`` and the collector that receives it
    resets its envs (and warns).

    Args:
        trainer: the kind of trainer the checkpoint must come from (``None``: any).

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint at all.
        CheckpointError: an old-format checkpoint (pickles; the message gives the command that
            converts a trusted one), a ``trainer.pt`` that holds anything but tensors and plain values,
            a checkpoint of another trainer, or a damaged or incomplete checkpoint.
    """
    root = Path(path)
    manifest = _read_manifest(root)
    if manifest is None:
        old = [f for f in _OLD_FILES if (root / f).exists()]
        if old:
            raise CheckpointError(
                f"{root} is a checkpoint of rlcore's old format ({', '.join(old)}: pickles, which run code "
                f"when loaded), so it is not loaded; {_convert_advice(root)}"
            )
        raise FileNotFoundError(f"no checkpoint in {root} (expected {MANIFEST})")
    if trainer is not None and manifest.get("trainer") != trainer:
        raise CheckpointError(
            f"{root} is a checkpoint of a {manifest.get('trainer')!r} trainer, not of a {trainer!r} one"
        )
    gen = root / manifest["data_dir"]
    if not gen.is_dir():
        raise CheckpointError(f"{root / MANIFEST} names {manifest['data_dir']}, which is missing")
    try:
        raw = torch.load(gen / TRAINER_FILE, weights_only=True, map_location="cpu")
    except FileNotFoundError as e:
        raise CheckpointError(f"{gen / TRAINER_FILE} is missing") from e
    except Exception as e:  # noqa: BLE001 - whatever the restricted unpickler or zip reader raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{gen / TRAINER_FILE} is refused: torch.load(weights_only=True) cannot read it ({first}); it is "
            f"corrupt or holds objects other than tensors and plain values, which rlcore never loads; "
            f"{_convert_advice(root)}"
        ) from e
    if (
        not isinstance(raw, dict)
        or raw.get("format") != FORMAT
        or raw.get("version") != VERSION
        or raw.get("trainer") != manifest["trainer"]
    ):
        raise CheckpointError(f"{gen / TRAINER_FILE} is not the trainer state {root / MANIFEST} describes")
    state = from_plain({k: v for k, v in raw.items() if k not in ("format", "version", "trainer")})
    try:
        counters = json.loads((gen / COUNTERS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{gen / COUNTERS_FILE} is missing or corrupt: {e}") from e
    if not isinstance(counters, dict):
        raise CheckpointError(f"{gen / COUNTERS_FILE} is not a JSON object")
    has_env_state = bool(manifest.get("env_state"))
    env_state = None
    if has_env_state and trust_env_state:
        env_state = _load_trusted_env_state(gen / ENV_STATE_FILE)
    return Checkpoint(
        path=root,
        data_dir=gen,
        trainer=str(manifest["trainer"]),
        state=state,
        counters=counters,
        has_buffer=bool(manifest.get("buffer")),
        has_env_state=has_env_state,
        env_state=env_state,
    )


def _load_trusted_env_state(path: Path) -> Any:
    """Unpickle the env snapshot: the one opt-in place where a checkpoint file may run code."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - only with trust_env_state=True (documented opt-in)
    except FileNotFoundError as e:
        raise CheckpointError(f"{path} is missing") from e
    except Exception as e:  # noqa: BLE001 - a broken pickle may raise anything
        raise CheckpointError(f"{path} cannot be unpickled: {e!r}") from e


# ------------------------------------------------------------------------------ old format


class _SaveWith:
    """An object whose ``save(path)`` calls ``write(path)`` (what :func:`save` needs of a buffer)."""

    def __init__(self, write: Callable[[Path], None]) -> None:
        self.save = write


def _no_reward(*args: Any) -> np.ndarray:
    raise RuntimeError("placeholder compute_reward of a converted checkpoint's buffer")


def _buffer_from_state(state: Mapping[str, Any]) -> Any:
    """A local rlcore buffer holding an old ``buffer.pkl`` state (to write it in the save format)."""
    import rlcore

    cfg = state["config"]
    kind, capacity, num_envs = cfg["kind"], int(cfg["capacity"]), int(cfg["num_envs"])
    buf: Any
    if kind == "replay":
        buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs)
    elif kind == "prioritized":
        buf = rlcore.PrioritizedReplayBuffer(
            capacity, num_envs=num_envs, alpha=cfg["alpha"], beta=cfg["beta"], eps=cfg["eps"]
        )
    elif kind == "her":
        per = {k: cfg[k] for k in ("alpha", "beta", "eps")} if cfg.get("prioritized") else {}
        threshold = cfg.get("distance_threshold")
        buf = rlcore.HERReplayBuffer(
            capacity,
            num_envs=num_envs,
            strategy=cfg["strategy"],
            future_k=cfg["future_k"],
            # callables are never saved: the trainer's own buffer brings its compute_reward
            compute_reward=_no_reward if threshold is None else None,
            distance_threshold=threshold,
            goal_keys=tuple(cfg["goal_keys"]),
            prioritized=bool(cfg.get("prioritized")),
            **per,
        )
    else:
        raise CheckpointError(f"old buffer.pkl holds an unknown buffer kind {kind!r}")
    buf.load_state_dict(state)
    return buf


def _old_buffer(state: Mapping[str, Any]) -> _SaveWith:
    """``save(path)`` writing an old ``buffer.pkl`` state in the buffer's save format (a local
    buffer, or a sharded one as :meth:`rlcore.distributed.ShardedReplayBuffer.save` writes it)."""
    cfg = state["config"]
    if cfg.get("kind") == "sharded":
        from rlcore.distributed import save_shard_dirs

        shards = [_buffer_from_state(s) for s in state["shards"]]
        writers = [shard.save for shard in shards]
        return _SaveWith(lambda path: save_shard_dirs(path, num_envs=int(cfg["num_envs"]), writers=writers))
    return _SaveWith(_buffer_from_state(state).save)


def _old_rng(old: Mapping[str, Any]) -> dict[str, Any]:
    rng: dict[str, Any] = {}
    if old.get("torch_rng") is not None:
        rng["torch"] = old["torch_rng"]
    if old.get("cuda_rng") is not None:
        rng["cuda"] = list(old["cuda_rng"])
    return rng


def _split_envs(part: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """A collector/sampler state of the old format without its pickled sub-envs, and those (unpickled)."""
    part = dict(part)
    blob = part.pop("envs", None)
    envs = pickle.loads(blob) if blob is not None else None  # noqa: S301 - `convert`: explicit trust
    return part, envs


def convert(old: str | os.PathLike[str], new: str | os.PathLike[str]) -> Path:
    """Convert a checkpoint of the old pickle format at ``old`` into this format at ``new``.

    This UNPICKLES ``old/trainer.pt`` and ``old/buffer.pkl`` (``torch.load(weights_only=False)``,
    ``pickle.load``), which runs any code they contain: convert only checkpoints you trust. It is
    the one place in rlcore that does so, and only on this explicit request. The env snapshot of
    the old collector/sampler state, if any, becomes ``env_state.pkl`` (still loaded only with
    ``trust_env_state=True``).

    Raises:
        CheckpointError: ``old`` is not an old-format checkpoint, or ``new`` is not empty.
        FileNotFoundError: ``old`` has no ``trainer.pt``.
    """
    old_root, new_root = Path(old), Path(new)
    if (old_root / MANIFEST).is_file():
        raise CheckpointError(f"{old_root} is already a checkpoint of format {VERSION}: nothing to convert")
    if not (old_root / "trainer.pt").is_file():
        raise FileNotFoundError(f"no old-format checkpoint in {old_root} (no trainer.pt)")
    if new_root.exists() and (not new_root.is_dir() or any(new_root.iterdir())):
        raise CheckpointError(f"{new_root} exists and is not an empty directory: choose a new one")
    trained = torch.load(old_root / "trainer.pt", weights_only=False, map_location="cpu")  # noqa: S614 - explicit trust
    if not isinstance(trained, dict) or "algorithm" not in trained:
        raise CheckpointError(f"{old_root}/trainer.pt is not an rlcore trainer checkpoint")
    buffer_state = None
    if (old_root / "buffer.pkl").is_file():
        with open(old_root / "buffer.pkl", "rb") as f:
            buffer_state = pickle.load(f)  # noqa: S301 - `convert`: explicit trust
    rng = _old_rng(trained)
    info = {"config": trained.get("config"), "converted_from": str(old_root)}
    buffer = None if buffer_state is None else _old_buffer(buffer_state)
    if "collector" in trained:
        collector, envs = _split_envs(trained["collector"])
        return save(
            new_root,
            trainer="off-policy",
            state={"algorithm": trained["algorithm"], "collector": collector, "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(collector["env_steps"]),
                "grad_steps": int(trained["grad_steps"]),
                "grad_credit": float(trained["grad_credit"]),
                "evaluations": int(trained["evaluations"]),
                "buffer_beta": trained.get("buffer_beta"),
            },
            buffer=buffer,
            env_state=envs,
            info=info,
        )
    if "sampler" in trained:
        sampler, envs = _split_envs(trained["sampler"])
        return save(
            new_root,
            trainer="on-policy",
            state={"algorithm": trained["algorithm"], "sampler": sampler, "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(sampler["env_steps"]),
                "grad_steps": int(trained["grad_steps"]),
                "evaluations": int(trained["evaluations"]),
            },
            env_state=envs,
            info=info,
        )
    if "dist" in trained:
        shards = (buffer_state or {}).get("shards") or [{}]
        beta = shards[0].get("config", {}).get("beta")
        return save(
            new_root,
            trainer="distributed",
            state={"algorithm": trained["algorithm"], "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(trained["env_steps"]),
                "episodes": 0,
                "grad_steps": int(trained["grad_steps"]),
                "grad_credit": float(trained["grad_credit"]),
                "evaluations": 0,
                "buffer_beta": None if beta is None else float(beta),
            },
            buffer=buffer,
            info={**info, "dist": trained.get("dist")},
        )
    return save(
        new_root,
        trainer="offline",
        state={"algorithm": trained["algorithm"], "rng": rng},
        counters={
            "iteration": int(trained["iteration"]),
            "grad_steps": int(trained["grad_steps"]),
            "evaluations": int(trained["evaluations"]),
        },
        info=info,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcore.checkpoint convert OLD_DIR NEW_DIR``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m rlcore.checkpoint",
        description="Convert a trusted rlcore checkpoint of the old pickle format into the current one.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser(
        "convert",
        help="convert OLD_DIR (old pickle format) into NEW_DIR",
        description="UNPICKLES OLD_DIR/trainer.pt and OLD_DIR/buffer.pkl, which runs any code they contain: "
        "use it only on checkpoints you trust. NEW_DIR then loads without running code.",
    )
    conv.add_argument("old", type=Path, help="checkpoint directory of the old format")
    conv.add_argument("new", type=Path, help="new, empty directory for the converted checkpoint")
    args = parser.parse_args(argv)
    print(
        f"rlcore.checkpoint: unpickling {args.old}/trainer.pt and buffer.pkl: this runs any code they "
        "contain; convert only checkpoints you trust",
        file=sys.stderr,
    )
    try:
        out = convert(args.old, args.new)
    except (OSError, KeyError, TypeError, ValueError) as e:
        print(f"rlcore.checkpoint: error: {e}", file=sys.stderr)
        return 2
    print(f"converted {args.old} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
