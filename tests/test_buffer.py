"""ReplayBuffer against the numpy reference (tests/reference.py) and the storage contract of
DESIGN.md: episode-contiguous rows, n-step windows, views, save/load, offline construction."""

from __future__ import annotations

import gc
import itertools
import json
import pickle
import weakref

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer
from rlcore._core import _crc32c
from rlcore.buffers.persist import seal
from rlcore.errors import SaveFileError

F32 = np.float32
KINDS = ("step", "step", "step", "term", "trunc", "cut", "mask")


# ---------------------------------------------------------------------------------------------
# a random episode stream fed to rlcore and to the reference side by side


class Stream:
    """Feeds the same random vector-env steps to an rlcore buffer and to the reference."""

    def __init__(self, buf, ref: RefBuffer, num_envs: int, *, dict_obs: bool = False, seed: int = 0):
        self.buf, self.ref, self.n, self.dict_obs = buf, ref, num_envs, dict_obs
        self.rng = np.random.default_rng(seed)
        self.counter = itertools.count(1)
        self.last_next: list[np.ndarray | None] = [None] * num_envs

    def _obs(self, vals: np.ndarray):
        if self.dict_obs:
            return {"pos": vals.copy(), "tag": (vals[:, 1:2] % 7).astype(np.int16)}
        return vals.copy()

    def step(self, kinds) -> None:
        n = self.n
        obs = np.empty((n, 2), F32)
        nxt = np.empty((n, 2), F32)
        for e, k in enumerate(kinds):
            if self.last_next[e] is None or k == "cut":
                obs[e] = (e, next(self.counter))
            else:
                obs[e] = self.last_next[e]
            nxt[e] = (e, next(self.counter))
        kinds = np.asarray(kinds)
        term, trunc, mask = kinds == "term", kinds == "trunc", kinds != "mask"
        act = self.rng.integers(-5, 5, size=(n, 2)).astype(F32)
        rew = (self.rng.integers(-8, 9, size=n) / 4).astype(F32)
        aux = self.rng.integers(0, 1000, size=n).astype(np.int32)
        res = self.buf.add(self._obs(obs), act, rew, term, trunc, self._obs(nxt), mask=mask, aux=aux)
        rows, dones = self.ref.add(
            self._obs(obs), act, rew, term, trunc, self._obs(nxt), mask=mask, extras={"aux": aux}
        )
        assert _rows(res.indices).tolist() == rows
        assert res.done_envs.tolist() == [d[0] for d in dones]
        np.testing.assert_allclose(res.episode_returns, [d[1] for d in dones], rtol=1e-6, atol=1e-6)
        assert res.episode_lengths.tolist() == [d[2] for d in dones]
        for e in range(n):
            if mask[e]:
                self.last_next[e] = None if (term[e] or trunc[e]) else nxt[e].copy()


def obs_at(obs, i):
    return {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]


def assert_obs_equal(got, want, msg=""):
    if isinstance(want, dict):
        assert set(got) == set(want), msg
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{msg} key {k}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


def _rows(indices: np.ndarray) -> np.ndarray:
    """The rows of a buffer's indices (-1 stays -1): a prioritized buffer's indices carry the
    generation of their transition above bit INDEX_ROW_BITS."""
    return np.where(indices >= 0, indices & ((1 << rlcore._core.INDEX_ROW_BITS) - 1), indices)


def check_against_reference(buf, ref: RefBuffer, n_step: int, gamma: float, batch_size: int = 64) -> None:
    """Every structural query and every sampled field equals the reference."""
    assert len(buf) == len(ref)
    rows = np.arange(buf.capacity)
    sampleable = ref.sampleable()
    assert buf.is_transition(rows).tolist() == [int(p) in sampleable for p in rows]
    alive = np.array(ref.alive_rows(), np.int64)
    s, e, ln = buf.episode_bounds(alive)
    want = [ref.episode_bounds(p) for p in alive]
    assert list(zip(s.tolist(), e.tolist(), ln.tolist(), strict=True)) == want
    assert buf.prev(alive).tolist() == [ref.prev(p) for p in alive]
    assert buf.next(alive).tolist() == [ref.next(p) for p in alive]
    assert buf.last_index().tolist() == ref.last_index()
    assert buf.unfinished_index().tolist() == ref.unfinished_index()
    # the views hold the reference's rows
    flags = buf.column("flags")
    obs_view = buf.column("obs")
    for p in alive:
        en, a = ref.locate(p)
        r = ref.envs[en].rows[a]
        assert_obs_equal(obs_at(obs_view, p), r.obs, f"row {p}")
        is_terminal_row = ref.envs[en].ep_end.get(r.ep) == a
        assert bool(flags[p] & 8) == is_terminal_row, f"row {p} terminal flag"
        if r.transition:
            np.testing.assert_array_equal(buf.act[p], r.act)
            assert buf.rew[p] == np.float32(r.rew)
            assert (buf.terminated[p], buf.truncated[p]) == (r.term, r.trunc)
            assert bool(flags[p] & 4) == r.cut, f"row {p} cut flag"
            for k, v in r.extras.items():
                np.testing.assert_array_equal(buf.column(k)[p], v)
    if len(ref) == 0:
        return
    batch = buf.sample(batch_size, n_step=n_step, gamma=gamma)
    assert batch.indices.dtype == np.int64 and batch.indices.shape == (batch_size,)
    assert batch.rew.dtype == np.float32 and batch.discount.dtype == np.float32
    for flag in (batch.terminated, batch.truncated):  # real numpy bools: bytes 0 or 1 only
        assert flag.dtype == np.bool_ and flag.view(np.uint8).max() <= 1
    for i, p in enumerate(_rows(batch.indices)):
        assert int(p) in sampleable, f"sampled row {p} is not a stored transition"
        w = ref.nstep(int(p), n_step, gamma)
        assert_obs_equal(obs_at(batch.obs, i), w["obs"], f"obs of row {p}")
        assert_obs_equal(obs_at(batch.obs_next, i), w["obs_next"], f"obs_next of row {p} (m={w['m']})")
        np.testing.assert_array_equal(batch.act[i], w["act"])
        np.testing.assert_allclose(batch.rew[i], w["rew"], rtol=1e-5, atol=1e-5, err_msg=f"rew_n of row {p}")
        np.testing.assert_allclose(
            batch.discount[i], w["discount"], rtol=1e-6, atol=0, err_msg=f"discount of row {p}"
        )
        assert (bool(batch.terminated[i]), bool(batch.truncated[i])) == (w["terminated"], w["truncated"])
        assert set(batch.extras) == set(w["extras"])
        for k, v in w["extras"].items():
            np.testing.assert_array_equal(batch.extras[k][i], v)


stream_params = st.fixed_dictionaries(
    {
        "num_envs": st.integers(1, 3),
        "seg": st.integers(2, 12),
        "n_step": st.integers(1, 4),
        "gamma": st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
        "seed": st.integers(0, 2**32 - 1),
    }
)


