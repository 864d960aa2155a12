"""Algorithm math and smoke tests, on hand-built TransitionBatch objects (no buffer, no env)."""

from __future__ import annotations

import copy
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from rlcore.algos import DDPG, DQN, SAC, TD3, DDPGConfig, DQNConfig, SACConfig, TD3Config
from rlcore.algos.common import polyak_update, td_target, weighted_mean
from rlcore.batch import TransitionBatch
from rlcore.nets import (
    DiscreteQNetwork,
    EnsembleLinear,
    EnsembleQNetwork,
    ObsEncoder,
    RunningMeanStd,
    SquashedGaussianActor,
    squashed_gaussian_log_prob,
)
from rlcore.stats import EpisodeStats, EpochStats, TimeStats, flatten_stats, logged_fields, mean_stats
from torch import nn

torch.set_num_threads(1)

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX_ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
GOAL_OBS = gym.spaces.Dict(
    {
        "observation": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
        "achieved_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "desired_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    }
)


def make_batch(
    obs_space: gym.Space,
    act_space: gym.Space,
    b: int = 16,
    *,
    weights: np.ndarray | None = None,
    seed: int = 0,
) -> TransitionBatch:
    rng = np.random.default_rng(seed)

    def obs() -> np.ndarray | dict[str, np.ndarray]:
        if isinstance(obs_space, gym.spaces.Dict):
            return {
                k: rng.standard_normal((b, *s.shape)).astype(np.float32) for k, s in obs_space.spaces.items()
            }
        return rng.standard_normal((b, *obs_space.shape)).astype(np.float32)

    if isinstance(act_space, gym.spaces.Discrete):
        act = rng.integers(0, act_space.n, size=b).astype(np.int64)
    else:
        act = rng.uniform(act_space.low, act_space.high, size=(b, *act_space.shape)).astype(np.float32)
    term = rng.random(b) < 0.3
    return TransitionBatch(
        obs=obs(),
        act=act,
        rew=rng.standard_normal(b).astype(np.float32),
        obs_next=obs(),
        terminated=term,
        truncated=np.zeros(b, bool),
        discount=np.where(term, 0.0, 0.99**3).astype(np.float32),
        indices=np.arange(b, dtype=np.int64),
        weights=weights,
    )


# ---------------------------------------------------------------- shared math


def test_td_target_matches_hand_computed_values() -> None:
    rew = torch.tensor([1.75, 1.5, 1.0])
    discount = torch.tensor([0.125, 0.25, 0.0])  # gamma^m, gamma^m, terminated
    q_next = torch.tensor([2.0, 4.0, 100.0])
    torch.testing.assert_close(td_target(rew, discount, q_next), torch.tensor([2.0, 2.5, 1.0]))


def test_td_target_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="three \\[B\\] tensors"):
        td_target(torch.zeros(3), torch.zeros(3), torch.zeros(3, 1))


def test_polyak_update_interpolates_parameters_and_copies_buffers() -> None:
    src, tgt = nn.Linear(2, 2), nn.Linear(2, 2)
    bn_s, bn_t = nn.BatchNorm1d(2), nn.BatchNorm1d(2)
    bn_s.running_mean.fill_(3.0)
    expected = [
        0.9 * t.detach().clone() + 0.1 * s.detach()
        for t, s in zip(tgt.parameters(), src.parameters(), strict=True)
    ]
    polyak_update(tgt, src, 0.1)
    for p, e in zip(tgt.parameters(), expected, strict=True):
        torch.testing.assert_close(p.detach(), e)
    polyak_update(bn_t, bn_s, 0.1)
    torch.testing.assert_close(bn_t.running_mean, torch.full((2,), 3.0))
    with pytest.raises(ValueError, match="tau"):
        polyak_update(tgt, src, 1.5)


def test_weighted_mean_uses_weights() -> None:
    loss = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert weighted_mean(loss, None).item() == pytest.approx(2.5)
    assert weighted_mean(loss, torch.tensor([1.0, 0.0, 0.0, 0.0])).item() == pytest.approx(0.25)


