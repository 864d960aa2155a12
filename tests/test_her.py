"""Hindsight relabeling against the numpy reference: which goals may be chosen (strategy, episode,
ring wrap), how often (k/(k+1)), how uniformly, and the recomputed (n-step) rewards."""

from __future__ import annotations

import itertools
import pickle

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer, chi2_critical, chi2_stat, fetch_reward
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, RlcoreError, ShapeError

F32 = np.float32
W = np.array([1.0, 0.001, 0.5])


def asym_reward(achieved_goal, desired_goal, info):
    """Asymmetric in its arguments: swapping them flips the sign."""
    assert isinstance(info, dict)
    return ((np.asarray(achieved_goal, np.float64) - desired_goal) @ W).astype(F32)


class HERStream:
    """Goal-env steps fed to an rlcore HER buffer and the reference side by side.

    Every stored observation gets a unique id: ``achieved_goal = [env, id, 0.5]``; stored desired
    goals are negative (``[-1, -1 - episode, -2]``) so that a relabeled goal is recognisable and
    names the row it came from.
    """

    def __init__(self, buf, ref: RefBuffer, num_envs: int, seed: int = 0):
        self.buf, self.ref, self.n = buf, ref, num_envs
        self.rng = np.random.default_rng(seed)
        self.ids = itertools.count(0)
        self.ep = [0] * num_envs
        self.last_next: list[dict | None] = [None] * num_envs

    def _fresh(self, e):
        return {
            "observation": self.rng.normal(size=2).astype(F32),
            "achieved_goal": np.array([e, next(self.ids), 0.5], F32),
            "desired_goal": np.array([-1, -1 - self.ep[e], -2], F32),
        }

    def step(self, kinds):
        obs, nxt = [], []
        for e, k in enumerate(kinds):
            if self.last_next[e] is None or k == "cut":
                if k == "cut":
                    self.ep[e] += 1
                obs.append(self._fresh(e))
            else:
                obs.append(self.last_next[e])
            nxt.append(self._fresh(e))
        stack = lambda ds: {key: np.stack([d[key] for d in ds]) for key in ds[0]}  # noqa: E731
        o, on = stack(obs), stack(nxt)
        kinds = np.asarray(kinds)
        term, trunc = kinds == "term", kinds == "trunc"
        act = self.rng.normal(size=(self.n, 2)).astype(F32)
        rew = self.rng.integers(-3, 1, size=self.n).astype(F32)
        self.buf.add(o, act, rew, term, trunc, on)
        self.ref.add(o, act, rew, term, trunc, on)
        for e in range(self.n):
            if term[e] or trunc[e]:
                self.last_next[e] = None
                self.ep[e] += 1
            else:
                self.last_next[e] = nxt[e]

    def row_of_goal(self):
        """id -> (env, absolute row) for every alive row."""
        out = {}
        for e, env in enumerate(self.ref.envs):
            for a in range(env.alive_lo, env.head):
                out[int(env.rows[a].obs["achieved_goal"][1])] = (e, a)
        return out


def her_buffer(capacity, num_envs=1, *, reward="python", seed=0, **kw):
    if reward == "python":
        return rlcore.HERReplayBuffer(
            capacity, num_envs=num_envs, seed=seed, compute_reward=asym_reward, **kw
        )
    return rlcore.HERReplayBuffer(capacity, num_envs=num_envs, seed=seed, distance_threshold=reward, **kw)


