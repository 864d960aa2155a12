"""One save-directory mechanism (rlcore.buffers.generations; DESIGN.md "Durability") for buffer
saves, trainer checkpoints and sharded buffer saves: saves written by older code still load and
are replaced cleanly; checkpoints and sharded saves own only what they wrote, survive concurrent
saves (threads and processes) and killed saves, and can be read while another process saves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import rlcore
import torch
from rlcore.distributed import shard_files
from rlcore.trainers import checkpoint

LEGACY = Path(__file__).parent / "data" / "saves_d0153cb"


def _expected(name: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(config, schema, len) and the arrays of the buffer ``name`` that make.py saved."""
    meta = json.loads((LEGACY / "expected.json").read_text())[name]
    with np.load(LEGACY / "expected.npz") as z:
        arrays = {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith(f"{name}/")}
    return meta, arrays


def _holds(buf: rlcore.ReplayBuffer, name: str) -> bool:
    meta, arrays = _expected(name)
    state = buf.state_dict()
    return (
        state["config"] == meta["config"]
        and json.loads(json.dumps(state["schema"])) == meta["schema"]
        and len(buf) == meta["len"]
        and set(state["arrays"]) == set(arrays)
        and all(np.array_equal(state["arrays"][k], v) for k, v in arrays.items())
    )


def _shard_buffers(root: Path, tmp: Path) -> list[rlcore.ReplayBuffer]:
    """Every shard of the sharded save ``root``, read as plain files (as the shards' restore
    reads them) and loaded as a local buffer."""
    manifest = shard_files._read_shard_manifest(root)
    out = []
    for k, name in enumerate(manifest["shards"]):
        tree = shard_files._read_tree(root / manifest["data_dir"] / name)
        shard_files._write_tree(tmp / f"shard-{k}", tree)
        out.append(rlcore.ReplayBuffer.load(tmp / f"shard-{k}"))
    return out


def _copy_legacy(name: str, tmp: Path) -> Path:
    dst = tmp / name
    shutil.copytree(LEGACY / name, dst)
    return dst


# ---------------------------------------------------------------------------------------------
# saves written by the code before this module (commit d0153cb)


def test_buffer_save_written_by_d0153cb_loads_and_restores(tmp_path: Path) -> None:
    root = _copy_legacy("buffer", tmp_path)
    assert _holds(rlcore.ReplayBuffer.load(root), "buffer")
    target = rlcore.ReplayBuffer(64, num_envs=2)
    target.restore(root)
    assert _holds(target, "buffer")


def test_checkpoint_written_by_d0153cb_loads_with_its_buffer_and_env_state(tmp_path: Path) -> None:
    root = _copy_legacy("checkpoint", tmp_path)
    assert checkpoint.is_checkpoint(root)
    assert checkpoint.read_info(root) == {"buffer_capacity": 64}
    ckpt = checkpoint.load(root, trainer="off-policy", trust_env_state=True)
    assert ckpt.counters == {"iteration": 3, "env_steps": 18}
    assert torch.equal(ckpt.part("algorithm")["w"], torch.arange(6, dtype=torch.float32))
    np.testing.assert_array_equal(ckpt.part("collector")["obs"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert ckpt.has_buffer and ckpt.has_env_state and ckpt.env_state == {"envs": [1, 2, 3]}
    target = rlcore.ReplayBuffer(64, num_envs=2)
    ckpt.restore_buffer(target)
    assert _holds(target, "buffer")


def test_sharded_save_written_by_d0153cb_reads_every_shard(tmp_path: Path) -> None:
    root = _copy_legacy("sharded", tmp_path)
    shards = _shard_buffers(root, tmp_path / "read")
    assert [_holds(s, n) for s, n in zip(shards, ("shard0", "shard1"), strict=True)] == [True, True]


def test_checkpoint_of_a_sharded_buffer_written_by_d0153cb_loads(tmp_path: Path) -> None:
    root = _copy_legacy("checkpoint-sharded", tmp_path)
    ckpt = checkpoint.load(root, trainer="distributed")
    assert ckpt.counters == {"iteration": 5, "env_steps": 36} and not ckpt.has_env_state
    shards = _shard_buffers(ckpt.data_dir / "buffer", tmp_path / "read")
    assert [_holds(s, n) for s, n in zip(shards, ("shard0", "shard1"), strict=True)] == [True, True]
