"""The checkpoint directory of every rlcore trainer: data that loads without running code.

Layout (format version 2)::

    DIR/checkpoint.json          what the directory is: format, version, trainer kind, the generation
                                 folder, which parts it holds, every file the save wrote, the
                                 CRC-32C of each part outside ``buffer/`` ("crc32c") and of the
                                 manifest's own content ("checksum"); written last (temp file,
                                 fsync, rename)
    DIR/rlcore.lock              the lock file: saves take turns on it, loads share it
    DIR/gen-<id>/rlcore-data.json  the marker: what the save writes here (written first)
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

The directory is one of :mod:`rlcore.buffers.generations` (docs/replay-buffer.md, "save and load"): a save writes
a fresh generation folder and fsyncs it, then replaces ``checkpoint.json``, then removes exactly the
files the replaced manifest lists and the folders this empties; nothing else in the directory, whatever
its name. Concurrent saves (threads or processes) take turns on ``rlcore.lock``, the last one wins;
a killed or failed save never costs the previous checkpoint, and a later save removes a killed
save's folder once its marker proves it rlcore's. A load holds the lock shared, so it never reads a
half-replaced checkpoint, and the :class:`Checkpoint` it returns keeps its generation folder from
being removed until :meth:`Checkpoint.restore_buffer` can no longer need it (the object is gone).

A load checks the manifest's checksum, then every part's CRC-32C, before it reads any part (the
buffer's files are checked by the buffer's own load), so an edited or damaged checkpoint is refused
with a :class:`~rlcore.errors.CheckpointError` naming the file, never loaded as something else; a
manifest without checksums is refused the same way."""

from __future__ import annotations

import collections
import json
import os
import pickle
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlcore.buffers import generations
from rlcore.errors import CheckpointError