def check_her_batch(batch, stream: HERStream, strategy, n_step, gamma, reward="python"):
    """Every sample is either the stored n-step transition or a valid relabeling of it.

    Returns (list of relabeled flags, list of (t, t', start, end) for relabeled samples)."""
    ref = stream.ref
    goal_rows = stream.row_of_goal()
    relabeled, picks = [], []
    for i, p in enumerate(batch.indices & ((1 << rlcore._core.INDEX_ROW_BITS) - 1)):
        e, t = ref.locate(int(p))
        env = ref.envs[e]
        w = env.nstep(t, n_step, gamma)
        np.testing.assert_array_equal(batch.obs["observation"][i], w["obs"]["observation"])
        np.testing.assert_array_equal(batch.obs["achieved_goal"][i], w["obs"]["achieved_goal"])
        np.testing.assert_array_equal(batch.obs_next["observation"][i], w["obs_next"]["observation"])
        np.testing.assert_array_equal(batch.obs_next["achieved_goal"][i], w["obs_next"]["achieved_goal"])
        np.testing.assert_array_equal(batch.act[i], w["act"])
        np.testing.assert_allclose(batch.discount[i], w["discount"], rtol=1e-6)
        g = batch.obs["desired_goal"][i]
        np.testing.assert_array_equal(
            batch.obs_next["desired_goal"][i], g, err_msg="the new goal must be in obs_next too"
        )
        if g[0] < 0:  # stored goal: not relabeled
            relabeled.append(False)
            np.testing.assert_array_equal(g, w["obs"]["desired_goal"])
            np.testing.assert_allclose(batch.rew[i], w["rew"], rtol=1e-5, atol=1e-5)
            continue
        relabeled.append(True)
        gid = int(g[1])
        assert gid in goal_rows, f"goal {g} of row {p} comes from an overwritten row"
        ge, ga = goal_rows[gid]
        assert ge == e, f"goal of row {p} comes from env {ge}"
        start, end = env.bounds(t)
        tp = ga - 1  # the goal is the achieved goal after step t'
        assert env.rows[ga].ep == env.rows[t].ep, f"goal of row {p} comes from another episode"
        if strategy == "future":
            assert t <= tp <= end - 1, (t, tp, end)
        elif strategy == "final":
            assert tp == end - 1, (t, tp, end)
        else:
            assert start <= tp <= end - 1, (start, tp, end)
        picks.append((t, tp, start, end))
        # every reward of the window is recomputed against the new goal
        ags = np.stack([env.rows[t + k + 1].obs["achieved_goal"] for k in range(w["m"])])
        r = asym_reward(ags, g[None], {}) if reward == "python" else fetch_reward(ags, g[None], reward)
        want = sum(gamma**k * float(r[k]) for k in range(w["m"]))
        np.testing.assert_allclose(
            batch.rew[i], want, rtol=1e-4, atol=1e-3, err_msg=f"relabeled reward of row {p}"
        )
    return relabeled, picks


HER_KINDS = ("step", "step", "step", "term", "trunc", "cut")


