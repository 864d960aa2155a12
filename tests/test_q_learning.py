"""The parts DQN and R2D2 share (``rlcore.algos.q_learning``): epsilon-greedy draws against a
NumPy reference, and state dicts whose keys stay what earlier checkpoints hold."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcore.algos.dqn import DQN, DQNConfig
from rlcore.algos.q_learning import epsilon_greedy
from rlcore.algos.r2d2 import R2D2, R2D2Config


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 40), n_actions=st.integers(1, 9), eps=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
def test_epsilon_greedy_equals_the_numpy_reference(n: int, n_actions: int, eps: float, seed: int) -> None:
    greedy = np.arange(n, dtype=np.int64) % n_actions
    ref = np.random.default_rng(seed)
    coins = ref.random(n) < eps
    expected = np.where(coins, ref.integers(0, n_actions, size=n), greedy)
    got = epsilon_greedy(greedy, np.random.default_rng(seed), eps, n_actions)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64


def test_epsilon_greedy_explores_at_its_rate() -> None:
    greedy = np.zeros(20_000, np.int64)
    got = epsilon_greedy(greedy, np.random.default_rng(0), 0.3, 4)
    # a random action is 0 with probability 1/4: non-greedy share = 0.3 * 3/4 = 0.225, sd ~0.003
    assert abs((got != 0).mean() - 0.225) < 0.015
    assert np.all(epsilon_greedy(greedy[:100], np.random.default_rng(1), 0.0, 4) == 0)


def _dqn() -> DQN:
    obs = gym.spaces.Box(-1, 1, (3,), np.float32)
    return DQN.from_spaces(obs, gym.spaces.Discrete(2), DQNConfig(seed=3, eps_decay_env_steps=10), device="cpu")


def _r2d2() -> R2D2:
    obs = gym.spaces.Box(-1, 1, (3,), np.float32)
    config = R2D2Config(seed=3, normalize_obs=True, eps_decay_env_steps=10)
    return R2D2.from_spaces(obs, gym.spaces.Discrete(2), config, device="cpu")


@pytest.mark.parametrize(
    ("make", "keys"),
    [
        (_dqn, {"config", "encoder", "q_net", "q_target", "optimizer", "explore_env_steps", "grad_steps", "rng", "eval_rng"}),
        (_r2d2, {"config", "q_net", "q_target", "optimizer", "obs_rms", "explore_env_steps", "grad_steps", "rng"}),
    ],
)
def test_state_dict_keys_are_those_of_earlier_checkpoints(make, keys) -> None:
    assert set(make().state_dict()) == keys


def test_exploration_schedule_and_generator_round_trip() -> None:
    a = _dqn()
    a.act(np.zeros((7, 3), np.float32))
    assert a.explore_env_steps == 7 and a.epsilon == pytest.approx(1.0 - 0.95 * 0.7)
    b = _dqn()
    b.load_state_dict(a.state_dict())
    obs = np.zeros((50, 3), np.float32)
    np.testing.assert_array_equal(a.act(obs), b.act(obs))
    assert b.explore_env_steps == 57
    # the targets are frozen copies, apart from the online network
    assert all(not p.requires_grad for p in b.q_target.parameters())
    with torch.no_grad():
        next(b.q_net.parameters()).add_(1.0)
    assert not torch.equal(next(b.q_net.parameters()), next(b.q_target.parameters()))