@settings(max_examples=60, deadline=None)
@given(p=stream_params, data=st.data())
def test_random_streams_match_reference_rows_windows_and_samples(p, data):
    n = p["num_envs"]
    steps = data.draw(
        st.lists(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n), min_size=1, max_size=40)
    )
    buf = rlcore.ReplayBuffer(p["seg"] * n, num_envs=n, seed=p["seed"])
    ref = RefBuffer(p["seg"] * n, n)
    stream = Stream(buf, ref, n, seed=p["seed"])
    for kinds in steps:
        stream.step(kinds)
    if not buf._schema()[1]:
        return  # every env masked on every step: nothing was stored
    check_against_reference(buf, ref, p["n_step"], p["gamma"])


@settings(max_examples=25, deadline=None)
@given(p=stream_params, data=st.data())
def test_random_streams_with_dict_observations_match_reference(p, data):
    n = p["num_envs"]
    steps = data.draw(
        st.lists(st.lists(st.sampled_from(KINDS[:-1]), min_size=n, max_size=n), min_size=1, max_size=30)
    )
    buf = rlcore.ReplayBuffer(p["seg"] * n, num_envs=n, seed=p["seed"])
    ref = RefBuffer(p["seg"] * n, n)
    stream = Stream(buf, ref, n, dict_obs=True, seed=p["seed"])
    for kinds in steps:
        stream.step(kinds)
    assert buf.obs_is_dict
    assert set(buf.column("obs")) == {"pos", "tag"}
    assert buf.column("obs.tag").dtype == np.int16
    check_against_reference(buf, ref, p["n_step"], p["gamma"])


def test_len_counts_stored_transitions_across_wrap():
    buf = rlcore.ReplayBuffer(10, num_envs=2, seed=0)  # 5 rows per env
    ref = RefBuffer(10, 2)
    stream = Stream(buf, ref, 2)
    lens = []
    for k in range(12):
        stream.step(["step", "term" if k % 3 == 2 else "step"])
        lens.append(len(buf))
        assert len(buf) == len(ref)
    # env 0: one running episode keeps 4 of its 5 rows as transitions once wrapped;
    # env 1: 3-step episodes of 4 rows
    assert lens[:3] == [2, 4, 6]
    assert lens[-1] == 4 + 3


# ---------------------------------------------------------------------------------------------
# views


def _filled(capacity=16, num_envs=2, steps=5, seed=0):
    buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=seed)
    ref = RefBuffer(capacity, num_envs)
    stream = Stream(buf, ref, num_envs, seed=seed)
    for _ in range(steps):
        stream.step(["step"] * num_envs)
    return buf, ref, stream


@pytest.mark.parametrize("name", ["obs", "act", "rew", "terminated", "truncated", "flags", "aux"])
def test_column_views_are_read_only(name):
    buf, _, _ = _filled()
    view = buf.column(name)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1
    with pytest.raises(ValueError):
        view.setflags(write=True)


def test_column_views_share_memory_and_show_later_writes():
    buf, ref, stream = _filled(capacity=16, num_envs=2, steps=2)
    obs, rew, act = buf.column("obs"), buf.rew, buf.act
    assert obs.shape == (16, 2) and rew.shape == (16,) and act.shape == (16, 2)
    assert rew.dtype == np.float32
    assert buf.terminated.dtype == buf.truncated.dtype == buf.column("flags").dtype == np.uint8
    assert not obs.flags.owndata and obs.base is not None
    before = rew.copy()
    for _ in range(9):  # wraps both 8-row segments
        stream.step(["step", "term"])
    assert not np.array_equal(rew, before), "later writes must show through the view"
    for p in ref.alive_rows():
        e, a = ref.locate(p)
        np.testing.assert_array_equal(obs[p], ref.envs[e].rows[a].obs)
    # memory is never reallocated: a fresh view starts at the same address
    assert buf.column("obs").__array_interface__["data"][0] == obs.__array_interface__["data"][0]
    buf.clear()
    assert buf.column("obs").__array_interface__["data"][0] == obs.__array_interface__["data"][0]


def test_column_view_keeps_buffer_alive_after_del():
    buf, ref, stream = _filled(capacity=8, num_envs=1, steps=3)
    del stream  # holds a reference to buf
    ref_obs = [ref.envs[0].rows[a].obs for a in range(4)]
    alive = weakref.ref(buf)
    view = buf.column("obs")
    del buf
    gc.collect()
    assert alive() is not None, "the view's base must keep the buffer alive"
    for a in range(4):
        np.testing.assert_array_equal(view[a], ref_obs[a])
    del view
    gc.collect()
    assert alive() is None