__all__ = [
    "Checkpoint",
    "capture_rng",
    "check_env_snapshot",
    "from_plain",
    "is_checkpoint",
    "load",
    "numpy_rng_from_plain",
    "numpy_rng_to_plain",
    "python_rng_from_plain",
    "python_rng_to_plain",
    "read_info",
    "remove",
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

_KIND = generations.Kind(
    prefix="gen-",
    folders=re.compile(r"gen-[0-9a-f]{16}"),
    marker="rlcore-checkpoint-data",
    entries=re.compile(r"trainer\.pt|counters\.json|env_state\.pkl|buffer"),
)
_CRC = re.compile(r"[0-9a-f]{8}")
_NDARRAY = "__rlcore_ndarray__"
_RESUME_SALT = 0x52455355  # "RESU": keeps resume seeds apart from every other seed stream


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
    _pin: generations.Pin | None = field(default=None, repr=False, compare=False)
    """Keeps a save into the same directory from removing :attr:`data_dir` while this object
    lives (its buffer is read later, by :meth:`restore_buffer`)."""

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
        """Copy the checkpoint's buffer into ``buffer`` with ``buffer.restore`` (all or nothing):
        the buffer of the generation :func:`load` read, even if a save has replaced the
        checkpoint since (that save leaves this generation's folder while this object lives).

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
    """True when ``path`` holds a checkpoint manifest: something to load rather than a place to
    write a new one."""
    root = Path(path)
    return (root / MANIFEST).is_file()


def read_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``info`` a trainer stored in ``checkpoint.json`` (its config, buffer capacity, ...),
    read as JSON only.

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint.
        CheckpointError: a damaged manifest (as :func:`load`).
    """
    root = Path(path)
    manifest = _read_manifest(root)
    if manifest is None:
        raise FileNotFoundError(f"no checkpoint in {root} (expected {MANIFEST})")
    info = manifest.get("info")
    return dict(info) if isinstance(info, dict) else {}


def _read_manifest(root: Path) -> dict[str, Any] | None:
    """The parsed ``checkpoint.json``, or ``None`` when there is none."""
    mpath = root / MANIFEST
    try:
        manifest = generations.read_manifest(
            mpath, manifest_format=FORMAT, version=VERSION, error=CheckpointError, what="checkpoint"
        )
    except FileNotFoundError:
        return None
    if not generations.plain_name(manifest.get("data_dir")):
        raise CheckpointError(
            f"{mpath} names a data folder that is not a plain name: {manifest.get('data_dir')!r}"
        )
    generations.check_seal(manifest, mpath, CheckpointError)
    sums = manifest.get("crc32c")
    if not (
        isinstance(sums, dict)
        and all(k in (TRAINER_FILE, COUNTERS_FILE, ENV_STATE_FILE) for k in sums)
        and all(isinstance(v, str) and _CRC.fullmatch(v) for v in sums.values())
    ):
        raise CheckpointError(f"{mpath} fails its checksum: it was edited or damaged after the save")
    return manifest


def _check_files(root: Path, manifest: Mapping[str, Any]) -> None:
    """Check every file ``manifest`` has a CRC-32C for (``trainer.pt``, ``counters.json``,
    ``env_state.pkl``; the buffer's files are checked by its own load) before any is read.

    Raises:
        CheckpointError: a file is missing or its checksum differs.
    """
    gen = root / manifest["data_dir"]
    for name, crc in manifest.get("crc32c", {}).items():
        try:
            got = generations.file_crc32c(gen / name)
        except OSError as e:
            raise CheckpointError(f"{gen / name} is missing or unreadable: {e}") from e
        if got != crc:
            raise CheckpointError(
                f"{gen / name} fails its checksum: it was changed or damaged after the save"
            )


def _previous(root: Path) -> generations.Generation | None:
    """What removing the checkpoint that ``root/checkpoint.json`` names removes: the files its
    manifest lists. None for a damaged manifest."""
    try:
        manifest = _read_manifest(root)
    except CheckpointError:
        return None
    if manifest is None:
        return None
    files = generations.relative_paths(manifest.get("files"))
    return None if files is None else generations.Generation(manifest["data_dir"], files)


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
        SaveFileError: ``path/checkpoint.json`` exists and is not an rlcore checkpoint manifest
            (a user's own file is never overwritten; nothing is written).
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

    files = [TRAINER_FILE, COUNTERS_FILE] + ([ENV_STATE_FILE] if env_blob is not None else [])
    trees = [BUFFER_DIR] if buffer is not None else []
    root = Path(path)
    with generations.writing(
        root, _KIND, manifest=MANIFEST, manifest_format=FORMAT, previous=_previous, files=files, trees=trees
    ) as draft:
        gen = draft.path
        torch.save(plain, gen / TRAINER_FILE)
        (gen / COUNTERS_FILE).write_text(json.dumps(dict(counters), indent=1), encoding="utf-8")
        if env_blob is not None:
            (gen / ENV_STATE_FILE).write_bytes(env_blob)
        if buffer is not None:
            buffer.save(gen / BUFFER_DIR)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "trainer": trainer,
            "data_dir": draft.name,
            "buffer": buffer is not None,
            "env_state": env_blob is not None,
            "torch": torch.__version__,
            "info": dict(info or {}),
            "files": list(draft.sync()),
            # the buffer's files carry their own checksums in buffer/manifest.json
            "crc32c": {f: generations.file_crc32c(gen / f) for f in files},
        }
        manifest = json.loads(json.dumps(manifest, default=str))  # what the file will hold
        manifest["checksum"] = generations.seal(manifest)
        draft.commit(json.dumps(manifest, indent=1))
    return root


def remove(path: str | os.PathLike[str]) -> list[str]:
    """Remove the checkpoint in directory ``path``: exactly what :func:`save` wrote there
    (``checkpoint.json``, its generation folders, the lock file), never a user's own files, in
    ``path`` or inside a generation folder; ``path`` itself goes if that empties it. Returns the
    names removed from ``path``."""
    return generations.remove_saves(
        path, _KIND, manifest=MANIFEST, manifest_format=FORMAT, previous=_previous
    )


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
        CheckpointError: a ``trainer.pt`` that holds anything but tensors and plain values,
            a checkpoint of another trainer, or a damaged or incomplete checkpoint.
    """
    root = Path(path)
    with generations.reading(root, MANIFEST):  # no save replaces what is read meanwhile
        return _read_checkpoint(root, trainer, trust_env_state)


def _read_checkpoint(root: Path, trainer: str | None, trust_env_state: bool) -> Checkpoint:
    """:func:`load` with the directory's lock held shared."""
    manifest = _read_manifest(root)
    if manifest is None:
        raise FileNotFoundError(f"no checkpoint in {root} (expected {MANIFEST})")
    if trainer is not None and manifest.get("trainer") != trainer:
        raise CheckpointError(
            f"{root} is a checkpoint of a {manifest.get('trainer')!r} trainer, not of a {trainer!r} one"
        )
    gen = root / manifest["data_dir"]
    if not gen.is_dir():
        raise CheckpointError(f"{root / MANIFEST} names {manifest['data_dir']}, which is missing")
    _check_files(root, manifest)
    try:
        raw = torch.load(gen / TRAINER_FILE, weights_only=True, map_location="cpu")
    except FileNotFoundError as e:
        raise CheckpointError(f"{gen / TRAINER_FILE} is missing") from e
    except Exception as e:  # noqa: BLE001 - whatever the restricted unpickler or zip reader raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{gen / TRAINER_FILE} is refused: torch.load(weights_only=True) cannot read it ({first}); it is "
            f"corrupt or holds objects other than tensors and plain values, which rlcore never loads"
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
    has_buffer = bool(manifest.get("buffer"))
    return Checkpoint(
        path=root,
        data_dir=gen,
        trainer=str(manifest["trainer"]),
        state=state,
        counters=counters,
        has_buffer=has_buffer,
        has_env_state=has_env_state,
        env_state=env_state,
        _pin=generations.pin(root, gen.name) if has_buffer else None,
    )


def check_env_snapshot(snapshot: Any, where: str | os.PathLike[str]) -> None:
    """Check that an unpickled ``env_state.pkl`` is what trainers save: ``(sub_envs,
    autoreset)``, a non-empty list of envs (objects with ``step`` and ``reset``) and their
    pending autoresets (or None).

    Raises:
        CheckpointError: it is anything else (``where`` names the checkpoint).
    """
    ok = (
        isinstance(snapshot, tuple)
        and len(snapshot) == 2
        and isinstance(snapshot[0], list | tuple)
        and len(snapshot[0]) > 0
        and all(
            callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None))
            for env in snapshot[0]
        )
    )
    if not ok:
        raise CheckpointError(
            f"{where}: {ENV_STATE_FILE} is not an env snapshot (a (sub_envs, autoreset) pair of envs), "
            f"got a {type(snapshot).__name__}"
        )


def _load_trusted_env_state(path: Path) -> Any:
    """Unpickle the env snapshot: the one opt-in place where a checkpoint file may run code.
    What it holds is checked by the env stepper that restores it (a CheckpointError there)."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - only with trust_env_state=True (documented opt-in)
    except FileNotFoundError as e:
        raise CheckpointError(f"{path} is missing") from e
    except Exception as e:  # noqa: BLE001 - a broken pickle may raise anything
        raise CheckpointError(f"{path} cannot be unpickled: {e!r}") from e