@settings(max_examples=40, deadline=None)
@given(
    num_envs=st.integers(1, 2),
    seg=st.integers(3, 14),
    strategy=st.sampled_from(["future", "final", "episode"]),
    n_step=st.integers(1, 3),
    gamma=st.sampled_from([0.5, 0.9, 1.0]),
    reward=st.sampled_from(["python", 0.5]),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_her_random_streams_match_reference(num_envs, seg, strategy, n_step, gamma, reward, seed, data):
    steps = data.draw(
        st.lists(
            st.lists(st.sampled_from(HER_KINDS), min_size=num_envs, max_size=num_envs),
            min_size=1,
            max_size=30,
        )
    )
    buf = her_buffer(seg * num_envs, num_envs, reward=reward, seed=seed, strategy=strategy, future_k=3)
    stream = HERStream(buf, RefBuffer(seg * num_envs, num_envs), num_envs, seed=seed)
    for kinds in steps:
        stream.step(kinds)
    assert len(buf) == len(stream.ref)
    check_her_batch(buf.sample(64, n_step=n_step, gamma=gamma), stream, strategy, n_step, gamma, reward)


# ---------------------------------------------------------------------------------------------
# statistics


def _single_episode(length=10, **kw):
    buf = her_buffer(64, **kw)
    stream = HERStream(buf, RefBuffer(64, 1), 1)
    for t in range(length):
        stream.step(["trunc" if t == length - 1 else "step"])
    return buf, stream


def _fast_picks(batch):
    """For a single episode stored from row 0 (ids = rows): (t, t' or -1 if not relabeled)."""
    g = batch.obs["desired_goal"]
    tp = np.where(g[:, 0] >= 0, g[:, 1].astype(np.int64) - 1, -1)
    return batch.indices, tp


@pytest.mark.parametrize("future_k", [4, 1, 0.25, 0])
def test_relabeled_fraction_is_k_over_k_plus_one(future_k):
    buf, stream = _single_episode(future_k=future_k)
    check_her_batch(buf.sample(256), stream, "future", 1, 0.99)
    p = future_k / (future_k + 1)
    n = hits = 0
    for _ in range(100):
        _, tp = _fast_picks(buf.sample(256))
        hits += int((tp >= 0).sum())
        n += len(tp)
    if future_k == 0:
        assert hits == 0
        return
    assert abs(hits / n - p) < 5 * np.sqrt(p * (1 - p) / n), (hits / n, p)


def test_relabeled_fraction_holds_for_tiny_batches():
    """Not rounded down per batch: batch_size 1 still relabels ~80 %."""
    buf, _ = _single_episode(future_k=4)
    n = 3000
    hits = sum(int(buf.sample(1).obs["desired_goal"][0, 0] >= 0) for _ in range(n))
    assert abs(hits / n - 0.8) < 5 * np.sqrt(0.16 / n)


def _pick_counts(strategy, length=8, batches=120):
    buf, stream = _single_episode(length=length, strategy=strategy, future_k=1e9)
    _, picks = check_her_batch(buf.sample(256), stream, strategy, 1, 0.99)
    start, end = picks[0][2], picks[0][3]
    assert (start, end) == (0, length)
    for _ in range(batches):
        t, tp = _fast_picks(buf.sample(256))
        assert np.all(tp >= 0)
        picks += [(int(a), int(b), start, end) for a, b in zip(t, tp, strict=True)]
    return picks


def test_future_goal_step_is_uniform_over_remaining_episode():
    picks = _pick_counts("future")
    end = picks[0][3]
    counts = {}
    for t, tp, _, _ in picks:
        counts[(t, tp)] = counts.get((t, tp), 0) + 1
    stat, dof = 0.0, 0
    for t in range(end):
        n_t = sum(c for (tt, _), c in counts.items() if tt == t)
        cells = [counts.get((t, tp), 0) for tp in range(t, end)]
        assert sum(cells) == n_t, "t' outside [t, e-1]"
        if len(cells) > 1:
            stat += chi2_stat(cells, [n_t / len(cells)] * len(cells))
            dof += len(cells) - 1
    assert stat < chi2_critical(dof), (stat, dof)
    # the last step can only relabel with its own achieved goal; the first one sees all steps
    assert {tp for t, tp, _, _ in picks if t == 0} == set(range(end))


def test_final_goal_is_always_the_last_step():
    picks = _pick_counts("final", batches=20)
    assert picks and all(tp == end - 1 for _, tp, _, end in picks)


def test_episode_goal_step_is_uniform_over_whole_episode():
    picks = _pick_counts("episode")
    start, end = picks[0][2], picks[0][3]
    counts = np.bincount([tp for _, tp, _, _ in picks], minlength=end)[start:end]
    assert counts.sum() == len(picks)
    assert chi2_stat(counts, [len(picks) / (end - start)] * (end - start)) < chi2_critical(end - start - 1)
    # independent of t: also the last step gets goals from the start of the episode
    assert {tp for t, tp, _, _ in picks if t == end - 1} == set(range(start, end))


# ---------------------------------------------------------------------------------------------
# the HER cases


def _counting_episode(strategy, reward_fn, length=5, **kw):
    """One episode whose achieved goal after step t is t + 1 (ag(o_t) = t)."""
    buf = rlcore.HERReplayBuffer(32, seed=0, strategy=strategy, compute_reward=reward_fn, **kw)
    for t in range(length):
        o = {
            "observation": np.zeros(1, F32),
            "achieved_goal": np.full(1, t, F32),
            "desired_goal": np.full(1, -100, F32),
        }
        n = {
            "observation": np.zeros(1, F32),
            "achieved_goal": np.full(1, t + 1, F32),
            "desired_goal": np.full(1, -100, F32),
        }
        buf.add(o, np.zeros(1, F32), 0.0, False, t == length - 1, n)
    return buf


def test_final_goal_is_achieved_goal_after_last_step():
    buf = _counting_episode("final", lambda ag, g, info: np.zeros(len(ag), F32), future_k=4)
    b = buf.sample(500)
    g = b.obs["desired_goal"][:, 0]
    relabeled = g != -100
    assert 0.7 < relabeled.mean() < 0.9
    np.testing.assert_array_equal(g[relabeled], 5.0)  # o_5's achieved goal, not o_4's (4)
    np.testing.assert_array_equal(b.obs_next["desired_goal"][relabeled, 0], 5.0)


def test_reward_function_is_called_with_achieved_then_desired_goal():
    calls = []

    def achieved_minus_desired(achieved_goal, desired_goal, info):
        calls.append((achieved_goal.shape, desired_goal.shape, dict(info)))
        return (achieved_goal - desired_goal)[:, 0]

    buf = _counting_episode("final", achieved_minus_desired, future_k=4)
    b = buf.sample(200)
    assert len(calls) == 1, "one batched call per sample()"
    m = calls[0][0][0]
    assert calls[0][0] == calls[0][1] == (m, 1) and calls[0][2] == {}
    t = b.obs["achieved_goal"][:, 0]
    relabeled = b.obs["desired_goal"][:, 0] != -100
    assert m == relabeled.sum()
    # reward = ag(o_{t+1}) - g = (t + 1) - 5 <= 0; the swapped call would give 5 - (t + 1) >= 0
    np.testing.assert_array_equal(b.rew[relabeled], (t[relabeled] + 1) - 5)
    assert np.any(b.rew[relabeled] < 0)


def test_future_goals_stay_inside_episode_after_ring_wraps_twice():
    buf = her_buffer(10, strategy="future", future_k=4)
    stream = HERStream(buf, RefBuffer(10, 1), 1)
    for _ in range(6):  # 6 episodes of length 4 = 30 rows through a 10-row ring
        for t in range(4):
            stream.step(["term" if t == 3 else "step"])
    for _ in range(2):  # and a running episode that overwrites the oldest episode's head
        stream.step(["step"])
    assert stream.ref.envs[0].head == 33
    seen_partial = False
    for _ in range(50):
        rel, picks = check_her_batch(buf.sample(64, gamma=0.9), stream, "future", 1, 0.9)
        for t, tp, start, end in picks:
            assert t <= tp < end
            seen_partial |= start == 23  # the episode whose first 3 rows were overwritten
    assert seen_partial
    # with n-step windows too
    check_her_batch(buf.sample(256, n_step=3, gamma=0.9), stream, "future", 3, 0.9)


@pytest.mark.parametrize("strategy", ["future", "episode"])
def test_her_vector_envs_take_goals_from_own_env_and_episode(strategy):
    buf = her_buffer(60, num_envs=3, strategy=strategy, future_k=4)
    stream = HERStream(buf, RefBuffer(60, 3), 3, seed=4)
    rng = np.random.default_rng(4)
    for _ in range(40):
        stream.step(list(rng.choice(HER_KINDS, size=3)))
    envs_seen = set()
    for _ in range(20):
        b = buf.sample(128, n_step=2, gamma=0.8)
        check_her_batch(b, stream, strategy, 2, 0.8)
        envs_seen |= set((b.indices // buf.segment_len).tolist())
    assert envs_seen == {0, 1, 2}


def test_native_reward_equals_fetch_style_reward():
    eps = 0.05
    buf = rlcore.HERReplayBuffer(200, seed=0, distance_threshold=eps, future_k=4)
    rng = np.random.default_rng(0)
    # achieved goals on a fine grid around the goals so that distances straddle the threshold
    ag = np.cumsum(rng.normal(scale=0.03, size=(41, 3)), axis=0).astype(F32)
    for t in range(40):
        o = {"observation": np.zeros(2, F32), "achieved_goal": ag[t], "desired_goal": np.full(3, 9, F32)}
        n = {"observation": np.zeros(2, F32), "achieved_goal": ag[t + 1], "desired_goal": np.full(3, 9, F32)}
        buf.add(o, np.zeros(1, F32), -1.0, False, t == 39, n)
    b = buf.sample(2000)
    relabeled = b.obs["desired_goal"][:, 0] != 9
    want = fetch_reward(b.obs_next["achieved_goal"], b.obs["desired_goal"], eps)
    np.testing.assert_array_equal(b.rew[relabeled], want[relabeled])
    assert set(np.unique(b.rew[relabeled])) == {-1.0, 0.0}
    assert b.rew.dtype == np.float32
    np.testing.assert_array_equal(b.rew[~relabeled], -1.0)


def test_her_nstep_recomputes_every_reward_in_window():
    def ag_minus_g(achieved_goal, desired_goal, info):
        return (achieved_goal - desired_goal)[:, 0]

    buf = _counting_episode("final", ag_minus_g, length=6, future_k=1e9)
    b = buf.sample(300, n_step=3, gamma=0.5)
    t = b.obs["achieved_goal"][:, 0].astype(int)
    assert np.all(b.obs["desired_goal"][:, 0] == 6)
    for i in range(b.batch_size):
        m = min(3, 6 - t[i])
        want = sum(0.5**k * ((t[i] + k + 1) - 6) for k in range(m))
        assert b.rew[i] == pytest.approx(want), (t[i], b.rew[i], want)
        assert b.obs_next["achieved_goal"][i, 0] == t[i] + m
        assert b.discount[i] == pytest.approx(0.5**m)


@pytest.mark.parametrize("reward", ["python", 0.5])
@pytest.mark.parametrize("prioritized", [False, True])
def test_her_save_load_round_trip_gives_same_samples(tmp_path, reward, prioritized):
    buf = her_buffer(30, num_envs=2, reward=reward, strategy="episode", future_k=2.5, prioritized=prioritized)
    stream = HERStream(buf, RefBuffer(30, 2), 2, seed=1)
    rng = np.random.default_rng(1)
    for _ in range(25):
        stream.step(list(rng.choice(HER_KINDS, size=2)))
    buf.sample(8)
    buf.save(tmp_path / "her")
    if reward == "python":
        with pytest.raises(ApiUsageError):
            rlcore.HERReplayBuffer.load(tmp_path / "her")
        loaded = rlcore.HERReplayBuffer.load(tmp_path / "her", compute_reward=asym_reward)
    else:
        loaded = rlcore.HERReplayBuffer.load(tmp_path / "her")
    assert (loaded.strategy, loaded.future_k, loaded.distance_threshold, loaded.prioritized) == (
        "episode",
        2.5,
        None if reward == "python" else 0.5,
        prioritized,
    )
    for n_step in (1, 2):
        a, b = buf.sample(64, n_step=n_step, gamma=0.9), loaded.sample(64, n_step=n_step, gamma=0.9)
        for f in ("rew", "indices", "discount"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        for k in a.obs:
            np.testing.assert_array_equal(a.obs[k], b.obs[k])
            np.testing.assert_array_equal(a.obs_next[k], b.obs_next[k])
        check_her_batch(b, stream, "episode", n_step, 0.9, reward)


def test_relabeling_never_writes_into_storage():
    buf, stream = _single_episode(future_k=4)
    before = {k: v.copy() for k, v in buf.state_dict()["arrays"].items() if k != "rng"}
    for _ in range(10):
        buf.sample(128, n_step=2)
    after = buf.state_dict()["arrays"]
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)


def test_fetchreach_smoke_with_env_compute_reward():
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    env = gym.make("FetchReach-v4")
    compute_reward = env.unwrapped.compute_reward
    buf = rlcore.HERReplayBuffer.from_spaces(
        env.observation_space, env.action_space, capacity=1000, seed=0, compute_reward=compute_reward
    )
    native = rlcore.HERReplayBuffer.from_spaces(
        env.observation_space,
        env.action_space,
        capacity=1000,
        seed=0,
        distance_threshold=env.unwrapped.distance_threshold,
    )
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    steps = 0
    while steps < 100:
        act = env.action_space.sample()
        nxt, rew, term, trunc, _ = env.step(act)
        for b in (buf, native):
            b.add(obs, act, rew, term, trunc, nxt)
        steps += 1
        obs = nxt if not (term or trunc) else env.reset()[0]
    env.close()
    assert len(buf) == 100
    s = buf.sample(256)
    want = compute_reward(s.obs_next["achieved_goal"], s.obs["desired_goal"], {})
    np.testing.assert_array_equal(s.rew, want.astype(F32))
    relabeled = np.any(s.obs["desired_goal"] != buf.column("obs.desired_goal")[s.indices], axis=1)
    assert 0.6 < relabeled.mean() < 0.95
    # the native reward gives the same batch as the env's compute_reward
    n = native.sample(256)
    np.testing.assert_array_equal(n.indices, s.indices)
    np.testing.assert_array_equal(n.rew, s.rew)


# ---------------------------------------------------------------------------------------------
# bad input


def _snapshot(buf):
    st_ = buf.state_dict()
    return st_["schema"], {k: v.copy() for k, v in st_["arrays"].items()}


def _assert_same(buf, before):
    schema, arrays = _snapshot(buf)
    assert schema == before[0]
    for k, v in before[1].items():
        np.testing.assert_array_equal(arrays[k], v, err_msg=k)


def _goal_obs(
    ag_shape=(3,), dg_shape=(3,), keys=("observation", "achieved_goal", "desired_goal"), dg_dtype=F32
):
    shapes = {"observation": (2,), "achieved_goal": ag_shape, "desired_goal": dg_shape}
    return {k: np.zeros(shapes.get(k, (1,)), dg_dtype if k == "desired_goal" else F32) for k in keys}


@pytest.mark.parametrize(
    "obs",
    [
        _goal_obs(keys=("observation", "achieved_goal")),
        _goal_obs(keys=("observation", "desired_goal")),
        _goal_obs(ag_shape=(3,), dg_shape=(2,)),
        _goal_obs(dg_dtype=np.float64),
        np.zeros(5, F32),
    ],
    ids=["no-desired", "no-achieved", "goal-shapes", "goal-dtypes", "array-obs"],
)
def test_her_first_add_with_bad_goal_keys_raises_shape_error_and_leaves_buffer_empty(obs):
    buf = her_buffer(20)
    before = _snapshot(buf)
    with pytest.raises(ShapeError):
        buf.add(obs, np.zeros(1, F32), 0.0, False, False, obs)
    _assert_same(buf, before)
    assert len(buf) == 0 and buf._schema() == ([], [])
    good = _goal_obs()
    buf.add(good, np.zeros(1, F32), 0.0, False, False, good)
    assert len(buf) == 1


def test_her_native_reward_needs_float_goals():
    buf = her_buffer(20, reward=0.1)
    obs = {
        "observation": np.zeros(2, F32),
        "achieved_goal": np.zeros(3, np.int32),
        "desired_goal": np.zeros(3, np.int32),
    }
    with pytest.raises(DTypeError):
        buf.add(obs, np.zeros(1, F32), 0.0, False, False, obs)
    assert buf._schema() == ([], [])


def test_her_from_spaces_without_goal_keys_raises_shape_error():
    space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(-1, 1, (2,)), "achieved_goal": gym.spaces.Box(-1, 1, (3,))}
    )
    with pytest.raises(ShapeError):
        rlcore.HERReplayBuffer.from_spaces(
            space, gym.spaces.Box(-1, 1, (2,)), capacity=10, distance_threshold=0.1
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(compute_reward=asym_reward, distance_threshold=0.1),
        dict(compute_reward=42),
        dict(distance_threshold=0.1, strategy="past"),
        dict(distance_threshold=0.1, future_k=-1),
        dict(distance_threshold=-0.1),
        dict(distance_threshold=float("nan")),
    ],
    ids=["no-reward", "two-rewards", "not-callable", "strategy", "negative-k", "negative-eps", "nan-eps"],
)
def test_her_bad_constructor_arguments_raise_invalid_value(kwargs):
    with pytest.raises(InvalidValueError):
        rlcore.HERReplayBuffer(20, **kwargs)


