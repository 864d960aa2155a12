"""The save directory of a replay buffer: how it is written, locked, checked and read.

A save is a directory ``d`` (DESIGN.md "Durability")::

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
                             (``fcntl.flock``); created by the first save (or a load that can
                             write ``d``) and kept

Guarantees:

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
  memory. Arrays are memory-mapped, not copied. Saves of format version 1 (no checksums) are
  still read, with every header checked.

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
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlcore._core import _crc32c
from rlcore.errors import SaveFileError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock
    fcntl = None  # type: ignore[assignment]

__all__ = ["FORMAT", "MANIFEST", "VERSION", "Save", "open_save", "seal", "write"]

FORMAT = "rlcore-buffer"
VERSION = 2
MANIFEST = "manifest.json"
LOCK = "rlcore.lock"
MARKER = "rlcore-data.json"
_MARKER_FORMAT = "rlcore-buffer-data"
_DATA_DIR = re.compile(r"data-[0-9a-f]{16}")
_DATA_DIR_V1 = re.compile(r"data-[0-9a-f]{12}")
_DATA_FILE = re.compile(r"[0-9]{3,}\.npy")
_CRC = re.compile(r"[0-9a-f]{8}")

#: (part name, numpy dtype name, shape) of every state part, in order.
Layout = Sequence[tuple[str, str, tuple[int, ...]]]


# -- checksums ---------------------------------------------------------------------------------


def _checksum(data: Any, value: int = 0) -> int:
    """The CRC-32C of the bytes of ``data`` (bytes, an mmap or a C-contiguous array) following
    bytes whose CRC-32C is ``value``."""
    if not isinstance(data, np.ndarray):
        data = np.frombuffer(data, np.uint8)
    return _crc32c(data, value)


def seal(body: Mapping[str, Any]) -> str:
    """The checksum of a manifest's content (every field but ``"checksum"``): ``"crc32c:"`` and
    8 hex digits of the CRC-32C of its canonical JSON (sorted keys, no spaces, ASCII)."""
    canon = json.dumps(
        {k: v for k, v in body.items() if k != "checksum"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )
    return f"crc32c:{_checksum(canon.encode('ascii')):08x}"


# -- locking -----------------------------------------------------------------------------------


def _open_lock(root: Path, exclusive: bool) -> int | None:
    """A descriptor of ``root/rlcore.lock`` holding the lock (None: no lock possible, for a
    reader of a directory it cannot write and that has no lock file)."""
    path = root / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            if exclusive:
                raise
            try:  # a read-only directory: share an existing lock file, or go without
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            # the lock file may have been replaced while we waited: then lock the new one
            mine, now = os.fstat(fd), os.stat(path)
            if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextlib.contextmanager
def _locked(root: Path, exclusive: bool) -> Iterator[None]:
    """Hold ``root``'s save lock (exclusive for a save, shared for a load). Each call opens its
    own descriptor, so the lock works between threads as between processes."""
    fd = None if fcntl is None else _open_lock(root, exclusive)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the flock


# -- writing -----------------------------------------------------------------------------------


def _fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, exclusive=True):
        previous = _generation_of(root)
        _remove_abandoned(root, keep=previous)
        name = f"data-{secrets.token_hex(8)}"
        data = root / name
        files = [f"{k:03d}.npy" for k in range(len(parts))]
        made: list[Path] = []  # what this save created, in order; removed again if it fails
        committed = False
        try:
            data.mkdir()
            made.append(data)
            made.append(data / MARKER)
            (data / MARKER).write_text(
                json.dumps({"format": _MARKER_FORMAT, "data_dir": name, "files": files}) + "\n"
            )
            # the checksums are computed on another thread while the files are written and
            # flushed (the fsyncs wait for the disk), so they add little to the save's time
            with ThreadPoolExecutor(max_workers=1) as pool:
                crcs = []
                for fname, (_, arr) in zip(files, parts, strict=True):
                    arr = np.ascontiguousarray(arr)
                    header = _npy_header(arr)
                    made.append(data / fname)
                    _write_npy(data / fname, header, arr)
                    crcs.append(pool.submit(_file_checksum, header, arr))
                # flushed after all files are written (the kernel writes them back together)
                for p in made[1:]:
                    _fsync_path(p)
                _fsync_path(data)
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
                "data_dir": name,
                "files": entries,
            }
            body["checksum"] = seal(body)
            tmp = root / f"{MANIFEST}.tmp-{secrets.token_hex(8)}"
            made.append(tmp)
            with open(tmp, "x", encoding="ascii") as f:
                json.dump(body, f, indent=1, ensure_ascii=True, allow_nan=False)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, root / MANIFEST)
            committed = True
            _fsync_path(root)
        except BaseException:
            if not committed:
                _remove_made(made)
            raise
        # the new manifest is durable: the generation it replaced can go
        if previous is not None and previous.data_dir != name:
            _remove_generation(root, previous)


def _remove_made(made: list[Path]) -> None:
    """Undo a failed save: remove exactly the files and the folder it created."""
    for p in reversed(made):
        with contextlib.suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            else:
                p.unlink()


class _Generation(NamedTuple):
    data_dir: str
    files: tuple[str, ...]


def _plain(name: object) -> bool:
    """A file or folder name that stays inside its directory."""
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def _generation_of(root: Path) -> _Generation | None:
    """The data folder and files of the save that ``root/manifest.json`` describes, if it is an
    intact rlcore manifest (anything else names nothing this save may remove)."""
    try:
        m = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            return None
        data_dir, files = m["data_dir"], m["files"]
        if m.get("version") == VERSION:
            if m.get("checksum") != seal(m) or not _DATA_DIR.fullmatch(data_dir):
                return None
            names = [e["file"] for e in files.values()]
        elif m.get("version") == 1:
            if not _DATA_DIR_V1.fullmatch(data_dir):
                return None
            names = list(files.values())
        else:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not all(_plain(n) for n in names):
        return None
    return _Generation(data_dir, tuple(names))


def _remove_generation(root: Path, gen: _Generation) -> None:
    """Remove the files of ``gen`` (and its marker) from its folder, then the folder if that
    emptied it. Anything else in the folder stays, and so does the folder then."""
    folder = root / gen.data_dir
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return
    except OSError:
        return
    for name in (*gen.files, MARKER):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(folder / name).st_mode):
                os.unlink(folder / name)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _remove_abandoned(root: Path, keep: _Generation | None) -> None:
    """Remove data folders of killed saves (called with the exclusive lock held, so no save is
    writing one): a folder is removed only if its name is ours, its marker names it, and the
    current manifest does not."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if not _DATA_DIR.fullmatch(entry.name) or (keep is not None and entry.name == keep.data_dir):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            marker = json.loads((root / entry.name / MARKER).read_text(encoding="utf-8"))
            ours = (
                isinstance(marker, dict)
                and marker.get("format") == _MARKER_FORMAT
                and marker.get("data_dir") == entry.name
                and isinstance(marker.get("files"), list)
                and all(isinstance(f, str) and _DATA_FILE.fullmatch(f) for f in marker["files"])
            )
        except (OSError, ValueError):
            continue
        if ours:
            _remove_generation(root, _Generation(entry.name, tuple(marker["files"])))