def test_column_views_are_strided_and_usable_by_numpy():
    buf, ref, _ = _filled(capacity=16, num_envs=2, steps=5)
    obs, rew = buf.column("obs"), buf.rew
    # rows are interleaved records: the row stride is the record size, not the item size
    assert obs.strides[1] == 4 and obs.strides[0] >= 2 * 4
    assert rew.strides[0] == obs.strides[0]
    rows = np.array(ref.alive_rows())
    want = np.stack([ref.envs[p // 8].rows[ref.locate(p)[1]].obs for p in rows])
    np.testing.assert_array_equal(obs[rows], want)
    np.testing.assert_array_equal(np.ascontiguousarray(obs)[rows], want)
    assert obs[rows].sum() == want.sum()


# ---------------------------------------------------------------------------------------------
# the n-step cases


def _one_episode(end: str, length: int = 6, capacity: int = 16):
    buf = rlcore.ReplayBuffer(capacity, seed=1)
    for t in range(length):
        last = t == length - 1
        buf.add(
            np.array([t], F32),
            np.array([t], F32),
            1.0,
            last and end == "term",
            last and end == "trunc",
            np.array([t + 1], F32),
        )
    return buf


def _by_step(batch):
    """{step t: (rew, obs_next, discount, terminated)} for a single-episode buffer (obs = [t])."""
    out = {}
    for i in range(batch.batch_size):
        t = int(batch.obs[i, 0])
        out[t] = (
            float(batch.rew[i]),
            float(batch.obs_next[i, 0]),
            float(batch.discount[i]),
            bool(batch.terminated[i]),
        )
    return out


@pytest.mark.parametrize("end", ["term", "trunc"])
def test_nstep_across_termination_and_truncation(end):
    buf = _one_episode(end)
    got = _by_step(buf.sample(400, n_step=3, gamma=0.5))
    assert sorted(got) == [0, 1, 2, 3, 4, 5], "400 uniform draws over 6 rows must hit every row"
    rew = [1.75, 1.75, 1.75, 1.75, 1.5, 1.0]
    nxt = [3, 4, 5, 6, 6, 6]
    power = [0.125, 0.125, 0.125, 0.125, 0.25, 0.5]
    masked = {3, 4, 5} if end == "term" else set()
    for t in range(6):
        r, o, d, term = got[t]
        assert r == pytest.approx(rew[t], abs=1e-6)
        assert o == nxt[t]
        assert d == pytest.approx(0.0 if t in masked else power[t], abs=1e-7)
        assert term == (t in masked)


def test_nstep_window_stops_at_write_cursor_after_wrap():
    buf = rlcore.ReplayBuffer(8, seed=3)
    for t in range(11):  # one running episode, 12 rows written into 8
        buf.add(np.array([t], F32), np.array([t], F32), 1.0, False, False, np.array([t + 1], F32))
    newest = int(buf.last_index()[0])
    assert newest == buf.unfinished_index()[0]
    assert buf.column("obs")[newest, 0] == 10
    got = _by_step(buf.sample(500, n_step=4, gamma=0.5))
    assert sorted(got) == list(range(4, 11)), "steps 0..3 were overwritten; 4..10 survive"
    r, o, d, _ = got[10]
    assert (r, o, d) == (1.0, 11.0, 0.5), "the newest transition has m = 1 and bootstraps from o_11"
    for t, (r, o, d, _) in got.items():
        m = min(4, 11 - t)
        assert o == t + m, f"window of step {t} ran past the newest row into the oldest"
        assert d == pytest.approx(0.5**m)
        assert r == pytest.approx(sum(0.5**k for k in range(m)))


@pytest.mark.parametrize("gamma", [0.0, 0.3, 0.9, 1.0])
def test_bootstrap_discount_is_gamma_to_the_window_length(gamma):
    buf = _one_episode("trunc", length=5)
    got = _by_step(buf.sample(400, n_step=3, gamma=gamma))
    for t, (_, o, d, _) in got.items():
        m = int(o) - t
        assert m == min(3, 5 - t)
        assert d == pytest.approx(np.float32(gamma**m), rel=1e-6, abs=0)


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
# randomness: seeded, independent streams per buffer


def _long_buffer(seed, num_envs=1, steps=50):
    buf = rlcore.ReplayBuffer(64 * num_envs, num_envs=num_envs, seed=seed)
    stream = Stream(buf, RefBuffer(64 * num_envs, num_envs), num_envs)
    for k in range(steps):
        stream.step(["term" if k % 10 == 9 else "step"] * num_envs)
    return buf


def test_seeds_matter_and_same_seed_reproduces():
    a1, a2, b = _long_buffer(7), _long_buffer(7), _long_buffer(8)
    i1, i2, j = (x.sample(64).indices for x in (a1, a2, b))
    np.testing.assert_array_equal(i1, i2)
    assert not np.array_equal(i1, j)
    # two buffers with the same seed stay in lock step over many calls; the stream moves on
    prev = i1
    for _ in range(5):
        x, y = a1.sample(64, n_step=2).indices, a2.sample(64, n_step=2).indices
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, prev)
        prev = x
    # unseeded buffers get independent streams
    u1, u2 = _long_buffer(None), _long_buffer(None)
    assert not np.array_equal(u1.sample(64).indices, u2.sample(64).indices)


def test_vector_buffer_per_env_rows_are_not_time_aligned():
    n_envs = 4
    buf = _long_buffer(11, num_envs=n_envs, steps=60)  # all envs store identical layouts
    seg = buf.segment_len
    same_time = pairs = 0
    env_pairs = np.zeros((n_envs, n_envs))
    for _ in range(200):
        idx = buf.sample(64).indices
        env, local = idx // seg, idx % seg
        diff_env = env[:-1] != env[1:]
        pairs += int(diff_env.sum())
        same_time += int((diff_env & (local[:-1] == local[1:])).sum())
        np.add.at(env_pairs, (env[:-1], env[1:]), 1)
    # chance of two independent draws landing on the same local row: 1 / (transitions per env)
    p = 1.0 / (len(buf) / n_envs)
    expect, sd = pairs * p, np.sqrt(pairs * p * (1 - p))
    assert abs(same_time - expect) < 5 * sd, (same_time, expect, sd)
    # consecutive samples pick their envs independently (every pair of envs about equally often)
    e_exp = env_pairs.sum() / n_envs**2
    assert np.all(np.abs(env_pairs - e_exp) < 5 * np.sqrt(e_exp))


# ---------------------------------------------------------------------------------------------
# columns: extras, dict observations, from_spaces


def test_extras_columns_are_stored_and_sampled_at_step_t():
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    for t in range(6):
        o = np.array([[t, 0], [t, 1]], F32)
        buf.add(
            o,
            np.zeros((2, 1), F32),
            np.zeros(2, F32),
            np.zeros(2, bool),
            np.zeros(2, bool),
            o + [1, 0],
            logp=np.array([t * 0.5, -t * 0.5], np.float64),
            mask_bits=np.array([[t, 1, 0], [0, 1, t]], np.uint8),
        )
    assert buf.column("logp").dtype == np.float64 and buf.column("mask_bits").shape == (20, 3)
    b = buf.sample(100)
    assert set(b.extras) == {"logp", "mask_bits"}
    t = b.obs[:, 0]
    env = b.obs[:, 1]
    np.testing.assert_array_equal(b.extras["logp"], np.where(env == 0, t * 0.5, -t * 0.5))
    np.testing.assert_array_equal(b.extras["mask_bits"][:, 1], 1)
    np.testing.assert_array_equal(b.extras["mask_bits"][:, 0], np.where(env == 0, t, 0))


def test_dict_obs_key_order_of_obs_next_does_not_matter():
    buf = rlcore.ReplayBuffer(10, seed=0)
    a, b = np.zeros(2, F32), np.zeros(1, F32)
    buf.add({"a": a, "b": b}, np.zeros(1, F32), 0.0, False, False, {"b": b + 1, "a": a + 1})
    assert len(buf) == 1
    np.testing.assert_array_equal(buf.sample(1).obs_next["a"][0], [1, 1])


def test_dict_obs_key_order_after_first_add_does_not_matter():
    buf = rlcore.ReplayBuffer(10, seed=0)
    a, b = np.zeros(2, F32), np.zeros(1, F32)
    buf.add({"a": a, "b": b}, np.zeros(1, F32), 0.0, False, False, {"a": a + 1, "b": b + 1})
    buf.add({"b": b + 1, "a": a + 1}, np.zeros(1, F32), 0.0, False, False, {"b": b + 2, "a": a + 2})
    s, e, ln = buf.episode_bounds(np.array([0]))
    assert ln.tolist() == [2], "same keys in another order are the same observation (no cut)"
    assert buf.column("obs.a")[2].tolist() == [2, 2]


def test_from_spaces_declares_columns_before_any_add():
    obs_space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1, 1, (3,), F32),
            "grid": gym.spaces.MultiBinary(4),
            "k": gym.spaces.Discrete(5),
        }
    )
    buf = rlcore.ReplayBuffer.from_spaces(
        obs_space, gym.spaces.Discrete(3), capacity=12, num_envs=2, seed=0, extras={"logp": ((), np.float32)}
    )
    obs_schema, step_schema = buf._schema()
    assert dict((s[0], (s[1], tuple(s[2]))) for s in obs_schema) == {
        "obs.pos": ("float32", (3,)),
        "obs.grid": ("int8", (4,)),
        "obs.k": ("int64", ()),
    }
    assert [(s[0], s[1], tuple(s[2])) for s in step_schema] == [("act", "int64", ()), ("logp", "float32", ())]
    views = buf.column("obs")
    assert views["pos"].shape == (12, 3) and buf.act.dtype == np.int64
    o = obs_space.sample()
    vo = {k: np.stack([v, v]) for k, v in o.items()}
    buf.add(vo, np.array([1, 2]), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), vo, logp=np.zeros(2, F32))
    assert len(buf) == 2
    b = buf.sample(4)
    assert b.obs["grid"].dtype == np.int8 and b.act.dtype == np.int64 and b.extras["logp"].dtype == np.float32
    assert set(b.act.tolist()) <= {1, 2}