def _bad_reward_buffer(fn):
    buf = rlcore.HERReplayBuffer(40, seed=0, compute_reward=asym_reward, future_k=1e9)
    stream = HERStream(buf, RefBuffer(40, 1), 1)
    for t in range(8):
        stream.step(["trunc" if t == 7 else "step"])
    buf._compute_reward = fn
    return buf


@pytest.mark.parametrize(
    "fn,err,builtin",
    [
        (lambda ag, g, info: ag - g, ShapeError, ValueError),
        (lambda ag, g, info: np.zeros(len(ag) + 1, F32), ShapeError, ValueError),
        (lambda ag, g, info: np.zeros((len(ag), 1), F32), ShapeError, ValueError),
        (lambda ag, g, info: np.array(["x"] * len(ag)), DTypeError, TypeError),
        (lambda ag, g, info: np.zeros(len(ag), np.complex64), DTypeError, TypeError),
        (lambda ag, g, info: None, DTypeError, TypeError),
        (lambda ag, g, info: np.full(len(ag), np.nan), InvalidValueError, ValueError),
    ],
    ids=["per-dim", "too-long", "column", "strings", "complex", "none", "nan"],
)
def test_her_compute_reward_returning_wrong_shape_or_dtype_raises_and_leaves_buffer_unchanged(
    fn, err, builtin
):
    buf = _bad_reward_buffer(fn)
    before = _snapshot(buf)
    with pytest.raises(err) as info:
        buf.sample(16)
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    _assert_same(buf, before)  # the RNG too: the next good call samples as if nothing happened
    buf._compute_reward = asym_reward
    twin = rlcore.HERReplayBuffer(40, seed=0, compute_reward=asym_reward, future_k=1e9)
    twin.load_state_dict(buf.state_dict())
    np.testing.assert_array_equal(buf.sample(16).indices, twin.sample(16).indices)


