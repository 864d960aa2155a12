"""A sharded buffer's save on disk: each shard's buffer save under one generation folder and the
``sharded.json`` manifest that names it; a directory of :mod:`rlcore.buffers.generations`::

    DIR/sharded.json                 format, version, shard and stream counts, the generation
                                     folder, its shard folders, every file the save wrote and
                                     a CRC-32C of its own content ("checksum", checked on read;
                                     each shard's files carry their own in its manifest.json);
                                     written last (temp file, fsync, rename)
    DIR/rlcore.lock                  the lock file: saves take turns on it, reads share it
    DIR/shards-<id>/rlcore-data.json the marker: the shard folders the save writes (written first)
    DIR/shards-<id>/shard-SSS/       shard S's buffer save (``ReplayBuffer.save`` format)"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlcore.buffers import generations
from rlcore.errors import SaveFileError

_KIND = generations.Kind(
    prefix="shards-",
    folders=re.compile(r"shards-[0-9a-f]{16}"),
    marker="rlcore-sharded-data",
    entries=re.compile(r"shard-[0-9]{3,}"),
)


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


def _write_tree(root: Path, files: Mapping[str, bytes]) -> None:
    """Write ``{relative posix path: bytes}`` under ``root`` (created; must not exist).

    Raises:
        SaveFileError: a path is absolute or leaves ``root`` (``..``, empty parts, backslashes).
    """
    bad = [rel for rel in files if generations.relative_paths([rel]) is None]
    if bad:
        raise SaveFileError(f"a buffer save names the file {bad[0]!r}, which is not a plain relative path")
    root.mkdir(parents=True)
    for rel, data in files.items():
        p = root.joinpath(*rel.split("/"))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


_SHARDED_FORMAT = "rlcore-sharded-buffer"
_SHARDED_VERSION = 1
_SHARDED_MANIFEST = "sharded.json"


def save_shard_dirs(path: str | Path, *, num_envs: int, writers: Sequence[Callable[[Path], None]]) -> None:
    """Write a sharded buffer's save: ``writers[s](dir)`` writes shard s as a buffer save into a
    fresh ``shards-<id>/shard-SSS`` folder of ``path``; then ``sharded.json`` (format, shard and
    stream counts, the folder, the files written) replaces the previous one atomically, and only
    the files the previous manifest lists are removed. Concurrent saves into ``path`` take turns,
    the last one wins; a failed or killed save leaves the previous one intact (:mod:`rlcore.buffers.generations`).

    Raises:
        OSError: ``path`` cannot be written (a previous save there stays intact).
    """
    names = [f"shard-{s:03d}" for s in range(len(writers))]
    with generations.writing(
        path,
        _KIND,
        manifest=_SHARDED_MANIFEST,
        manifest_format=_SHARDED_FORMAT,
        previous=_previous,
        trees=names,
    ) as draft:
        for name, write in zip(names, writers, strict=True):
            write(draft.path / name)
        manifest = {
            "format": _SHARDED_FORMAT,
            "version": _SHARDED_VERSION,
            "num_shards": len(writers),
            "num_envs": int(num_envs),
            "data_dir": draft.name,
            "shards": names,
            "files": list(draft.sync()),
        }
        manifest["checksum"] = generations.seal(manifest)  # each shard's files carry their own
        draft.commit(json.dumps(manifest, indent=1))


@contextlib.contextmanager
def open_shard_dirs(path: str | Path) -> Iterator[tuple[dict[str, Any], list[Path]]]:
    """Open the sharded save ``path`` for reading: holds its lock shared (no save removes what is
    being read) and yields its checked manifest and every shard's folder.

    Raises:
        SaveFileError: no manifest, or one that is not a sharded manifest of this version, has the
            wrong number of shards or names a folder that is not a plain name.
    """
    root = Path(path)
    with generations.reading(root, _SHARDED_MANIFEST):
        manifest = _read_shard_manifest(root)
        yield manifest, [root / manifest["data_dir"] / name for name in manifest["shards"]]


def _previous(root: Path) -> generations.Generation | None:
    """What removing the save that ``root/sharded.json`` names removes: the files its manifest
    lists. None for a damaged manifest."""
    try:
        manifest = _read_shard_manifest(root)
    except SaveFileError:
        return None
    files = generations.relative_paths(manifest.get("files"))
    return None if files is None else generations.Generation(manifest["data_dir"], files)


def _read_shard_manifest(root: Path) -> dict[str, Any]:
    mpath = root / _SHARDED_MANIFEST
    try:
        manifest = generations.read_manifest(
            mpath,
            manifest_format=_SHARDED_FORMAT,
            version=_SHARDED_VERSION,
            error=SaveFileError,
            what="sharded buffer",
        )
    except FileNotFoundError as e:
        raise SaveFileError(f"{root}: no {_SHARDED_MANIFEST} (not a sharded buffer save)") from e
    names = manifest.get("shards")
    if not isinstance(names, list) or len(names) != manifest.get("num_shards"):
        raise SaveFileError(f"{mpath} lists {names!r} for num_shards={manifest.get('num_shards')!r}")
    for name in [manifest.get("data_dir"), *names]:
        if not generations.plain_name(name):
            raise SaveFileError(f"{mpath} names a folder that is not a plain name: {name!r}")
    generations.check_seal(manifest, mpath, SaveFileError)
    return manifest
