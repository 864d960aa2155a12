"""Hindsight relabeling against the numpy reference: which goals may be chosen (strategy, episode,
ring wrap), how often (k/(k+1)), how uniformly, and the recomputed (n-step) rewards. Bad input and the
other calls of HERReplayBuffer: test_her_inputs.py; Stable-Baselines3's sampling rules and
``sample_at``: test_her_sb3_rules.py."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from her_stream import F32, HER_KINDS, HERStream, asym_reward, check_her_batch, her_buffer, single_episode
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer, chi2_critical, chi2_stat, fetch_reward
from rlcore.errors import ApiUsageError


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


def _fast_picks(batch):
    """For a single episode stored from row 0 (ids = rows): (t, t' or -1 if not relabeled)."""
    g = batch.obs["desired_goal"]
    tp = np.where(g[:, 0] >= 0, g[:, 1].astype(np.int64) - 1, -1)
    return batch.indices, tp


@pytest.mark.parametrize("future_k", [4, 1, 0.25, 0])
def test_relabeled_fraction_is_k_over_k_plus_one(future_k):
    buf, stream = single_episode(future_k=future_k)
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
    buf, _ = single_episode(future_k=4)
    n = 3000
    hits = sum(int(buf.sample(1).obs["desired_goal"][0, 0] >= 0) for _ in range(n))
    assert abs(hits / n - 0.8) < 5 * np.sqrt(0.16 / n)


def _pick_counts(strategy, length=8, batches=120):
    buf, stream = single_episode(length=length, strategy=strategy, future_k=1e9)
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
    buf, stream = single_episode(future_k=4)
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
