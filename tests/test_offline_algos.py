"""TD3+BC, IQL and CQL: their losses against small references written here, a short OfflineTrainer
run of each on a tiny dataset with evaluation on the real env, checkpoint round trips, and their own
random streams (two algorithms in one process never change each other's draws)."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.algos.cql import CQL, CQLConfig, cql_gap
from rlcore.algos.iql import IQL, IQLConfig, awr_weights, expectile_loss, iql_reward_scale
from rlcore.algos.td3bc import TD3BC, TD3BCConfig, td3bc_actor_loss
from rlcore.errors import InvalidValueError
from rlcore.nets import EnsembleLinear, EnsembleQNetwork
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig

SMALL = {"hidden": (32, 32), "seed": 3}
ALGOS = {
    "td3bc": (TD3BC, TD3BCConfig(**SMALL)),
    "iql": (IQL, IQLConfig(**SMALL, actor_lr_decay_grad_steps=60)),
    "cql": (CQL, CQLConfig(**SMALL, n_actions=4)),
    "cql-lagrange": (CQL, CQLConfig(**SMALL, n_actions=4, lagrange=True)),
}


def _pendulum_dataset(steps: int = 600, seed: int = 0) -> rlcore.ReplayBuffer:
    """Random-policy Pendulum episodes of 50 steps (truncated), D4RL's layout (no next observations)."""
    env = gym.make("Pendulum-v1", max_episode_steps=50)
    env.action_space.seed(seed)
    rows: dict[str, list[object]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc")}
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        act = env.action_space.sample()
        nxt, rew, term, trunc, _ = env.step(act)
        for k, v in zip(rows, (obs, act, rew, term, trunc), strict=True):
            rows[k].append(v)
        obs = env.reset()[0] if term or trunc else nxt
    env.close()
    a = {k: np.asarray(v) for k, v in rows.items()}
    return rlcore.ReplayBuffer.from_arrays(
        a["obs"].astype(np.float32),
        a["act"].astype(np.float32),
        a["rew"],
        a["term"],
        a["trunc"],
        None,
        seed=seed,
    )


@pytest.fixture(scope="module")
def dataset() -> rlcore.ReplayBuffer:
    return _pendulum_dataset()


def _build(name: str) -> object:
    env = gym.make("Pendulum-v1")
    cls, config = ALGOS[name]
    return cls.from_spaces(env.observation_space, env.action_space, config, device="cpu")


# -- losses against references ------------------------------------------------------------------


def test_td3bc_actor_loss_reference() -> None:
    q = torch.tensor([1.0, -3.0, 2.0], requires_grad=True)
    pi = torch.tensor([[0.5, 0.0], [0.1, -0.2], [1.0, 1.0]])
    a = torch.tensor([[0.0, 0.0], [0.1, 0.2], [0.0, 1.0]])
    loss, bc, lmbda = td3bc_actor_loss(q, pi, a, 2.5)
    lm = 2.5 / np.mean([1.0, 3.0, 2.0])
    mse = np.mean((pi.numpy() - a.numpy()) ** 2)
    assert float(lmbda) == pytest.approx(lm)
    assert float(bc) == pytest.approx(mse)
    assert float(loss.detach()) == pytest.approx(-lm * q.detach().mean().item() + mse)
    loss.backward()  # lambda is not differentiated: dL/dq = -lambda / B
    np.testing.assert_allclose(q.grad.numpy(), np.full(3, -lm / 3), rtol=1e-6)


def test_iql_expectile_and_awr_references() -> None:
    u = torch.tensor([-2.0, -0.5, 0.0, 1.0, 3.0])
    want = np.mean([0.3 * 4, 0.3 * 0.25, 0.0, 0.7 * 1, 0.7 * 9])
    assert float(expectile_loss(u, 0.7)) == pytest.approx(want)
    assert float(expectile_loss(u, 0.5)) == pytest.approx(0.5 * np.mean(u.numpy() ** 2))
    w = awr_weights(torch.tensor([-1.0, 0.0, 0.5, 10.0]), 3.0, 100.0)
    np.testing.assert_allclose(w.numpy(), [np.exp(-3.0), 1.0, np.exp(1.5), 100.0], rtol=1e-6)
    assert iql_reward_scale([10.0, 30.0, 20.0]) == pytest.approx(50.0)
    with pytest.raises(InvalidValueError):
        iql_reward_scale([1.0, 1.0])


def test_cql_gap_reference() -> None:
    g = torch.Generator().manual_seed(0)
    k, b, n = 2, 3, 4
    q_rand, q_pi, q_next = (torch.randn(k, b, n, generator=g) for _ in range(3))
    log_pi, log_next = torch.randn(b, n, generator=g), torch.randn(b, n, generator=g)
    q_data = torch.randn(k, b, generator=g)
    log_density = -np.log(2.0**3)
    for temp in (1.0, 0.5):
        got = cql_gap(q_rand, log_density, q_pi, log_pi, q_next, log_next, q_data, temp).numpy()
        want = np.zeros(k)
        for i in range(k):
            for j in range(b):
                x = np.concatenate(
                    [q_rand[i, j] - log_density, q_next[i, j] - log_next[j], q_pi[i, j] - log_pi[j]]
                ).astype(np.float64)
                lse = temp * np.log(np.sum(np.exp(x / temp)))
                want[i] += (lse - q_data[i, j].item()) / b
        np.testing.assert_allclose(got, want, rtol=1e-5)


def _q_one_pass(critic: EnsembleQNetwork, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    """``[K, X]``: each critic written out as ``relu(x W + b)`` layers, all X rows in one pass."""
    layers = [m for m in critic.net if isinstance(m, EnsembleLinear)]
    q_k = []
    for k in range(critic.n_critics):
        h = torch.cat([obs, act], -1)
        for i, layer in enumerate(layers):
            h = h @ layer.weight[k] + layer.bias[k]
            h = torch.relu(h) if i + 1 < len(layers) else h
        q_k.append(h.squeeze(-1))
    return torch.stack(q_k)


@pytest.mark.parametrize("name", ["cql", "cql-lagrange"])
def test_cql_step_equals_the_papers_losses_in_the_previous_formulation(
    name: str, dataset: rlcore.ReplayBuffer
) -> None:
    """One CQL update against its critic and actor losses written here from Kumar et al. 2020
    (eq. 4 with Appendix F's importance-sampled log-sum-exp; eq. 31 with ``lagrange``) and SAC's
    actor loss, computed the way ``CQL.update`` did before it was made faster: the policy network
    run on every state repeated N times, the critics in one pass over all 3N actions with
    out-of-place ReLU. The same draws from the algorithm's generator in the same order; the update's
    statistics and the gradients it leaves on the critics and the actor agree to float rounding
    (the critics here run in row blocks of 7, so the blocked sums are exercised)."""
    algo = _build(name)
    assert isinstance(algo, CQL)
    algo.critic.CPU_BLOCK_ROWS = 7  # 16 states x 12 actions: 28 blocks, the last one short
    before = copy.deepcopy(algo)
    c, n, temp = algo.config, algo.config.n_actions, algo.config.cql_temperature
    batch = dataset.sample(16)
    stats = algo.update(batch)

    t = batch.to_torch("cpu")
    g = before.torch_rng
    obs, obs_next = before.encoder(t.obs), before.encoder(t.obs_next)
    act = t.act.float().reshape(16, -1)
    b, a = act.shape
    alpha = before.log_alpha.detach().exp()
    with torch.no_grad():
        act_next, _ = before.actor(obs_next, generator=g)
        y = t.rew + t.discount * _q_one_pass(before.critic_target, obs_next, act_next).min(0).values
    q_data = _q_one_pass(before.critic, obs, act)
    td_loss = ((q_data - y) ** 2).sum(0).mean()
    scale, bias = before.actor.action_scale, before.actor.action_bias
    rand = bias - scale + 2 * scale * torch.rand((b, n, a), generator=g)
    log_density_rand = -torch.log(2 * scale).sum()
    with torch.no_grad():
        pi, log_pi = before.actor(torch.cat([obs, obs_next]).repeat_interleave(n, dim=0), generator=g)
    pi, log_pi = pi.reshape(2 * b, n, a), log_pi.reshape(2 * b, n)
    acts = torch.cat([rand, pi[:b], pi[b:]], dim=1).reshape(b * 3 * n, a)
    q_rand, q_pi, q_pi_next = _q_one_pass(before.critic, obs.repeat_interleave(3 * n, 0), acts).reshape(
        2, b, 3 * n
    ).split(n, dim=-1)
    weighted = torch.cat(
        [q_rand - log_density_rand, q_pi_next - log_pi[b:], q_pi - log_pi[:b]], dim=-1
    )
    gap_k = (temp * torch.logsumexp(weighted / temp, dim=-1) - q_data).mean(-1)
    if c.lagrange:
        alpha_prime = before.log_alpha_prime.detach().exp().clamp(0.0, 1e6)
        critic_loss = td_loss + (alpha_prime * c.cql_alpha * (gap_k - c.target_action_gap)).sum()
    else:
        alpha_prime = torch.ones(())
        critic_loss = td_loss + c.cql_alpha * gap_k.sum()
    critic_grads = torch.autograd.grad(critic_loss, list(before.critic.parameters()))

    pi_s, log_pi_s = before.actor(obs, generator=g)
    actor_loss = (alpha * log_pi_s - _q_one_pass(algo.critic, obs, pi_s).min(0).values).mean()
    actor_grads = torch.autograd.grad(actor_loss, list(before.actor.parameters()))

    want = {
        "critic_loss": critic_loss,
        "td_loss": td_loss,
        "cql_gap": gap_k.mean(),
        "actor_loss": actor_loss,
        "alpha": alpha,
        "alpha_prime": alpha_prime,
        "entropy": -log_pi_s.mean(),
        "q_mean": q_data[0].mean(),
    }
    for key, value in want.items():
        assert getattr(stats, key) == pytest.approx(float(value.detach()), rel=1e-5, abs=1e-6), key
    for got_p, want_g in zip(algo.critic.parameters(), critic_grads, strict=True):
        torch.testing.assert_close(got_p.grad, want_g, rtol=1e-5, atol=1e-6)
    for got_p, want_g in zip(algo.actor.parameters(), actor_grads, strict=True):
        torch.testing.assert_close(got_p.grad, want_g, rtol=1e-5, atol=1e-6)


def test_td3bc_critic_loss_of_the_first_step_by_hand(dataset: rlcore.ReplayBuffer) -> None:
    env = gym.make("Pendulum-v1")
    algo = TD3BC.from_spaces(
        env.observation_space, env.action_space, TD3BCConfig(**SMALL, target_policy_noise=0.0), device="cpu"
    )
    algo.fit_obs(np.asarray(dataset.obs))
    before = copy.deepcopy(algo)
    batch = dataset.sample(16)
    stats = algo.update(batch)
    with torch.no_grad():
        t = batch.to_torch("cpu")
        obs, nxt = before.encoder(t.obs), before.encoder(t.obs_next)
        y = t.rew + t.discount * before.critic_target(nxt, before.actor_target(nxt)).min(0).values
        q = before.critic(obs, t.act)
        want = ((q - y) ** 2).sum(0).mean().item()
    assert stats.critic_loss == pytest.approx(want, rel=1e-5)


def test_iql_value_loss_of_the_first_step_by_hand(dataset: rlcore.ReplayBuffer) -> None:
    algo = _build("iql")
    before = copy.deepcopy(algo)
    batch = dataset.sample(16)
    stats = algo.update(batch)
    with torch.no_grad():
        t = batch.to_torch("cpu")
        obs = before.encoder(t.obs)
        u = before.critic_target(obs, t.act).min(0).values - before.value(obs).squeeze(-1)
        w = np.where(u.numpy() > 0, 0.7, 0.3)
    assert stats.value_loss == pytest.approx(float(np.mean(w * u.numpy() ** 2)), rel=1e-5)


# -- training, checkpoints, random streams --------------------------------------------------------


@pytest.mark.parametrize("name", list(ALGOS))
def test_short_offline_run_with_evaluation(name: str, dataset: rlcore.ReplayBuffer) -> None:
    algo = _build(name)
    if isinstance(algo, TD3BC):
        algo.fit_obs(np.asarray(dataset.obs))
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1", max_episode_steps=50)])
    config = OfflineTrainerConfig(
        max_grad_steps=60, grad_steps_per_iteration=30, batch_size=32, eval_every=1, eval_episodes=1, seed=0
    )
    stats = list(OfflineTrainer(algo, dataset, config=config, eval_envs=envs))
    assert [s.grad_steps for s in stats] == [30, 60]
    assert all(s.eval is not None and np.isfinite(s.eval.return_mean) for s in stats)
    assert all(np.isfinite(v) for v in stats[-1].train.__dict__.values() if isinstance(v, float))


@pytest.mark.parametrize("name", list(ALGOS))
def test_state_dict_round_trip_continues_identically(name: str, dataset: rlcore.ReplayBuffer) -> None:
    a = _build(name)
    for _ in range(3):
        a.update(dataset.sample(16))
    b = _build(name)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    batch = dataset.sample(16)
    assert a.update(batch) == b.update(batch)
    obs = np.asarray(batch.obs)
    np.testing.assert_array_equal(a.act(obs, deterministic=False), b.act(obs, deterministic=False))


@pytest.mark.parametrize("name", ["td3bc", "iql", "cql"])
def test_two_algorithms_in_one_process_keep_their_own_streams(
    name: str, dataset: rlcore.ReplayBuffer
) -> None:
    batches = [dataset.sample(16) for _ in range(4)]
    alone = _build(name)
    ref = [alone.update(b) for b in batches]
    first, other = _build(name), _build(name)
    got = []
    for b in batches:
        got.append(first.update(b))
        other.update(b)
        torch.randn(5)  # the global generator moves too
    assert got == ref


def test_configs_refuse_out_of_range_values() -> None:
    with pytest.raises(InvalidValueError, match="expectile"):
        IQLConfig(expectile=1.0)
    with pytest.raises(InvalidValueError, match="n_actions"):
        CQLConfig(n_actions=0)
    with pytest.raises(InvalidValueError, match="alpha"):
        TD3BCConfig(alpha=-1.0)


BAD = [
    *[(cls, "hidden", (32, 0)) for cls in (TD3BCConfig, IQLConfig, CQLConfig)],
    (TD3BCConfig, "actor_lr", -1.0),
    (TD3BCConfig, "critic_lr", float("nan")),
    (TD3BCConfig, "tau", 0.0),
    (TD3BCConfig, "policy_delay", 0),
    (TD3BCConfig, "target_policy_noise", -0.1),
    (TD3BCConfig, "target_noise_clip", -0.5),
    (TD3BCConfig, "alpha", -1.0),
    (IQLConfig, "actor_lr", -1.0),
    (IQLConfig, "value_lr", -1.0),
    (IQLConfig, "critic_lr", float("inf")),
    (IQLConfig, "actor_lr_decay_grad_steps", 0),
    (IQLConfig, "tau", 1.5),
    (IQLConfig, "expectile", 0.0),
    (IQLConfig, "beta", -3.0),
    (IQLConfig, "max_weight", 0.0),
    (IQLConfig, "reward_scale", 0.0),
    (CQLConfig, "actor_lr", -1.0),
    (CQLConfig, "critic_lr", -1.0),
    (CQLConfig, "alpha_lr", -1.0),
    (CQLConfig, "tau", 0.0),
    (CQLConfig, "init_alpha", 0.0),
    (CQLConfig, "target_entropy", float("nan")),
    (CQLConfig, "cql_alpha", -5.0),
    (CQLConfig, "n_actions", 0),
    (CQLConfig, "cql_temperature", 0.0),
    (CQLConfig, "target_action_gap", float("inf")),
    (CQLConfig, "alpha_prime_lr", -1.0),
]


@pytest.mark.parametrize(("cls", "field", "value"), BAD)
def test_every_numeric_option_is_range_checked(cls: type, field: str, value: object) -> None:
    with pytest.raises(InvalidValueError, match=f"{cls.__name__}.{field}"):
        cls(**{field: value})


def test_the_bad_values_cover_every_numeric_option() -> None:
    import dataclasses

    checked = {(cls, field) for cls, field, _ in BAD}
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls in (TD3BCConfig, IQLConfig, CQLConfig)
        for f in dataclasses.fields(cls)
        if f.name != "seed" and not isinstance(f.default, bool) and (cls, f.name) not in checked
    ]
    assert missing == []
