"""What the bad-input tests (test_bad_input*.py) share: ``rejects`` (the typed error, also a
subclass of the builtin a user would catch, and a buffer left exactly as it was), valid steps to
start from and to break, and a small started buffer."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from rlcore.errors import RlcoreError

F32 = np.float32
N = 2


def snapshot(buf):
    state = buf.state_dict()
    return state["schema"], {k: v.copy() for k, v in state["arrays"].items()}, len(buf)


def assert_unchanged(buf, before):
    schema, arrays, n = snapshot(buf)
    assert n == before[2]
    assert schema == before[0], "the columns changed"
    assert set(arrays) == set(before[1])
    for k, v in before[1].items():
        np.testing.assert_array_equal(arrays[k], v, err_msg=f"state part {k} changed")


def rejects(buf, err, builtin, fn):
    """fn() raises err (an RlcoreError that is also a builtin) and leaves buf as it was."""
    before = snapshot(buf)
    with pytest.raises(err) as info:
        fn()
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    assert str(info.value), "the message must say what was expected"
    assert_unchanged(buf, before)
    return info.value


def step(k=0, n=N):
    """A valid vector step continuing from step k-1 (obs = k, obs_next = k + 1)."""
    o = np.full((n, 3), k, F32)
    return dict(
        obs=o,
        act=np.zeros(n, np.int64),
        rew=np.ones(n, F32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        obs_next=o + 1,
    )


def add(buf, **kw):
    return buf.add(
        kw.pop("obs"),
        kw.pop("act"),
        kw.pop("rew"),
        kw.pop("terminated"),
        kw.pop("truncated"),
        kw.pop("obs_next"),
        **kw,
    )


def started_buffer():
    """A buffer of N envs holding 4 steps with an ``info`` column, sampled once."""
    b = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    for k in range(4):
        add(b, **step(k), info=np.full(N, k, np.int32))
    b.sample(3)
    return b


def bad(k=4, **override):
    s = step(k)
    s["info"] = np.zeros(N, np.int32)
    s.update(override)
    return s


def offline_arrays(t_len=4):
    o = np.arange(t_len * 3, dtype=F32).reshape(t_len, 3)
    z = np.zeros(t_len, bool)
    return dict(
        obs=o,
        act=np.zeros(t_len, np.int64),
        rew=np.ones(t_len, F32),
        terminated=z,
        truncated=z,
        obs_next=o + 3,
    )
