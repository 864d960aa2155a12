"""Versions of a trainer checkpoint and of a sharded buffer save, for tests/test_generations.py
and the processes it starts. Imports torch only to save a checkpoint, so that a process saving
sharded saves starts in a second, not in the seconds torch takes."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import rlcore
from rlcore.buffers import generations
from rlcore.distributed import shard_files

ROWS = 20_000


class ShardedSave:
    """What ShardedReplayBuffer.save writes, without Ray: one buffer save per shard."""

    def __init__(self, shards: list[rlcore.ReplayBuffer], num_envs: int) -> None:
        self.shards, self.num_envs = shards, num_envs

    def save(self, path: Path) -> None:
        shard_files.save_shard_dirs(path, num_envs=self.num_envs, writers=[s.save for s in self.shards])


@functools.cache
def buffer(seed: int) -> rlcore.ReplayBuffer:
    """A single-env buffer of ROWS rows, ~90 % full; its first observation starts with ``seed``."""
    buf = rlcore.ReplayBuffer(ROWS, seed=seed)
    rng = np.random.default_rng(seed)
    t_len = ROWS * 9 // 10
    obs = rng.standard_normal((t_len + 1, 17)).astype(np.float32)
    obs[0, 0] = seed
    ends = np.arange(t_len) % 50 == 49
    buf.extend(
        obs[:-1],
        rng.standard_normal((t_len, 6)).astype(np.float32),
        rng.standard_normal(t_len),
        np.zeros(t_len, bool),
        ends,
        obs[1:],
    )
    return buf


def same(a: rlcore.ReplayBuffer, b: rlcore.ReplayBuffer) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return (
        sa["config"] == sb["config"]
        and sa["schema"] == sb["schema"]
        and set(sa["arrays"]) == set(sb["arrays"])
        and all(np.array_equal(sa["arrays"][k], sb["arrays"][k]) for k in sa["arrays"])
    )


def save(kind: str, root: str | Path, seed: int) -> None:
    """Save version ``seed`` of a checkpoint (with a buffer and an env snapshot) or of a sharded
    save (two shards) into ``root``."""
    if kind == "checkpoint":
        import torch
        from rlcore.trainers import checkpoint

        checkpoint.save(
            root,
            trainer="off-policy",
            state={"algorithm": {"w": torch.full((8,), float(seed))}},
            counters={"seed": seed},
            buffer=buffer(seed),
            env_state={"seed": seed},
        )
    else:
        ShardedSave([buffer(seed), buffer(seed + 100)], num_envs=1).save(Path(root))


def resealed(path: Path, manifest: dict[str, Any] | None = None) -> Path:
    """Write ``manifest`` (default: the current one) into ``path/checkpoint.json`` with the
    checksums recomputed for the parts now on disk: what someone crafting a checkpoint would do,
    so that a test reaches the checks behind the checksums (which only catch accidents)."""
    manifest = dict(manifest or json.loads((path / "checkpoint.json").read_text()))
    gen = path / manifest["data_dir"]
    if gen.is_dir():  # else the manifest names a folder that is not there: only the seal
        manifest["crc32c"] = {f: generations.file_crc32c(gen / f) for f in manifest.get("crc32c", {})}
    manifest["checksum"] = generations.seal(manifest)
    (path / "checkpoint.json").write_text(json.dumps(manifest))
    return path