def test_squashed_gaussian_log_prob_matches_torch_distributions() -> None:
    torch.manual_seed(0)
    mean, log_std = torch.randn(5, 2), torch.randn(5, 2) * 0.3
    scale, bias = torch.tensor([2.0, 0.5]), torch.tensor([0.0, 0.5])
    u = mean + log_std.exp() * torch.randn(5, 2)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(bias, scale)],
    )
    a = torch.tanh(u) * scale + bias
    torch.testing.assert_close(
        squashed_gaussian_log_prob(u, mean, log_std, scale), dist.log_prob(a).sum(-1), rtol=1e-4, atol=1e-4
    )


def test_running_mean_std_matches_numpy() -> None:
    rms = RunningMeanStd(3, clip=100.0, eps=0.0)
    rng = np.random.default_rng(1)
    data = [rng.normal(2.0, 3.0, size=(n, 3)) for n in (5, 17, 1, 40)]
    for d in data:
        rms.update(torch.from_numpy(d))
    allx = np.concatenate(data)
    np.testing.assert_allclose(rms.mean.numpy(), allx.mean(0), rtol=1e-10)
    np.testing.assert_allclose(rms.var.numpy(), allx.var(0), rtol=1e-10)
    x = torch.from_numpy(allx[:4]).float()
    np.testing.assert_allclose(rms(x).numpy(), ((allx[:4] - allx.mean(0)) / allx.std(0)), rtol=1e-4)


def test_obs_encoder_flattens_goal_dicts_in_fixed_order() -> None:
    enc = ObsEncoder(GOAL_OBS)
    obs = {
        "desired_goal": torch.full((2, 2), 3.0),
        "observation": torch.full((2, 4), 1.0),
        "achieved_goal": torch.full((2, 2), 2.0),
    }
    x = enc(obs)
    assert x.shape == (2, 8) and enc.dim == 8
    torch.testing.assert_close(x[0], torch.tensor([1.0, 1, 1, 1, 2, 2, 3, 3]))
    with pytest.raises(ValueError):
        ObsEncoder(gym.spaces.Discrete(3))


def test_ensemble_critics_are_independent() -> None:
    q = EnsembleQNetwork(3, 2, (8,), n_critics=2)
    out = q(torch.randn(4, 3), torch.randn(4, 2))
    assert out.shape == (2, 4)
    out[0].sum().backward()
    assert q.net[0].weight.grad[1].abs().sum() == 0 and q.net[0].weight.grad[0].abs().sum() > 0


def test_ensemble_critic_cpu_member_loop_matches_batched_form() -> None:
    """The CPU path (one addmm chain per member) computes what the batched baddbmm chain (the CUDA
    path, ``q.net`` on the input repeated K times) computes: values and parameter gradients."""
    torch.manual_seed(0)
    q = EnsembleQNetwork(3, 2, (8, 8), n_critics=2)
    obs, act = torch.randn(5, 3), torch.randn(5, 2)
    out = q(obs, act)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in q.parameters()]
    q.zero_grad()
    x = torch.cat([obs, act], -1)
    ref = q.net(x.unsqueeze(0).expand(2, *x.shape)).squeeze(-1)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref)
    for g, p in zip(grads, q.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad)


@pytest.mark.parametrize("block_rows", [1, 4, 5, 7, 64])
def test_ensemble_critic_cpu_row_blocks_match_one_pass(block_rows: int) -> None:
    """Rows in blocks of ``CPU_BLOCK_ROWS`` (even, uneven, one row, one block) give the values and
    the parameter and input gradients of the critics written out in one pass, with ``torch.relu``
    out of place (the CPU path before blocks and in-place ReLU)."""
    torch.manual_seed(0)
    q = EnsembleQNetwork(3, 2, (8, 8), n_critics=2)
    q.CPU_BLOCK_ROWS = block_rows
    obs, act = torch.randn(20, 3), torch.randn(20, 2, requires_grad=True)
    weight_B = torch.randn(20)
    out = q(obs, act)
    (out.square() * weight_B).sum().backward()
    grads = [p.grad.clone() for p in (*q.parameters(), act)]
    q.zero_grad()
    act.grad = None
    layers = [m for m in q.net if isinstance(m, EnsembleLinear)]
    ref_k = []
    for k in range(2):
        h = torch.cat([obs, act], -1)
        for i, layer in enumerate(layers):
            h = h @ layer.weight[k] + layer.bias[k]
            h = torch.relu(h) if i + 1 < len(layers) else h
        ref_k.append(h.squeeze(-1))
    ref = torch.stack(ref_k)
    (ref.square() * weight_B).sum().backward()
    torch.testing.assert_close(out, ref)
    for g, p in zip(grads, (*q.parameters(), act), strict=True):
        torch.testing.assert_close(g, p.grad)