# -- reading -----------------------------------------------------------------------------------


class Save:
    """A save directory whose manifest has been read and checked (under the shared lock of
    :func:`open_save`). ``config`` and ``schema`` are the manifest's; :meth:`arrays` reads the
    state parts."""

    def __init__(
        self, root: Path, manifest: Mapping[str, Any], files: dict[str, tuple[str, int | None]]
    ) -> None:
        self.root = root
        self.config: dict[str, Any] = manifest["config"]
        self.schema: dict[str, Any] = manifest["schema"]
        self.class_name = manifest.get("class")
        self._data_dir: str = manifest["data_dir"]
        # part name -> (file name, CRC-32C or None for version 1)
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
            if crc is not None and sums[k] != crc:
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
        except (ValueError, OSError, EOFError, SyntaxError, TypeError) as e:
            raise SaveFileError(f"{where} is not a valid .npy file ({e})") from e
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
    with _locked(root, exclusive=False):
        yield Save(root, *_read_manifest(root))


def _read_manifest(root: Path) -> tuple[dict[str, Any], dict[str, tuple[str, int | None]]]:
    """The checked manifest of ``root`` and its files: part name -> (file name, CRC-32C or None)."""
    mpath = root / MANIFEST
    try:
        text = mpath.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise SaveFileError(
            f"{root}: no {MANIFEST} (not a saved rlcore buffer, or the save never finished)"
        ) from e
    except (OSError, UnicodeDecodeError) as e:
        raise SaveFileError(f"{root} is not a readable saved rlcore buffer directory: {e}") from e
    try:
        m = json.loads(text)
    except json.JSONDecodeError as e:
        raise SaveFileError(f"{mpath} is corrupt: {e}") from e
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise SaveFileError(f"{mpath} is not an rlcore buffer manifest")
    version = m.get("version")
    if version not in (1, VERSION):
        raise SaveFileError(f"{mpath} has format version {version!r}; this rlcore reads 1 and {VERSION}")
    if version == VERSION:
        try:
            ok = m.get("checksum") == seal(m)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise SaveFileError(
                f"{mpath} fails its checksum: the manifest was edited or damaged after the save"
            )
    for key in ("config", "schema", "data_dir", "files"):
        if key not in m:
            raise SaveFileError(f"{mpath} lacks '{key}'")
    if not isinstance(m["config"], dict) or not isinstance(m["schema"], dict):
        raise SaveFileError(f"{mpath}: 'config' and 'schema' must be objects")
    files = m["files"]
    if not isinstance(files, dict):
        raise SaveFileError(f"{mpath}: 'files' must map state parts to files")
    parsed: dict[str, tuple[Any, int | None]] = {}  # file names are checked below
    for part, entry in files.items():
        if version == VERSION:
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("crc32c"), str)
                and _CRC.fullmatch(entry["crc32c"])
            ):
                raise SaveFileError(f"{mpath}: the entry of state part {part!r} lacks its crc32c")
            parsed[part] = (entry.get("file"), int(entry["crc32c"], 16))
        else:
            parsed[part] = (entry, None)
    for name in (m["data_dir"], *(f for f, _ in parsed.values())):
        # plain names only: a manifest must not point outside its own directory
        if not _plain(name):
            raise SaveFileError(f"{mpath} names a file or directory that is not a plain name: {name!r}")
    if version == VERSION and not (
        _DATA_DIR.fullmatch(m["data_dir"]) and all(_DATA_FILE.fullmatch(f) for f, _ in parsed.values())
    ):
        raise SaveFileError(f"{mpath} names a data folder or file that rlcore does not write")
    if len({f for f, _ in parsed.values()}) != len(parsed):
        raise SaveFileError(f"{mpath} names one file for two state parts")
    return m, parsed