def test_her_compute_reward_exception_propagates_and_leaves_buffer_unchanged():
    def boom(ag, g, info):
        raise KeyError("user bug")

    buf = _bad_reward_buffer(boom)
    before = _snapshot(buf)
    with pytest.raises(KeyError, match="user bug"):
        buf.sample(16)
    _assert_same(buf, before)


def test_her_add_with_missing_goal_key_after_first_add_raises_shape_error():
    buf, _ = _single_episode(length=3)
    before = _snapshot(buf)
    obs = {"observation": np.zeros(2, F32), "achieved_goal": np.zeros(3, F32)}
    with pytest.raises(ShapeError):
        buf.add(obs, np.zeros(2, F32), 0.0, False, False, obs)
    bad = _goal_obs(dg_shape=(4,))
    with pytest.raises(ShapeError):
        buf.add(bad, np.zeros(2, F32), 0.0, False, False, bad)
    _assert_same(buf, before)


def test_her_custom_goal_keys():
    buf = rlcore.HERReplayBuffer(
        40, seed=0, distance_threshold=0.5, future_k=1e9, goal_keys=("state", "reached", "target")
    )
    for t in range(6):
        o = {"state": np.zeros(2, F32), "reached": np.full(2, t, F32), "target": np.full(2, -50, F32)}
        n = {"state": np.zeros(2, F32), "reached": np.full(2, t + 1, F32), "target": np.full(2, -50, F32)}
        buf.add(o, np.zeros(1, F32), -1.0, False, t == 5, n)
    b = buf.sample(200)
    t = b.obs["reached"][:, 0]
    g = b.obs["target"][:, 0]
    assert np.all((g >= t + 1) & (g <= 6)), "future goals are achieved goals after steps t..e-1"
    np.testing.assert_array_equal(b.obs_next["target"], b.obs["target"])
    np.testing.assert_array_equal(b.rew, np.where(g == t + 1, 0.0, -1.0))