def test_squashed_actor_sample_n_is_forward_on_repeated_states() -> None:
    """``sample_n`` runs the trunk once per state and draws the same noise as ``forward`` on each
    state repeated N times: the same actions and log-densities, bit for bit."""
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, BOX_ACT, (8,))
    x = torch.randn(6, 3)
    g = torch.Generator().manual_seed(5)
    act, log_prob = actor.sample_n(x, 4, generator=g)
    assert act.shape == (6, 4, 2) and log_prob.shape == (6, 4)
    g.manual_seed(5)
    want_act, want_log_prob = actor(x.repeat_interleave(4, dim=0), generator=g)
    torch.testing.assert_close(act.reshape(24, 2), want_act, rtol=0, atol=0)
    torch.testing.assert_close(log_prob.reshape(24), want_log_prob, rtol=0, atol=0)


def test_squashed_actor_action_is_forward_without_log_prob() -> None:
    actor = SquashedGaussianActor(3, BOX_ACT, (8,))
    x = torch.randn(6, 3)
    torch.manual_seed(1)
    a_forward, _ = actor(x)
    torch.manual_seed(1)
    torch.testing.assert_close(actor.action(x), a_forward)
    torch.testing.assert_close(actor.action(x, deterministic=True), actor(x, deterministic=True)[0])


def test_dueling_head_shape_and_mean_zero_advantage() -> None:
    q = DiscreteQNetwork(3, 4, (8, 8), dueling=True)
    x = torch.randn(5, 3)
    out = q(x)
    h = q.trunk(x)
    torch.testing.assert_close(out.mean(-1, keepdim=True), q.value(h))


# ---------------------------------------------------------------- DQN target math


def _linear_dqn(double_q: bool, loss: str) -> DQN:
    obs_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    q_net = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        q_net.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))  # Q(o) = (o0, 2 o1)
    algo = DQN(
        encoder=ObsEncoder(obs_space),
        q_net=q_net,
        optimizer=torch.optim.SGD(q_net.parameters(), lr=0.0),
        n_actions=2,
        config=DQNConfig(double_q=double_q, loss=loss, max_grad_norm=None),
        device="cpu",
    )
    with torch.no_grad():
        algo.q_target.weight.copy_(torch.tensor([[3.0, 0.0], [0.0, -1.0]]))  # Q'(o) = (3 o0, -o1)
    return algo


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_td_target_double_and_plain(double_q: bool) -> None:
    algo = _linear_dqn(double_q, "mse")
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    obs_next = np.array([[1.0, 1.0], [2.0, 0.5]], np.float32)
    # online Q(o') = (1, 2), (2, 1) -> argmax 1, 0; target Q'(o') = (3, -1), (6, -0.5)
    q_next = np.array([-1.0, 6.0]) if double_q else np.array([3.0, 6.0])
    rew = np.array([0.5, 1.0], np.float32)
    discount = np.array([0.25, 0.0], np.float32)  # second row terminated
    act = np.array([0, 1])
    q = np.array([1.0, 2.0])  # Q(o, a)
    y = rew + discount * q_next
    batch = TransitionBatch(
        obs, act, rew, obs_next, np.array([False, True]), np.zeros(2, bool), discount, np.arange(2)
    )
    stats = algo.update(batch)
    assert stats.loss == pytest.approx(np.mean((q - y) ** 2), rel=1e-6)
    assert stats.q_mean == pytest.approx(1.5)
    assert stats.priorities is None


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_dqn_per_weights_multiply_every_loss_branch(loss: str) -> None:
    algo = _linear_dqn(True, loss)
    obs = np.array([[3.0, 0.0], [0.0, 0.1]], np.float32)
    obs_next = np.zeros((2, 2), np.float32)
    rew = np.zeros(2, np.float32)
    w = np.array([0.5, 2.0], np.float32)
    batch = TransitionBatch(
        obs,
        np.array([0, 1]),
        rew,
        obs_next,
        np.zeros(2, bool),
        np.zeros(2, bool),
        np.ones(2, np.float32),
        np.arange(2),
        w,
    )
    td = np.array([3.0, 0.2])  # Q - y, y = 0; row 0 is in Huber's linear part
    per_sample = np.where(td > 1, td - 0.5, 0.5 * td**2) if loss == "huber" else td**2
    stats = algo.update(batch)
    assert stats.loss == pytest.approx(np.mean(w * per_sample), rel=1e-6)
    np.testing.assert_allclose(stats.priorities, td, rtol=1e-6)


