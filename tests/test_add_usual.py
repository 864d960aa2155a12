"""``add``'s lean path: a call of the collector's usual kind (exact ``numpy.ndarray``s of the
columns' dtypes and shapes, Python or NumPy float rewards or float arrays, Python, NumPy or array
bools as flags, no dict, extras, mask or env_ids) is read and written without the general
conversion and checks. It must leave exactly the state, outcome and samples that the general
path leaves for the same steps; the general path is taken here by handing an all-true ``mask``
(which neither the binding's nor the core's lean path takes) and, for vector steps, the rewards
as a list."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from rlcore.errors import InvalidValueError

from tests.test_env_ids import stored

OBS_DTYPES = [np.float32, np.float64, np.uint8, np.int16]
ACT_DTYPES = [np.float32, np.float64, np.int64, np.bool_]

case_st = st.tuples(
    st.integers(1, 4),  # num_envs
    st.sampled_from([None, float, np.float64, np.float32]),  # single env without the env axis: rew's type
    st.sampled_from(OBS_DTYPES),
    st.sampled_from([(3,), (2, 2)]),
    st.sampled_from(ACT_DTYPES),
    st.integers(2, 12),  # ring segment per env: small, so the ring wraps and evicts
    st.booleans(),  # prioritized
    st.lists(  # per step and env: reward, 0 running / 1 terminated / 2 truncated, a jump
        st.tuples(
            st.integers(-3, 3), st.sampled_from([0] * 6 + [1, 2]), st.sampled_from([False] * 7 + [True])
        ),
        min_size=1,
        max_size=160,
    ),
    st.integers(0, 2**32 - 1),
)


def streams(n_envs, events, obs_dtype, obs_shape, act_dtype):
    """Per step, the arrays of one vector step: obs continues each env's previous obs_next
    unless its episode ended or the event jumps (a continuity break)."""
    size = int(np.prod(obs_shape))
    steps, last, k = [], [None] * n_envs, 0
    for t in range(len(events) // n_envs):
        obs, nxt, act, rew, term, trunc = [], [], [], [], [], []
        for e in range(n_envs):
            r, done, jump = events[t * n_envs + e]
            if last[e] is None or jump:
                k += 1
                last[e] = (np.arange(size) + 7 * k).reshape(obs_shape)
            k += 1
            n = (np.arange(size) + 7 * k).reshape(obs_shape)
            obs.append(last[e])
            nxt.append(n)
            act.append(np.full(2, k % 3 == 0 if act_dtype is np.bool_ else k % 50))
            rew.append(r / 4)
            term.append(done == 1)
            trunc.append(done == 2)
            last[e] = None if done else n
        steps.append(
            dict(
                obs=np.array(obs, obs_dtype),
                act=np.array(act, act_dtype),
                rew=np.array(rew, np.float32),
                terminated=np.array(term),
                truncated=np.array(trunc),
                obs_next=np.array(nxt, obs_dtype),
            )
        )
    return steps


def outcome(res) -> tuple:
    return (
        res.indices.tolist(),
        res.done_envs.tolist(),
        res.episode_returns.tolist(),
        res.episode_lengths.tolist(),
    )


@settings(max_examples=80, deadline=None)
@given(case_st)
def test_the_lean_add_path_leaves_the_state_outcome_and_samples_of_the_general_path(case) -> None:
    n_envs, bare, obs_dtype, obs_shape, act_dtype, seg, per, events, seed = case
    bare = bare if n_envs == 1 else None
    make = rlcore.PrioritizedReplayBuffer if per else rlcore.ReplayBuffer
    lean = make(seg * n_envs, num_envs=n_envs, seed=seed)
    general = make(seg * n_envs, num_envs=n_envs, seed=seed)
    for s in streams(n_envs, events, obs_dtype, obs_shape, act_dtype):
        if bare:  # what one gymnasium env returns: arrays without the env axis, a float, bools
            one = {k: v[0] for k, v in s.items()}
            flag = bool if bare is float else np.bool_  # Python bools, or NumPy's with NumPy floats
            a = dict(
                one,
                rew=bare(one["rew"]),
                terminated=flag(one["terminated"]),
                truncated=flag(one["truncated"]),
            )
            b = dict(a, mask=np.True_)
        else:
            a = s
            b = dict(s, rew=s["rew"].tolist(), mask=np.ones(n_envs, bool))
        assert outcome(lean.add(**a)) == outcome(general.add(**b))
    x, y = stored(lean), stored(general)
    assert x.keys() == y.keys()
    for k in x:
        np.testing.assert_array_equal(x[k], y[k], err_msg=f"state part {k}")
    assert len(lean) == len(general)
    if len(lean):
        p, q = lean.sample(8, n_step=2, gamma=0.5), general.sample(8, n_step=2, gamma=0.5)
        for f in ("indices", "obs", "act", "obs_next", "rew", "discount", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(p, f), getattr(q, f), err_msg=f)


@pytest.mark.parametrize(
    ("rew", "dtype"),
    [(np.nan, np.float32), (np.inf, np.float32), (1e39, np.float64)],
    ids=["nan float32", "inf float32", "beyond float32 in float64"],
)
def test_a_non_finite_reward_in_an_exact_array_is_refused_and_nothing_is_written(rew, dtype) -> None:
    buf = rlcore.ReplayBuffer(16, num_envs=2, seed=0)
    obs = np.zeros((2, 3), np.float32)
    ok = dict(act=np.zeros((2, 1), np.float32), terminated=np.zeros(2, bool), truncated=np.zeros(2, bool))
    buf.add(obs, rew=np.zeros(2, np.float32), obs_next=obs + 1, **ok)
    before = stored(buf)
    with pytest.raises(InvalidValueError, match=r"rew\[1\] is .*rewards must be finite"):
        buf.add(obs + 1, rew=np.array([0.0, rew], dtype), obs_next=obs + 2, **ok)
    after = stored(buf)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)
    assert len(buf) == 2


@pytest.mark.parametrize("form", ["big-endian", "strided", "ndarray subclass", "0-d rewards"])
def test_inputs_the_lean_path_does_not_read_are_converted_as_before(form) -> None:
    """Byte-swapped, non-contiguous and subclassed arrays (and 0-d reward arrays) reach the
    general conversion, which stores the values they hold: the same state as plain arrays."""
    steps = streams(
        1, [(1, 0, False), (2, 0, False), (-1, 2, False), (0, 0, True)] * 3, np.float32, (3,), np.float32
    )
    plain, other = rlcore.ReplayBuffer(32, seed=0), rlcore.ReplayBuffer(32, seed=0)

    def reform(x: np.ndarray) -> np.ndarray:
        if form == "big-endian":
            return x.astype(x.dtype.newbyteorder(">"))
        if form == "strided":
            return np.repeat(x, 2, axis=-1)[..., ::2]
        if form == "ndarray subclass":
            return x.view(np.matrix) if x.ndim == 2 else x.view(np.recarray)
        return x

    for s in steps:
        one = {k: v[0] for k, v in s.items()}
        one.update(
            rew=float(one["rew"]), terminated=bool(one["terminated"]), truncated=bool(one["truncated"])
        )
        plain.add(**one)
        if form == "0-d rewards":
            other.add(**dict(one, rew=np.asarray(one["rew"], np.float64)))
        else:
            other.add(
                **dict(one, obs=reform(one["obs"]), obs_next=reform(one["obs_next"]), act=reform(one["act"]))
            )
    x, y = stored(plain), stored(other)
    for k in x:
        np.testing.assert_array_equal(x[k], y[k], err_msg=f"state part {k}")


def test_an_add_waiting_for_the_lock_reads_its_arrays_once_it_holds_it() -> None:
    """A lean add that waits for the buffer's lock (held here by a general add converting an
    object with ``__array__``) must read its arrays' headers after it takes the lock: another
    thread may change them meanwhile (here the dtype, float32 -> int32; a resize would free the
    memory a stale header points to). The add then stores what the array holds when it runs."""
    buf = rlcore.ReplayBuffer(8, seed=0)
    act = np.zeros(1, np.float32)
    buf.add(np.zeros(4, np.float32), act, 0.0, False, False, np.ones(4, np.float32))
    victim, nxt = np.ones(4, np.float32), np.full(4, 2, np.float32)
    errors: list[BaseException] = []

    def lean_add() -> None:
        try:
            buf.add(victim, act, 1.0, False, False, nxt)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    waiter = threading.Thread(target=lean_add)

    class ChangesTheVictim:
        def __array__(self, dtype=None, copy=None):
            waiter.start()
            time.sleep(0.3)  # the waiter is in add, waiting for the lock with the GIL released
            victim.dtype = np.int32  # the same bytes, now read as int32
            return np.ones(4, np.float32)

    buf.add(ChangesTheVictim(), act, 0.0, False, False, np.full(4, 8, np.float32))
    waiter.join()
    assert not errors
    stored_obs = np.asarray(buf.state_dict()["arrays"]["col:obs"])
    # rows: 0 zeros, 1 ones (the general add continues there), 2 eights; the victim's obs is
    # not the eights, so its episode starts at row 3 with the int32 values cast to float32
    np.testing.assert_array_equal(stored_obs[3], np.full(4, np.float32(1).view(np.int32), np.float32))
    np.testing.assert_array_equal(stored_obs[4], nxt)


def test_a_zero_d_array_in_foreign_byte_order_stays_zero_d() -> None:
    """A 0-d big-endian ``act`` (or reward, or flag) is converted to native order without
    becoming 1-d: the column it declares is ``()``, and the same input is accepted again."""
    buf = rlcore.ReplayBuffer(8, seed=0)
    act = np.asarray(np.float32(1.5)).astype(">f4")
    obs = np.zeros(3, np.float32)
    buf.add(obs, act, np.asarray(1.0, ">f8"), np.asarray(False, ">u2"), False, obs + 1)
    assert buf._schema()[1] == [("act", "float32", ())]
    buf.add(obs + 1, act, np.asarray(2.0, ">f8"), np.asarray(False, ">u2"), False, obs + 2)
    np.testing.assert_array_equal(buf.sample(4).act, np.full(4, 1.5, np.float32))
    assert sorted(buf.sample(64).rew.tolist())[::63] == [1.0, 2.0]