def test_from_spaces_box_observation_and_box_action():
    buf = rlcore.PrioritizedReplayBuffer.from_spaces(
        gym.spaces.Box(-1, 1, (4,), np.float64), gym.spaces.Box(-1, 1, (2,), F32), capacity=8, seed=0
    )
    assert buf.column("obs").dtype == np.float64 and buf.act.shape == (8, 2)
    buf.add(np.ones(4), np.ones(2, F32), 1.0, True, False, np.zeros(4))
    assert len(buf) == 1 and buf.sample(2).weights.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------------------------
# save / load / state_dict / pickle


def _batches_equal(a, b):
    for f in ("obs", "act", "rew", "obs_next", "terminated", "truncated", "discount", "indices", "weights"):
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, dict):
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{f}.{k}")
        elif x is None:
            assert y is None
        else:
            np.testing.assert_array_equal(x, y, err_msg=f)
    assert set(a.extras) == set(b.extras)
    for k in a.extras:
        np.testing.assert_array_equal(a.extras[k], b.extras[k])


def _state_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["config"] == sb["config"] and sa["schema"] == sb["schema"]
    assert set(sa["arrays"]) == set(sb["arrays"])
    for k in sa["arrays"]:
        np.testing.assert_array_equal(sa["arrays"][k], sb["arrays"][k], err_msg=k)


def _wrapped(kind="replay"):
    cls = {"replay": rlcore.ReplayBuffer, "prioritized": rlcore.PrioritizedReplayBuffer}[kind]
    buf = cls(18, num_envs=3, seed=42)
    stream = Stream(buf, RefBuffer(18, 3), 3, seed=1)
    rng = np.random.default_rng(2)
    for _ in range(20):
        stream.step(list(rng.choice(KINDS, size=3)))
    buf.sample(8)  # advance the RNG
    return buf


@pytest.mark.parametrize("kind", ["replay", "prioritized"])
def test_save_load_round_trip_is_exact_including_rng(tmp_path, kind):
    buf = _wrapped(kind)
    if kind == "prioritized":
        idx = buf.sample(16).indices
        buf.update_priorities(idx, np.linspace(0.1, 5, 16))
        buf.beta = 0.7
    buf.save(tmp_path / "buf")
    loaded = type(buf).load(tmp_path / "buf")
    assert type(loaded) is type(buf) and loaded.capacity == buf.capacity and loaded.num_envs == 3
    assert len(loaded) == len(buf)
    _state_equal(buf, loaded)
    for n in (1, 3):
        _batches_equal(buf.sample(32, n_step=n, gamma=0.9), loaded.sample(32, n_step=n, gamma=0.9))
    # also through the base class
    again = rlcore.ReplayBuffer.load(tmp_path / "buf")
    assert type(again) is type(buf)


def test_save_is_atomic_a_crashed_save_leaves_previous_save_loadable(tmp_path):
    buf = _wrapped()
    root = tmp_path / "ckpt"
    buf.save(root)
    expected = buf.state_dict()
    # simulate a crash mid-save: a half-written data dir and a leftover temporary manifest
    stale = root / "data-0123456789ab"
    stale.mkdir()
    (stale / "000_col_obs.npy").write_bytes(b"\x93NUMPY garbage")
    (root / "manifest.json.tmp-deadbeef").write_text('{"format": "rlcore-buffer", "data_dir": "data-0123')
    loaded = rlcore.ReplayBuffer.load(root)
    for k, v in expected["arrays"].items():
        np.testing.assert_array_equal(loaded.state_dict()["arrays"][k], v, err_msg=k)
    # the next save replaces it; a folder that no rlcore marker proves to be a killed save's
    # is not the save's to remove (tests/test_persist.py kills a real save)
    buf.add(*_one_step(buf.num_envs), **_aux(buf.num_envs))
    buf.save(root)
    assert (stale / "000_col_obs.npy").read_bytes() == b"\x93NUMPY garbage"
    _state_equal(buf, rlcore.ReplayBuffer.load(root))


def _one_step(n):
    o = np.full((n, 2), 1e6, F32)
    return o, np.zeros((n, 2), F32), np.zeros(n, F32), np.zeros(n, bool), np.zeros(n, bool), o + 1


def _aux(n):
    return {"aux": np.zeros(n, np.int32)}


def _saved(tmp_path):
    buf = _wrapped()
    root = tmp_path / "s"
    buf.save(root)
    manifest = json.loads((root / "manifest.json").read_text())
    return root, manifest