def test_dqn_epsilon_schedule_and_greedy_actions() -> None:
    algo = DQN.from_spaces(
        BOX_OBS, gym.spaces.Discrete(3), DQNConfig(eps_decay_env_steps=100, seed=0), device="cpu"
    )
    assert algo.epsilon == 1.0
    obs = np.zeros((10, 3), np.float32)
    for _ in range(20):
        a = algo.act(obs)
    assert a.dtype == np.int64 and a.shape == (10,)
    assert algo.epsilon == pytest.approx(0.05)
    greedy = algo.act(obs, deterministic=True)
    assert np.all(greedy == greedy[0])


def test_dqn_learning_rate_anneals_linearly_with_env_steps() -> None:
    algo = DQN.from_spaces(
        BOX_OBS,
        gym.spaces.Discrete(3),
        DQNConfig(hidden=(8,), lr=1e-3, lr_anneal_env_steps=100, seed=0),
        device="cpu",
    )
    batch = make_batch(BOX_OBS, gym.spaces.Discrete(3))
    assert algo.update(batch).learning_rate == pytest.approx(1e-3)
    obs = np.zeros((10, 3), np.float32)
    for _ in range(3):
        algo.act(obs)  # 30 env steps
    assert algo.update(batch).learning_rate == pytest.approx(0.7e-3)
    for _ in range(10):
        algo.act(obs)
    assert algo.update(batch).learning_rate == 0.0
    with pytest.raises(ValueError):
        DQNConfig(lr_anneal_env_steps=0)


# ---------------------------------------------------------------- continuous algorithms


CONTINUOUS = [
    (DDPG, DDPGConfig(hidden=(16, 16), seed=0)),
    (TD3, TD3Config(hidden=(16, 16), policy_delay=1, seed=0)),
    (SAC, SACConfig(hidden=(16, 16))),
]


@pytest.mark.parametrize(("cls", "config"), CONTINUOUS, ids=lambda x: getattr(x, "__name__", ""))
@pytest.mark.parametrize("obs_space", [BOX_OBS, GOAL_OBS], ids=["box", "goal"])
def test_continuous_update_act_and_state_dict_roundtrip(cls, config, obs_space) -> None:
    torch.manual_seed(0)
    algo = cls.from_spaces(obs_space, BOX_ACT, config, device="cpu")
    batch = make_batch(obs_space, BOX_ACT)
    for _ in range(3):
        stats = algo.update(batch)
    for f in logged_fields(stats):
        value = getattr(stats, f.name)
        assert isinstance(value, float) and np.isfinite(value), f.name
    obs = batch.obs
    act = algo.act(obs)
    assert act.shape == (16, 2) and act.dtype == np.float32
    assert np.all(act >= BOX_ACT.low - 1e-6) and np.all(act <= BOX_ACT.high + 1e-6)
    clone = cls.from_spaces(obs_space, BOX_ACT, config, device="cpu")
    clone.load_state_dict(copy.deepcopy(algo.state_dict()))
    np.testing.assert_allclose(clone.act(obs, deterministic=True), algo.act(obs, deterministic=True))
    torch.manual_seed(5)
    s1 = algo.update(batch)
    torch.manual_seed(5)
    s2 = clone.update(batch)
    assert s1 == s2


