"""Collector: autoreset modes, terminated vs truncated, episode statistics, reward_fn, evaluation."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from rlcore.collect.collector import Collector
from rlcore.collect.evaluate import evaluate


class CountEnv(gym.Env):
    """obs = (episode id, t); reward = t + a; the episode ends after ``length`` steps.

    Episodes whose id is even end by termination when ``mixed``, the others by truncation.
    ``is_success`` is 1 at the last step of even episodes.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, length: int = 3, *, terminate: bool = False, mixed: bool = False) -> None:
        self.length, self.terminate, self.mixed = length, terminate, mixed
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.ep, self.t], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.ep = int(self.np_random.integers(0, 1000))
        self.t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        end = self.t == self.length
        term_ep = self.terminate or (self.mixed and self.ep % 2 == 0)
        info = {"is_success": float(end and self.ep % 2 == 0)}
        return self._obs(), float(self.t + action[0]), end and term_ep, end and not term_ep, info


class RecordingBuffer:
    """Stands in for an rlcore buffer: records the unmasked rows of every add call."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.calls = 0
        self.masks: list[Any] = []

    def add(self, obs, act, rew, terminated, truncated, obs_next, *, mask=None) -> None:
        self.calls += 1
        self.masks.append(mask)
        n = len(rew)
        for i in range(n):
            if mask is None or mask[i]:
                o = {k: v[i].copy() for k, v in obs.items()} if isinstance(obs, dict) else obs[i].copy()
                on = (
                    {k: v[i].copy() for k, v in obs_next.items()}
                    if isinstance(obs_next, dict)
                    else obs_next[i].copy()
                )
                self.rows.append(
                    (i, o, act[i].copy(), float(rew[i]), bool(terminated[i]), bool(truncated[i]), on)
                )


def make_envs(mode: AutoresetMode, *, n: int = 2, **kw: Any) -> SyncVectorEnv:
    return SyncVectorEnv([lambda i=i: CountEnv(3 + i, **kw) for i in range(n)], autoreset_mode=mode)


def const_policy(obs: Any) -> np.ndarray:
    n = len(obs["observation"]) if isinstance(obs, dict) else len(obs)
    return np.zeros((n, 1), np.float32)


def test_next_step_truncated_episode_keeps_final_obs_and_skips_reset_row() -> None:
    envs = make_envs(AutoresetMode.NEXT_STEP, n=1)
    buf = RecordingBuffer()
    col = Collector(envs, buf)
    col.reset(seed=0)
    stats = col.collect(7, policy=const_policy)
    rows = buf.rows
    assert len(rows) == 7 and stats.env_steps == 7
    assert stats.vector_steps == 9  # two reset rows after the two finished episodes
    # step 2 of the first episode: truncated, obs_next is the final obs o_3 of the same episode
    _, o, _, rew, term, trunc, on = rows[2]
    assert (term, trunc) == (False, True)
    assert on[1] == 3 and on[0] == o[0]
    # the next stored row starts the new episode from its reset obs (t = 0), not from o_3
    assert rows[3][1][1] == 0
    assert [r[3] for r in rows] == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]
    assert buf.masks[3] is not None and not buf.masks[3][0]
    assert stats.episode_lengths == (3, 3) and stats.episode_returns == (6.0, 6.0)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_every_autoreset_mode_writes_the_same_transitions(mode: AutoresetMode) -> None:
    ref_buf, buf = RecordingBuffer(), RecordingBuffer()
    ref = Collector(make_envs(AutoresetMode.NEXT_STEP, mixed=True), ref_buf)
    col = Collector(make_envs(mode, mixed=True), buf)
    ref.reset(seed=3)
    col.reset(seed=3)
    s_ref = ref.collect(40, policy=const_policy)
    s = col.collect(40, policy=const_policy)
    by_env = lambda rows, i: [(r[1].tolist(), r[3], r[4], r[5], r[6].tolist()) for r in rows if r[0] == i]  # noqa: E731
    for i in range(2):
        got, want = by_env(buf.rows, i), by_env(ref_buf.rows, i)
        k = min(len(got), len(want))
        assert k >= 15 and got[:k] == want[:k]
    # every stored transition is inside one episode: obs_next continues obs
    for _, o, _, _, _, _, on in buf.rows:
        assert on[0] == o[0] and on[1] == o[1] + 1
    assert s.episode_returns[:4] == s_ref.episode_returns[:4]
    if mode != AutoresetMode.NEXT_STEP:
        assert all(m is None for m in buf.masks)


def test_terminated_and_truncated_are_kept_apart() -> None:
    buf = RecordingBuffer()
    col = Collector(make_envs(AutoresetMode.NEXT_STEP, n=1, mixed=True), buf)
    col.reset(seed=1)
    col.collect(60, policy=const_policy)
    ends = [(int(r[1][0]), r[4], r[5]) for r in buf.rows if r[4] or r[5]]
    assert any(t for _, t, _ in ends) and any(tr for _, _, tr in ends)
    for ep, term, trunc in ends:
        assert term == (ep % 2 == 0) and trunc == (ep % 2 == 1)


def test_episode_stats_success_and_reward_fn() -> None:
    buf = RecordingBuffer()
    seen: list[Any] = []

    def reward_fn(obs, act, obs_next, rew):
        seen.append((obs.copy(), obs_next.copy()))
        return -np.ones_like(rew)

    col = Collector(make_envs(AutoresetMode.NEXT_STEP, n=2, mixed=True), buf, reward_fn=reward_fn)
    col.reset(seed=2)
    stats = col.collect(30, policy=const_policy)
    assert all(r[3] == -1.0 for r in buf.rows)  # stored reward replaced
    assert all(
        ret == sum(range(1, n + 1))
        for ret, n in zip(stats.episode_returns, stats.episode_lengths, strict=True)
    )
    assert len(stats.episode_successes) == len(stats.episode_returns) > 0
    assert set(stats.episode_successes) <= {0.0, 1.0}
    assert col.env_steps == stats.env_steps and col.episodes == len(stats.episode_returns)


def test_random_policy_is_seeded_and_collect_requires_reset() -> None:
    envs = make_envs(AutoresetMode.NEXT_STEP)
    col = Collector(envs, None)
    with pytest.raises(RuntimeError, match="reset"):
        col.collect(5)
    col.reset(seed=0)
    with pytest.raises(ValueError):
        col.collect(0)
    b1, b2 = RecordingBuffer(), RecordingBuffer()
    for b in (b1, b2):
        c = Collector(make_envs(AutoresetMode.NEXT_STEP), b)
        c.reset(seed=7)
        c.collect(10)
    assert [r[2].tolist() for r in b1.rows] == [r[2].tolist() for r in b2.rows]


def test_dict_observations_are_written_whole() -> None:
    class GoalCount(CountEnv):
        def __init__(self) -> None:
            super().__init__(4)
            box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
            self.observation_space = gym.spaces.Dict(
                {"observation": box, "achieved_goal": box, "desired_goal": box}
            )

        def _obs(self) -> dict[str, np.ndarray]:
            o = np.array([self.ep, self.t], np.float32)
            return {"observation": o, "achieved_goal": o + 1, "desired_goal": np.zeros(2, np.float32)}

    buf = RecordingBuffer()
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        buf.rows.clear()
        col = Collector(SyncVectorEnv([GoalCount, GoalCount], autoreset_mode=mode), buf)
        col.reset(seed=0)
        col.collect(20, policy=const_policy)
        for r in buf.rows:
            assert r[6]["observation"][1] == r[1]["observation"][1] + 1
            assert r[6]["observation"][0] == r[1]["observation"][0]


def test_state_dict_roundtrip_continues_identically() -> None:
    a = Collector(make_envs(AutoresetMode.NEXT_STEP), RecordingBuffer())
    a.reset(seed=4)
    a.collect(5)
    state = a.state_dict()
    assert state["envs"] is not None
    b = Collector(make_envs(AutoresetMode.NEXT_STEP), RecordingBuffer())
    b.load_state_dict(state)
    sa, sb = a.collect(12), b.collect(12)
    assert sa.episode_returns == sb.episode_returns
    assert [r[2].tolist() for r in a.buffer.rows[-12:]] == [r[2].tolist() for r in b.buffer.rows]


def test_evaluate_spreads_episodes_over_envs() -> None:
    envs = make_envs(AutoresetMode.NEXT_STEP, n=2)  # lengths 3 and 4
    stats = evaluate(const_policy, envs, 5, seed=0)
    assert stats.episodes == 5
    assert stats.length_mean == pytest.approx((3 * 3 + 2 * 4) / 5)
    assert 0.0 <= stats.success_rate <= 1.0
    with pytest.raises(ValueError):
        evaluate(const_policy, envs, 0)


def test_case6_real_buffer_stores_final_obs_of_timed_out_step() -> None:
    rlcore = pytest.importorskip("rlcore")
    envs = make_envs(AutoresetMode.NEXT_STEP, n=1)  # truncated at step 3
    buf = rlcore.ReplayBuffer(64, num_envs=1, seed=0)
    col = Collector(envs, buf)
    col.reset(seed=0)
    col.collect(6, policy=const_policy)
    assert len(buf) == 6  # the reset row after the first episode is not a transition
    batch = buf.sample(256, n_step=1, gamma=0.5)
    t = batch.obs[:, 1]
    np.testing.assert_array_equal(
        batch.obs_next[:, 1], t + 1
    )  # final obs o_3 after step 2, never a reset obs
    np.testing.assert_array_equal(batch.obs_next[:, 0], batch.obs[:, 0])  # same episode
    last = t == 2
    assert last.any() and batch.truncated[last].all() and not batch.terminated.any()
    np.testing.assert_allclose(batch.discount, 0.5)  # truncation bootstraps


def test_async_vector_env_writes_the_same_transitions() -> None:
    fns = [lambda i=i: CountEnv(3 + i, mixed=True) for i in range(2)]
    sync_buf, async_buf = RecordingBuffer(), RecordingBuffer()
    envs = gym.vector.AsyncVectorEnv(fns)
    try:
        for e, b in ((SyncVectorEnv(fns), sync_buf), (envs, async_buf)):
            col = Collector(e, b)
            col.reset(seed=5)
            col.collect(20, policy=const_policy)
    finally:
        envs.close()
    key = lambda r: (r[0], r[1].tolist(), r[3], r[4], r[5], r[6].tolist())  # noqa: E731
    assert [key(r) for r in sync_buf.rows] == [key(r) for r in async_buf.rows]
