"""A directory whose data lives in generation folders named by a manifest written last: the one
mechanism under buffer saves (:mod:`rlcore.buffers.persist`), trainer checkpoints
(:mod:`rlcore.trainers.checkpoint`) and sharded buffer saves (:mod:`rlcore.distributed.shard_files`);
docs/replay-buffer.md, "save and load".

A save directory ``d`` of one :class:`Kind` holds::

    d/<manifest>             the save's own manifest (format, fields and file checks are the
                             caller's); names the current generation folder in ``"data_dir"``
    d/<prefix><16 hex>/      a generation folder: what one save wrote
        rlcore-data.json     the marker, written first: the kind's marker format, the folder's own
                             name, and the files and folders ("trees") the save declares it writes
                             at the top of the folder
    d/rlcore.lock            the lock file (``fcntl.flock``): exclusive for a save, shared for a
                             read; created by the first save (or by a read of a directory that
                             holds the manifest and can be written), never removed

What :func:`writing` guarantees:

- Saves into one directory, from threads or processes, take turns on the lock: the last to
  commit wins and the directory always holds one complete save. A lock file replaced while a
  save waited on it is locked again.
- A save writes a fresh generation folder (its marker first), fsyncs every file and folder in it,
  writes the manifest to a temporary file, fsyncs it, renames it over the manifest and fsyncs
  ``d``. Only then does it remove the previous generation (if its folder has the kind's name), and
  only what the caller says the replaced manifest lists: those files (never through a link), the marker, and then the folders
  that this leaves empty. Anything else, in ``d`` or in the folder, stays.
- A save that fails (any exception: a full disk, Ctrl-C) removes what it created and nothing else;
  the previous save stays as it was. If only the final fsync of ``d`` fails, the new save is in
  place and the previous generation is kept too.
- A save killed before its manifest (``kill -9``, power loss) leaves a generation folder that no
  manifest names. A later save removes it only when that is provably safe: the folder's name is
  the kind's, its marker has the kind's format and names the folder, the current manifest does not
  name it, and the save holds the lock (so no other save is writing it). It then removes the
  entries the marker declares (a declared tree as a whole) and the folder if that empties it. A
  leftover temporary manifest (``<manifest>.tmp-*``) is left alone.
- A reader that must go on reading a generation after it released the lock (a checkpoint's buffer
  restored after the checkpoint was loaded) pins it with :func:`pin`: while the pin is held, a save
  skips removing that folder, and a later save removes it as a killed save's leftover.

Locks need ``fcntl`` (Linux, macOS); elsewhere saves are not serialised and nothing is pinned.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import secrets
import shutil
import stat
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlcore._core import _crc32c
from rlcore.errors import SaveFileError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK",
    "MARKER",
    "Draft",
    "Generation",
    "Kind",
    "Pin",
    "pin",
    "plain_name",
    "reading",
    "relative_paths",
    "remove_saves",
    "seal",
    "file_crc32c",
    "writing",
]

LOCK = "rlcore.lock"
MARKER = "rlcore-data.json"


class Kind(NamedTuple):
    """The generation folders of one kind of save directory."""

    prefix: str
    """Start of a new folder's name (``"data-"``); 16 hex digits follow."""
    folders: re.Pattern[str]
    """Names of this kind's folders (of new and older saves): nothing else is ever removed."""
    marker: str
    """``"format"`` of the kind's marker files."""
    entries: re.Pattern[str]
    """Names a marker may declare at the top of a folder."""


class Generation(NamedTuple):
    """What removing one generation removes from ``root/folder``."""

    folder: str
    files: tuple[str, ...] = ()
    """Files, as paths relative to the folder (``"buffer/manifest.json"``)."""
    trees: tuple[str, ...] = ()
    """Top-level folders removed with all they hold (a killed save's, whose files are unknown)."""


def plain_name(name: object) -> bool:
    """A file or folder name that stays inside its directory."""
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def relative_paths(value: object) -> tuple[str, ...] | None:
    """``value`` as a tuple of relative paths made of plain names, or None if it is not a list
    of such paths."""
    if not isinstance(value, list) or not all(
        isinstance(p, str) and all(plain_name(part) for part in p.split("/")) for p in value
    ):
        return None
    return tuple(value)


# -- checksums ---------------------------------------------------------------------------------


