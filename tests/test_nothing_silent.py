"""Nothing silently wrong (issue 38): stale priority indices, user files, restore settings,
lossy integer casts, damaged .npy headers, huge batches, Tianshou's HDF5 files, typed errors and
HER's ``info``. Each test fails on the code before the fix and leaves the buffer as it was when
a call is refused."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import rlcore
from rlcore.errors import CheckpointError, DTypeError, InvalidValueError, SaveFileError

F32 = np.float32
ROW_MASK = (1 << getattr(rlcore._core, "INDEX_ROW_BITS", 40)) - 1


def _o(v: float) -> np.ndarray:
    return np.full(1, v, F32)


def _stream(buf, steps: range) -> None:
    for t in steps:
        buf.add(_o(t), _o(0), 1.0, False, False, _o(t + 1))


def _state(buf) -> dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in buf.state_dict()["arrays"].items()}


def _same_state(buf, before: dict[str, np.ndarray]) -> None:
    after = _state(buf)
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)


# -- 1: a stale prioritized index skips the transition that overwrote its row -------------------


def test_stale_sampled_index_is_skipped_and_counted_not_landed_on_the_newer_transition():
    b = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, seed=0)
    _stream(b, range(6))
    i = int(b.sample(1).indices[0])
    row = i & ROW_MASK
    _stream(b, range(6, 20))  # the ring wraps over row i
    assert b.is_transition([row])[0]
    before = b.priorities([row]).copy()
    assert b.update_priorities([i], [1000.0]) == 1
    np.testing.assert_array_equal(b.priorities([row]), before)
    assert b.priorities([i]).tolist() == [0.0]  # the index names a transition that is gone
    with pytest.raises(InvalidValueError, match="overwritten"):
        b.sample_at([i])
    with pytest.raises(InvalidValueError, match="overwritten"):
        b.rows_of([i])
    # a fresh index of the row lands
    fresh = b.sample(512).indices
    j = int(fresh[(fresh & ROW_MASK) == row][0])
    assert j != i and b.update_priorities([j], [7.0]) == 0
    np.testing.assert_allclose(b.priorities([row]), 7.0 + 1e-6)


def test_stale_sequence_start_index_is_skipped():
    b = rlcore.PrioritizedReplayBuffer(16, alpha=1.0, seed=0)
    _stream(b, range(10))
    s = b.sample_sequences(4, 3)
    _stream(b, range(10, 40))  # every row rewritten
    rows = s.start_indices & ROW_MASK
    before = b.priorities(rows).copy()
    td = np.full((4, 3), 50.0, F32)
    assert b.update_sequence_priorities(s.start_indices, td) == 4
    np.testing.assert_array_equal(b.priorities(rows), before)
    fresh = b.sample_sequences(4, 3)
    assert b.update_sequence_priorities(fresh.start_indices, td) == 0


def test_sharded_front_check_and_routing_keep_the_generation():
    from rlcore.buffers.prioritized import checked_priority_update

    idx = np.array([(3 << 40) | 70], np.int64)  # row 70 of 2 shards of 64
    checked, _ = checked_priority_update(idx, [1.0], alpha=0.6, eps=1e-6, rows=128)
    assert checked.tolist() == idx.tolist()
    ray = pytest.importorskip("ray")  # noqa: F841 - the sharded buffer's module needs it
    from rlcore.distributed.sharded_buffer import ShardedReplayBuffer

    shard, local = ShardedReplayBuffer.shard_of(type("S", (), {"shard_capacity": 64})(), idx)
    assert shard.tolist() == [1] and local.tolist() == [(3 << 40) | 6]


def test_tianshou_prioritized_update_weight_skips_rows_overwritten_since_the_sample():
    pytest.importorskip("tianshou")
    from rlcore.compat.tianshou import PrioritizedReplayBuffer
    from tianshou.data import Batch

    buf = PrioritizedReplayBuffer(8, alpha=1.0, beta=0.4, extra_rows=2)

    def add(t: int) -> None:
        buf.add(
            Batch(
                obs=_o(t)[None],
                act=np.zeros(1),
                rew=np.ones(1),
                terminated=np.zeros(1, bool),
                truncated=np.zeros(1, bool),
                obs_next=_o(t + 1)[None],
                info=Batch(),
            ),
            buffer_ids=[0],
        )

    for t in range(6):
        add(t)
    _, idx = buf.sample(4)
    assert (idx < 10).all()  # Tianshou gets rows
    for t in range(6, 30):
        add(t)
    before = buf._core.priorities(idx).copy()
    buf.update_weight(idx, np.full(idx.size, 1000.0))
    np.testing.assert_array_equal(buf._core.priorities(idx), before)
    _, idx = buf.sample(4)
    buf.update_weight(idx, np.full(idx.size, 1000.0))
    assert (buf._core.priorities(idx) > 999).all()


# -- 2: user files are never overwritten or removed ---------------------------------------------


def test_save_refuses_to_overwrite_a_users_own_manifest_json(tmp_path: Path):
    b = rlcore.ReplayBuffer(8)
    _stream(b, range(3))
    (tmp_path / "manifest.json").write_text('{"my": "notes"}')
    with pytest.raises(SaveFileError, match="not an rlcore manifest"):
        b.save(tmp_path)
    assert (tmp_path / "manifest.json").read_text() == '{"my": "notes"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "rlcore.lock"]
    b.save(tmp_path / "ok")
    b.save(tmp_path / "ok")  # its own manifest is replaced as before


def test_checkpoint_save_refuses_to_overwrite_a_users_checkpoint_json(tmp_path: Path):
    from rlcore.trainers import checkpoint

    (tmp_path / "checkpoint.json").write_text("mine")
    with pytest.raises(SaveFileError, match="not an rlcore manifest"):
        checkpoint.save(tmp_path, trainer="off-policy", state={"x": 1}, counters={"iteration": 0})
    assert (tmp_path / "checkpoint.json").read_text() == "mine"


def test_overwrite_removes_only_what_rlcore_wrote_in_checkpoint_and_tb(tmp_path: Path):
    import argparse

    from rlcore.cli.common import prepare_run_dir
    from rlcore.trainers import checkpoint

    run = tmp_path / "run"
    checkpoint.save(run / "checkpoint", trainer="off-policy", state={"x": 1}, counters={"iteration": 0})
    (run / "checkpoint" / "my_notes.txt").write_text("keep")
    (run / "tb").mkdir()
    (run / "tb" / "events.out.tfevents.1.host").write_bytes(b"x")
    (run / "tb" / "plot.svg").write_text("keep")
    (run / "config.json").write_text("{}")
    args = argparse.Namespace(out=run, resume=None, overwrite=True)
    assert prepare_run_dir(args, tmp_path / "default") == run
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["my_notes.txt"]
    assert sorted(p.name for p in (run / "tb").iterdir()) == ["plot.svg"]
    assert not (run / "config.json").exists()


# -- 3: restore refuses other prioritized settings ----------------------------------------------


def test_restore_refuses_a_save_with_another_alpha_and_changes_nothing(tmp_path: Path):
    src = rlcore.PrioritizedReplayBuffer(8, alpha=0.5, seed=0)
    _stream(src, range(5))
    src.save(tmp_path / "s")
    dst = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, seed=0)
    _stream(dst, range(3))
    before = _state(dst)
    with pytest.raises(SaveFileError, match="alpha"):
        dst.restore(tmp_path / "s")
    _same_state(dst, before)
    assert rlcore.PrioritizedReplayBuffer.load(tmp_path / "s").alpha == 0.5  # load adopts them


def test_restore_refuses_a_prioritized_her_save_into_a_uniform_her_buffer(tmp_path: Path):
    def her(prioritized: bool) -> rlcore.HERReplayBuffer:
        return rlcore.HERReplayBuffer(16, distance_threshold=0.05, prioritized=prioritized, seed=0)

    src = her(True)
    for t in range(6):
        o = {"observation": _o(t), "achieved_goal": _o(t), "desired_goal": _o(9)}
        n = {"observation": _o(t + 1), "achieved_goal": _o(t + 1), "desired_goal": _o(9)}
        src.add(o, _o(0), -1.0, False, False, n)
    src.save(tmp_path / "s")
    with pytest.raises(SaveFileError, match="prioritized"):
        her(False).restore(tmp_path / "s")


# -- 4: integers a float column cannot hold exactly are refused ----------------------------------


def test_integers_that_float32_cannot_hold_exactly_are_refused_and_change_nothing():
    b = rlcore.ReplayBuffer(8)
    b.add(np.zeros(2, F32), 0, 1.0, False, False, np.zeros(2, F32))
    before = _state(b)
    with pytest.raises(DTypeError, match="16777217"):
        b.add(np.array([16777217, 123456789]), 0, 1.0, False, False, np.array([1, 2]))
    _same_state(b, before)
    b.add(np.array([2**24, -(2**24)]), 0, 1.0, False, False, np.array([2**30, 3]))  # exact ones


def test_integers_that_float64_cannot_hold_exactly_are_refused():
    b = rlcore.ReplayBuffer(8)
    b.add(np.zeros(1), 0, 1.0, False, False, np.zeros(1))
    with pytest.raises(DTypeError, match="exactly"):
        b.add(np.array([2**53 + 1]), 0, 1.0, False, False, np.array([0]))
    b.add(np.array([2**53]), 0, 1.0, False, False, np.array([0]))


# -- 5: any damage to a .npy header is a SaveFileError naming the file ---------------------------


def test_every_bit_flip_of_every_npy_header_byte_is_a_save_file_error(tmp_path: Path):
    b = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, seed=0)
    _stream(b, range(5))
    b.save(tmp_path / "s")
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    data = tmp_path / "s" / manifest["data_dir"]
    path = data / manifest["files"]["per.priorities"]["file"]
    good = path.read_bytes()
    header_len = 10 + int.from_bytes(good[8:10], "little")
    for pos in range(header_len):
        for bit in range(8):
            bad = bytearray(good)
            bad[pos] ^= 1 << bit
            path.write_bytes(bytes(bad))
            with pytest.raises(SaveFileError, match=path.name):
                rlcore.PrioritizedReplayBuffer.load(tmp_path / "s")
    path.write_bytes(good)
    rlcore.PrioritizedReplayBuffer.load(tmp_path / "s")


# -- 6: huge batches are refused before anything is allocated ------------------------------------


def test_huge_batches_are_refused_before_allocating():
    b = rlcore.ReplayBuffer(64)
    _stream(b, range(10))
    with pytest.raises(InvalidValueError, match="more than this buffer can return"):
        b.sample(2**31 - 1)
    with pytest.raises(InvalidValueError, match="more than this buffer can return"):
        b.sample_sequences(1, 2**31 - 1)
    assert b.sample(65536).indices.shape == (65536,)  # the documented bound is allowed


# -- 7: Tianshou's own HDF5 files load; anything else is a SaveFileError -------------------------


def _ts_step(t: int, n: int = 1):
    from tianshou.data import Batch

    return Batch(
        obs=np.full((n, 2), t, F32),
        act=np.ones(n),
        rew=np.full(n, float(t)),
        terminated=np.full(n, t % 5 == 4),
        truncated=np.zeros(n, bool),
        obs_next=np.full((n, 2), t + 1, F32),
        info=Batch(),
    )


@pytest.mark.parametrize("kind", ["ReplayBuffer", "PrioritizedReplayBuffer", "VectorReplayBuffer"])
def test_tianshou_compat_loads_tianshous_own_hdf5_files(kind: str, tmp_path: Path):
    pytest.importorskip("h5py")
    ts = pytest.importorskip("tianshou.data")
    from rlcore.compat import tianshou as compat

    args = {"ReplayBuffer": (10,), "PrioritizedReplayBuffer": (10, 0.6, 0.4), "VectorReplayBuffer": (10, 2)}[
        kind
    ]
    theirs = getattr(ts, kind)(*args)
    n = getattr(theirs, "buffer_num", 1)
    for t in range(13):
        theirs.add(_ts_step(t, n), buffer_ids=list(range(n)))  # as Tianshou's collector adds
    theirs.save_hdf5(str(tmp_path / "ts.h5"))
    mine = getattr(compat, kind).load_hdf5(str(tmp_path / "ts.h5"))
    assert len(mine) == len(theirs)
    got, want = mine[:], theirs[:]
    assert sorted(got.rew.tolist()) == sorted(want.rew.tolist())


def test_tianshou_compat_load_hdf5_refuses_truncated_crafted_and_foreign_files(tmp_path: Path):
    h5py = pytest.importorskip("h5py")
    pytest.importorskip("tianshou")
    from rlcore.compat.tianshou import ReplayBuffer

    buf = ReplayBuffer(10)
    for t in range(4):
        buf.add(_ts_step(t), buffer_ids=[0])
    path = tmp_path / "b.h5"
    buf.save_hdf5(str(path))
    assert len(ReplayBuffer.load_hdf5(str(path))) == len(buf)
    (tmp_path / "cut.h5").write_bytes(path.read_bytes()[:500])
    with pytest.raises(SaveFileError, match="cut.h5"):
        ReplayBuffer.load_hdf5(str(tmp_path / "cut.h5"))
    with h5py.File(path, "r+") as f:
        meta = json.loads(f.attrs["rlcore_compat"])
        meta["dict"]["_core"] = "crafted"
        meta["dict"]["stack_num"] = {"x": 1}
        f.attrs["rlcore_compat"] = json.dumps(meta)
    with pytest.raises(SaveFileError, match="stack_num"):
        ReplayBuffer.load_hdf5(str(path))
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with pytest.raises(SaveFileError):
        ReplayBuffer.load_hdf5(str(tmp_path / "other.h5"))


# -- 8: typed errors and clear messages ---------------------------------------------------------


def test_column_of_a_non_string_is_a_dtype_error():
    b = rlcore.ReplayBuffer(8)
    _stream(b, range(2))
    with pytest.raises(DTypeError, match="column name must be a str"):
        b.column(3)


def test_sample_at_reports_uint64_indices_and_empty_indices_as_they_are():
    b = rlcore.ReplayBuffer(8)
    _stream(b, range(3))
    with pytest.raises(InvalidValueError, match="9223372036854775808"):
        b.sample_at(np.array([2**63], np.uint64))
    with pytest.raises(InvalidValueError, match="indices is empty"):
        b.sample_at([])


def test_missing_obs_next_says_it_is_missing():
    b = rlcore.ReplayBuffer(8)
    with pytest.raises(DTypeError, match="obs_next is missing"):
        b.add(np.zeros(2, F32), 0, 1.0, False, False, None)
    with pytest.raises(DTypeError, match="act is missing"):
        rlcore.ReplayBuffer.from_arrays(
            np.zeros((3, 2), F32), None, np.zeros(3), np.zeros(3, bool), np.zeros(3, bool), None
        )


def test_trusted_env_state_that_is_not_a_snapshot_is_a_checkpoint_error(tmp_path: Path):
    from rlcore.trainers import checkpoint

    with pytest.raises(CheckpointError, match="not an env snapshot"):
        checkpoint.check_env_snapshot({"payload": None}, tmp_path)
    with pytest.raises(CheckpointError, match="not an env snapshot"):
        checkpoint.check_env_snapshot(pickle.loads(pickle.dumps(([1, 2], None))), tmp_path)


# -- 9: HER's compute_reward receives the sampled rows' extras as its info -----------------------


def test_her_compute_reward_gets_the_extras_of_the_relabeled_transitions():
    seen = []

    def reward(ag, dg, info):
        seen.append(info)
        return -(np.abs(ag - dg).sum(-1) > 0.05).astype(F32)

    b = rlcore.HERReplayBuffer(32, compute_reward=reward, future_k=4, seed=0)
    for t in range(10):
        o = {"observation": _o(t), "achieved_goal": _o(t), "desired_goal": _o(99)}
        n = {"observation": _o(t + 1), "achieved_goal": _o(t + 1), "desired_goal": _o(99)}
        b.add(o, _o(0), -1.0, t == 9, False, n, step_id=np.int32(t))
    b.sample(64, n_step=2)
    info = seen[-1]
    assert set(info) == {"step_id"} and info["step_id"].dtype == np.int32
    pairs = len(info["step_id"])
    assert pairs >= 1 and info["step_id"].shape == (pairs,)
    assert set(info["step_id"].tolist()) <= set(range(10))