def test_load_missing_manifest_raises_save_file_error(tmp_path):
    root, _ = _saved(tmp_path)
    (root / "manifest.json").unlink()
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(root)
    with pytest.raises(OSError):
        rlcore.ReplayBuffer.load(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda m: "{not json",
        lambda m: json.dumps({**m, "format": "other"}),
        lambda m: json.dumps({**m, "version": 99}),
        lambda m: json.dumps({k: v for k, v in m.items() if k != "files"}),
        lambda m: json.dumps({**m, "data_dir": "data-missing"}),
        lambda m: json.dumps({**m, "config": {**m["config"], "kind": "weird"}}),
        lambda m: json.dumps({**m, "config": {**m["config"], "capacity": m["config"]["capacity"] + 3}}),
        lambda m: json.dumps({**m, "files": {k: v for k, v in m["files"].items() if k != "rng"}}),
        lambda m: json.dumps({**m, "schema": {**m["schema"], "obs": [["obs", "float64", [2]]]}}),
        lambda m: json.dumps([m]),
        lambda m: json.dumps({**m, "data_dir": "../"}),
        *[
            pytest.param(f, id=i)
            for i, f in [
                (
                    "schema-unknown-dtype",
                    lambda m: json.dumps({**m, "schema": {**m["schema"], "obs": [["obs", "complex", [2]]]}}),
                ),
                ("schema-not-list", lambda m: json.dumps({**m, "schema": {**m["schema"], "obs": 5}})),
                (
                    "config-no-capacity",
                    lambda m: json.dumps({**m, "config": {"kind": "replay", "num_envs": 3}}),
                ),
                (
                    "config-negative-capacity",
                    lambda m: json.dumps({**m, "config": {**m["config"], "capacity": -4}}),
                ),
                ("files-not-dict", lambda m: json.dumps({**m, "files": list(m["files"])})),
            ]
        ],
    ],
    ids=[
        "not-json",
        "format",
        "version",
        "no-files",
        "no-data-dir",
        "kind",
        "capacity",
        "file-entry-missing",
        "schema-dtype",
        "manifest-not-dict",
        "data-dir-outside",
        "schema-unknown-dtype",
        "schema-not-list",
        "config-no-capacity",
        "config-negative-capacity",
        "files-not-dict",
    ],
)
def test_load_corrupt_manifest_raises_save_file_error(tmp_path, corrupt):
    root, manifest = _saved(tmp_path)
    text = corrupt(manifest)
    (root / "manifest.json").write_text(text)
    with pytest.raises(SaveFileError):  # the manifest's checksum
        rlcore.ReplayBuffer.load(root)
    # the same manifest with a valid checksum (written by a faulty writer): refused by the
    # check of its own field
    try:
        m = json.loads(text)
    except json.JSONDecodeError:
        return
    if isinstance(m, dict):
        m["checksum"] = seal(m)
        (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(root)


@pytest.mark.parametrize(
    "damage", ["delete", "truncate", "garbage", "wrong-shape", "wrong-dtype", "bad-flags"]
)
def test_load_missing_or_corrupt_npy_raises_save_file_error(tmp_path, damage):
    root, manifest = _saved(tmp_path)
    data = root / manifest["data_dir"]
    name = "flags" if damage == "bad-flags" else "col:obs"
    path = data / manifest["files"][name]["file"]
    arr = np.load(path)
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-7])
    elif damage == "garbage":
        path.write_bytes(b"this is not an npy file")
    elif damage == "wrong-shape":
        np.save(path, arr[:-1])
    elif damage == "wrong-dtype":
        np.save(path, arr.astype(np.float64))
    elif damage == "bad-flags":
        np.save(path, arr | 0x80)
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(root)
    # the same damage with the file's checksum updated in the manifest: the header, size and
    # episode-index checks refuse it on their own
    if path.exists():
        manifest["files"][name]["crc32c"] = f"{_crc32c(np.frombuffer(path.read_bytes(), np.uint8)):08x}"
        manifest["checksum"] = seal(manifest)
        (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(root)


def test_state_dict_round_trip_into_fresh_buffer_and_pickle():
    buf = _wrapped()
    state = buf.state_dict()
    fresh = rlcore.ReplayBuffer(18, num_envs=3)
    fresh.load_state_dict(state)
    _state_equal(buf, fresh)
    clone = pickle.loads(pickle.dumps(buf))
    _state_equal(buf, clone)
    b1, b2, b3 = buf.sample(16, n_step=2), fresh.sample(16, n_step=2), clone.sample(16, n_step=2)
    _batches_equal(b1, b2)
    _batches_equal(b1, b3)
    # state_dict is a deep copy: later adds do not change it
    snapshot = {k: v.copy() for k, v in state["arrays"].items()}
    buf.add(*_one_step(3), **_aux(3))
    for k in snapshot:
        np.testing.assert_array_equal(state["arrays"][k], snapshot[k])


def test_load_state_dict_copies_into_existing_memory():
    buf = _wrapped()
    other = rlcore.ReplayBuffer(18, num_envs=3)
    other.add(*_one_step(3), aux=np.zeros(3, np.int32))
    view = other.column("obs")
    other.load_state_dict(buf.state_dict())
    np.testing.assert_array_equal(view, buf.column("obs"))


def test_load_state_dict_with_mismatched_config_raises_and_leaves_buffer_unchanged():
    buf = _wrapped()
    other = rlcore.ReplayBuffer(24, num_envs=3, seed=0)
    other.add(*_one_step(3), aux=np.zeros(3, np.int32))
    before = other.state_dict()
    with pytest.raises(SaveFileError):
        other.load_state_dict(buf.state_dict())
    _state_equal_dict(other.state_dict(), before)


def _state_equal_dict(sa, sb):
    assert set(sa["arrays"]) == set(sb["arrays"])
    for k in sa["arrays"]:
        np.testing.assert_array_equal(sa["arrays"][k], sb["arrays"][k], err_msg=k)


# ---------------------------------------------------------------------------------------------
# out= and to_torch


def test_sample_out_fills_and_returns_caller_arrays():
    buf = _wrapped()
    twin = rlcore.ReplayBuffer(18, num_envs=3)
    twin.load_state_dict(buf.state_dict())
    out = buf.sample(32, n_step=2)
    twin.sample(32, n_step=2)
    ids = {f: id(getattr(out, f)) for f in ("obs", "act", "rew", "obs_next", "discount", "indices")}
    ids["aux"] = id(out.extras["aux"])
    got = buf.sample(32, n_step=3, gamma=0.7, out=out)
    want = twin.sample(32, n_step=3, gamma=0.7)
    _batches_equal(got, want)
    for f, i in ids.items():
        arr = got.extras["aux"] if f == "aux" else getattr(got, f)
        assert id(arr) == i, f"{f} is not the caller's array"
    assert got.rew is out.rew


def test_sample_out_with_dict_obs_and_extras():
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(20, 2), 2, dict_obs=True)
    for _ in range(6):
        stream.step(["step", "trunc"])
    out = buf.sample(8)
    pos = out.obs["pos"]
    res = buf.sample(8, out=out)
    assert res.obs["pos"] is pos
    for i, p in enumerate(res.indices):
        np.testing.assert_array_equal(res.obs["pos"][i], buf.column("obs.pos")[p])


def test_to_torch_is_zero_copy_on_cpu():
    torch = pytest.importorskip("torch")
    buf = rlcore.PrioritizedReplayBuffer(16, num_envs=2, seed=0)
    Stream(buf, RefBuffer(16, 2), 2).step(["step", "term"])
    b = buf.sample(8)
    t = b.to_torch("cpu")
    assert isinstance(t.obs, torch.Tensor) and t.obs.dtype == torch.float32
    assert t.terminated.dtype == torch.bool and t.indices.dtype == torch.int64
    assert t.weights.dtype == torch.float32 and t.extras["aux"].dtype == torch.int32
    for f in ("obs", "act", "rew", "obs_next", "discount", "indices", "weights"):
        assert getattr(t, f).data_ptr() == getattr(b, f).__array_interface__["data"][0], f
        np.testing.assert_array_equal(getattr(t, f).numpy(), getattr(b, f))


# ---------------------------------------------------------------------------------------------
# offline construction, large gathers, clear, single env without a leading dim


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
    _batches_equal(off.sample(16, n_step=2), online.sample(16, n_step=2))
    check_against_reference(off, ref, 3, 0.9, batch_size=32)


def test_from_arrays_default_capacity_fits_dict_obs_and_discontinuities():
    obs, act, rew, term, trunc, nxt = _offline_data()
    nxt[5] += 100  # a cut inside episode 1
    d = lambda x: {"a": x, "b": x[:, :1]}  # noqa: E731
    buf = rlcore.ReplayBuffer.from_arrays(d(obs), act, rew, term, trunc, d(nxt), seed=0)
    assert len(buf) == 12 and buf.capacity == 12 + 4


