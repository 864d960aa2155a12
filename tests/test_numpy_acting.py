"""On-policy acting on the CPU in numpy (``rlcore.algos.numpy_acting``): the same function as the
torch forward, a correct categorical and Gaussian draw, live views of the parameters, its own
saved generator, and torch's path wherever the numpy one does not apply."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from rlcore.algos import A2C, PPO, VPG, A2CConfig, PPOConfig, VPGConfig
from rlcore.errors import InvalidValueError, ShapeError
from torch import nn

DISCRETE = (gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(3))
BOX = (gym.spaces.Box(-5.0, 5.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (2,), np.float32))


def ppo(spaces: tuple[gym.Space, gym.Space], *, seed: int = 0, normalize_obs: bool = False) -> PPO:
    torch.manual_seed(seed)
    return PPO.from_spaces(*spaces, PPOConfig(seed=seed, normalize_obs=normalize_obs), num_envs=8, device="cpu")


def scramble(algo: PPO, seed: int) -> None:
    """Weights far from the small-output initialisation, so the heads' outputs are not ~0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in algo.policy.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.7)


def torch_forward(algo: PPO, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        out, value = algo.policy(algo._features(obs))
    return out.numpy(), value.numpy()


@pytest.mark.parametrize("spaces", [DISCRETE, BOX], ids=["discrete", "box"])
@pytest.mark.parametrize("normalize_obs", [False, True])
def test_the_numpy_forward_is_torchs_up_to_float32_rounding(spaces: tuple, normalize_obs: bool) -> None:
    algo = ppo(spaces, normalize_obs=normalize_obs)
    assert algo._fast() is not None
    scramble(algo, 1)
    rng = np.random.default_rng(0)
    if normalize_obs:
        algo.policy.update_obs_stats(torch.as_tensor(rng.normal(1.0, 3.0, (500, spaces[0].shape[0]))))
    for dtype in (np.float32, np.float64):
        obs = rng.normal(0.0, 2.0, (8, spaces[0].shape[0])).astype(dtype)
        out, value = algo._fast().forward(obs)  # type: ignore[union-attr]
        t_out, t_value = torch_forward(algo, obs)
        assert out.dtype == np.float32 and value.shape == (8,)
        np.testing.assert_allclose(out, t_out, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value, t_value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spaces", [DISCRETE, BOX], ids=["discrete", "box"])
def test_act_value_gives_the_log_prob_and_value_torch_computes_for_the_drawn_action(spaces: tuple) -> None:
    algo = ppo(spaces)
    scramble(algo, 2)
    obs = np.random.default_rng(1).normal(0.0, 2.0, (8, spaces[0].shape[0])).astype(np.float32)
    act, log_prob, value = algo.act_value(obs)
    assert log_prob.dtype == np.float32 and value.dtype == np.float32
    assert act.dtype == (np.int64 if spaces is DISCRETE else np.float32)
    with torch.no_grad():
        t_log_prob, _, t_value = algo.policy.evaluate(algo._features(obs), torch.as_tensor(act))
    np.testing.assert_allclose(log_prob, t_log_prob.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value, t_value.numpy(), rtol=1e-5, atol=1e-5)  # type: ignore[union-attr]
    det = algo.act(obs, deterministic=True)
    t_out, _ = torch_forward(algo, obs)
    np.testing.assert_array_equal(det, t_out.argmax(-1)) if spaces is DISCRETE else np.testing.assert_allclose(
        det, t_out, rtol=1e-5, atol=1e-5
    )


def test_categorical_draws_follow_the_softmax_and_never_pick_a_zero_probability_action() -> None:
    algo = ppo(DISCRETE)
    fast = algo._fast()
    assert fast is not None
    logits = np.log(np.array([[0.1, 0.6, 0.3]], np.float32)).repeat(20_000, 0)
    logits_zero = np.array([[0.0, -np.inf, 0.0]], np.float32).repeat(20_000, 0)
    counts = np.zeros(3)
    for _ in range(5):
        act, log_prob = fast.sample(logits)
        counts += np.bincount(act, minlength=3)
        np.testing.assert_allclose(log_prob, np.log([0.1, 0.6, 0.3])[act], rtol=1e-5)
    expected = 100_000 * np.array([0.1, 0.6, 0.3])
    assert ((counts - expected) ** 2 / expected).sum() < 13.82  # chi-square, 2 dof, p = 0.001
    act, _ = fast.sample(logits_zero)
    assert not (act == 1).any() and abs((act == 0).mean() - 0.5) < 0.02
    assert fast.sample(np.array([[-np.inf, -np.inf, 0.0]], np.float32))[0].tolist() == [2]


def test_gaussian_draws_have_the_heads_mean_and_the_policys_std() -> None:
    algo = ppo(BOX)
    with torch.no_grad():
        algo.policy.log_std.copy_(torch.tensor([-1.0, 0.5]))  # type: ignore[union-attr]
    fast = algo._fast()
    assert fast is not None
    mean = np.array([[0.3, -1.2]], np.float32).repeat(50_000, 0)
    act, log_prob = fast.sample(mean)
    std = np.exp([-1.0, 0.5])
    assert (np.abs(act.mean(0) - mean[0]) < 4 * std / np.sqrt(50_000)).all(), act.mean(0)
    np.testing.assert_allclose(act.std(0), std, rtol=0.02)
    ref = (-0.5 * ((act - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(log_prob, ref, rtol=1e-4, atol=1e-4)


def test_the_views_follow_optimizer_steps_loads_and_replaced_parameters() -> None:
    algo = ppo(DISCRETE)
    obs = np.random.default_rng(2).normal(0.0, 1.0, (8, 4)).astype(np.float32)
    algo.act_value(obs)  # views built
    scramble(algo, 3)  # in-place copies
    np.testing.assert_allclose(algo._fast().forward(obs)[0], torch_forward(algo, obs)[0], atol=1e-5)  # type: ignore[union-attr]
    other = ppo(DISCRETE, seed=5)
    scramble(other, 4)
    algo.load_state_dict(other.state_dict())
    np.testing.assert_allclose(algo._fast().forward(obs)[1], torch_forward(other, obs)[1], atol=1e-5)  # type: ignore[union-attr]
    algo.policy.actor.weight = nn.Parameter(torch.zeros_like(algo.policy.actor.weight))
    out, _ = algo._fast().forward(obs)  # type: ignore[union-attr]
    np.testing.assert_allclose(out, np.broadcast_to(algo.policy.actor.bias.detach().numpy(), out.shape), atol=1e-6)
    algo.policy.double()  # not float32 any more: numpy's path declines
    assert algo._fast() is None
    algo.policy.float()
    np.testing.assert_allclose(algo._fast().forward(obs)[0], torch_forward(algo, obs)[0], atol=1e-5)  # type: ignore[union-attr]


def test_the_action_stream_is_seeded_by_the_config_and_restored_with_the_state() -> None:
    obs = np.random.default_rng(3).normal(0.0, 1.0, (8, 4)).astype(np.float32)
    a, b = ppo(DISCRETE, seed=7), ppo(DISCRETE, seed=7)
    scramble(a, 0)
    scramble(b, 0)
    first = [a.act(obs) for _ in range(3)]
    assert all((x == y).all() for x, y in zip(first, [b.act(obs) for _ in range(3)], strict=True))
    state = a.state_dict()
    after = [a.act(obs) for _ in range(5)]
    c = ppo(DISCRETE, seed=9)
    c.load_state_dict(state)
    assert all((x == y).all() for x, y in zip(after, [c.act(obs) for _ in range(5)], strict=True))
    assert not all((x == y).all() for x, y in zip(after, [c.act(obs) for _ in range(5)], strict=True))


def test_torch_path_where_numpy_does_not_apply() -> None:
    # VPG's actor and critic are separate networks (fused=False): torch's path
    vpg = VPG.from_spaces(*DISCRETE, VPGConfig(), num_envs=2, device="cpu")
    assert vpg._fast() is None and vpg._numpy_actor is None
    assert vpg.act_value(np.zeros((2, 4), np.float32))[0].shape == (2,)
    # dict observations: torch's path
    dict_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": DISCRETE[0]})
    a2c = A2C.from_spaces(dict_space, DISCRETE[1], A2CConfig(), num_envs=2, device="cpu")
    assert a2c._numpy_actor is None
    # A2C has no seed in its config: torch's generator seeds its action stream
    torch.manual_seed(11)
    x = A2C.from_spaces(*DISCRETE, A2CConfig(), num_envs=2, device="cpu")
    torch.manual_seed(11)
    y = A2C.from_spaces(*DISCRETE, A2CConfig(), num_envs=2, device="cpu")
    obs = np.zeros((64, 4), np.float32)
    assert x._fast() is not None and (x.act(obs) == y.act(obs)).all()


def test_a_linear_policy_without_hidden_layers_acts_as_torchs() -> None:
    torch.manual_seed(0)
    algo = PPO.from_spaces(*DISCRETE, PPOConfig(seed=0, hidden=()), num_envs=1, device="cpu")
    scramble(algo, 6)
    assert algo._fast() is not None
    for n in (1, 5):
        obs = np.random.default_rng(n).normal(0.0, 1.0, (n, 4)).astype(np.float32)
        out, value = algo._fast().forward(obs)  # type: ignore[union-attr]
        t_out, t_value = torch_forward(algo, obs)
        np.testing.assert_allclose(out, t_out, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value, t_value, rtol=1e-5, atol=1e-5)
        assert algo.act_value(obs)[0].shape == (n,)


def test_non_finite_logits_raise_instead_of_drawing_action_zero() -> None:
    algo = ppo(DISCRETE)
    obs = np.full((2, 4), np.nan, np.float32)
    with pytest.raises(InvalidValueError, match="logits of row 0 are not finite"):
        algo.act_value(obs)
    obs[0] = 0.0
    with pytest.raises(InvalidValueError, match="row 1"):
        algo.act(obs)
    assert algo.act(obs, deterministic=True).shape == (2,)  # argmax of NaN: no draw, as torch's


@pytest.mark.parametrize("numpy_path", [True, False])
def test_observations_of_the_wrong_size_raise_a_shape_error_on_both_paths(numpy_path: bool) -> None:
    algo = ppo(DISCRETE)
    if not numpy_path:
        algo._numpy_actor = None
    for bad in (np.zeros((3, 5), np.float32), np.zeros(4, np.float32), np.zeros((), np.float32)):
        with pytest.raises(ShapeError, match="batch"):
            algo.act_value(bad)
        with pytest.raises(ShapeError):
            algo.act(bad)
