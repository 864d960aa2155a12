"""Writing a ReplayBuffer: ``add`` from vector envs (masks, flags, a single env, a truncated
episode's true final observation, another thread), ``from_arrays`` and ``extend``, each equal to
step-by-step adds."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer
from reference_stream import (
    F32,
    KINDS,
    Stream,
    batches_equal,
    check_against_reference,
    long_buffer,
    state_equal,
    stream_params,
)

# ---------------------------------------------------------------------------------------------
# add from vector envs: masks, flags, a single env, another thread


def test_masked_envs_write_nothing_and_report_minus_one():
    buf = rlcore.ReplayBuffer(12, num_envs=3, seed=0)
    o = np.zeros((3, 2), F32)
    z = np.zeros(3, bool)
    res = buf.add(o, np.zeros(3, np.int64), np.ones(3), z, z, o + 1, mask=np.array([False, False, False]))
    assert res.indices.tolist() == [-1, -1, -1] and len(buf) == 0
    res = buf.add(
        o,
        np.zeros(3, np.int64),
        np.ones(3),
        z,
        np.array([0, 1, 0], bool),
        o + 1,
        mask=np.array([True, True, False]),
    )
    assert res.indices.tolist() == [0, 4, -1] and res.done_envs.tolist() == [1] and len(buf) == 2
    assert buf.last_index().tolist() == [0, 4, -1]


def test_integer_flags_are_stored_as_zero_or_one():
    buf = rlcore.ReplayBuffer(12, num_envs=2, seed=0)
    o = np.zeros((2, 2), F32)
    buf.add(
        o, np.zeros(2, np.int64), np.ones(2), np.array([2, 0], np.int64), np.array([0, 256], np.int32), o + 1
    )
    assert buf.terminated[[0, 6]].tolist() == [1, 0] and buf.truncated[[0, 6]].tolist() == [0, 1]
    b = buf.sample(32)
    assert b.terminated.view(np.uint8).max() <= 1 and b.truncated.view(np.uint8).max() <= 1
    np.testing.assert_array_equal(b.terminated, b.indices == 0)
    np.testing.assert_array_equal(b.discount, np.where(b.indices == 0, 0.0, np.float32(0.99)))


def test_single_env_with_and_without_leading_dim_are_the_same():
    a = rlcore.ReplayBuffer(12, seed=0)
    b = rlcore.ReplayBuffer(12, seed=0)
    for t in range(5):
        o, n = np.array([t, -t], F32), np.array([t + 1, -t - 1], F32)
        a.add(o, np.int64(t), float(t), t == 3, False, n)
        b.add(o[None], np.array([t]), np.array([t], F32), np.array([t == 3]), np.array([False]), n[None])
    sa, sb = a.state_dict()["arrays"], b.state_dict()["arrays"]
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
    res = a.add(np.array([5, -5], F32), 1, 1.0, False, False, np.array([6, -6], F32))
    assert res.indices.shape == (1,) and res.done_envs.tolist() == []


def test_add_from_another_thread_during_large_sample_does_not_fail():
    import threading

    buf = rlcore.ReplayBuffer(100_000, seed=0)
    for t in range(1000):
        buf.add(np.full(64, t, F32), np.zeros(4, F32), 0.0, False, False, np.full(64, t + 1, F32))
    stop = threading.Event()

    def learner():
        while not stop.is_set():
            buf.sample(5_000)  # > 1 MiB: gathered with the GIL released

    th = threading.Thread(target=learner)
    th.start()
    errors = []
    try:
        for k in range(1000, 1030):
            try:
                buf.add(np.full(64, k, F32), np.zeros(4, F32), 0.0, False, False, np.full(64, k + 1, F32))
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)
    finally:
        stop.set()
        th.join()
    assert not errors, f"{len(errors)} of 30 adds failed: {errors[0]!r}"
    assert len(buf) == 1030
    np.testing.assert_array_equal(buf.column("obs")[1000:1031, 0], np.arange(1000, 1031))


# ---------------------------------------------------------------------------------------------
# truncation with a real gymnasium vector env: a truncated episode keeps its true final observation


class _CounterEnv(gym.Env):
    """obs = [1000 * env + episode, t]; never terminates (TimeLimit truncates)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), F32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, idx: int) -> None:
        self.idx, self.episode, self.t = idx, -1, 0

    def _obs(self):
        return np.array([1000 * self.idx + self.episode, self.t], F32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(self.t), False, False, {}


def test_timed_out_step_keeps_true_final_observation_in_vector_env():
    limits = (3, 4)
    envs = gym.vector.SyncVectorEnv(
        [lambda i=i: gym.wrappers.TimeLimit(_CounterEnv(i), max_episode_steps=limits[i]) for i in range(2)]
    )
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    buf = rlcore.ReplayBuffer.from_spaces(
        envs.single_observation_space, envs.single_action_space, capacity=200, num_envs=2, seed=0
    )
    obs, _ = envs.reset(seed=0)
    autoreset = np.zeros(2, bool)
    n_real = 0
    ended = []
    for _ in range(25):
        act = envs.action_space.sample()
        nxt, rew, term, trunc, _ = envs.step(act)
        res = buf.add(obs, act, rew, term, trunc, nxt, mask=~autoreset)
        n_real += int((~autoreset).sum())
        ended += list(zip(res.done_envs.tolist(), res.episode_lengths.tolist(), strict=True))
        autoreset = term | trunc
        obs = nxt
    envs.close()
    assert len(buf) == n_real
    assert ended and all(length == limits[e] for e, length in ended)
    # the stored transitions: exactly steps 0..limit-1 of each episode, never a reset row
    obs_v = buf.column("obs")
    is_t = buf.is_transition(np.arange(buf.capacity))
    for p in np.flatnonzero(is_t):
        env = p // buf.segment_len
        assert 0 <= obs_v[p, 1] < limits[env], f"row {p} stores a reset step as a transition"
    batch = buf.sample(2000, n_step=1, gamma=0.9)
    env_of = batch.indices // buf.segment_len
    lim = np.array(limits)[env_of]
    tr = batch.truncated
    assert tr.any() and not batch.terminated.any()
    # step limit-1 of every episode is truncated and bootstraps from the final observation o_limit
    np.testing.assert_array_equal(tr, batch.obs[:, 1] == lim - 1)
    np.testing.assert_array_equal(batch.obs_next[tr, 1], lim[tr])
    np.testing.assert_array_equal(batch.obs_next[tr, 0], batch.obs[tr, 0])
    np.testing.assert_array_equal(batch.obs_next[:, 1], batch.obs[:, 1] + 1)
    np.testing.assert_allclose(batch.discount[tr], 0.9, rtol=1e-6)
    np.testing.assert_array_equal(batch.rew, batch.obs[:, 1] + 1)


# ---------------------------------------------------------------------------------------------
# offline construction: from_arrays


def _offline_data():
    """3 episodes of length 4 (terminated, truncated, running), rewards 1, 2, 3, 4 each."""
    obs, act, rew, term, trunc, nxt = [], [], [], [], [], []
    for ep in range(3):
        for t in range(4):
            obs.append([ep, t])
            nxt.append([ep, t + 1])
            act.append([ep * 10 + t])
            rew.append(t + 1)
            term.append(ep == 0 and t == 3)
            trunc.append(ep == 1 and t == 3)
    return (
        np.array(obs, F32),
        np.array(act, np.int64),
        np.array(rew, F32),
        np.array(term),
        np.array(trunc),
        np.array(nxt, F32),
    )


def test_offline_from_arrays_gives_same_nstep_as_step_by_step():
    obs, act, rew, term, trunc, nxt = _offline_data()
    off = rlcore.ReplayBuffer.from_arrays(obs, act, rew, term, trunc, nxt, capacity=32, seed=5)
    online = rlcore.ReplayBuffer(32, seed=5)
    for t in range(len(rew)):
        online.add(obs[t], act[t], rew[t], term[t], trunc[t], nxt[t])
    # index 0 holds step 0 of episode 0: n = 3, rewards 1, 2, 3 -> 6 with gamma = 1
    assert off.column("obs")[0].tolist() == [0, 0]
    b_off, b_on = off.sample(200, n_step=3, gamma=1.0), online.sample(200, n_step=3, gamma=1.0)
    for b in (b_off, b_on):
        at0 = b.rew[b.indices == 0]
        assert len(at0) > 0 and np.all(at0 == 6.0)
    for f in ("obs", "act", "rew", "obs_next", "terminated", "truncated", "discount", "indices"):
        np.testing.assert_array_equal(getattr(b_off, f), getattr(b_on, f), err_msg=f)
    s_off, s_on = off.state_dict()["arrays"], online.state_dict()["arrays"]
    for k in s_on:
        np.testing.assert_array_equal(s_off[k], s_on[k], err_msg=k)


def test_from_arrays_default_capacity_keeps_every_step():
    obs, act, rew, term, trunc, nxt = _offline_data()
    buf = rlcore.ReplayBuffer.from_arrays(obs, act, rew, term, trunc, nxt, seed=0)
    assert buf.capacity == 12 + 3
    assert len(buf) == 12
    s, e, ln = buf.episode_bounds(np.array([0, 5, 10]))
    assert ln.tolist() == [4, 4, 4]


def test_from_arrays_splits_at_discontinuities_like_add():
    """A stream of independent transitions (obs[t+1] != obs_next[t]) costs two rows each."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(6, 3)).astype(F32)
    nxt = rng.normal(size=(6, 3)).astype(F32)
    z = np.zeros(6, bool)
    buf = rlcore.ReplayBuffer.from_arrays(obs, np.zeros((6, 1), F32), np.ones(6, F32), z, z, nxt, seed=0)
    assert buf.capacity == 12 and len(buf) == 6
    ref = RefBuffer(12, 1)
    for t in range(6):
        ref.add(obs[t : t + 1], np.zeros((1, 1), F32), np.ones(1, F32), z[:1], z[:1], nxt[t : t + 1])
    check_against_reference(buf, ref, 2, 0.9, batch_size=32)


def test_from_arrays_default_capacity_with_signed_zero_discontinuity():
    obs = np.array([[0.0], [1.0], [0.0]], F32)
    nxt = np.array([[1.0], [-0.0], [3.0]], F32)  # obs_next[1] = -0.0 but obs[2] = +0.0: a cut
    z = np.zeros(3, bool)
    buf = rlcore.ReplayBuffer.from_arrays(obs, np.zeros((3, 1), F32), np.ones(3, F32), z, z, nxt, seed=0)
    assert len(buf) == 3


@settings(max_examples=30, deadline=None)
@given(
    t_len=st.integers(1, 30),
    cap_extra=st.integers(-12, 6),
    dict_obs=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_from_arrays_equals_step_by_step_adds(t_len, cap_extra, dict_obs, seed, data):
    kinds = data.draw(
        st.lists(st.sampled_from(("step", "step", "term", "trunc", "cut")), min_size=t_len, max_size=t_len)
    )
    rng = np.random.default_rng(seed)
    obs = np.empty((t_len, 2), F32)
    nxt = np.empty((t_len, 2), F32)
    last = None
    for t, k in enumerate(kinds):
        obs[t] = last if (last is not None and k != "cut") else rng.normal(size=2)
        nxt[t] = rng.normal(size=2)
        last = None if k in ("term", "trunc") else nxt[t]
    kinds = np.array(kinds)
    term, trunc = kinds == "term", kinds == "trunc"
    act = rng.integers(0, 4, size=t_len)
    rew = rng.normal(size=t_len).astype(F32)
    extra = rng.integers(0, 9, size=(t_len, 2)).astype(np.int16)
    wrap = (lambda x: {"x": x, "y": x[:, :1] * 2}) if dict_obs else (lambda x: x)
    needed = t_len + 1 + int(((term | trunc)[:-1]).sum()) + int((kinds[1:] == "cut").sum())
    capacity = max(2, needed + cap_extra)
    off = rlcore.ReplayBuffer.from_arrays(
        wrap(obs), act, rew, term, trunc, wrap(nxt), capacity=capacity, seed=seed, extras={"e": extra}
    )
    online = rlcore.ReplayBuffer(capacity, seed=seed)
    ref = RefBuffer(capacity, 1)
    for t in range(t_len):
        one = (lambda x, t=t: {k: v[t] for k, v in x.items()}) if dict_obs else (lambda x, t=t: x[t])
        online.add(one(wrap(obs)), act[t], rew[t], term[t], trunc[t], one(wrap(nxt)), e=extra[t])
        ref.add(
            (lambda x, t=t: {k: v[t : t + 1] for k, v in x.items()})(wrap(obs))
            if dict_obs
            else obs[t : t + 1],
            act[t : t + 1],
            rew[t : t + 1],
            term[t : t + 1],
            trunc[t : t + 1],
            (lambda x, t=t: {k: v[t : t + 1] for k, v in x.items()})(wrap(nxt))
            if dict_obs
            else nxt[t : t + 1],
            extras={"e": extra[t : t + 1]},
        )
    s_off, s_on = off.state_dict(), online.state_dict()
    assert s_off["schema"] == s_on["schema"]
    for k in s_on["arrays"]:
        np.testing.assert_array_equal(s_off["arrays"][k], s_on["arrays"][k], err_msg=k)
    if cap_extra >= 0:
        assert len(off) == t_len, "a large enough buffer keeps every step"
    batches_equal(off.sample(16, n_step=2), online.sample(16, n_step=2))
    check_against_reference(off, ref, 3, 0.9, batch_size=32)


def test_from_arrays_default_capacity_fits_dict_obs_and_discontinuities():
    obs, act, rew, term, trunc, nxt = _offline_data()
    nxt[5] += 100  # a cut inside episode 1
    d = lambda x: {"a": x, "b": x[:, :1]}  # noqa: E731
    buf = rlcore.ReplayBuffer.from_arrays(d(obs), act, rew, term, trunc, d(nxt), seed=0)
    assert len(buf) == 12 and buf.capacity == 12 + 4


# ---------------------------------------------------------------------------------------------
# extend: T vector steps in one call


class _Recorder:
    """Forwards ``add`` to a real buffer and keeps every call's arguments and result."""

    def __init__(self, buf):
        self.buf, self.calls = buf, []

    def add(self, obs, act, rew, term, trunc, obs_next, *, mask, **extras):
        res = self.buf.add(obs, act, rew, term, trunc, obs_next, mask=mask, **extras)
        self.calls.append(((obs, act, rew, term, trunc, obs_next), mask, extras, res))
        return res


def _stack(xs):
    if isinstance(xs[0], dict):
        return {k: np.stack([x[k] for x in xs]) for k in xs[0]}
    return np.stack(xs)


@settings(max_examples=40, deadline=None)
@given(p=stream_params, data=st.data())
def test_extend_equals_step_by_step_add(p, data):
    """Chunks of T vector steps through ``extend`` build exactly the state (rows, episode index,
    RNG untouched) and the AddResults of T ``add`` calls."""
    n = p["num_envs"]
    steps = data.draw(
        st.lists(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n), min_size=1, max_size=30)
    )
    dict_obs = data.draw(st.booleans())
    rec = _Recorder(rlcore.ReplayBuffer(p["seg"] * n, num_envs=n, seed=p["seed"]))
    stream = Stream(rec, RefBuffer(p["seg"] * n, n), n, dict_obs=dict_obs, seed=p["seed"])
    for kinds in steps:
        stream.step(kinds)
    other = rlcore.ReplayBuffer(p["seg"] * n, num_envs=n, seed=p["seed"])
    calls, k = rec.calls, 0
    while k < len(calls):
        t = data.draw(st.integers(1, len(calls) - k))
        chunk = calls[k : k + t]
        arrays = [_stack([c[0][j] for c in chunk]) for j in range(6)]
        res = other.extend(
            *arrays, mask=_stack([c[1] for c in chunk]), aux=_stack([c[2]["aux"] for c in chunk])
        )
        assert res.indices.tolist() == [i for c in chunk for i in c[3].indices.tolist()]
        assert res.done_envs.tolist() == [e for c in chunk for e in c[3].done_envs.tolist()]
        assert res.episode_lengths.tolist() == [x for c in chunk for x in c[3].episode_lengths.tolist()]
        k += t
    if rec.buf._schema()[1]:
        state_equal(rec.buf, other)


