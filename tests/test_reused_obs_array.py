"""Vector envs that rewrite the observation array they returned.

``SyncVectorEnv(fns, copy=False)`` and ``AsyncVectorEnv(fns, shared_memory=True, copy=False)``
return the same array at every step and reset, rewritten in place. The collector, the rollout
sampler and ``evaluate`` must keep their own copy of whatever they hold across an env step.
The env's observation is its step count t (truncated at 6), so every right answer is known:
``obs_next == obs + 1`` for every transition, episodes of 6 steps starting at 0, never cut.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from gymnasium.vector import AutoresetMode
from rlcore.collect.collector import Collector
from rlcore.collect.evaluate import evaluate
from rlcore.collect.sampler import RolloutSampler

LENGTH = 6
F_CUT = 4  # flag bit of a row whose episode the continuity check cut (rlcore-core storage/mod.rs)


class StepCountEnv(gym.Env):
    """Observation = the step count t of the episode (0 after reset); reward 1 per step.
    With ``dict_obs`` the observation is ``{"t": [t], "twice": [2 t]}``. Wrapped in gymnasium's
    ``TimeLimit(LENGTH)`` by :func:`make_env`, so every episode is truncated after 6 steps."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, dict_obs: bool = False) -> None:
        self.dict_obs = dict_obs
        box = gym.spaces.Box(0, 100, (1,), np.float32)
        self.observation_space = gym.spaces.Dict({"t": box, "twice": box}) if dict_obs else box
        self.t = 0

    def _obs(self) -> Any:
        t = np.array([self.t], np.float32)
        return {"t": t, "twice": 2 * t} if self.dict_obs else t

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 1.0, False, False, {}


def make_env(dict_obs: bool = False) -> gym.Env:
    return gym.wrappers.TimeLimit(StepCountEnv(dict_obs), LENGTH)


def make_envs(kind: str, mode: AutoresetMode, n: int = 2, dict_obs: bool = False) -> gym.vector.VectorEnv:
    fns = [lambda: make_env(dict_obs)] * n
    if kind == "sync":
        return gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)
    return gym.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, autoreset_mode=mode)


KINDS = ["sync", "async"]
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def first_key(obs: Any) -> np.ndarray:
    return obs["t"] if isinstance(obs, dict) else obs


def zero_policy(obs: Any) -> np.ndarray:
    return np.zeros(len(first_key(obs)), np.int64)


def stored_transitions(buf: rlcore.ReplayBuffer) -> tuple[np.ndarray, np.ndarray, Any, Any]:
    """Every stored transition row, its episode's start row, its obs and its obs_next (the
    observation of the next row of its env's segment)."""
    seg = buf.segment_len
    rows = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    nxt = rows - rows % seg + (rows % seg + 1) % seg
    start = buf.episode_bounds(rows)[0]
    col = buf.column("obs")
    if isinstance(col, dict):
        return rows, start, {k: v[rows] for k, v in col.items()}, {k: v[nxt] for k, v in col.items()}
    return rows, start, col[rows], col[nxt]