def test_her_pickle_and_state_dict_round_trip():
    buf = her_buffer(30, num_envs=2, strategy="future", future_k=3)
    stream = HERStream(buf, RefBuffer(30, 2), 2, seed=2)
    for _ in range(12):
        stream.step(["step", "trunc"])
    clone = pickle.loads(pickle.dumps(buf))
    assert clone._compute_reward is asym_reward
    a, b = buf.sample(64, n_step=2, gamma=0.9), clone.sample(64, n_step=2, gamma=0.9)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.rew, b.rew)
    np.testing.assert_array_equal(a.obs["desired_goal"], b.obs["desired_goal"])
    check_her_batch(b, stream, "future", 2, 0.9)


def test_her_sample_into_out_arrays():
    buf = her_buffer(40, num_envs=2, strategy="final", future_k=1)
    stream = HERStream(buf, RefBuffer(40, 2), 2, seed=5)
    for _ in range(10):
        stream.step(["step", "term"])
    out = buf.sample(32)
    dg = out.obs["desired_goal"]
    for _ in range(5):
        b = buf.sample(32, n_step=2, gamma=0.7, out=out)
        assert b.obs["desired_goal"] is dg
        check_her_batch(b, stream, "final", 2, 0.7)


def test_her_compute_reward_calling_back_into_its_buffer_raises_api_usage_error():
    holder = {}

    def reentrant(ag, g, info):
        len(holder["buf"])  # a user reward that touches its own buffer mid-sample
        return asym_reward(ag, g, info)

    buf = _bad_reward_buffer(reentrant)
    holder["buf"] = buf
    before = _snapshot(buf)
    with pytest.raises(ApiUsageError):
        buf.sample(16)
    _assert_same(buf, before)
    buf._compute_reward = asym_reward
    assert buf.sample(4).rew.shape == (4,)