def seal(body: Mapping[str, Any]) -> str:
    """The checksum of a manifest's content (every field but ``"checksum"``): ``"crc32c:"`` and
    8 hex digits of the CRC-32C of its canonical JSON (sorted keys, no spaces, ASCII).

    Raises:
        TypeError: ``body`` holds something JSON cannot encode.
    """
    canon = json.dumps(
        {k: v for k, v in body.items() if k != "checksum"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return f"crc32c:{_crc32c(np.frombuffer(canon.encode('ascii'), np.uint8), 0):08x}"


def read_manifest(
    mpath: Path, *, manifest_format: str, version: int, error: type[Exception], what: str
) -> dict[str, Any]:
    """The manifest ``mpath`` after the checks every rlcore save makes of its manifest first (a
    buffer save's, a checkpoint's, a sharded buffer save's): UTF-8 JSON, an object of
    ``manifest_format`` (its ``format``) and of this rlcore's ``version``. ``what`` names the kind
    of save in the messages. Its checksum is :func:`check_seal`'s to check, its fields the
    caller's.

    Raises:
        FileNotFoundError: there is no ``mpath`` (what that means is the caller's to say).
        error: ``mpath`` cannot be read or fails a check (the message names it).
    """
    try:
        text = mpath.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{mpath} cannot be read: {e}") from e
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{mpath} is corrupt: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != manifest_format:
        raise error(f"{mpath} is not an rlcore {what} manifest")
    if manifest.get("version") != version:
        got = manifest.get("version")
        raise error(f"{mpath} has format version {got!r}; this rlcore reads version {version}")
    return manifest


def check_seal(manifest: Mapping[str, Any], mpath: Path, error: type[Exception]) -> None:
    """Check that the manifest read from ``mpath`` holds its own :func:`seal` as ``checksum``.

    Raises:
        error: it does not (the manifest was edited or damaged after the save).
    """
    try:
        ok = manifest.get("checksum") == seal(manifest)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise error(f"{mpath} fails its checksum: it was edited or damaged after the save")


def file_crc32c(path: Path) -> str:
    """The CRC-32C of the file at ``path`` as 8 hex digits (the file is mapped, not read into
    memory).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return f"{_crc32c(np.zeros(0, np.uint8), 0):08x}"
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            arr = np.frombuffer(view, np.uint8)
            try:
                return f"{_crc32c(arr, 0):08x}"
            finally:
                del arr  # the mapping closes only once no array views it


# -- locking -----------------------------------------------------------------------------------


def _open_lock(root: Path, exclusive: bool, create: bool) -> int | None:
    """A descriptor of ``root/rlcore.lock`` holding the lock (None: no lock possible, for a
    reader of a directory it cannot or should not write that has no lock file)."""
    path = root / LOCK
    while True:
        fd = None
        if create:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:
                if exclusive:
                    raise
        if fd is None:
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
def _locked(root: Path, exclusive: bool, create: bool = True) -> Iterator[None]:
    """Hold ``root``'s lock. Each call opens its own descriptor, so the lock works between
    threads as between processes."""
    fd = None if fcntl is None else _open_lock(root, exclusive, create)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the flock


@contextlib.contextmanager
def reading(root: str | os.PathLike[str], manifest: str) -> Iterator[None]:
    """Hold the lock of the save directory ``root`` shared while its ``manifest`` and the
    generation it names are read: no save removes that generation meanwhile. The lock file is
    created only where the manifest exists (reading elsewhere leaves no trace)."""
    root = Path(root)
    with _locked(root, exclusive=False, create=(root / manifest).is_file()):
        yield


class Pin:
    """A shared lock on one generation folder; released by :meth:`release` or when garbage
    collected."""

    def __init__(self, fd: int) -> None:
        self._release = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        self._release()


def pin(root: str | os.PathLike[str], folder: str) -> Pin | None:
    """Keep saves from removing the generation ``root/folder`` while the returned pin lives
    (call under :func:`reading`, so the folder is the current one). None where it cannot be
    pinned (no ``fcntl``, or the folder is gone)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(Path(root) / folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return Pin(fd)


def _pinned(folder: Path) -> bool:
    """A reader holds a :class:`Pin` on ``folder``."""
    if fcntl is None:
        return False
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# -- writing -----------------------------------------------------------------------------------


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Draft:
    """The generation a save is writing (see :func:`writing`): write into :attr:`path`, then
    :meth:`commit` the manifest."""

    name: str
    """The folder's name (for the manifest's ``"data_dir"``)."""
    path: Path
    """The folder: write the save's files and folders into it."""
    committed: bool
    """The manifest names this generation."""

    def __init__(
        self, root: Path, kind: Kind, manifest: str, files: Sequence[str], trees: Sequence[str]
    ) -> None:
        bad = [n for n in (*files, *trees) if not kind.entries.fullmatch(n)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an entry that a {kind.prefix}* folder may hold")
        self.name = f"{kind.prefix}{secrets.token_hex(8)}"
        self.path = root / self.name
        self.committed = False
        self._root, self._manifest = root, manifest
        self._declared = Generation(self.name, tuple(files), tuple(trees))
        self._inventory: tuple[str, ...] | None = None
        marker = {"format": kind.marker, "data_dir": self.name, "files": list(files)}
        if trees:
            marker["trees"] = list(trees)
        self.path.mkdir()
        try:
            with open(self.path / MARKER, "x", encoding="ascii") as f:
                f.write(json.dumps(marker) + "\n")
        except BaseException:
            self.discard()
            raise

    def sync(self) -> tuple[str, ...]:
        """fsync every file and folder in the generation (the folder last) and return every
        file's path relative to it, the marker left out, sorted: what removing this generation
        later must remove. Call it after the last write; :meth:`commit` calls it if not."""
        files = []
        for dirpath, _, filenames in os.walk(self.path, topdown=False):
            here = Path(dirpath)
            for name in filenames:
                if stat.S_ISREG(os.lstat(here / name).st_mode):
                    _fsync(here / name)
                    files.append((here / name).relative_to(self.path).as_posix())
            _fsync(here)  # children come before their parents, the folder itself last
        self._inventory = tuple(sorted(f for f in files if f != MARKER))
        return self._inventory

    def commit(self, text: str) -> None:
        """Make this generation the save: write ``text`` to a temporary file, fsync it, rename it
        over the manifest, fsync the directory.

        Raises:
            OSError: the manifest cannot be written (the previous one stays), or only the final
                fsync failed (:attr:`committed` is then True: the new save is in place).
        """
        if self._inventory is None:
            self.sync()
        tmp = self._root / f"{self._manifest}.tmp-{secrets.token_hex(8)}"
        try:
            with open(tmp, "x", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._root / self._manifest)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        self.committed = True
        _fsync(self._root)

    def discard(self) -> None:
        """Remove what this save created (it failed before its manifest)."""
        _remove(self._root, self._declared)


@contextlib.contextmanager
def writing(
    root: str | os.PathLike[str],
    kind: Kind,
    *,
    manifest: str,
    manifest_format: str,
    previous: Callable[[Path], Generation | None],
    files: Sequence[str] = (),
    trees: Sequence[str] = (),
) -> Iterator[Draft]:
    """Save a new generation into the directory ``root`` (created if needed), with the
    guarantees of the module docstring.

    Under the exclusive lock: ``previous(root)`` reads the current manifest and says what its
    generation holds (None: nothing this save may remove); leftovers of killed saves are removed;
    then a fresh folder with a marker declaring ``files`` and ``trees`` (names matching
    ``kind.entries``) is yielded as a :class:`Draft`. The caller writes into ``draft.path`` and
    calls ``draft.commit(manifest_text)``; after the block the previous generation is removed.
    Leaving the block by an exception, or without committing, removes what the save created.

    A file already at ``root/manifest`` is replaced only if it is a manifest of this kind (a
    JSON object whose ``"format"`` is ``manifest_format``): a user's own file of that name is
    never overwritten.

    Raises:
        OSError: the directory cannot be written.
        SaveFileError: ``root/manifest`` exists and is not a manifest of this kind (nothing is
            written).
        ValueError: ``files`` or ``trees`` not of ``kind.entries``; a block that did not commit.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, exclusive=True):
        _refuse_foreign(root / manifest, manifest_format)
        prev = previous(root)
        if prev is not None and not kind.folders.fullmatch(prev.folder):
            prev = None  # a manifest naming a folder rlcore never writes: nothing to remove
        _remove_abandoned(root, kind, keep=None if prev is None else prev.folder)
        draft = Draft(root, kind, manifest, files, trees)
        try:
            yield draft
            if not draft.committed:
                raise ValueError("a save left generations.writing without draft.commit(...)")
        except BaseException:
            if not draft.committed:
                draft.discard()
            raise
        # the new manifest is durable: the generation it replaced can go
        if prev is not None and prev.folder != draft.name:
            _remove(root, prev)


def remove_saves(
    root: str | os.PathLike[str],
    kind: Kind,
    *,
    manifest: str,
    manifest_format: str,
    previous: Callable[[Path], Generation | None],
) -> list[str]:
    """Remove from the directory ``root`` what saves of ``kind`` wrote there, and nothing else:
    the generation the manifest names (what ``previous(root)`` lists), killed saves' folders
    whose marker proves them the kind's, the manifest if it is one of ``manifest_format``, and
    the lock file; then ``root`` itself if that leaves it empty. A user's own files (in ``root``
    or inside a generation folder) stay. Returns the names removed from ``root``.
    """
    root = Path(root)
    if not _is_dir(root):
        return []
    with _locked(root, exclusive=True):
        folders = [e.name for e in os.scandir(root) if kind.folders.fullmatch(e.name)]
        prev = previous(root)
        if prev is not None and kind.folders.fullmatch(prev.folder):
            _remove(root, prev)
        _remove_abandoned(root, kind, keep=None)
        removed = [name for name in folders if not os.path.lexists(root / name)]
        try:
            _refuse_foreign(root / manifest, manifest_format)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / manifest)
                removed.append(manifest)
        except SaveFileError:
            pass  # not ours: it stays
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(root / LOCK).st_mode):
            os.unlink(root / LOCK)
            removed.append(LOCK)
    with contextlib.suppress(OSError):
        root.rmdir()
    return removed


def _refuse_foreign(path: Path, manifest_format: str) -> None:
    """Raise SaveFileError if ``path`` exists and is not a manifest of ``manifest_format``."""
    if not os.path.lexists(path):
        return
    try:
        ours = json.loads(path.read_bytes()).get("format") == manifest_format
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, not an object
        ours = False
    if not ours:
        raise SaveFileError(
            f"{path} exists and is not an rlcore manifest ({manifest_format}): rlcore never "
            "overwrites a file it did not write; move that file or save to another directory"
        )


# -- removing ----------------------------------------------------------------------------------


def _is_dir(path: Path) -> bool:
    """``path`` is a folder (not a link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove(root: Path, gen: Generation) -> None:
    """Remove what ``gen`` lists from ``root/gen.folder``: its files (regular files only, never
    through a link), its trees, the folders this empties, its marker last, then the folder if it
    is empty. Nothing while a reader pins the folder."""
    folder = root / gen.folder
    if not _is_dir(folder) or _pinned(folder):
        return
    parents = set()
    for rel in gen.files:
        *dirs, name = rel.split("/")
        here = folder
        for d in dirs:
            here = here / d
            parents.add(here)
            if not _is_dir(here):
                break
        else:
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(here / name).st_mode):
                    os.unlink(here / name)
    for tree in gen.trees:
        if _is_dir(folder / tree):
            shutil.rmtree(folder / tree, ignore_errors=True)
    for here in sorted(parents, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            if _is_dir(here):
                here.rmdir()
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(folder / MARKER).st_mode):
            os.unlink(folder / MARKER)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _declared(root: Path, name: str, kind: Kind) -> Generation | None:
    """What the marker of ``root/name`` declares, if it proves the folder a generation of
    ``kind`` (the kind's marker format, its own name, entries of the kind)."""
    try:
        marker = json.loads((root / name / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != kind.marker or marker.get("data_dir") != name:
        return None
    files, trees = relative_paths(marker.get("files")), relative_paths(marker.get("trees", []))
    if files is None or trees is None or not all(kind.entries.fullmatch(n) for n in (*files, *trees)):
        return None
    return Generation(name, files, trees)


def _remove_abandoned(root: Path, kind: Kind, keep: str | None) -> None:
    """Remove the generation folders of killed saves (called with the exclusive lock held, so no
    save is writing one): a folder of the kind's name whose marker proves it one of the kind's,
    and which is not ``keep`` (the one the current manifest names)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if entry.name == keep or not kind.folders.fullmatch(entry.name):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        gen = _declared(root, entry.name, kind)
        if gen is not None:
            _remove(root, gen)