@pytest.mark.parametrize(("cls", "config"), CONTINUOUS, ids=lambda x: getattr(x, "__name__", ""))
def test_continuous_per_weights_scale_every_loss(cls, config) -> None:
    torch.manual_seed(0)
    algo = cls.from_spaces(BOX_OBS, BOX_ACT, config, device="cpu")
    other = copy.deepcopy(algo)
    w = np.linspace(0.1, 1.0, 16).astype(np.float32)
    torch.manual_seed(1)
    s1 = algo.update(make_batch(BOX_OBS, BOX_ACT, weights=w))
    torch.manual_seed(1)
    s3 = other.update(make_batch(BOX_OBS, BOX_ACT, weights=3 * w))
    assert s3.critic_loss == pytest.approx(3 * s1.critic_loss, rel=1e-5)
    assert s3.actor_loss == pytest.approx(3 * s1.actor_loss, rel=1e-5)
    if cls is SAC:
        assert s3.alpha_loss == pytest.approx(3 * s1.alpha_loss, rel=1e-5)
    assert s1.priorities is not None and s1.priorities.shape == (16,)
    assert np.all(s1.priorities >= 0)


def test_ddpg_critic_target_uses_batch_discount_and_clip() -> None:
    torch.manual_seed(0)
    cfg = DDPGConfig(hidden=(8,), normalize_obs=False, q_target_clip=(-1.0, 0.0), critic_lr=0.0, actor_lr=0.0)
    algo = DDPG.from_spaces(BOX_OBS, BOX_ACT, cfg, device="cpu")
    batch = make_batch(BOX_OBS, BOX_ACT)
    t = batch.to_torch()
    with torch.no_grad():
        q_next = algo.critic_target(t.obs_next, algo.actor_target(t.obs_next))[0]
        y = (t.rew + t.discount * q_next).clamp(-1.0, 0.0)
        q = algo.critic(t.obs, t.act)[0]
    stats = algo.update(batch)
    assert stats.critic_loss == pytest.approx(float(((q - y) ** 2).mean()), rel=1e-5)


def test_sac_alpha_is_learned_towards_target_entropy() -> None:
    torch.manual_seed(0)
    algo = SAC.from_spaces(
        BOX_OBS, BOX_ACT, SACConfig(hidden=(16,), alpha_lr=1e-2, target_entropy=100.0), device="cpu"
    )
    batch = make_batch(BOX_OBS, BOX_ACT)
    for _ in range(20):
        algo.update(batch)
    assert algo.alpha > 1.0  # entropy far below the (unreachable) target -> alpha grows
    fixed = SAC.from_spaces(
        BOX_OBS, BOX_ACT, SACConfig(hidden=(16,), autotune_alpha=False, init_alpha=0.2), device="cpu"
    )
    for _ in range(5):
        fixed.update(batch)
    assert fixed.alpha == pytest.approx(0.2)


def test_squashed_actor_deterministic_is_mean() -> None:
    actor = SquashedGaussianActor(3, BOX_ACT, (8,))
    x = torch.randn(4, 3)
    a1, _ = actor(x, deterministic=True)
    a2, _ = actor(x, deterministic=True)
    torch.testing.assert_close(a1, a2)


