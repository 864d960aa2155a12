"""A sharded buffer's save on disk: each shard's buffer save under one generation folder and the
``sharded.json`` manifest that names it (DESIGN.md, "Durability")."""


from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlcore.errors import SaveFileError


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
