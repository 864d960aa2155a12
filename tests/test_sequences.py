"""``sample_sequences`` (sequence replay for recurrent agents) against a numpy reference of its
documented semantics (rlcore.batch.SequenceBatch): eligible starts, padding and masks, n-step
inside the sequence, ``is_first``, stored recurrent state, prioritized starts, HER per
sequence, the peers' known faults, and typed errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from her_stream import HERStream, asym_reward
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer, chi2_critical, chi2_stat, fetch_reward
from reference_stream import KINDS, Stream, assert_obs_equal, index_rows, obs_at
from rlcore.errors import ApiUsageError, DTypeError, EmptyBufferError, InvalidValueError, ShapeError

F32 = np.float32


# ---------------------------------------------------------------------------------------------
# the reference


def ref_eligible(ref: RefBuffer, length: int, pad: bool) -> dict[int, tuple[int, int]]:
    """Physical start row -> (env, absolute row) of every eligible start."""
    out = {}
    for e, env in enumerate(ref.envs):
        for a in env.sampleable():
            s, end = env.bounds(a)
            if a + length <= end or (pad and a == s and end - s < length):
                out[ref.phys(e, a)] = (e, a)
    return out


def ref_sequence(ref: RefBuffer, e: int, t: int, length: int, n_step: int, gamma: float) -> list[dict | None]:
    """Per step of the sequence starting at absolute row t of env e: its fields, None if padded."""
    env = ref.envs[e]
    _, end = env.bounds(t)
    v = min(length, end - t)
    steps: list[dict | None] = []
    for k in range(length):
        if k >= v:
            steps.append(None)
            continue
        w = env.nstep(t + k, min(n_step, v - k), gamma)  # DESIGN's window, capped at the sequence
        w["row"] = ref.phys(e, t + k)
        w["is_first"] = env.ep_start[env.rows[t + k].ep] == t + k
        steps.append(w)
    return steps


def check_sequences(batch, ref: RefBuffer, length: int, n_step: int, gamma: float, pad: bool, state=()):
    eligible = ref_eligible(ref, length, pad)
    b = batch.batch_size
    assert batch.mask.shape == batch.is_first.shape == batch.indices.shape == (b, length)
    assert batch.rew.dtype == batch.discount.dtype == F32
    assert batch.mask.dtype == batch.is_first.dtype == batch.terminated.dtype == np.bool_
    for flag in (batch.mask, batch.is_first, batch.terminated, batch.truncated):
        assert flag.view(np.uint8).max() <= 1
    for i, p in enumerate(index_rows(batch.start_indices).tolist()):
        assert p in eligible, f"start {p} is not an eligible start"
        e, t = eligible[p]
        want = ref_sequence(ref, e, t, length, n_step, gamma)
        for k, w in enumerate(want):
            if w is None:
                assert not batch.mask[i, k] and batch.indices[i, k] == -1
                assert batch.rew[i, k] == 0 and batch.discount[i, k] == 0 and batch.horizon[i, k] == 0
                assert not (batch.terminated[i, k] or batch.truncated[i, k] or batch.is_first[i, k])
                zero = obs_at(batch.obs, i)
                for x in zero.values() if isinstance(zero, dict) else [zero]:
                    assert not np.any(x[k])
                assert not np.any(batch.act[i, k])
                continue
            msg = f"sequence {i} (start {p}) step {k}"
            assert batch.mask[i, k], msg
            assert batch.indices[i, k] == w["row"], msg
            assert bool(batch.is_first[i, k]) == w["is_first"], msg
            assert batch.horizon[i, k] == w["m"], msg
            assert_obs_equal({kk: v[i, k] for kk, v in batch.obs.items()} if isinstance(batch.obs, dict)
                             else batch.obs[i, k], w["obs"], msg)
            assert_obs_equal({kk: v[i, k] for kk, v in batch.obs_next.items()} if isinstance(batch.obs_next, dict)
                             else batch.obs_next[i, k], w["obs_next"], msg)
            np.testing.assert_array_equal(batch.act[i, k], w["act"], err_msg=msg)
            np.testing.assert_allclose(batch.rew[i, k], w["rew"], rtol=1e-5, atol=1e-5, err_msg=msg)
            np.testing.assert_allclose(batch.discount[i, k], w["discount"], rtol=1e-6, atol=0, err_msg=msg)
            assert (bool(batch.terminated[i, k]), bool(batch.truncated[i, k])) == (w["terminated"], w["truncated"])
            for name, val in w["extras"].items():
                if name in state:
                    continue
                np.testing.assert_array_equal(batch.extras[name][i, k], val, err_msg=msg)
        first = ref.envs[e].rows[t]
        for name in state:
            np.testing.assert_array_equal(batch.state[name][i], first.extras[name])


seq_params = st.fixed_dictionaries(
    {
        "num_envs": st.integers(1, 3),
        "seg": st.integers(3, 16),
        "seq_len": st.integers(1, 6),
        "burn_in": st.integers(0, 3),
        "n_step": st.integers(1, 4),
        "gamma": st.sampled_from([0.0, 0.5, 0.99, 1.0]),
        "pad": st.booleans(),
        "prioritized": st.booleans(),
        "seed": st.integers(0, 2**32 - 1),
    }
)


@settings(max_examples=80, deadline=None)
@given(p=seq_params, data=st.data())
def test_random_multi_env_streams_with_wraparound_match_the_reference(p, data):
    n = p["num_envs"]
    steps = data.draw(st.lists(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n), min_size=1, max_size=60))
    cap = p["seg"] * n
    if p["prioritized"]:
        buf = rlcore.PrioritizedReplayBuffer(cap, num_envs=n, seed=p["seed"])
    else:
        buf = rlcore.ReplayBuffer(cap, num_envs=n, seed=p["seed"])
    ref = RefBuffer(cap, n)
    stream = Stream(buf, ref, n, seed=p["seed"])
    for kinds in steps:
        stream.step(kinds)
    if len(ref) == 0:
        return
    length = p["seq_len"] + p["burn_in"]
    kw = dict(burn_in=p["burn_in"], n_step=p["n_step"], gamma=p["gamma"], pad=p["pad"])
    if p["prioritized"]:  # priorities over the rows, so that the prioritized draw is exercised
        rows = np.array(sorted(ref.sampleable()))
        buf.update_priorities(rows, np.random.default_rng(p["seed"]).uniform(0.1, 5, rows.size))
    if not ref_eligible(ref, length, p["pad"]):
        with pytest.raises(EmptyBufferError, match="pad=False"):
            buf.sample_sequences(8, p["seq_len"], **kw)
        return
    state = data.draw(st.sampled_from([(), ("aux",)]))
    batch = buf.sample_sequences(32, p["seq_len"], state=state, **kw)
    check_sequences(batch, ref, length, p["n_step"], p["gamma"], p["pad"], state)
    assert (batch.weights is not None) == p["prioritized"]


def test_dict_observation_sequences_match_the_reference():
    buf = rlcore.ReplayBuffer(60, num_envs=2, seed=3)
    ref = RefBuffer(60, 2)
    stream = Stream(buf, ref, 2, dict_obs=True, seed=3)
    rng = np.random.default_rng(0)
    for _ in range(70):
        stream.step(list(rng.choice(KINDS[:-1], size=2)))
    batch = buf.sample_sequences(64, 3, burn_in=1, n_step=2, gamma=0.9)
    assert set(batch.obs) == {"pos", "tag"} and batch.obs["tag"].shape == (64, 4, 1)
    check_sequences(batch, ref, 4, 2, 0.9, True)


# ---------------------------------------------------------------------------------------------
# the peers' known faults


@pytest.mark.parametrize("prioritized", [False, True])
def test_sampling_at_exactly_full_capacity_stays_inside_filled_storage(prioritized):
    # TorchRL's slice sampler returned indices outside the filled storage at capacity: fill the
    # ring exactly (head == segment length), then exactly plus one step, and sample
    for extra in (0, 1):
        cap = 12
        buf = rlcore.PrioritizedReplayBuffer(cap, seed=1) if prioritized else rlcore.ReplayBuffer(cap, seed=1)
        ref = RefBuffer(cap, 1)
        stream = Stream(buf, ref, 1)
        # episodes of 3 steps take 4 rows: three of them fill the 12 rows exactly
        for k in range(9 + extra):
            stream.step(["term" if k % 3 == 2 else "step"])
        assert ref.envs[0].head == cap + 2 * extra  # a new episode takes two rows
        batch = buf.sample_sequences(200, 2, burn_in=1)
        alive = set(ref.alive_rows())
        rows = batch.indices[batch.mask]
        assert set(rows.tolist()) <= alive
        assert batch.indices[~batch.mask].tolist() == [-1] * int((~batch.mask).sum())
        check_sequences(batch, ref, 3, 1, 0.99, True)


def test_prioritized_sequences_never_cross_episode_boundaries():
    # flashbax's prioritized sequences crossed episode boundaries: many short episodes, high
    # priorities on the last steps of each (the starts whose sequences would cross)
    buf = rlcore.PrioritizedReplayBuffer(64, num_envs=2, seed=5, alpha=1.0)
    ref = RefBuffer(64, 2)
    stream = Stream(buf, ref, 2)
    rng = np.random.default_rng(1)
    for k in range(90):
        stream.step(["term" if rng.random() < 0.3 else "step", "trunc" if k % 4 == 3 else "step"])
    rows = np.array(sorted(ref.sampleable()))
    _, ends, _ = buf.episode_bounds(rows)
    near_end = (ends - rows) % 32 <= 2
    buf.update_priorities(rows, np.where(near_end, 1000.0, 1.0))
    for pad in (True, False):
        batch = buf.sample_sequences(256, 3, pad=pad)
        check_sequences(batch, ref, 3, 1, 0.99, pad)
        for i in range(256):
            valid = batch.indices[i][batch.mask[i]]
            s, _, _ = buf.episode_bounds(valid)
            assert len(set(s.tolist())) == 1, "a sequence spans two episodes"


# ---------------------------------------------------------------------------------------------
# distributions


def test_starts_are_uniform_over_eligible_starts_chi_square():
    buf = rlcore.ReplayBuffer(90, num_envs=3, seed=11)
    ref = RefBuffer(90, 3)
    stream = Stream(buf, ref, 3)
    rng = np.random.default_rng(2)
    for _ in range(80):  # wraps every 30-row segment
        stream.step([rng.choice(["step"] * 5 + ["term", "trunc"]) for _ in range(3)])
    for pad in (True, False):
        eligible = sorted(ref_eligible(ref, 4, pad))
        counts = dict.fromkeys(eligible, 0)
        draws = 0
        for _ in range(40):
            batch = buf.sample_sequences(500, 3, burn_in=1, pad=pad)
            for p in index_rows(batch.start_indices).tolist():
                counts[p] += 1  # KeyError: an ineligible start
            draws += 500
        expected = np.full(len(eligible), draws / len(eligible))
        stat = chi2_stat([counts[p] for p in eligible], expected)
        assert stat < chi2_critical(len(eligible) - 1), (pad, stat, len(eligible))


def test_prioritized_starts_are_drawn_in_proportion_to_priority_chi_square():
    buf = rlcore.PrioritizedReplayBuffer(80, num_envs=2, seed=4, alpha=1.0, eps=1e-9)
    ref = RefBuffer(80, 2)
    stream = Stream(buf, ref, 2)
    rng = np.random.default_rng(3)
    for _ in range(70):
        stream.step([rng.choice(["step"] * 6 + ["term"]) for _ in range(2)])
    rows = np.array(sorted(ref.sampleable()))
    prio = rng.uniform(0.5, 8.0, rows.size)
    buf.update_priorities(rows, prio)
    p_of = dict(zip(rows.tolist(), buf.priorities(rows).tolist(), strict=True))
    eligible = sorted(ref_eligible(ref, 3, False))
    counts = dict.fromkeys(eligible, 0)
    draws = 0
    for _ in range(60):
        batch = buf.sample_sequences(400, 3, pad=False)
        for p in index_rows(batch.start_indices).tolist():
            counts[p] += 1
        draws += 400
        np.testing.assert_allclose(batch.weights, (buf.priorities(batch.start_indices) /
                                                   min(p_of.values())) ** -buf.beta, rtol=1e-5)
    mass = np.array([p_of[p] for p in eligible])
    stat = chi2_stat([counts[p] for p in eligible], draws * mass / mass.sum())
    assert stat < chi2_critical(len(eligible) - 1), stat


# ---------------------------------------------------------------------------------------------
# priorities, state, out=, determinism


def test_update_sequence_priorities_sets_the_r2d2_mixture_over_valid_steps():
    buf = rlcore.PrioritizedReplayBuffer(100, seed=0, alpha=0.7, eps=1e-3)
    ref = RefBuffer(100, 1)
    stream = Stream(buf, ref, 1)
    for k in range(40):
        stream.step(["term" if k % 9 == 8 else "step"])
    batch = buf.sample_sequences(16, 5, burn_in=2)
    td = np.random.default_rng(0).normal(size=(16, 5)).astype(F32)
    mask = batch.mask[:, 2:].copy()
    mask[:, 0] = True
    mask[3, 1:] = False
    skipped = buf.update_sequence_priorities(batch.start_indices, td, mask=mask, eta=0.9)
    assert skipped == 0
    got = buf.priorities(batch.start_indices)
    last = {}
    for i, p in enumerate(index_rows(batch.start_indices).tolist()):
        a = np.abs(td[i][mask[i]].astype(np.float64))
        last[p] = (0.9 * a.max() + 0.1 * a.mean() + 1e-3) ** 0.7  # the last update of a row wins
    np.testing.assert_allclose(got, [last[p] for p in index_rows(batch.start_indices).tolist()], rtol=1e-9)
    # without a mask every step counts
    buf.update_sequence_priorities(batch.start_indices[:1], td[:1], eta=0.0)
    np.testing.assert_allclose(buf.priorities(batch.start_indices[:1]), (np.abs(td[0]).mean() + 1e-3) ** 0.7,
                               rtol=1e-6)


def test_stored_recurrent_state_is_returned_from_each_sequence_first_step():
    buf = rlcore.ReplayBuffer(64, num_envs=2, seed=0)
    for t in range(50):
        o = np.array([[t, 0], [t, 1]], F32)
        h = np.stack([np.full(4, 10 * t + e, F32) for e in range(2)])
        buf.add(o, np.zeros(2, np.int64), np.ones(2), np.zeros(2, bool), np.array([t % 11 == 10, False]), o + 1,
                h=h, c=h[:, :2] * 2)
    batch = buf.sample_sequences(64, 4, burn_in=3, state=("h", "c"))
    assert batch.state["h"].shape == (64, 4) and batch.state["c"].shape == (64, 2)
    assert "h" not in batch.extras and "c" not in batch.extras
    np.testing.assert_array_equal(batch.state["h"], buf.column("h")[index_rows(batch.start_indices)])
    np.testing.assert_array_equal(batch.state["c"], buf.column("c")[index_rows(batch.start_indices)])
    assert np.array_equal(batch.indices[:, 0], index_rows(batch.start_indices))
    per_step = buf.sample_sequences(8, 4, burn_in=3)
    assert per_step.extras["h"].shape == (8, 7, 4) and per_step.state == {}


def test_out_arrays_are_filled_in_place_and_checked():
    buf, _ = _simple(60)
    first = buf.sample_sequences(8, 4, burn_in=2)
    again = buf.sample_sequences(8, 4, burn_in=2, out=first)
    assert again.obs is first.obs and again.mask is first.mask
    with pytest.raises(ShapeError):
        buf.sample_sequences(8, 5, burn_in=2, out=first)
    with pytest.raises(ApiUsageError):
        buf.sample_sequences(8, 4, burn_in=2, out=object())


def test_same_seed_same_sequences_and_a_failed_call_leaves_the_generator():
    a, _ = _simple(60, seed=9)
    b, _ = _simple(60, seed=9)
    with pytest.raises(EmptyBufferError):
        a.sample_sequences(4, 40, pad=False)  # no episode has 40 transitions
    x, y = a.sample_sequences(16, 3), b.sample_sequences(16, 3)
    assert np.array_equal(x.start_indices, y.start_indices)
    c, _ = _simple(60, seed=10)
    assert not np.array_equal(c.sample_sequences(16, 3).start_indices, x.start_indices)


def _simple(cap, seed=0, prioritized=False):
    buf = rlcore.PrioritizedReplayBuffer(cap, seed=seed) if prioritized else rlcore.ReplayBuffer(cap, seed=seed)
    ref = RefBuffer(cap, 1)
    stream = Stream(buf, ref, 1, seed=seed)
    for k in range(cap + 7):
        stream.step(["term" if k % 8 == 7 else "step"])
    return buf, ref


# ---------------------------------------------------------------------------------------------
# HER on sequences


@pytest.mark.parametrize("reward", ["python", 0.05])
@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_her_relabels_one_goal_per_sequence_and_recomputes_every_reward(reward, strategy):
    kw = {"compute_reward": asym_reward} if reward == "python" else {"distance_threshold": reward}
    buf = rlcore.HERReplayBuffer(96, num_envs=2, seed=2, strategy=strategy, future_k=4, **kw)
    ref = RefBuffer(96, 2)
    stream = HERStream(buf, ref, 2)
    rng = np.random.default_rng(5)
    for _ in range(70):
        stream.step([rng.choice(["step"] * 6 + ["trunc", "term"]) for _ in range(2)])
    goal_rows = stream.row_of_goal()
    n_step, gamma = 2, 0.9
    batch = buf.sample_sequences(200, 4, burn_in=1, n_step=n_step, gamma=gamma)
    relabeled = 0
    for i, p in enumerate(index_rows(batch.start_indices).tolist()):
        e, t = ref.locate(p)
        env = ref.envs[e]
        s, end = env.bounds(t)
        v = int(batch.mask[i].sum())
        g = batch.obs["desired_goal"][i, :v]
        assert (g == g[0]).all() and (batch.obs_next["desired_goal"][i, :v] == g[0]).all()
        stored = env.rows[t].obs["desired_goal"]
        if np.array_equal(g[0], stored):
            rews = [env.rows[t + k].rew for k in range(v)]
        else:
            relabeled += 1
            ge, ga = goal_rows[int(g[0][1])]
            assert ge == e and env.rows[ga].ep == env.rows[t].ep, "goal from another episode"
            lo = {"future": t + v, "final": end, "episode": s + 1}[strategy]
            assert lo <= ga <= end, (strategy, lo, ga, end)
            ag = np.stack([env.rows[t + k + 1].obs["achieved_goal"] for k in range(v)])
            gg = np.repeat(g[:1], v, axis=0)
            rews = (asym_reward(ag, gg, {}) if reward == "python" else fetch_reward(ag, gg, reward)).tolist()
        for k in range(v):
            m = int(batch.horizon[i, k])
            want = sum(gamma**j * rews[k + j] for j in range(m))
            np.testing.assert_allclose(batch.rew[i, k], want, rtol=1e-5, atol=1e-5)
        assert (batch.rew[i, v:] == 0).all() and (batch.obs["desired_goal"][i, v:] == 0).all()
    assert 0.65 < relabeled / 200 < 0.93  # k / (k + 1) = 0.8


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_sequence_arguments_raise_typed_errors_and_change_nothing():
    buf, _ = _simple(40)
    cases = [
        (dict(batch_size=4, seq_len=0), InvalidValueError),
        (dict(batch_size=4, seq_len=3, burn_in=-1), InvalidValueError),
        (dict(batch_size=0, seq_len=3), InvalidValueError),
        (dict(batch_size=4, seq_len=3, n_step=0), InvalidValueError),
        (dict(batch_size=4, seq_len=3, gamma=1.5), InvalidValueError),
        (dict(batch_size=4, seq_len=2.0), DTypeError),
        (dict(batch_size=4, seq_len=3, burn_in=True), DTypeError),
        (dict(batch_size=4, seq_len=20, pad=False), EmptyBufferError),
        (dict(batch_size=4, seq_len=3, state="nope"), ApiUsageError),
        (dict(batch_size=4, seq_len=3, state=("aux", "aux")), InvalidValueError),
        (dict(batch_size=4, seq_len=3, state=7), DTypeError),
        (dict(batch_size=2**20, seq_len=2**12), InvalidValueError),
    ]
    before = buf.sample_sequences(8, 2).start_indices  # noqa: F841 - advances the generator
    twin, _ = _simple(40)
    twin.sample_sequences(8, 2)
    for kw, err in cases:
        with pytest.raises(err):
            buf.sample_sequences(**kw)
    # every failed call left the generator where it was
    assert np.array_equal(buf.sample_sequences(8, 2).start_indices, twin.sample_sequences(8, 2).start_indices)
    with pytest.raises(EmptyBufferError):
        rlcore.ReplayBuffer(10).sample_sequences(1, 1)
    with pytest.raises(ApiUsageError):
        buf.update_sequence_priorities([0], np.zeros((1, 2)))


def test_sequence_start_mass_counts_the_starts_and_refuses_bad_arguments():
    buf, _ = _simple(40)
    count, mass = buf.sequence_start_mass(3, burn_in=1)
    starts = {int(i) for _ in range(50) for i in index_rows(buf.sample_sequences(64, 3, burn_in=1).start_indices)}
    assert count == mass == len(starts) > 0  # every eligible start is drawn, and only those
    assert buf.sequence_start_mass(1) == (len(buf), float(len(buf)))  # L = 1: every transition
    assert rlcore.ReplayBuffer(10).sequence_start_mass(2) == (0, 0.0)
    for kw, err in [
        (dict(seq_len=0), InvalidValueError),
        (dict(seq_len=3, burn_in=-1), InvalidValueError),
        (dict(seq_len=2.0), DTypeError),
        (dict(seq_len=3, burn_in=True), DTypeError),
    ]:
        with pytest.raises(err):
            buf.sequence_start_mass(**kw)
    assert buf.sequence_start_mass(3, burn_in=1) == (count, mass)  # nothing changed


def test_bad_sequence_priority_updates_raise_typed_errors_and_write_nothing():
    buf, _ = _simple(40, prioritized=True)
    batch = buf.sample_sequences(4, 3)
    rows = np.array(sorted(set(index_rows(batch.start_indices).tolist())))
    before = buf.priorities(rows)
    td = np.ones((4, 3))
    cases = [
        (dict(td_errors=np.ones(4)), ShapeError),
        (dict(td_errors=np.ones((3, 3))), ShapeError),
        (dict(td_errors=td, mask=np.ones((4, 2), bool)), ShapeError),
        (dict(td_errors=td, mask=np.ones((4, 3))), DTypeError),
        (dict(td_errors=td.astype(bool)), DTypeError),
        (dict(td_errors=np.where(np.eye(4, 3) > 0, np.nan, 1.0)), InvalidValueError),
        (dict(td_errors=td, eta=1.5), InvalidValueError),
        (dict(td_errors=td, mask=np.zeros((4, 3), bool)), InvalidValueError),
    ]
    for kw, err in cases:
        with pytest.raises(err):
            buf.update_sequence_priorities(batch.start_indices, **kw)
    with pytest.raises(InvalidValueError):
        buf.update_sequence_priorities([10**6, 0, 0, 0], td)
    np.testing.assert_array_equal(buf.priorities(rows), before)