def test_invalid_configs_raise() -> None:
    with pytest.raises(ValueError):
        DQNConfig(loss="l1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TD3Config(policy_delay=0)
    with pytest.raises(ValueError):
        SACConfig(tau=0.0)
    with pytest.raises(ValueError):
        DDPGConfig(q_target_clip=(1.0, -1.0))
    with pytest.raises(ValueError):
        DQN.from_spaces(BOX_OBS, BOX_ACT, device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("cls", "config"), CONTINUOUS, ids=lambda x: getattr(x, "__name__", ""))
def test_continuous_update_on_cuda(cls, config) -> None:
    algo = cls.from_spaces(GOAL_OBS, BOX_ACT, config, device="cuda")
    stats = algo.update(make_batch(GOAL_OBS, BOX_ACT, weights=np.ones(16, np.float32)))
    assert np.isfinite(stats.critic_loss)
    assert algo.act(make_batch(GOAL_OBS, BOX_ACT).obs).shape == (16, 2)


@pytest.mark.parametrize(("cls", "config"), CONTINUOUS, ids=lambda x: getattr(x, "__name__", ""))
def test_actor_step_leaves_critic_gradients_alone(cls, config) -> None:
    """The actor loss backpropagates through the critic without adding to the critic's gradients."""
    torch.manual_seed(0)
    algo = cls.from_spaces(BOX_OBS, BOX_ACT, config, device="cpu")
    seen: dict[str, list[torch.Tensor]] = {}
    critic_step, actor_step = algo.critic_optimizer.step, algo.actor_optimizer.step

    def record(name, step):
        def wrapped(*a, **k):
            seen[name] = [p.grad.clone() for p in algo.critic.parameters()]
            return step(*a, **k)

        return wrapped

    algo.critic_optimizer.step = record("critic", critic_step)
    algo.actor_optimizer.step = record("actor", actor_step)
    algo.update(make_batch(BOX_OBS, BOX_ACT))
    assert "actor" in seen
    assert all(torch.equal(a, b) for a, b in zip(seen["critic"], seen["actor"], strict=True))
    assert all(p.requires_grad for p in algo.critic.parameters())


# ---------------------------------------------------------------- PER priorities in the stats


def _frozen(cls, config):
    """An algorithm whose learning rates are 0, so a reference computed before ``update`` stays valid."""
    torch.manual_seed(0)
    return cls.from_spaces(BOX_OBS, BOX_ACT, config, device="cpu")


def _reference_td_abs(algo, batch: TransitionBatch, seed: int) -> np.ndarray:
    """``|Q_1(o, a) - y|`` computed independently of ``update`` (float64 NumPy), drawing the same
    random numbers as ``update`` does: SAC's from a copy of its own generator (the global one,
    seeded with ``seed``, must not matter)."""
    t = batch.to_torch()
    rew, discount = t.rew.double().numpy(), t.discount.double().numpy()
    torch.manual_seed(seed)
    with torch.no_grad():
        obs, obs_next = algo.encoder(t.obs), algo.encoder(t.obs_next)
        q = algo.critic(obs, t.act)[0].double().numpy()
        if isinstance(algo, SAC):
            generator = torch.Generator().manual_seed(0)
            generator.set_state(algo.torch_rng.get_state())
            a_next, logp_next = algo.actor(obs_next, generator=generator)
            q_next = algo.critic_target(obs_next, a_next).min(0).values - algo.alpha * logp_next
        elif isinstance(algo, TD3):  # target_policy_noise = 0: the smoothing is the identity
            q_next = algo.critic_target(obs_next, algo.actor_target(obs_next)).min(0).values
        else:
            q_next = algo.critic_target(obs_next, algo.actor_target(obs_next))[0]
    return np.abs(q - (rew + discount * q_next.double().numpy()))


FROZEN = [
    (DDPG, DDPGConfig(hidden=(8,), actor_lr=0.0, critic_lr=0.0, normalize_obs=False, seed=0)),
    (TD3, TD3Config(hidden=(8,), actor_lr=0.0, critic_lr=0.0, target_policy_noise=0.0, seed=0)),
    (SAC, SACConfig(hidden=(8,), actor_lr=0.0, critic_lr=0.0, alpha_lr=0.0)),
]


@pytest.mark.parametrize(("cls", "config"), FROZEN, ids=lambda x: getattr(x, "__name__", ""))
def test_update_returns_priorities_equal_to_abs_td_error_when_weighted(cls, config) -> None:
    algo = _frozen(cls, config)
    batch = make_batch(BOX_OBS, BOX_ACT, b=5, weights=np.linspace(0.2, 1.0, 5).astype(np.float32), seed=3)
    want = _reference_td_abs(algo, batch, seed=7)
    torch.manual_seed(7)
    stats = algo.update(batch)
    assert isinstance(stats.priorities, np.ndarray)
    assert stats.priorities.dtype == np.float32 and stats.priorities.shape == (5,)
    np.testing.assert_allclose(stats.priorities, want, rtol=1e-5, atol=1e-6)
    assert stats.td_abs_mean == pytest.approx(float(want.mean()), rel=1e-5)
    assert not hasattr(algo, "priorities")  # the algorithm keeps no priorities


def test_dqn_update_returns_float32_priorities_equal_to_abs_td_error() -> None:
    algo = _linear_dqn(True, "mse")
    obs = np.array([[3.0, 0.0], [0.0, 0.1], [1.0, 1.0]], np.float32)
    batch = TransitionBatch(
        obs,
        np.array([0, 1, 1]),
        np.array([1.0, 0.0, -0.5], np.float32),
        np.zeros((3, 2), np.float32),
        np.zeros(3, bool),
        np.zeros(3, bool),
        np.ones(3, np.float32),
        np.arange(3),
        np.ones(3, np.float32),
    )
    stats = algo.update(batch)  # y = rew (Q'(0) = 0); Q(o, a) = (o0, 2 o1)[a]
    assert stats.priorities is not None and stats.priorities.dtype == np.float32
    np.testing.assert_allclose(stats.priorities, [2.0, 0.2, 2.5], rtol=1e-6)
    assert not hasattr(algo, "priorities")


@pytest.mark.parametrize(
    ("cls", "config"),
    [*CONTINUOUS, (DQN, DQNConfig(hidden=(8,), seed=0))],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_update_returns_no_priorities_without_weights(cls, config) -> None:
    act_space = gym.spaces.Discrete(3) if cls is DQN else BOX_ACT
    algo = cls.from_spaces(BOX_OBS, act_space, config, device="cpu")
    assert algo.update(make_batch(BOX_OBS, act_space)).priorities is None


def test_priorities_are_neither_logged_nor_averaged_nor_compared() -> None:
    algo = DQN.from_spaces(BOX_OBS, gym.spaces.Discrete(3), DQNConfig(hidden=(8,), seed=0), device="cpu")
    w = np.ones(16, np.float32)
    s1 = algo.update(make_batch(BOX_OBS, gym.spaces.Discrete(3), weights=w, seed=1))
    s2 = algo.update(make_batch(BOX_OBS, gym.spaces.Discrete(3), weights=w, seed=2))
    assert s1.priorities is not None and s2.priorities is not None
    assert "priorities" not in {f.name for f in logged_fields(s1)}
    assert "priorities" not in repr(s1)
    assert s1 == dataclasses.replace(s1, priorities=None)
    mean = mean_stats([s1, s2])
    assert mean is not None and mean.priorities is None
    assert mean.loss == pytest.approx((s1.loss + s2.loss) / 2)
    time = TimeStats(
        env_steps=1,
        grad_steps=2,
        episodes=0,
        collect_s=0,
        update_s=0,
        eval_s=0,
        iteration_s=0,
        env_steps_per_s=0,
    )
    episodes = EpisodeStats.from_episodes([], [], [])
    flat = flatten_stats(
        EpochStats(iteration=1, env_steps=1, grad_steps=2, rollout=episodes, train=s1, eval=None, time=time)
    )
    assert "train/loss" in flat and not any("priorities" in k for k in flat)
    assert all(isinstance(v, float) for v in flat.values())


# ---------------------------------------------------------------- SAC as CleanRL's sac_continuous_action.py


def _count_steps(optimizer: torch.optim.Optimizer) -> list[int]:
    calls = [0]
    step = optimizer.step

    def counted(*a, **k):
        calls[0] += 1
        return step(*a, **k)

    optimizer.step = counted  # type: ignore[method-assign]
    return calls


def test_sac_policy_frequency_takes_k_actor_and_alpha_steps_every_k_critic_steps() -> None:
    torch.manual_seed(0)
    algo = SAC.from_spaces(BOX_OBS, BOX_ACT, SACConfig(hidden=(8,), policy_frequency=3), device="cpu")
    critic, actor, alpha = (
        _count_steps(o) for o in (algo.critic_optimizer, algo.actor_optimizer, algo.alpha_optimizer)
    )
    seen = []
    for k in range(1, 7):
        algo.update(make_batch(BOX_OBS, BOX_ACT, seed=k))
        seen.append((critic[0], actor[0], alpha[0]))
    assert seen == [(1, 0, 0), (2, 0, 0), (3, 3, 3), (4, 3, 3), (5, 3, 3), (6, 6, 6)]


def test_sac_temperature_loss_uses_the_actor_steps_own_sample() -> None:
    """sac.py's documented difference from CleanRL: ``alpha_loss = -alpha * mean(log pi(a|o) + H)`` with
    ``a`` the actor step's sample of the actor *before* its step (the second draw, after the target's),
    not a fresh sample of the updated actor."""
    torch.manual_seed(0)
    cfg = SACConfig(hidden=(8,), actor_lr=0.05, critic_lr=0.0, init_alpha=0.5, target_entropy=-1.0)
    algo = SAC.from_spaces(BOX_OBS, BOX_ACT, cfg, device="cpu")
    batch = make_batch(BOX_OBS, BOX_ACT, b=32)
    obs_BO = algo.encoder(batch.to_torch().obs)
    start = algo.torch_rng.get_state()  # SAC draws from its own generator
    g = torch.Generator().manual_seed(0)
    g.set_state(start)
    torch.randn(32, 2, generator=g)  # the target's draw
    with torch.no_grad():
        _, log_prob_before = algo.actor(obs_BO, generator=g)
    stats = algo.update(batch)
    g.set_state(start)
    torch.randn(32, 2, generator=g), torch.randn(32, 2, generator=g)  # the target's and the actor step's draws
    with torch.no_grad():
        _, log_prob_fresh = algo.actor(obs_BO, generator=g)  # what CleanRL would use: the updated actor, a new draw
    want = float(-0.5 * (log_prob_before + -1.0).mean())
    assert stats.alpha_loss == pytest.approx(want, rel=1e-5)
    assert abs(want - float(-0.5 * (log_prob_fresh + -1.0).mean())) > 1e-3  # the two do differ here


def test_sac_actor_steps_after_a_temperature_step_use_the_new_alpha() -> None:
    """With ``policy_frequency=2`` the second actor step's loss is ``mean(alpha_1 log pi - min_k Q_k)``
    with ``alpha_1`` the temperature after the first temperature step (CleanRL refreshes ``alpha``)."""
    torch.manual_seed(0)
    cfg = SACConfig(hidden=(8,), policy_frequency=2, alpha_lr=0.5, actor_lr=0.0, critic_lr=0.0)
    algo = SAC.from_spaces(BOX_OBS, BOX_ACT, cfg, device="cpu")
    alphas: list[float] = []
    step = algo.actor_optimizer.step

    def record(*a, **k):
        alphas.append(float(algo.log_alpha.detach().exp()))
        return step(*a, **k)

    algo.actor_optimizer.step = record  # type: ignore[method-assign]
    algo.update(make_batch(BOX_OBS, BOX_ACT, seed=1))  # critic step only
    batch = make_batch(BOX_OBS, BOX_ACT, b=32, seed=2)
    g = torch.Generator().manual_seed(0)
    g.set_state(algo.torch_rng.get_state())  # SAC draws from its own generator
    stats = algo.update(batch)  # critic step, then actor, alpha, actor, alpha
    assert len(alphas) == 2 and alphas[0] == pytest.approx(1.0) and alphas[1] != pytest.approx(1.0)
    obs_BO = algo.encoder(batch.to_torch().obs)
    torch.randn(32, 2, generator=g), torch.randn(32, 2, generator=g)  # the target's and the first actor step's draws
    with torch.no_grad():
        pi, log_prob = algo.actor(obs_BO, generator=g)  # networks unchanged (learning rates 0)
        want = float((alphas[1] * log_prob - algo.critic(obs_BO, pi).min(0).values).mean())
    assert stats.actor_loss == pytest.approx(want, rel=1e-5)
