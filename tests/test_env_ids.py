"""Partial vector steps: ``add(..., env_ids=ids)`` (rows for a subset of envs, any order).

Each env's stored stream, episode index, continuity cuts and n-step samples must be exactly what
lock-step adds of the same per-env streams give (docs/replay-buffer.md, "Adding and sampling"); bad ids raise
typed errors and leave the buffer unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from rlcore.errors import DTypeError, InvalidValueError, ShapeError

from tests.test_bad_input import rejects

F32 = np.float32


def env_streams(n_envs: int, events: list[list[tuple[int, int, bool]]]) -> list[list[dict]]:
    """Per env, one row dict per step: obs continues the previous obs_next unless the event
    jumps (a continuity break) or the episode ended; ``done`` 1 terminates, 2 truncates."""
    out: list[list[dict]] = [[] for _ in range(n_envs)]
    last = [None] * n_envs
    next_id = 0.0
    for step in events:
        for e in range(n_envs):
            rew, done, jump = step[e]
            if last[e] is None or jump:
                next_id += 1.0
                obs = next_id
            else:
                obs = last[e]
            next_id += 1.0
            out[e].append(
                dict(
                    obs=[obs, -obs],
                    act=obs,
                    rew=float(rew),
                    term=done == 1,
                    trunc=done == 2,
                    nxt=[next_id, -next_id],
                )
            )
            last[e] = None if done else next_id
    return out


def add_rows(buf, rows: list[tuple[int, dict]], *, with_ids: bool):
    cols = dict(
        obs=np.array([r["obs"] for _, r in rows], F32),
        act=np.array([r["act"] for _, r in rows], F32),
        rew=np.array([r["rew"] for _, r in rows], F32),
        terminated=np.array([r["term"] for _, r in rows]),
        truncated=np.array([r["trunc"] for _, r in rows]),
        obs_next=np.array([r["nxt"] for _, r in rows], F32),
    )
    ids = np.array([e for e, _ in rows], np.int64) if with_ids else None
    return buf.add(**cols, env_ids=ids)


def stored(buf) -> dict[str, np.ndarray]:
    state = buf.state_dict()
    return {k: np.array(v, copy=True) for k, v in state["arrays"].items()}


events_st = st.integers(1, 4).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.lists(
                st.tuples(st.integers(-2, 2), st.sampled_from([0] * 8 + [1, 2]), st.just(False)),
                min_size=n,
                max_size=n,
            ),
            min_size=1,
            max_size=40,
        ),
        st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=200),
        st.integers(2, 20),
        st.integers(0, 2**32),
    )
)


@settings(max_examples=60, deadline=None)
@given(events_st, st.booleans())
def test_any_interleaving_of_env_id_adds_stores_and_samples_as_lock_step(case, jumps) -> None:
    n_envs, events, picks, seg, seed = case
    if jumps:  # every fifth step of env 0 breaks continuity
        events = [
            [(r, d, (t % 5 == 4 and e == 0)) for e, (r, d, _) in enumerate(s)] for t, s in enumerate(events)
        ]
    streams = env_streams(n_envs, events)
    lock = rlcore.ReplayBuffer(seg * n_envs, num_envs=n_envs, seed=seed)
    for t in range(len(events)):
        add_rows(lock, [(e, streams[e][t]) for e in range(n_envs)], with_ids=False)

    part = rlcore.ReplayBuffer(seg * n_envs, num_envs=n_envs, seed=seed)
    order = [p % n_envs for p, _ in picks] + [e for e in range(n_envs) for _ in events]
    cut = [c for _, c in picks]
    pos = [0] * n_envs
    call: list[tuple[int, dict]] = []
    for k, e in enumerate(order):
        if pos[e] == len(events):
            continue
        if any(c == e for c, _ in call) or (k < len(cut) and cut[k]):
            if call:
                add_rows(part, call, with_ids=True)
            call = []
        call.append((e, streams[e][pos[e]]))
        pos[e] += 1
    if call:
        add_rows(part, call, with_ids=True)

    a, b = stored(lock), stored(part)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=f"state part {k}")
    assert len(lock) == len(part)
    idx = np.arange(lock.capacity)
    np.testing.assert_array_equal(lock.is_transition(idx), part.is_transition(idx))
    if len(lock):
        x = lock.sample(16, n_step=3, gamma=0.9)
        y = part.sample(16, n_step=3, gamma=0.9)
        for f in ("indices", "obs", "obs_next", "rew", "discount", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f), err_msg=f)
        np.testing.assert_array_equal(lock.episode_bounds(x.indices)[2], part.episode_bounds(y.indices)[2])


def test_env_id_add_reports_rows_and_episodes_of_the_listed_envs() -> None:
    buf = rlcore.ReplayBuffer(30, num_envs=3, seed=0)
    o = np.array([[1.0], [2.0]], F32)
    res = buf.add(
        o,
        np.zeros(2, np.int64),
        np.array([1.0, 2.0], F32),
        np.array([False, True]),
        np.zeros(2, bool),
        o + 10,
        env_ids=np.array([2, 0]),
    )
    # env 2's segment is rows 20..29 and env 0's rows 0..9: first row of each
    np.testing.assert_array_equal(res.indices, [20, 0])
    np.testing.assert_array_equal(res.done_envs, [0])
    np.testing.assert_array_equal(res.episode_returns, [2.0])
    assert len(buf) == 2


def ok_rows(k: int):
    o = np.arange(k * 2, dtype=F32).reshape(k, 2)
    return (o, np.zeros(k, np.int64), np.ones(k, F32), np.zeros(k, bool), np.zeros(k, bool), o + 1)


@pytest.mark.parametrize(
    ("ids", "rows", "err", "builtin", "msg"),
    [
        ([0, 3], 2, InvalidValueError, ValueError, "num_envs=3"),
        ([-1, 0], 2, InvalidValueError, ValueError, "num_envs=3"),
        ([1, 1], 2, InvalidValueError, ValueError, "appears earlier"),
        ([0, 1, 2], 2, ShapeError, ValueError, "env_ids: expected shape [2]"),
        ([[0, 1]], 2, ShapeError, ValueError, "env_ids"),
        ([0.0, 1.0], 2, DTypeError, TypeError, "integers"),
        ([True, False], 2, DTypeError, TypeError, "integers"),
    ],
    ids=["out_of_range", "negative", "duplicate", "wrong_length", "two_dim", "float", "bool"],
)
def test_bad_env_ids_raise_typed_errors_and_leave_the_buffer_unchanged(ids, rows, err, builtin, msg) -> None:
    buf = rlcore.ReplayBuffer(30, num_envs=3, seed=0)
    buf.add(*ok_rows(3))
    e = rejects(buf, err, builtin, lambda: buf.add(*ok_rows(rows), env_ids=np.array(ids)))
    assert msg in str(e)
    # a first add that fails defines no columns either
    fresh = rlcore.ReplayBuffer(30, num_envs=3, seed=0)
    rejects(fresh, err, builtin, lambda: fresh.add(*ok_rows(rows), env_ids=np.array(ids)))


def test_env_ids_need_one_reward_per_listed_env() -> None:
    buf = rlcore.ReplayBuffer(30, num_envs=3, seed=0)
    o, a, r, te, tr, on = ok_rows(1)
    with pytest.raises(ShapeError, match="with env_ids"):
        buf.add(o[0], a[0], r[0], te[0], tr[0], on[0], env_ids=np.array([0]))