def test_extend_single_env_takes_time_only_arrays_like_from_arrays():
    d = _offline_data()
    buf = rlcore.ReplayBuffer(64, seed=5)
    res = buf.extend(*d)
    assert res.indices.shape == (12,) and res.done_envs.tolist() == [0, 0]
    state_equal(buf, rlcore.ReplayBuffer.from_arrays(*d, capacity=64, seed=5))


@pytest.mark.parametrize(
    "bad",
    [
        dict(rew=np.zeros((4, 3), F32)),  # N does not match num_envs=2
        dict(rew=np.zeros(8, F32)),  # [T] only for one env
        dict(act=np.zeros((3, 2, 2), F32)),  # T differs
        dict(obs_next=np.zeros((4, 1, 2), F32)),  # N differs
        dict(terminated=np.zeros((4, 2, 1), bool)),  # extra trailing dimension
        dict(act=np.zeros((4, 2, 3), F32)),  # action shape differs from the stored column
        dict(aux=np.zeros((4, 2), np.complex64)),  # extra of an unsupported dtype
        dict(obs={"pos": np.zeros((4, 2, 2), F32)}),  # dict obs for an array column
    ],
)
def test_extend_bad_input_raises_typed_error_and_writes_nothing(bad):
    buf = long_buffer(0, num_envs=2, steps=6)
    before = buf.state_dict()
    good = dict(
        obs=np.full((4, 2, 2), 9, F32),
        act=np.zeros((4, 2, 2), F32),
        rew=np.zeros((4, 2), F32),
        terminated=np.zeros((4, 2), bool),
        truncated=np.zeros((4, 2), bool),
        obs_next=np.full((4, 2, 2), 9, F32),
        aux=np.zeros((4, 2), np.int32),
    )
    twin = pickle.loads(pickle.dumps(buf))
    assert twin.extend(**good).indices.shape == (8,)
    with pytest.raises((rlcore.errors.ShapeError, rlcore.errors.DTypeError)):
        buf.extend(**{**good, **bad})
    after = buf.state_dict()
    for k in before["arrays"]:
        np.testing.assert_array_equal(before["arrays"][k], after["arrays"][k], err_msg=k)


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("num_envs", [1, 3])
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("p_cut", [0.15, 0.003])
@pytest.mark.parametrize("dtypes", ["float32/bool", "float64/int32"])
def test_bulk_extend_equals_step_by_step_add_through_cuts_wraps_and_masks(num_envs, prioritized, masked, p_cut, dtypes):
    """``extend`` of many rows copies the columns after the rows' bookkeeping (issue 20's bulk
    path), and one env's unmasked rows that continue an episode go as whole runs; it must build
    exactly the state of step-by-step adds: continuity cuts (the check compares with this call's
    own obs_next), episode ends, a ring that wraps several times within one call (runs longer
    than the ring), masked steps, a dict observation and an extra."""
    rng = np.random.default_rng(5)
    t, n = 400, num_envs
    obs = rng.standard_normal((t, n, 3)).astype(np.float32)
    obs_next = rng.standard_normal((t, n, 3)).astype(np.float32)
    cont = rng.random((t, n)) >= p_cut
    obs[1:][cont[1:]] = obs_next[:-1][cont[1:]]  # mostly continuous streams, some cuts
    p_done = 0.03 if p_cut > 0.01 else 0.002
    term = rng.random((t, n)) < p_done
    trunc = rng.random((t, n)) < p_done
    mask = rng.random((t, n)) < 0.9 if masked else np.ones((t, n), bool)
    act = rng.integers(0, 5, (t, n)).astype(np.int64)
    rew = rng.standard_normal((t, n)).astype(np.float32)
    if dtypes == "float64/int32":  # the run path's generic reads (float32/bool has its own loop)
        rew, term, trunc = rew.astype(np.float64), term.astype(np.int32), trunc.astype(np.int32)
    aux = rng.standard_normal((t, n, 2))
    goal = {"o": obs, "g": obs[..., :2].astype(np.float64).copy()}
    goal_next = {"o": obs_next, "g": obs_next[..., :2].astype(np.float64).copy()}

    def make() -> rlcore.ReplayBuffer:
        klass = rlcore.PrioritizedReplayBuffer if prioritized else rlcore.ReplayBuffer
        return klass(70 * n, num_envs=n, seed=1)

    for o, on in ((obs, obs_next), (goal, goal_next)):
        pick = (lambda x, k: {kk: v[k] for kk, v in x.items()}) if isinstance(o, dict) else (lambda x, k: x[k])
        steps, bulk = make(), make()
        want = [steps.add(pick(o, k), act[k], rew[k], term[k], trunc[k], pick(on, k), mask=mask[k], aux=aux[k])
                for k in range(t)]
        got = bulk.extend(o, act, rew, term, trunc, on, mask=mask if masked else None, aux=aux)
        assert got.indices.tolist() == [i for r in want for i in r.indices.tolist()]
        assert got.episode_returns.tolist() == [x for r in want for x in r.episode_returns.tolist()]
        assert got.episode_lengths.tolist() == [x for r in want for x in r.episode_lengths.tolist()]
        state_equal(steps, bulk)
        assert len(steps) == len(bulk)  # the counters, which the state does not hold
        np.testing.assert_array_equal(steps.sample(64).indices, bulk.sample(64).indices)