@pytest.mark.parametrize("dict_obs", [False, True], ids=["array", "dict"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", KINDS)
def test_collector_stores_obs_next_equal_obs_plus_one_with_reused_obs_array(kind, mode, dict_obs):
    envs = make_envs(kind, mode, dict_obs=dict_obs)
    try:
        buf = rlcore.ReplayBuffer.from_spaces(
            envs.single_observation_space, envs.single_action_space, capacity=400, num_envs=2
        )
        col = Collector(envs, buf)
        col.reset(seed=0)
        stats = col.collect(40, policy=zero_policy)
        stats2 = col.collect(40, policy=zero_policy)  # a second call continues the same episodes
    finally:
        envs.close()
    rows, start, obs, obs_next = stored_transitions(buf)
    assert len(rows) == len(buf) == stats.env_steps + stats2.env_steps >= 80
    t, t_next = first_key(obs)[:, 0], first_key(obs_next)[:, 0]
    np.testing.assert_array_equal(t_next, t + 1)
    assert set(t.tolist()) == set(range(LENGTH))
    if dict_obs:
        np.testing.assert_array_equal(obs["twice"][:, 0], 2 * t)
        np.testing.assert_array_equal(obs_next["twice"][:, 0], 2 * t_next)
    # episodes are never cut: each starts at t = 0 and only its 6th step is truncated
    np.testing.assert_array_equal(first_key(buf.column("obs"))[start, 0], 0)
    assert not (buf.column("flags") & F_CUT).any(), "the continuity check cut an episode"
    np.testing.assert_array_equal(buf.truncated[rows].astype(bool), t == LENGTH - 1)
    assert not buf.terminated[rows].any()
    assert set(stats.episode_lengths + stats2.episode_lengths) == {LENGTH}
    batch = buf.sample(256)
    np.testing.assert_array_equal(first_key(batch.obs_next), first_key(batch.obs) + 1)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", KINDS)
def test_collector_reward_fn_sees_obs_and_its_true_next_obs_with_reused_obs_array(kind, mode):
    seen: list[np.ndarray] = []

    def reward_fn(obs, act, obs_next, rew):
        seen.append(obs_next[:, 0] - obs[:, 0])
        return rew

    envs = make_envs(kind, mode)
    try:
        col = Collector(envs, None, reward_fn=reward_fn)
        col.reset(seed=0)
        col.collect(30, policy=zero_policy)
    finally:
        envs.close()
    steps = np.concatenate(seen)
    # NEXT_STEP reset rows (reset obs 0 after final obs 6) are no transitions: -6 there only
    allowed = {1.0, -6.0} if mode == AutoresetMode.NEXT_STEP else {1.0}
    assert set(steps.tolist()) <= allowed and (steps == 1).sum() >= 30


class CountingPolicy:
    """act_value/value for the sampler; value(obs) = t so final values are checkable."""

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(obs)
        return np.zeros(n, np.int64), np.zeros(n, np.float32), obs[:, 0].astype(np.float32)

    def value(self, obs: np.ndarray) -> np.ndarray:
        return obs[:, 0].astype(np.float32)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", KINDS)
def test_rollout_observations_are_the_step_counts_with_reused_obs_array(kind, mode):
    steps: list[np.ndarray] = []

    def reward_fn(obs, act, obs_next, rew):
        steps.append(obs_next[:, 0] - obs[:, 0])
        return rew

    envs = make_envs(kind, mode)
    sampler = RolloutSampler(envs, reward_fn=reward_fn)
    try:
        sampler.reset(seed=0)
        first, _ = sampler.sample(CountingPolicy(), num_steps=8)
        second, _ = sampler.sample(CountingPolicy(), num_steps=8)  # continues the same episodes
    finally:
        envs.close()
    obs = np.concatenate([first.obs, second.obs])[:, :, 0]
    if mode == AutoresetMode.NEXT_STEP:  # the reset row holds the final observation o_6
        want, after = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1], 2
    else:
        want, after = [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3], 4
    for e in range(2):
        np.testing.assert_array_equal(obs[:, e], want)
    valid = np.concatenate([first.valid, second.valid])
    np.testing.assert_array_equal(np.stack(steps)[valid], 1)  # reward_fn saw (o_t, o_t+1)
    trunc = np.concatenate([first.truncated, second.truncated])
    np.testing.assert_array_equal(trunc, valid & (obs == LENGTH - 1))
    final = np.concatenate([first.final_value, second.final_value])
    np.testing.assert_array_equal(final[trunc], LENGTH)  # V(o_6) = 6: the true final observation
    np.testing.assert_array_equal(second.last_value, [after, after])


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", KINDS)
def test_evaluate_counts_six_step_episodes_with_reused_obs_array(kind, mode):
    """evaluate holds nothing across a step (the policy reads obs before the next step), so
    this passes on the old code too; it guards the loop against a future change."""
    seen: list[np.ndarray] = []

    def policy(obs: np.ndarray) -> np.ndarray:
        seen.append(obs[:, 0].copy())
        return zero_policy(obs)

    envs = make_envs(kind, mode)
    try:
        stats = evaluate(policy, envs, 4, seed=0)
    finally:
        envs.close()
    assert (stats.episodes, stats.length_mean, stats.return_mean, stats.return_std) == (4, LENGTH, LENGTH, 0)
    want = (
        [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5] if mode == AutoresetMode.NEXT_STEP else [0, 1, 2, 3, 4, 5] * 2
    )
    np.testing.assert_array_equal(np.stack(seen)[:, 0], want)
