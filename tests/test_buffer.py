"""ReplayBuffer against the numpy reference (tests/reference.py, docs/replay-buffer.md "Storage
model"): random streams give the reference's episode-contiguous rows, n-step windows and samples;
the n-step edge cases; seeded, independent and uniform sampling. Views and gathers are in
test_buffer_reads.py, add/extend/from_arrays in test_buffer_writes.py, save/load and state_dict in
test_buffer_save_load.py."""

from __future__ import annotations

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
    check_against_reference,
    filled_buffer,
    long_buffer,
    stream_params,
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


def test_clear_forgets_steps_keeps_memory_and_rng_stream():
    buf, _, stream = filled_buffer(capacity=16, num_envs=2, steps=6)
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


# ---------------------------------------------------------------------------------------------
# randomness: seeded, independent streams per buffer, uniform over stored transitions


def test_seeds_matter_and_same_seed_reproduces():
    a1, a2, b = long_buffer(7), long_buffer(7), long_buffer(8)
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
    u1, u2 = long_buffer(None), long_buffer(None)
    assert not np.array_equal(u1.sample(64).indices, u2.sample(64).indices)


def test_vector_buffer_per_env_rows_are_not_time_aligned():
    n_envs = 4
    buf = long_buffer(11, num_envs=n_envs, steps=60)  # all envs store identical layouts
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
