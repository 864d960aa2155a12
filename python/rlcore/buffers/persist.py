"""The save directory of a replay buffer: how it is written, locked, checked and read.

A save is a directory ``d`` (docs/replay-buffer.md, "save and load")::

    d/manifest.json          written last, atomically: format, version, class name (for people;
                             never imported), config, column schema, the data folder, and for
                             every state part its file and CRC-32C, plus a CRC-32C of the
                             manifest's own content ("checksum")
    d/data-<16 hex>/         the data folder of one save generation:
        rlcore-data.json     written first: marks the folder as rlcore's and lists its files
        000.npy, 001.npy ...  one .npy file per state part (the manifest maps part names to
                             files), so file names never depend on column names: any ``str``
                             is a valid column name for save and load
    d/rlcore.lock            an empty file that saves lock exclusively and loads share
                             (``fcntl.flock``); created by the first save (or by a load of a
                             directory that holds a manifest and can be written) and kept

The directory is one of :mod:`rlcore.buffers.generations`, which owns the lock, the data folder
and its marker, the fsyncs, the atomic manifest and what a save removes. Guarantees:

- A save writes a fresh data folder, fsyncs every file and the folder, writes the manifest to a
  temporary file, fsyncs it, renames it over ``manifest.json`` and fsyncs the directory. Only
  then does it remove the previous generation: exactly the files that the replaced manifest
  lists (and the marker) in exactly the folder it names, and the folder if that leaves it
  empty. Nothing else in ``d`` is touched, whatever its name.
- A save that fails (any exception: a full disk, a write error, Ctrl-C) removes what it created
  and nothing else (a first save into a new directory leaves that directory and its lock file);
  the previous save stays loadable. If only the final fsync of ``d`` fails, the new save is
  in place but the previous generation is kept too.
- Concurrent saves into one directory, from threads or processes, take turns on the lock; the
  last to commit wins and the directory always holds one complete save. Loads hold the lock
  shared, so no save removes the folder a load is reading.
- A save killed between its data folder and its manifest (``kill -9``, power loss) leaves a
  data folder that no manifest names. The next save into ``d`` removes it only when it can
  prove the folder is rlcore's and abandoned: its name is ``data-`` and 16 hex digits, its
  marker file names it, and no save is running (the save holds the lock). It then removes only
  the files the marker lists and the folder if that empties it. A leftover temporary manifest
  (``manifest.json.tmp-*``, a few hundred bytes) is left alone.
- Reading checks before it allocates anything: the manifest's checksum, then every file's
  ``.npy`` header (dtype, shape, C order, file size) against the layout the caller derives from
  the config and schema, then every file's CRC-32C; a corrupt save costs milliseconds and no
  memory. Arrays are memory-mapped, not copied.

CRC-32C (computed in the Rust core, with the CPU's crc32 instruction where it has one)
detects accidental damage (truncation, bit flips, swapped or edited files, hand-edited
manifests); it is no defence against someone who recomputes it. Locks need ``fcntl`` (Linux,
macOS); elsewhere saves are not serialised.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import mmap
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from rlcore._core import _crc32c, _state_layout
from rlcore.buffers import generations
from rlcore.buffers.generations import Generation, plain_name, seal
from rlcore.errors import ApiUsageError, RlcoreError, SaveFileError

__all__ = ["FORMAT", "MANIFEST", "VERSION", "Save", "open_save", "seal", "write"]

FORMAT = "rlcore-buffer"
VERSION = 2
MANIFEST = "manifest.json"
_DATA_DIR = re.compile(r"data-[0-9a-f]{16}")
_DATA_FILE = re.compile(r"[0-9]{3,}\.npy")
_CRC = re.compile(r"[0-9a-f]{8}")
_KIND = generations.Kind(
    prefix="data-",
    folders=_DATA_DIR,
    marker="rlcore-buffer-data",
    entries=_DATA_FILE,
)

#: (part name, numpy dtype name, shape) of every state part, in order.
Layout = Sequence[tuple[str, str, tuple[int, ...]]]


# -- checksums ---------------------------------------------------------------------------------


def _checksum(data: Any, value: int = 0) -> int:
    """The CRC-32C of the bytes of ``data`` (bytes, an mmap or a C-contiguous array) following
    bytes whose CRC-32C is ``value``."""
    if not isinstance(data, np.ndarray):
        data = np.frombuffer(data, np.uint8)
    return _crc32c(data, value)


# -- writing -----------------------------------------------------------------------------------


def _npy_header(arr: np.ndarray) -> bytes:
    """The .npy header (format 1.0, what ``np.save`` writes) of the C-contiguous ``arr``."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(arr))
    return head.getvalue()