@pytest.mark.parametrize("n_step", [1, 3])
def test_large_batch_gather_matches_views(n_step):
    """Batches above 1 MiB are gathered with the GIL released (another code path)."""
    buf = rlcore.ReplayBuffer(4000, num_envs=4, seed=0)
    ref = RefBuffer(4000, 4)
    stream = Stream(buf, ref, 4, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(1200):
        stream.step(list(rng.choice(["step"] * 8 + ["term", "trunc", "cut"], size=4)))
    b = buf.sample(60_000, n_step=n_step, gamma=0.9)
    assert b.obs.nbytes * 2 + b.act.nbytes > 1 << 20
    sampleable = np.array(sorted(ref.sampleable()))
    assert np.isin(b.indices, sampleable).all()
    np.testing.assert_array_equal(b.obs, buf.column("obs")[b.indices])
    np.testing.assert_array_equal(b.act, buf.act[b.indices])
    np.testing.assert_array_equal(b.extras["aux"], buf.column("aux")[b.indices])
    for i in range(0, 60_000, 997):  # spot-check the windows against the reference
        w = ref.nstep(int(b.indices[i]), n_step, 0.9)
        np.testing.assert_array_equal(b.obs_next[i], w["obs_next"])
        np.testing.assert_allclose(b.rew[i], w["rew"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.discount[i], w["discount"], rtol=1e-6)


def test_clear_forgets_steps_keeps_memory_and_rng_stream():
    buf, _, stream = _filled(capacity=16, num_envs=2, steps=6)
    twin = rlcore.ReplayBuffer(16, num_envs=2)
    twin.load_state_dict(buf.state_dict())
    addr = buf.column("obs").__array_interface__["data"][0]
    buf.clear()
    assert len(buf) == 0 and buf.last_index().tolist() == [-1, -1] and buf.unfinished_index().tolist() == []
    with pytest.raises(rlcore.errors.EmptyBufferError):
        buf.sample(1)
    assert buf.column("obs").__array_interface__["data"][0] == addr
    # a fresh start: the next add opens a new episode at the segment start
    ref = RefBuffer(16, 2)
    stream.ref, stream.last_next = ref, [None, None]
    for _ in range(3):
        stream.step(["step", "trunc"])
    check_against_reference(buf, ref, 2, 0.9, batch_size=8)


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


def test_empty_buffer_save_load_and_pickle(tmp_path):
    buf = rlcore.ReplayBuffer(10, num_envs=2, seed=3)
    buf.save(tmp_path / "empty")
    loaded = rlcore.ReplayBuffer.load(tmp_path / "empty")
    assert len(loaded) == 0 and loaded.capacity == 10 and loaded._schema() == ([], [])
    clone = pickle.loads(pickle.dumps(buf))
    assert len(clone) == 0
    for b in (loaded, clone):  # still usable: the first add defines the columns
        b.add(*_one_step(2))
        assert len(b) == 2


def test_to_torch_with_dict_obs_gives_dict_of_tensors():
    torch = pytest.importorskip("torch")
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(20, 2), 2, dict_obs=True)
    for _ in range(4):
        stream.step(["step", "step"])
    b = buf.sample(8)
    t = b.to_torch()
    assert set(t.obs) == {"pos", "tag"} and t.obs["tag"].dtype == torch.int16
    assert t.obs_next["pos"].data_ptr() == b.obs_next["pos"].__array_interface__["data"][0]
    assert t.weights is None


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


@pytest.mark.parametrize("cls", [rlcore.PrioritizedReplayBuffer, rlcore.HERReplayBuffer])
def test_loading_a_save_as_a_more_specific_class_raises_save_file_error(tmp_path, cls):
    buf = _wrapped()
    buf.save(tmp_path / "plain")
    try:
        loaded = cls.load(tmp_path / "plain")
    except SaveFileError:
        return
    assert isinstance(loaded, cls), f"{cls.__name__}.load returned a {type(loaded).__name__}"


def test_loading_a_subclass_save_through_the_base_class_gives_the_subclass(tmp_path):
    per = rlcore.PrioritizedReplayBuffer(18, num_envs=3, seed=0)
    Stream(per, RefBuffer(18, 3), 3).step(["step", "term", "cut"])
    per.save(tmp_path / "per")
    loaded = rlcore.ReplayBuffer.load(tmp_path / "per")
    assert isinstance(loaded, rlcore.PrioritizedReplayBuffer) and loaded.alpha == per.alpha
    with pytest.raises(SaveFileError):
        rlcore.HERReplayBuffer.load(tmp_path / "per")


def test_uniform_sampling_is_uniform_over_transitions_of_unequally_filled_envs():
    """Envs with different fill levels, many terminal rows and cuts: every stored transition has
    the same probability (chi-square), and non-transition rows are never drawn."""
    from reference import chi2_critical, chi2_stat

    buf = rlcore.ReplayBuffer(90, num_envs=3, seed=9)  # 30 rows per env
    ref = RefBuffer(90, 3)
    stream = Stream(buf, ref, 3, seed=9)
    rng = np.random.default_rng(9)
    for k in range(40):
        kinds = [
            "step" if k % 9 else "trunc",  # env 0: long episodes, wrapped
            "step" if k < 12 else "mask",  # env 1: partly filled, one running episode
            str(rng.choice(["step", "term", "cut"])),  # env 2: short episodes, many terminal rows
        ]
        stream.step(kinds)
    rows = np.array(sorted(ref.sampleable()))
    counts = np.zeros(buf.capacity)
    for _ in range(300):
        np.add.at(counts, buf.sample(256).indices, 1)
    assert counts[np.setdiff1d(np.arange(buf.capacity), rows)].sum() == 0
    expected = np.full(len(rows), counts.sum() / len(rows))
    assert chi2_stat(counts[rows], expected) < chi2_critical(len(rows) - 1)


@pytest.mark.parametrize("her", [False, True], ids=["plain", "her"])
@pytest.mark.parametrize("seg", [2, 3])
def test_uniform_sampling_over_many_short_segments(seg, her):
    """Many envs of 2 or 3 rows, wrapped: a third to a half of all alive rows hold no transition
    (each env's newest row), so the draw rejects many candidates and replaces them from the
    candidates already in flight (plain sample) or in rounds (HER's draw). Every transition is
    still equally likely (chi-square), only transitions are drawn, and each sample's next
    observation is its env's next step, read across the ring's wrap."""
    from reference import chi2_critical, chi2_stat

    n = 400
    rng = np.random.default_rng(seg)
    if her:
        buf = rlcore.HERReplayBuffer(n * seg, num_envs=n, seed=seg, distance_threshold=0.05)
    else:
        buf = rlcore.ReplayBuffer(n * seg, num_envs=n, seed=seg)
    step_id = np.zeros(n, F32)
    z = np.zeros(n, bool)
    for _ in range(seg + 3):
        # obs holds (env, step) so that obs_next can be checked; a running episode per env
        o = np.stack([np.arange(n, dtype=F32), step_id], axis=1)
        o_next = np.stack([np.arange(n, dtype=F32), step_id + 1], axis=1)
        act, rew = rng.standard_normal((n, 1)).astype(F32), np.zeros(n, F32)
        if her:
            g = np.zeros((n, 2), F32)
            buf.add(
                {"observation": o, "achieved_goal": o, "desired_goal": g},
                act, rew, z, z,
                {"observation": o_next, "achieved_goal": o_next, "desired_goal": g},
            )
        else:
            buf.add(o, act, rew, z, z, o_next)
        step_id += 1
    rows = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    assert len(rows) == len(buf) == n * (seg - 1)
    counts = np.zeros(buf.capacity)
    for _ in range(120):
        b = buf.sample(512)
        np.add.at(counts, b.indices, 1)
        obs, obs_next = (b.obs["observation"], b.obs_next["observation"]) if her else (b.obs, b.obs_next)
        np.testing.assert_array_equal(obs_next[:, 0], obs[:, 0])
        np.testing.assert_array_equal(obs_next[:, 1], obs[:, 1] + 1)
    assert counts[np.setdiff1d(np.arange(buf.capacity), rows)].sum() == 0
    expected = np.full(len(rows), counts.sum() / len(rows))
    assert chi2_stat(counts[rows], expected) < chi2_critical(len(rows) - 1)


@pytest.mark.parametrize("n_step", [1, 2], ids=["one-step", "n-step"])
@pytest.mark.parametrize(
    "nbytes", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300]
)
def test_gather_copies_rows_of_every_size_exactly(nbytes, n_step):
    """The sampler copies short rows with fixed-size moves; every size must come out exact."""
    rng = np.random.default_rng(nbytes)
    n = 3
    buf = rlcore.ReplayBuffer(60, num_envs=n, seed=nbytes)
    stored_act = {}
    obs = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    for k in range(25):
        act = rng.integers(-128, 128, size=(n, nbytes), dtype=np.int8)
        nxt = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
        z = np.zeros(n, bool)
        res = buf.add(obs, act, np.zeros(n, F32), z, np.array([k % 6 == 5] * n), nxt)
        for e, p in enumerate(res.indices):
            stored_act[int(p)] = act[e].copy()
        obs = nxt if k % 6 != 5 else rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    b = buf.sample(500, n_step=n_step, gamma=0.5)
    np.testing.assert_array_equal(b.obs, buf.column("obs")[b.indices])
    np.testing.assert_array_equal(b.act, np.stack([stored_act[int(p)] for p in b.indices]))
    m = np.where(b.discount == np.float32(0.25), 2, 1)
    assert np.all((b.discount == np.float32(0.25)) | (b.discount == np.float32(0.5)))
    seg = buf.segment_len
    nxt_rows = b.indices // seg * seg + (b.indices % seg + m) % seg
    np.testing.assert_array_equal(b.obs_next, buf.column("obs")[nxt_rows])
    assert b.obs.dtype == np.uint8 and b.act.dtype == np.int8


