"""Damaged or malformed states and saves (``load_state_dict``, ``load``): ``SaveFileError`` (an
``OSError``) and a buffer left exactly as it was."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from bad_inputs import F32, N, add, rejects, started_buffer, step
from rlcore.errors import SaveFileError


@pytest.fixture
def buf():
    return started_buffer()


def test_load_state_dict_with_corrupt_arrays_raises_save_file_error(buf):
    other = rlcore.ReplayBuffer(20, num_envs=N, seed=1)
    add(other, **step(7), info=np.zeros(N, np.int32))
    state = buf.state_dict()
    for name, damage in [
        ("flags", lambda a: a | 0x80),
        ("env.n_trans", lambda a: a + 1),
        ("ep_id", lambda a: a + 1000),
        ("col:obs", lambda a: a[:-1]),
        ("rew", lambda a: a.astype(np.float64)),
    ]:
        s = {**state, "arrays": {**state["arrays"], name: damage(state["arrays"][name])}}
        rejects(other, SaveFileError, OSError, lambda s=s: other.load_state_dict(s))
    s = {**state, "arrays": {k: v for k, v in state["arrays"].items() if k != "rng"}}
    rejects(other, SaveFileError, OSError, lambda: other.load_state_dict(s))


def test_failed_load_state_dict_into_fresh_buffer_leaves_it_undeclared(buf):
    state = buf.state_dict()
    state["arrays"]["flags"] = state["arrays"]["flags"] | 0x80
    fresh = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    rejects(fresh, SaveFileError, OSError, lambda: fresh.load_state_dict(state))


def _her_state():
    b = rlcore.HERReplayBuffer(20, num_envs=2, seed=0, distance_threshold=0.1, strategy="episode")
    for t in range(7):
        o = {
            "observation": np.full((2, 2), t, F32),
            "achieved_goal": np.full((2, 2), t, F32),
            "desired_goal": np.zeros((2, 2), F32),
        }
        n = {k: v + 1 if k != "desired_goal" else v for k, v in o.items()}
        b.add(o, np.zeros((2, 1), F32), np.ones(2), np.zeros(2, bool), np.array([t % 3 == 2] * 2), n)
    return b


@pytest.mark.parametrize(
    "part,delta",
    [("ep_start", 3), ("ep_start", -1), ("ep_end", -2), ("env.head", 100), ("env.next_ep", 5)],
)
def test_load_state_dict_with_inconsistent_episode_index_raises_save_file_error(part, delta):
    src = _her_state()
    state = src.state_dict()
    a = state["arrays"][part]
    state["arrays"][part] = (a.astype(np.int64) + delta).astype(a.dtype)
    dst = rlcore.HERReplayBuffer(20, num_envs=2, seed=0, distance_threshold=0.1, strategy="episode")
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


def _per_state():
    b = rlcore.PrioritizedReplayBuffer(20, num_envs=N, seed=0)
    for k in range(5):
        add(b, **step(k))
    batch = b.sample(4)
    b.update_priorities(batch.indices, np.full(4, 3.0))
    return b.state_dict()


@pytest.mark.parametrize(
    "part,value",
    [("per.max_p", np.nan), ("per.max_p", 0.0), ("per.max_p", 1e-3), ("per.max_p", -1.0)],
)
def test_load_state_dict_with_bad_max_priority_raises_save_file_error(part, value):
    state = _per_state()
    state["arrays"][part] = np.full_like(state["arrays"][part], value)
    dst = rlcore.PrioritizedReplayBuffer(20, num_envs=N, seed=0)
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


@pytest.mark.parametrize(
    "part,damage",
    [
        ("rew", lambda a: np.where(np.arange(a.size) == 0, np.nan, a).astype(a.dtype)),
        ("terminated", lambda a: np.where(np.arange(a.size) == 1, 7, a).astype(a.dtype)),
        ("truncated", lambda a: np.where(np.arange(a.size) == 1, 2, a).astype(a.dtype)),
        ("env.ep_len", lambda a: a + 10**6),
    ],
)
def test_load_state_dict_with_impossible_rows_raises_save_file_error(buf, part, damage):
    state = buf.state_dict()
    state["arrays"][part] = damage(state["arrays"][part])
    dst = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    add(dst, **step(9), info=np.zeros(N, np.int32))
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


@pytest.mark.parametrize("state", [{}, {"config": {}}, {"config": {"kind": "replay"}, "schema": 3}, []])
def test_load_state_dict_with_a_malformed_state_raises_save_file_error(buf, state):
    rejects(buf, SaveFileError, OSError, lambda: buf.load_state_dict(state))


def test_load_of_a_file_or_a_manifest_pointing_elsewhere_raises_save_file_error(buf, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(tmp_path / "file")
    buf.save(tmp_path / "a")
    buf.save(tmp_path / "b")
    import json

    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    other = json.loads((tmp_path / "a" / "manifest.json").read_text())
    from rlcore.buffers.persist import seal

    for field, value in [
        ("data_dir", f"../a/{other['data_dir']}"),
        ("data_dir", ".."),
        ("files", {"rew": {**m["files"]["rew"], "file": "/etc/passwd"}}),
    ]:
        bad_m = {**m, field: value if field == "data_dir" else {**m["files"], **value}}
        bad_m["checksum"] = seal(bad_m)  # a valid checksum does not make it acceptable
        (tmp_path / "b" / "manifest.json").write_text(json.dumps(bad_m))
        with pytest.raises(SaveFileError, match="plain name"):
            rlcore.ReplayBuffer.load(tmp_path / "b")