def _write_npy(path: Path, header: bytes, arr: np.ndarray) -> None:
    """Write a new .npy file: ``header``, then the bytes of the C-contiguous ``arr``."""
    with open(path, "xb") as f:
        f.write(header)
        f.write(arr.data)


def _file_checksum(header: bytes, arr: np.ndarray) -> int:
    """The checksum of the .npy file ``header + arr``."""
    return _checksum(arr, _checksum(header))


def write(
    path: str | os.PathLike[str],
    *,
    config: Mapping[str, Any],
    schema: Mapping[str, Any],
    length: int,
    class_name: str,
    parts: Sequence[tuple[str, np.ndarray]],
) -> None:
    """Save ``parts`` (name, array) with their ``config`` and ``schema`` as the new generation
    of the save directory ``path`` (created if needed); see the module docstring for what is
    guaranteed.

    Raises:
        OSError: the directory cannot be written (e.g. a full disk); nothing this save created
            is left behind and the previous save stays as it was.
    """
    files = [f"{k:03d}.npy" for k in range(len(parts))]
    with generations.writing(
        path, _KIND, manifest=MANIFEST, manifest_format=FORMAT, previous=_generation_of, files=files
    ) as draft:
        # the checksums are computed on another thread while the files are written and
        # flushed (the fsyncs wait for the disk), so they add little to the save's time
        with ThreadPoolExecutor(max_workers=1) as pool:
            crcs = []
            for fname, (_, arr) in zip(files, parts, strict=True):
                arr = np.ascontiguousarray(arr)
                header = _npy_header(arr)
                _write_npy(draft.path / fname, header, arr)
                crcs.append(pool.submit(_file_checksum, header, arr))
            # flushed after all files are written (the kernel writes them back together)
            draft.sync()
            entries = {
                part: {"file": fname, "crc32c": f"{crc.result():08x}"}
                for fname, (part, _), crc in zip(files, parts, crcs, strict=True)
            }
        body = {
            "format": FORMAT,
            "version": VERSION,
            "class": class_name,
            "config": dict(config),
            "schema": dict(schema),
            "len": int(length),
            "data_dir": draft.name,
            "files": entries,
        }
        body["checksum"] = seal(body)
        draft.commit(json.dumps(body, indent=1, ensure_ascii=True, allow_nan=False) + "\n")