def test_many_envs_and_odd_segment_lengths_match_reference():
    """Row -> env arithmetic (a division by the segment length) for many envs and odd lengths."""
    n, seg = 7, 37
    buf = rlcore.ReplayBuffer(n * seg + 5, num_envs=n, seed=1)  # 5 rows left over
    assert buf.capacity == n * seg and buf.segment_len == seg
    ref = RefBuffer(n * seg, n)
    stream = Stream(buf, ref, n, seed=1)
    rng = np.random.default_rng(1)
    for _ in range(60):
        stream.step(list(rng.choice(["step"] * 6 + ["term", "trunc", "cut", "mask"], size=n)))
    check_against_reference(buf, ref, 3, 0.9, batch_size=256)


def test_to_torch_cuda_from_pinned_out_arrays():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")

    buf = rlcore.PrioritizedReplayBuffer(64, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(64, 2), 2)
    for _ in range(10):
        stream.step(["step", "trunc"])

    def pinned(a):
        return torch.from_numpy(np.ascontiguousarray(a)).pin_memory().numpy()

    fresh = buf.sample(32)
    out = fresh._replace(
        **{
            f: pinned(getattr(fresh, f))
            for f in (
                "obs",
                "act",
                "rew",
                "obs_next",
                "terminated",
                "truncated",
                "discount",
                "indices",
                "weights",
            )
        },
        extras={k: pinned(v) for k, v in fresh.extras.items()},
    )
    b = buf.sample(32, n_step=2, out=out)
    t = b.to_torch("cuda")
    torch.cuda.synchronize()
    for f in ("obs", "act", "rew", "obs_next", "terminated", "discount", "indices", "weights"):
        assert getattr(t, f).device.type == "cuda", f
        np.testing.assert_array_equal(getattr(t, f).cpu().numpy(), getattr(b, f), err_msg=f)
    np.testing.assert_array_equal(t.extras["aux"].cpu().numpy(), b.extras["aux"])


@settings(max_examples=30, deadline=None)
@given(
    p=stream_params,
    prioritized=st.booleans(),
    clear_at=st.integers(-1, 30),
    via_disk=st.booleans(),
    data=st.data(),
)
def test_random_streams_survive_state_round_trip(p, prioritized, clear_at, via_disk, data):
    """Every reachable state (wraps, cuts, masks, clear, sampled PER rows) loads back exactly: the
    load-time validation of the episode index never rejects a genuine state."""
    import tempfile

    n = p["num_envs"]
    steps = data.draw(
        st.lists(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n), min_size=1, max_size=30)
    )
    kwargs = dict(num_envs=n, seed=p["seed"])
    cls = rlcore.PrioritizedReplayBuffer if prioritized else rlcore.ReplayBuffer
    buf = cls(p["seg"] * n, **kwargs)
    stream = Stream(buf, RefBuffer(p["seg"] * n, n), n, seed=p["seed"])
    rng = np.random.default_rng(p["seed"])
    for k, kinds in enumerate(steps):
        if k == clear_at:
            buf.clear()
            stream.ref, stream.last_next = RefBuffer(p["seg"] * n, n), [None] * n
        stream.step(kinds)
        if len(buf) and rng.random() < 0.3:
            idx = buf.sample(4).indices
            if prioritized:
                buf.update_priorities(idx, rng.random(4) * 3)
    twin = cls(p["seg"] * n, **kwargs)
    twin.load_state_dict(buf.state_dict())
    if via_disk:
        with tempfile.TemporaryDirectory() as d:
            buf.save(d)
            loaded = cls.load(d)
    else:
        loaded = pickle.loads(pickle.dumps(buf))
    for other in (twin, loaded):
        _state_equal(buf, other)
    if len(buf):
        a, b, c = (x.sample(16, n_step=p["n_step"], gamma=p["gamma"]) for x in (buf, twin, loaded))
        _batches_equal(a, b)
        _batches_equal(a, c)


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