def test_her_from_arrays_builds_an_offline_goal_buffer_with_its_reward():
    t_len = 10
    ag = np.arange(t_len + 1, dtype=np.float64)[:, None]
    obs = {
        "observation": np.zeros((t_len, 2)),
        "achieved_goal": ag[:-1],
        "desired_goal": np.full((t_len, 1), 99.0),
    }
    obs_next = {
        "observation": np.zeros((t_len, 2)),
        "achieved_goal": ag[1:],
        "desired_goal": np.full((t_len, 1), 99.0),
    }
    trunc = np.arange(t_len) % 5 == 4
    buf = rlcore.HERReplayBuffer.from_arrays(
        obs,
        np.zeros((t_len, 1), np.float32),
        -np.ones(t_len),
        np.zeros(t_len, bool),
        trunc,
        obs_next,
        strategy="final",
        future_k=1e9,
        distance_threshold=0.1,
        seed=0,
    )
    assert len(buf) == t_len
    batch = buf.sample(200)
    # 'final' with (almost) certain relabeling: the goal is the achieved goal after the episode's last step
    t = batch.obs["achieved_goal"][:, 0]
    want_goal = np.where(t < 5, 5.0, 10.0)
    relabeled = batch.obs["desired_goal"][:, 0] != 99.0
    assert relabeled.mean() > 0.99
    np.testing.assert_array_equal(batch.obs["desired_goal"][relabeled, 0], want_goal[relabeled])
    np.testing.assert_array_equal(
        batch.rew[relabeled], np.where(t[relabeled] + 1 == want_goal[relabeled], 0.0, -1.0)
    )


# ---------------------------------------------------------------------------------------------
# Stable-Baselines3's sampling rules (finished_only, exact_ratio) and sample_at


def _finished_whole(stream: HERStream) -> set[int]:
    """Physical rows of the transitions of episodes that have ended and whose first row is
    still stored (the reference's view of what finished_only may draw)."""
    out = set()
    for e, env in enumerate(stream.ref.envs):
        for a in env.sampleable():
            ep = env.rows[a].ep
            if ep in env.ep_end and env.ep_start[ep] >= env.alive_lo:
                out.add(stream.ref.phys(e, a))
    return out


