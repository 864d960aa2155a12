"""Writes the saves in this folder with the code of commit d0153cb (before buffer saves,
checkpoints and sharded saves shared one generations module), so that tests/test_generations.py
can check that saves written by that code still load and are replaced cleanly.

    git checkout d0153cb && PYTHONPATH=python python tests/data/saves_d0153cb/make.py

Kept for the record; run it only against that commit's code (it overwrites this folder's saves).
``expected.npz`` and ``expected.json`` hold what the saved buffers held in memory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import rlcore
import torch
from rlcore.distributed.shard_files import save_shard_dirs
from rlcore.trainers import checkpoint

HERE = Path(__file__).parent


def small_buffer(capacity: int, num_envs: int, offset: int) -> rlcore.ReplayBuffer:
    """A buffer of ``num_envs`` envs holding 9 steps each (episodes of 4 steps) of arange data."""
    buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=offset)
    for t in range(9):
        obs = (offset + t * num_envs + np.arange(num_envs * 3, dtype=np.float32)).reshape(num_envs, 3)
        act = np.full((num_envs, 2), t, np.float32)
        done = np.full(num_envs, t % 4 == 3)
        buf.add(obs, act, np.full(num_envs, 0.5 * t), done, np.zeros(num_envs, bool), obs + 1)
    return buf


class ShardedSave:
    """What a ShardedReplayBuffer's save writes, without Ray: one buffer save per shard."""

    def __init__(self, shards: list[rlcore.ReplayBuffer], num_envs: int) -> None:
        self.shards, self.num_envs = shards, num_envs

    def save(self, path: Path) -> None:
        save_shard_dirs(path, num_envs=self.num_envs, writers=[s.save for s in self.shards])


def main() -> None:
    buffers = {
        "buffer": small_buffer(64, 2, 0),
        "shard0": small_buffer(32, 2, 100),
        "shard1": small_buffer(32, 2, 200),
    }
    for name in ("buffer", "checkpoint", "sharded", "checkpoint-sharded"):
        shutil.rmtree(HERE / name, ignore_errors=True)
    buffers["buffer"].save(HERE / "buffer")
    sharded = ShardedSave([buffers["shard0"], buffers["shard1"]], num_envs=4)
    sharded.save(HERE / "sharded")
    state = {
        "algorithm": {"w": torch.arange(6, dtype=torch.float32)},
        "collector": {"obs": np.arange(6, dtype=np.float32).reshape(2, 3)},
    }
    checkpoint.save(
        HERE / "checkpoint",
        trainer="off-policy",
        state=state,
        counters={"iteration": 3, "env_steps": 18},
        buffer=buffers["buffer"],
        env_state={"envs": [1, 2, 3]},
        info={"buffer_capacity": 64},
    )
    checkpoint.save(
        HERE / "checkpoint-sharded",
        trainer="distributed",
        state=state,
        counters={"iteration": 5, "env_steps": 36},
        buffer=sharded,
        info={"shard_capacity": 32},
    )
    arrays, meta = {}, {}
    for name, buf in buffers.items():
        s = buf.state_dict()
        meta[name] = {"config": s["config"], "schema": s["schema"], "len": len(buf)}
        arrays.update({f"{name}/{k}": v for k, v in s["arrays"].items()})
    np.savez(HERE / "expected.npz", **arrays)
    (HERE / "expected.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