@pytest.mark.parametrize("crash_in", ["np.save", "os.replace"])
def test_save_crashing_midway_leaves_previous_save_intact(tmp_path, monkeypatch, crash_in):
    import rlcore.buffers.persist as persist_mod

    buf = _wrapped()
    root = tmp_path / "ckpt"
    buf.save(root)
    first = buf.state_dict()
    buf.add(*_one_step(3), **_aux(3))  # the buffer moves on; the next save crashes
    calls = {"n": 0}

    def crash(*args, **kwargs):
        calls["n"] += 1
        if crash_in == "os.replace" or calls["n"] == 3:
            raise OSError("simulated crash")
        return real(*args, **kwargs)

    if crash_in == "np.save":
        real = persist_mod._write_npy
        monkeypatch.setattr(persist_mod, "_write_npy", crash)
    else:
        real = persist_mod.os.replace
        monkeypatch.setattr(persist_mod.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        buf.save(root)
    monkeypatch.undo()
    loaded = rlcore.ReplayBuffer.load(root)
    _state_equal_dict(loaded.state_dict(), first)
    # and a later successful save replaces it
    buf.save(root)
    _state_equal(buf, rlcore.ReplayBuffer.load(root))


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
        _state_equal(rec.buf, other)


def test_extend_single_env_takes_time_only_arrays_like_from_arrays():
    d = _offline_data()
    buf = rlcore.ReplayBuffer(64, seed=5)
    res = buf.extend(*d)
    assert res.indices.shape == (12,) and res.done_envs.tolist() == [0, 0]
    _state_equal(buf, rlcore.ReplayBuffer.from_arrays(*d, capacity=64, seed=5))


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
    buf = _long_buffer(0, num_envs=2, steps=6)
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


def test_batch_repr_gives_shapes_and_dtypes_not_values():
    buf = _long_buffer(0)
    r = repr(buf.sample(256))
    assert "obs=ndarray[256, 2] float32" in r and "indices=ndarray[256] int64" in r
    assert len(r) < 600


def test_sample_and_len_cost_do_not_grow_with_num_envs():
    """A draw over N env segments locates its env in O(log N) and len() is a kept count (issue 20:
    both were O(N) per call, 229 µs against 11 µs at 100k envs): sample(256) and len() on 100k envs
    of 2 rows each cost at most 4x what they cost on one env (interleaved medians; measured 1.3x,
    the old code 17x)."""
    import time

    def filled(n: int, cap: int) -> rlcore.ReplayBuffer:
        buf = rlcore.ReplayBuffer(cap, num_envs=n, seed=0)
        rng = np.random.default_rng(0)
        o = rng.standard_normal((n, 4)).astype(np.float32)
        a, r, f = np.zeros((n, 1), np.float32), np.zeros(n, np.float32), np.zeros(n, bool)
        for _ in range(cap // n + 1):
            on = rng.standard_normal((n, 4)).astype(np.float32)
            buf.add(o, a, r, f, f, on)
            o = on
        return buf

    bufs = {1: filled(1, 200_000), 100_000: filled(100_000, 200_000)}

    def cost(buf: rlcore.ReplayBuffer) -> float:
        t = time.perf_counter()
        for _ in range(20):
            buf.sample(256)
            len(buf)
        return time.perf_counter() - t

    times: dict[int, list[float]] = {1: [], 100_000: []}
    for _ in range(9):
        for n, buf in bufs.items():
            times[n].append(cost(buf))
    ratio = float(np.median(times[100_000]) / np.median(times[1]))
    assert ratio < 4.0, f"sample(256) + len() on 100k envs costs {ratio:.1f}x one env"


@pytest.mark.skipif(
    not hasattr(rlcore.ReplayBuffer, "_floor_gather"),
    reason="bench-only: built with the cargo feature bench (make install-test, make bench)",
)
def test_bench_floor_gather_copies_the_drawn_rows_and_their_next_rows():
    """The benchmark floor (issue 20) gathers real bytes: the observation of each row it returns,
    the next row's (with n_step, the observation n rows on and the rewards in between), the action,
    reward and flags, into arrays shaped like a sample's; it leaves the buffer's generator alone."""
    buf = rlcore.ReplayBuffer(64, num_envs=2, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(40):
        buf.add(rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32),
                rng.standard_normal(2).astype(np.float32), np.array([True, False]), np.array([False, True]),
                rng.standard_normal((2, 3)).astype(np.float32))
    before = buf.sample(8).indices
    fields = rlcore.TransitionBatch(*buf._floor_gather(50, 3)[:8])
    obs, act, rew = buf.column("obs"), buf.column("act"), buf.column("rew")
    idx = fields.indices
    seg = buf.segment_len
    nxt = np.where((idx + 1) % seg == 0, idx + 1 - seg, idx + 1)
    assert fields.obs.shape == (50, 3) and fields.obs_next.shape == (50, 3) and fields.act.shape == (50, 2)
    np.testing.assert_array_equal(fields.obs, obs[idx])
    np.testing.assert_array_equal(fields.obs_next, obs[nxt])
    np.testing.assert_array_equal(fields.act, act[idx])
    np.testing.assert_array_equal(fields.rew, rew[idx])
    np.testing.assert_array_equal(fields.terminated, buf.column("terminated")[idx])
    assert len(set(idx.tolist())) > 20
    # the buffer's own stream continues as if the floor had not run
    ref = rlcore.ReplayBuffer(64, num_envs=2, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(40):
        ref.add(rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32),
                rng.standard_normal(2).astype(np.float32), np.array([True, False]), np.array([False, True]),
                rng.standard_normal((2, 3)).astype(np.float32))
    np.testing.assert_array_equal(ref.sample(8).indices, before)
    np.testing.assert_array_equal(ref.sample(8).indices, buf.sample(8).indices)
    # with n_step, the window's rows as they come, in the env segment's ring order: the rewards of
    # rows t .. t + n - 1 summed (float32, as stored) and the observation of row t + n
    for n in (2, 3):
        f = rlcore.TransitionBatch(*buf._floor_gather(50, 4, n)[:8])
        rows = [f.indices]
        for _ in range(n):
            r = rows[-1]
            rows.append(np.where((r + 1) % seg == 0, r + 1 - seg, r + 1))
        want = rew[rows[0]]
        for r in rows[1:n]:
            want = want + rew[r]
        np.testing.assert_array_equal(f.obs, obs[f.indices])
        np.testing.assert_array_equal(f.obs_next, obs[rows[n]])
        np.testing.assert_allclose(f.rew, want, rtol=1e-6)
    with pytest.raises(rlcore.errors.InvalidValueError, match="n_step"):
        buf._floor_gather(8, 1, 0)


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
        _state_equal(steps, bulk)
        assert len(steps) == len(bulk)  # the counters, which the state does not hold
        np.testing.assert_array_equal(steps.sample(64).indices, bulk.sample(64).indices)
