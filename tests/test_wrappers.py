"""TruncatedAsTerminated: a time limit reported as termination, so the buffer masks the bootstrap."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import rlcore.envs  # registers rlcore/PointGoal-v0 (never terminates; truncates at T)
from gymnasium.vector import SyncVectorEnv
from gymnasium.wrappers.vector import FlattenObservation
from rlcore.collect.collector import Collector
from rlcore.envs import TruncatedAsTerminated, TruncatedAsTerminatedVector

T, N, GAMMA = 5, 2, 0.9


def make(kind: str) -> gym.vector.VectorEnv:
    base = [lambda: gym.make("rlcore/PointGoal-v0", max_episode_steps=T)] * N
    if kind == "env":
        envs = SyncVectorEnv(
            [lambda: TruncatedAsTerminated(gym.make("rlcore/PointGoal-v0", max_episode_steps=T))] * N
        )
    elif kind == "vector":
        envs = TruncatedAsTerminatedVector(SyncVectorEnv(base))
    else:
        envs = SyncVectorEnv(base)
    return FlattenObservation(envs)


def last_steps(kind: str) -> tuple[rlcore.TransitionBatch, np.ndarray]:
    """Collect 3 episodes per env and return the stored last step of every finished episode."""
    envs = make(kind)
    buf = rlcore.ReplayBuffer(200, num_envs=N, seed=0)
    col = Collector(envs, buf)
    col.reset(seed=1)
    col.collect(3 * T * N + N)
    idx = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    batch = buf.sample_at(idx, n_step=1, gamma=GAMMA)
    ends = (batch.terminated | batch.truncated).astype(bool)
    assert ends.sum() >= 3 * N
    return batch, ends


@pytest.mark.parametrize("kind", ["env", "vector"])
def test_truncation_becomes_termination_and_the_buffer_masks_the_bootstrap(kind: str) -> None:
    batch, ends = last_steps(kind)
    assert batch.terminated[ends].all() and not batch.truncated.any()
    np.testing.assert_array_equal(batch.discount[ends], 0.0)
    np.testing.assert_allclose(batch.discount[~ends], GAMMA, rtol=1e-6)


def test_without_the_wrapper_a_time_limit_bootstraps() -> None:
    batch, ends = last_steps("plain")
    assert batch.truncated[ends].all() and not batch.terminated.any()
    np.testing.assert_allclose(batch.discount, GAMMA, rtol=1e-6)


def test_wrapper_passes_observations_rewards_and_infos_through() -> None:
    plain = gym.make("rlcore/PointGoal-v0", max_episode_steps=T)
    wrapped = TruncatedAsTerminated(gym.make("rlcore/PointGoal-v0", max_episode_steps=T))
    o1, _ = plain.reset(seed=3)
    o2, _ = wrapped.reset(seed=3)
    a = np.array([0.3, -0.2], np.float32)
    for t in range(T):
        s1, s2 = plain.step(a), wrapped.step(a)
        for k in o1:
            np.testing.assert_array_equal(s1[0][k], s2[0][k])
        assert s1[1] == s2[1] and s1[4] == s2[4]
        assert s2[2] == (s1[2] or s1[3]) and s2[3] is False
        assert s1[3] == (t == T - 1)