def _generation_of(root: Path) -> Generation | None:
    """The data folder and files of the save that ``root/manifest.json`` describes, if it is an
    intact rlcore manifest (anything else names nothing this save may remove)."""
    try:
        m = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            return None
        data_dir, files = m["data_dir"], m["files"]
        if m.get("version") != VERSION or m.get("checksum") != seal(m) or not _DATA_DIR.fullmatch(data_dir):
            return None
        names = [e["file"] for e in files.values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not all(plain_name(n) for n in names):
        return None
    return Generation(data_dir, tuple(names))


# -- reading -----------------------------------------------------------------------------------


class Save:
    """A save directory whose manifest has been read and checked (under the shared lock of
    :func:`open_save`). ``config`` and ``schema`` are the manifest's; :meth:`arrays` reads the
    state parts."""

    def __init__(
        self, root: Path, manifest: Mapping[str, Any], files: dict[str, tuple[str, int]]
    ) -> None:
        self.root = root
        self.config: dict[str, Any] = manifest["config"]
        self.schema: dict[str, Any] = manifest["schema"]
        self.class_name = manifest.get("class")
        self._data_dir: str = manifest["data_dir"]
        # part name -> (file name, CRC-32C)
        self._files = files

    def arrays(self, layout: Layout) -> dict[str, np.ndarray]:
        """The state parts named by ``layout``, as read-only memory-mapped arrays.

        First every part's ``.npy`` header (dtype, shape, C order) and file size is checked
        against ``layout`` (a few hundred bytes read per file), then every file is mapped (not
        copied) and its CRC-32C checked against the manifest. Nothing of the data's size is
        allocated.

        Raises:
            SaveFileError: a part missing from the manifest or not in ``layout``, a file that
                is missing, is not a .npy file, does not hold the dtype and shape ``layout``
                needs, has the wrong size, or whose checksum differs (the message names it).
        """
        manifest = self.root / MANIFEST
        names = [name for name, _, _ in layout]
        missing = [n for n in names if n not in self._files]
        if missing:
            raise SaveFileError(
                f"{manifest} lists no file for state part {missing[0]!r}, which a buffer of its "
                "config and schema has"
            )
        extra = sorted(set(self._files) - set(names))
        if extra:
            raise SaveFileError(
                f"{manifest} lists state part {extra[0]!r}, which a buffer of its config and "
                "schema does not have"
            )
        folder = self.root / self._data_dir
        placed = []
        for name, dtype_name, shape in layout:
            fname, crc = self._files[name]
            where = f"{self.root}: {self._data_dir}/{fname} (state part {name!r})"
            offset, size = _check_header(folder / fname, where, np.dtype(dtype_name), tuple(shape))
            placed.append(
                (name, folder / fname, where, crc, np.dtype(dtype_name), tuple(shape), offset, size)
            )
        views = [_map(path, where, size) for _, path, where, _, _, _, _, size in placed]
        # checksums of several files at once (the core releases the GIL), the largest first
        order = sorted(range(len(views)), key=lambda k: -len(views[k]))
        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            sums = dict(zip(order, pool.map(lambda k: _checksum(views[k]), order), strict=True))
        out = {}
        for k, (name, _, where, crc, dtype, shape, offset, _) in enumerate(placed):
            if sums[k] != crc:
                raise SaveFileError(f"{where} fails its checksum: it was changed or damaged after the save")
            out[name] = np.frombuffer(views[k], dtype, count=math.prod(shape), offset=offset).reshape(shape)
        return out

    def state(self, arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """``{"config", "schema", "arrays"}``: the form of ``ReplayBuffer.state_dict``."""
        return {"config": self.config, "schema": self.schema, "arrays": dict(arrays)}


def _check_header(path: Path, where: str, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[int, int]:
    """(data offset, file size) of the .npy file at ``path`` after checking that it holds a C-order
    array of exactly ``dtype`` and ``shape`` and has exactly the bytes that needs."""
    try:
        f = open(path, "rb")
    except FileNotFoundError as e:
        raise SaveFileError(f"{where} is missing") from e
    except OSError as e:
        raise SaveFileError(f"{where} cannot be read: {e}") from e
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                got_shape, fortran, got_dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                got_shape, fortran, got_dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format version {version} is not one rlcore writes")
            offset = f.tell()
        except Exception as e:  # noqa: BLE001 - any failure to parse a damaged header is one error
            # NumPy's header parser raises whatever its tokenizer and literal_eval meet in a
            # damaged header (ValueError, SyntaxError, tokenize.TokenError, TypeError, ...)
            raise SaveFileError(f"{where} is not a valid .npy file ({type(e).__name__}: {e})") from e
    if got_dtype != dtype or tuple(got_shape) != shape or fortran:
        order = " in Fortran order" if fortran else ""
        raise SaveFileError(
            f"{where} holds {got_dtype} {tuple(got_shape)}{order}, but the manifest's config and "
            f"schema need {dtype} {shape} in C order"
        )
    need = offset + math.prod(shape) * dtype.itemsize
    if size != need:
        raise SaveFileError(f"{where} has {size} bytes, a {dtype} {shape} array needs {need}")
    return offset, size


def _map(path: Path, where: str, size: int) -> mmap.mmap:
    """The file at ``path`` mapped read-only (it was checked to have ``size`` bytes)."""
    try:
        with open(path, "rb") as f:
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        raise SaveFileError(f"{where} cannot be read: {e}") from e
    if len(view) != size:
        raise SaveFileError(f"{where} changed size while being read")
    return view


@contextlib.contextmanager
def open_save(path: str | os.PathLike[str]) -> Iterator[Save]:
    """Open the save directory ``path`` for reading: holds its lock shared (no save can remove
    what is being read) and yields its checked manifest as a :class:`Save`.

    Raises:
        SaveFileError: no directory or no manifest, a manifest that is not an rlcore manifest,
            has another format version, fails its checksum, lacks a field, or names a folder or
            file outside the directory.
    """
    root = Path(path)
    with generations.reading(root, MANIFEST):
        yield Save(root, *_read_manifest(root))


def _read_manifest(root: Path) -> tuple[dict[str, Any], dict[str, tuple[str, int]]]:
    """The checked manifest of ``root`` and its files: part name -> (file name, CRC-32C)."""
    mpath = root / MANIFEST
    try:
        m = generations.read_manifest(
            mpath, manifest_format=FORMAT, version=VERSION, error=SaveFileError, what="buffer"
        )
    except FileNotFoundError as e:
        raise SaveFileError(
            f"{root}: no {MANIFEST} (not a saved rlcore buffer, or the save never finished)"
        ) from e
    generations.check_seal(m, mpath, SaveFileError)
    for key in ("config", "schema", "data_dir", "files"):
        if key not in m:
            raise SaveFileError(f"{mpath} lacks '{key}'")
    if not isinstance(m["config"], dict) or not isinstance(m["schema"], dict):
        raise SaveFileError(f"{mpath}: 'config' and 'schema' must be objects")
    files = m["files"]
    if not isinstance(files, dict):
        raise SaveFileError(f"{mpath}: 'files' must map state parts to files")
    parsed: dict[str, tuple[Any, int]] = {}  # file names are checked below
    for part, entry in files.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("crc32c"), str) and _CRC.fullmatch(entry["crc32c"])):
            raise SaveFileError(f"{mpath}: the entry of state part {part!r} lacks its crc32c")
        parsed[part] = (entry.get("file"), int(entry["crc32c"], 16))
    for name in (m["data_dir"], *(f for f, _ in parsed.values())):
        # plain names only: a manifest must not point outside its own directory
        if not plain_name(name):
            raise SaveFileError(f"{mpath} names a file or directory that is not a plain name: {name!r}")
    if not (_DATA_DIR.fullmatch(m["data_dir"]) and all(_DATA_FILE.fullmatch(f) for f, _ in parsed.values())):
        raise SaveFileError(f"{mpath} names a data folder or file that rlcore does not write")
    if len({f for f, _ in parsed.values()}) != len(parsed):
        raise SaveFileError(f"{mpath} names one file for two state parts")
    return m, parsed


def saved_layout(save: Save) -> list[tuple[str, str, tuple[int, ...]]]:
    """The state parts (name, dtype, shape) that a buffer of the save's config and columns has,
    from the core, without building it.

    Raises:
        SaveFileError: a config or schema that no buffer has (capacity or num_envs not a
            positive integer, fewer than 2 rows per env, malformed columns, unknown dtype).
    """
    config, schema = save.config, save.schema

    def specs(x: Any) -> list[tuple[str, str, tuple[int, ...]]]:
        if not isinstance(x, list):
            raise TypeError(f"columns must be a list, got {type(x).__name__}")
        out = []
        for s in x:
            name, dtype, shape = s
            if not (isinstance(name, str) and isinstance(dtype, str) and isinstance(shape, list)):
                raise TypeError(f"column {s!r} is not [name, dtype, shape]")
            if not all(type(d) is int and d >= 0 for d in shape):
                raise ValueError(f"column {name!r} has shape {shape!r}")
            out.append((name, dtype, tuple(shape)))
        return out

    try:
        capacity, num_envs, kind = config["capacity"], config["num_envs"], config["kind"]
        if type(capacity) is not int or type(num_envs) is not int or capacity < 1 or num_envs < 1:
            raise ValueError(f"capacity={capacity!r} and num_envs={num_envs!r} must be integers >= 1")
        per = kind == "prioritized" or (kind == "her" and config.get("prioritized") is True)
        frame_stack = config.get("frame_stack")
        if frame_stack is not None and (type(frame_stack) is not int or frame_stack < 1):
            raise ValueError(f"frame_stack={frame_stack!r} must be an integer >= 1")
        layout = _state_layout(
            capacity, num_envs, specs(schema["obs"]), specs(schema["step"]), per, frame_stack
        )
    except (KeyError, TypeError, ValueError, OverflowError, RlcoreError) as e:
        raise SaveFileError(
            f"{save.root}/manifest.json: its config and schema describe no buffer: {e}"
        ) from e
    return [(name, dtype, tuple(shape)) for name, dtype, shape in layout]


@contextlib.contextmanager
def as_save_error(save: Save) -> Iterator[None]:
    """Report a manifest whose config or state a buffer refuses as a SaveFileError."""
    try:
        yield
    except (SaveFileError, ApiUsageError):
        raise
    except (KeyError, TypeError, AttributeError, ValueError, RlcoreError) as e:
        raise SaveFileError(
            f"{save.root}/manifest.json is malformed or does not match its data: {e!r}"
        ) from e