@settings(max_examples=40, deadline=None)
@given(
    num_envs=st.integers(1, 2),
    seg=st.integers(3, 14),
    strategy=st.sampled_from(["future", "final", "episode"]),
    future_k=st.sampled_from([0, 1, 4, 7.5]),
    batch=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_finished_only_and_exact_ratio_draw_whole_ended_episodes_and_relabel_the_last_share(
    num_envs, seg, strategy, future_k, batch, seed, data
):
    steps = data.draw(
        st.lists(
            st.lists(st.sampled_from(HER_KINDS), min_size=num_envs, max_size=num_envs),
            min_size=1,
            max_size=30,
        )
    )
    buf = her_buffer(
        seg * num_envs,
        num_envs,
        seed=seed,
        strategy=strategy,
        future_k=future_k,
        finished_only=True,
        exact_ratio=True,
    )
    stream = HERStream(buf, RefBuffer(seg * num_envs, num_envs), num_envs, seed=seed)
    for kinds in steps:
        stream.step(kinds)
    allowed = _finished_whole(stream)
    if not allowed:
        with pytest.raises(ApiUsageError, match="finished episodes"):
            buf.sample(batch)
        assert isinstance(ApiUsageError("x"), RuntimeError)  # what SB3 raises
        return
    b = buf.sample(batch)
    assert set(b.indices.tolist()) <= allowed
    relabeled, _ = check_her_batch(b, stream, strategy, 1, 0.99)
    n_relabeled = int((1 - 1 / (future_k + 1)) * batch)  # SB3's int(her_ratio * batch_size)
    assert relabeled == [False] * (batch - n_relabeled) + [True] * n_relabeled
    # every allowed transition is drawn (uniformly: a 2000-draw batch misses one of <= 28
    # rows with probability < 28 * (27/28)^2000 ~ 1e-30)
    assert set(buf.sample(2000).indices.tolist()) == allowed


def test_finished_only_draws_every_whole_ended_transition_uniformly():
    """Chi-square over the drawn rows of 3 ended episodes plus a running one, 2 envs."""
    buf = her_buffer(80, 2, seed=5, finished_only=True)
    stream = HERStream(buf, RefBuffer(80, 2), 2)
    for t in range(23):
        stream.step(["trunc" if t % 7 == 6 else "step", "term" if t % 5 == 4 else "step"])
    allowed = sorted(_finished_whole(stream))
    draws = np.concatenate([buf.sample(1000).indices for _ in range(40)])
    counts = np.array([(draws == r).sum() for r in allowed])
    assert counts.sum() == draws.size
    expected = np.full(len(allowed), draws.size / len(allowed))
    assert chi2_stat(counts, expected) < chi2_critical(len(allowed) - 1)


def test_finished_only_cannot_be_combined_with_prioritized_replay():
    with pytest.raises(InvalidValueError, match="prioritized"):
        her_buffer(32, finished_only=True, prioritized=True)


def test_sample_at_gives_the_batch_of_the_rows_and_goals_it_is_given():
    """sample_at(indices of a draw, goal rows) equals that draw's batch, for every field; the
    buffer's generator is not used (the next sample is as if sample_at never ran)."""
    buf, stream = _single_episode(length=10, future_k=4)
    twin, _ = _single_episode(length=10, future_k=4)
    b = buf.sample(64)
    tw = twin.sample(64)
    # the goal row of a relabeled sample: the stored achieved-goal id names the row after t'
    ids = buf.column("obs")["achieved_goal"][:, 1]
    goal_rows = np.array(
        [-1 if g[0] < 0 else int(np.flatnonzero(ids == g[1])[0]) - 1 for g in b.obs["desired_goal"]]
    )
    again = buf.sample_at(b.indices, goal_rows)
    for field in ("obs", "obs_next"):
        for k in b.obs:
            np.testing.assert_array_equal(getattr(again, field)[k], getattr(b, field)[k])
    for field in ("act", "rew", "terminated", "truncated", "discount", "indices"):
        np.testing.assert_array_equal(getattr(again, field), getattr(b, field))
    nxt, twin_nxt = buf.sample(64), twin.sample(64)
    np.testing.assert_array_equal(nxt.indices, twin_nxt.indices)
    np.testing.assert_array_equal(tw.indices, b.indices)
    check_her_batch(buf.sample_at(b.indices), stream, "future", 1, 0.99)  # no goals: none relabeled
    assert (buf.sample_at(b.indices).obs["desired_goal"][:, 0] < 0).all()


@pytest.mark.parametrize(
    "indices, goal_indices, match",
    [
        ([10], None, "does not hold a transition"),  # the terminal row of the 10-step episode
        ([64], None, "out of range"),
        ([-1], None, "out of range"),
        ([], None, "indices is empty"),
        ([0, 1], [3], "goal_indices has 1 entries"),
        ([2], [12], "not a transition of that sample's episode"),
    ],
)
def test_sample_at_refuses_rows_without_transitions_and_foreign_goals(indices, goal_indices, match):
    buf, _ = _single_episode(length=10)
    HERStream(buf, RefBuffer(64, 1), 1).step(["step"])  # a second, running episode at rows 11..12
    state = pickle.dumps(buf.state_dict())
    with pytest.raises(InvalidValueError, match=match):
        buf.sample_at(np.array(indices, dtype=np.int64), goal_indices)
    assert pickle.dumps(buf.state_dict()) == state


def test_sample_at_of_a_plain_buffer_equals_sample_and_refuses_float_indices():
    buf = rlcore.ReplayBuffer(64, seed=3)
    for t in range(20):
        buf.add(np.array([t], F32), np.zeros(1, F32), F32(t), t % 6 == 5, False, np.array([t + 1], F32))
    b = buf.sample(32, n_step=3, gamma=0.9)
    again = buf.sample_at(b.indices, n_step=3, gamma=0.9)
    for field in ("obs", "obs_next", "act", "rew", "terminated", "truncated", "discount", "indices"):
        np.testing.assert_array_equal(getattr(again, field), getattr(b, field))
    with pytest.raises(DTypeError):
        buf.sample_at(b.indices.astype(np.float64))
