"""The tiny goal environment: gymnasium's checker, reward semantics, and HER on it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import rlcore.envs  # noqa: F401  (registers rlcore/PointGoal-v0)
from gymnasium.utils.env_checker import check_env
from rlcore.envs import PointGoalEnv


def test_point_goal_passes_gymnasium_checker():
    check_env(PointGoalEnv(), skip_render_check=True)


def test_point_goal_is_registered_with_configurable_episode_length():
    env = gym.make("rlcore/PointGoal-v0", max_episode_steps=7)
    env.reset(seed=0)
    steps = 0
    while True:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        steps += 1
        if term or trunc:
            break
    assert (steps, term, trunc) == (7, False, True)


def test_reward_is_vectorised_and_matches_step_and_success():
    env = PointGoalEnv(distance_threshold=0.1)
    ag = np.array([[0.0, 0.0], [0.0, 0.0], [0.5, 0.5]], np.float32)
    g = np.array([[0.05, 0.0], [0.2, 0.0], [0.5, 0.5]], np.float32)
    np.testing.assert_array_equal(env.compute_reward(ag, g, {}), [0.0, -1.0, 0.0])
    obs, _ = env.reset(seed=3)
    obs2, rew, _, _, info = env.step(np.zeros(2, np.float32))
    assert rew == env.compute_reward(obs2["achieved_goal"], obs2["desired_goal"], {})
    assert info["is_success"] == float(rew == 0.0)


@pytest.mark.parametrize("native", [True, False])
def test_her_buffer_on_point_goal_relabels_with_the_env_reward(native):
    envs = gym.make_vec("rlcore/PointGoal-v0", num_envs=2, vectorization_mode="sync", max_episode_steps=10)
    env0 = envs.envs[0].unwrapped
    kw = (
        {"distance_threshold": env0.distance_threshold} if native else {"compute_reward": env0.compute_reward}
    )
    buf = rlcore.HERReplayBuffer.from_spaces(
        envs.single_observation_space, envs.single_action_space, capacity=400, num_envs=2, seed=0, **kw
    )
    obs, _ = envs.reset(seed=0)
    autoreset = np.zeros(2, bool)
    envs.action_space.seed(0)
    for _ in range(60):
        act = envs.action_space.sample()
        obs_next, rew, term, trunc, _ = envs.step(act)
        buf.add(obs, act, rew, term, trunc, obs_next, mask=~autoreset)
        autoreset = term | trunc
        obs = obs_next
    batch = buf.sample(512)
    want = env0.compute_reward(batch.obs_next["achieved_goal"], batch.obs_next["desired_goal"], {})
    np.testing.assert_array_equal(batch.rew, want)
    stored = buf.column("obs")["desired_goal"][batch.indices]
    relabeled = np.any(batch.obs["desired_goal"] != stored, axis=1)
    assert 0.7 < relabeled.mean() < 0.9


def test_ddpg_her_solves_point_goal_in_500_steps_where_random_actions_do_not():
    import torch
    from rlcore.algos import DDPG, DDPGConfig
    from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

    torch.set_num_threads(1)
    def make(n):
        return gym.make_vec(
            "rlcore/PointGoal-v0", num_envs=n, vectorization_mode="sync", max_episode_steps=20
        )
    envs, eval_envs = make(2), make(5)
    # random actions: success rate at the end of 50 episodes
    rand = make(5)
    rand.action_space.seed(0)
    rand.reset(seed=1)
    successes = []
    for _ in range(200):
        _, _, term, trunc, info = rand.step(rand.action_space.sample())
        successes += list(info["is_success"][term | trunc])
    assert np.mean(successes) < 0.3

    buffer = rlcore.HERReplayBuffer(20_000, num_envs=2, seed=0, future_k=4, distance_threshold=0.1)
    agent = DDPG.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        DDPGConfig(q_target_clip=(-20.0, 0.0), seed=0),
    )
    config = OffPolicyTrainerConfig(
        max_env_steps=500, collect_env_steps=100, utd_ratio=0.5, gamma=0.95, eval_every=5
    )
    final = None
    for stats in OffPolicyTrainer(agent, buffer, envs, eval_envs=eval_envs, config=config):
        final = stats
    assert final is not None and final.eval is not None
    assert final.eval.success_rate >= 0.8
