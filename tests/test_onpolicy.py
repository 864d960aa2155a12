"""On-policy layer: rollout sampler + GAE (incl. truncation and episode starts), PPO loss pieces,
VPG/A2C/PPO smoke tests (discrete and continuous), OnPolicyTrainer contract."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from reference import gae as gae_reference
from rlcore.algos import A2C, PPO, VPG, A2CConfig, A2CStats, PPOConfig, PPOStats, VPGConfig, VPGStats
from rlcore.algos.actor_critic import (
    ReturnNormalizer,
    approx_kl,
    clip_fraction,
    normalize_advantages,
    ppo_policy_loss,
    value_loss,
)
from rlcore.batch import Rollout
from rlcore.collect.sampler import RolloutSampler
from rlcore.nets import ActorCritic, gaussian_log_prob
from rlcore.stats import EpochStats, EvalStats, flatten_stats
from rlcore.trainers.checkpoint import resume_seed
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

torch.set_num_threads(1)

# --------------------------------------------------------------------------- scripted env + policy


class ScriptedEnv(gym.Env):
    """obs = [100 * episode + t]; reward = 1 + t; episode k has length lengths[k] and ends by
    termination (ends[k] == "term") or truncation ("trunc")."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, lengths: list[int], ends: list[str]) -> None:
        self.lengths, self.ends = lengths, ends
        self.episode = -1
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([100.0 * self.episode + self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        rew = 1.0 + self.t
        self.t += 1
        k = self.episode % len(self.lengths)
        end = self.t >= self.lengths[k]
        return self._obs(), rew, end and self.ends[k] == "term", end and self.ends[k] == "trunc", {}


def v_of(obs_id: np.ndarray | float) -> np.ndarray:
    """The stub critic: a value that identifies the observation."""
    return np.asarray(obs_id, dtype=np.float32) * 0.01 + 0.5


class StubPolicy:
    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = obs.shape[0]
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.float32), v_of(obs[:, 0])

    def value(self, obs: np.ndarray) -> np.ndarray:
        return v_of(obs[:, 0])


def scripted_envs(lengths: list[int], ends: list[str], mode: AutoresetMode) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: ScriptedEnv(lengths, ends)], autoreset_mode=mode)


def episode_gae(steps: list[tuple[float, float, float]], end: str, gamma: float, lam: float) -> list[float]:
    """Independent reference for one episode: steps are (obs_id, rew, next_obs_id); ``end`` is
    "term", "trunc" or "cut"; the last step bootstraps from V(next_obs_id) unless terminated."""
    adv = [0.0] * len(steps)
    running = 0.0
    for i in reversed(range(len(steps))):
        obs_id, rew, next_id = steps[i]
        last = i == len(steps) - 1
        boot = 0.0 if (last and end == "term") else float(v_of(next_id))
        delta = rew + gamma * boot - float(v_of(obs_id))
        running = delta + (0.0 if last else gamma * lam * running)
        adv[i] = running
    return adv


MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


# --------------------------------------------------------------------------- GAE through the rollout


@pytest.mark.parametrize("mode", MODES)
def test_gae_at_episode_start_uses_no_value_of_previous_episode(mode: AutoresetMode) -> None:
    # Two back-to-back episodes in one column: length 3 terminated, then length >= 2 cut by the rollout end.
    gamma, lam = 0.9, 0.8
    envs = scripted_envs([3, 10], ["term", "term"], mode)
    sampler = RolloutSampler(envs)
    sampler.reset(seed=0)
    T = 5 + (mode == AutoresetMode.NEXT_STEP)  # NEXT_STEP spends one vector step on the reset row
    rollout, stats = sampler.sample(StubPolicy(), envs, T)
    adv_TN, ret_TN = rollout.advantages(gamma, lam)
    adv, valid = adv_TN[:, 0], rollout.valid[:, 0]

    ep1 = episode_gae([(0, 1, 1), (1, 2, 2), (2, 3, 3)], "term", gamma, lam)
    ep2 = episode_gae([(100, 1, 101), (101, 2, 102)], "cut", gamma, lam)
    np.testing.assert_allclose(adv[valid], ep1 + ep2, rtol=1e-5)
    np.testing.assert_allclose(ret_TN[valid, 0], np.array(ep1 + ep2) + rollout.value[valid, 0], rtol=1e-5)
    assert rollout.num_transitions == stats.env_steps == 5
    assert stats.episode_returns == (6.0,)
    # The first step of episode 2 depends on episode 2 only: changing episode 1's values changes nothing.
    other = Rollout(**{**rollout.__dict__, "value": np.where(rollout.obs[..., 0] < 100, 9.0, rollout.value)})
    np.testing.assert_allclose(other.advantages(gamma, lam)[0][:, 0][valid][3:], adv[valid][3:], rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_truncated_step_bootstraps_from_the_final_observation(mode: AutoresetMode) -> None:
    gamma, lam = 0.99, 0.95
    envs = scripted_envs([3], ["trunc"], mode)
    sampler = RolloutSampler(envs)
    sampler.reset(seed=0)
    T = 8
    rollout, _ = sampler.sample(StubPolicy(), envs, T)
    col = rollout.obs[:, 0, 0]
    valid = rollout.valid[:, 0]
    done_rows = np.flatnonzero(rollout.truncated[:, 0])
    assert len(done_rows) == 2 and not rollout.terminated.any()
    for row in done_rows:
        final_id = col[row] + 1  # o_3 of that episode, not the next episode's reset observation
        assert rollout.final_value[row, 0] == pytest.approx(float(v_of(final_id)))
        assert rollout.next_value()[row, 0] == pytest.approx(float(v_of(final_id)))
    if mode == AutoresetMode.NEXT_STEP:
        # The reset rows are kept in the grid, flagged invalid, and hold the final observation.
        np.testing.assert_array_equal(np.flatnonzero(~valid), done_rows + 1)
        np.testing.assert_array_equal(col[done_rows + 1], col[done_rows] + 1)
        assert (rollout.rew[~valid] == 0).all()
    else:
        assert valid.all()
    adv = rollout.advantages(gamma, lam)[0][valid, 0]
    ep = episode_gae([(0, 1, 1), (1, 2, 2), (2, 3, 3)], "trunc", gamma, lam)
    ep2 = episode_gae([(100, 1, 101), (101, 2, 102), (102, 3, 103)], "trunc", gamma, lam)
    n_rest = int(valid.sum()) - 6
    ep3 = episode_gae([(200 + i, 1 + i, 201 + i) for i in range(n_rest)], "cut", gamma, lam)
    np.testing.assert_allclose(adv, ep + ep2 + ep3, rtol=1e-5)


def test_truncation_at_the_last_rollout_step_and_continuation() -> None:
    # Episode of 4 steps truncated exactly at the rollout end (NEXT_STEP): final_value = V(o_4);
    # the next rollout starts with the reset row, flagged invalid.
    envs = scripted_envs([4], ["trunc"], AutoresetMode.NEXT_STEP)
    sampler = RolloutSampler(envs)
    sampler.reset(seed=0)
    first, _ = sampler.sample(StubPolicy(), envs, 4)
    assert first.truncated[3, 0] and first.final_value[3, 0] == pytest.approx(float(v_of(4)))
    assert first.last_value[0] == pytest.approx(float(v_of(4)))
    second, _ = sampler.sample(StubPolicy(), envs, 3)
    assert not second.valid[0, 0] and second.valid[1:, 0].all()
    assert second.obs[1, 0, 0] == 100.0


def test_rollout_advantages_match_the_numpy_reference() -> None:
    rng = np.random.default_rng(0)
    T, N = 37, 5
    done = rng.random((T, N)) < 0.15
    trunc = done & (rng.random((T, N)) < 0.5)
    rollout = Rollout(
        obs=rng.normal(size=(T, N, 3)).astype(np.float32),
        act=rng.integers(0, 2, (T, N)),
        rew=rng.normal(size=(T, N)).astype(np.float32),
        terminated=done & ~trunc,
        truncated=trunc,
        valid=np.ones((T, N), bool),
        log_prob=np.zeros((T, N), np.float32),
        value=rng.normal(size=(T, N)).astype(np.float32),
        final_value=np.where(trunc, rng.normal(size=(T, N)), 0.0).astype(np.float32),
        last_value=rng.normal(size=N).astype(np.float32),
        env_rew=np.zeros((T, N), np.float32),
    )
    next_value = np.concatenate([rollout.value[1:], rollout.last_value[None]], 0)
    next_value = np.where(trunc, rollout.final_value, next_value)
    adv, ret = rollout.advantages(0.97, 0.9)
    want_adv, want_ret = gae_reference(
        rollout.rew, rollout.value, next_value, rollout.terminated, rollout.truncated, 0.97, 0.9
    )
    np.testing.assert_allclose(adv, want_adv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ret, want_ret, rtol=1e-4, atol=1e-5)
    # Baseline-free: rewards-to-go with every bootstrap 0.
    adv0, _ = rollout.advantages(0.97, 1.0, value=np.zeros_like(rollout.value))
    want0, _ = gae_reference(
        rollout.rew, np.zeros((T, N)), np.zeros((T, N)), rollout.terminated, rollout.truncated, 0.97, 1.0
    )
    np.testing.assert_allclose(adv0, want0, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_reward_fn_sees_the_true_next_observation(mode: AutoresetMode) -> None:
    seen: list[tuple[float, float]] = []

    def reward_fn(obs: np.ndarray, act: np.ndarray, obs_next: np.ndarray, rew: np.ndarray) -> np.ndarray:
        seen.extend(zip(obs[:, 0].tolist(), obs_next[:, 0].tolist(), strict=True))
        return obs_next[:, 0] * 2.0

    envs = scripted_envs([2], ["term"], mode)
    sampler = RolloutSampler(envs, reward_fn=reward_fn)
    sampler.reset(seed=0)
    rollout, stats = sampler.sample(StubPolicy(), envs, 6)
    valid = rollout.valid[:, 0]
    transitions = [s for s, v in zip(seen, valid, strict=True) if v]
    assert all(nxt == cur + 1 for cur, nxt in transitions)  # final obs at done steps, never a reset obs
    np.testing.assert_allclose(rollout.rew[valid, 0], [2 * nxt for _, nxt in transitions])
    assert set(stats.episode_returns) == {3.0}  # episode stats keep the env's reward


def test_sampler_errors() -> None:
    envs = scripted_envs([3], ["term"], AutoresetMode.NEXT_STEP)
    sampler = RolloutSampler(envs)
    with pytest.raises(RuntimeError, match="reset"):
        sampler.sample(StubPolicy(), envs, 4)
    sampler.reset(seed=0)
    with pytest.raises(ValueError, match="num_steps"):
        sampler.sample(StubPolicy(), envs, 0)
    with pytest.raises(ValueError, match="envs"):
        sampler.sample(StubPolicy(), scripted_envs([3], ["term"], AutoresetMode.NEXT_STEP), 4)


# --------------------------------------------------------------------------- loss pieces


def test_ppo_policy_loss_hand_computed() -> None:
    ratio = torch.tensor([1.5, 0.5, 1.0])
    old = torch.tensor([-1.0, -2.0, -0.5])
    adv = torch.tensor([1.0, -1.0, 2.0])
    loss, log_ratio = ppo_policy_loss(old + ratio.log(), old, adv, 0.2)
    kl, clip_frac = approx_kl(log_ratio), clip_fraction(log_ratio, 0.2)
    # max(-1.5, -1.2) = -1.2; max(0.5, 0.8) = 0.8; -2  -> mean -0.8
    assert loss.item() == pytest.approx(-0.8, abs=1e-6)
    assert clip_frac.item() == pytest.approx(2 / 3)
    assert kl.item() == pytest.approx((0.5 - math.log(1.5) - 0.5 - math.log(0.5)) / 3, abs=1e-6)


def test_ppo_policy_gradient_vanishes_outside_the_clip_range() -> None:
    old = torch.zeros(2)
    log_prob = torch.tensor([math.log(1.5), math.log(1.1)], requires_grad=True)
    loss, _ = ppo_policy_loss(log_prob, old, torch.tensor([1.0, 1.0]), 0.2)
    loss.backward()
    assert log_prob.grad is not None
    assert log_prob.grad[0].item() == 0.0  # ratio 1.5 > 1.2 with A > 0: clipped, no gradient
    assert log_prob.grad[1].item() == pytest.approx(-1.1 / 2)


def test_value_loss_hand_computed() -> None:
    v, v_old, ret = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 0.0])
    assert value_loss(v, ret).item() == pytest.approx(0.25)
    # clipped predictions 1.5, 0.5 -> squared errors max(1, 2.25), max(0, 0.25)
    assert value_loss(v, ret, v_old, 0.5).item() == pytest.approx(0.625)


def test_log_prob_and_entropy_match_torch_distributions() -> None:
    torch.manual_seed(0)
    mean, log_std, act = torch.randn(6, 3), torch.randn(3) * 0.3, torch.randn(6, 3)
    want = torch.distributions.Normal(mean, log_std.exp()).log_prob(act).sum(-1)
    torch.testing.assert_close(gaussian_log_prob(act, mean, log_std), want)

    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    pol = ActorCritic(box, box, (8,), init_log_std=-0.3)
    x = torch.randn(5, 3)
    a, lp = pol.sample(x)
    lp2, ent, _ = pol.evaluate(x, a)
    dist = torch.distributions.Normal(pol(x)[0], pol.log_std.exp())
    torch.testing.assert_close(lp, dist.log_prob(a).sum(-1))
    torch.testing.assert_close(lp2, lp)
    torch.testing.assert_close(ent, dist.entropy().sum(-1))

    pol_d = ActorCritic(box, gym.spaces.Discrete(4), (8,), fused=True)
    a, lp = pol_d.sample(x)
    lp2, ent, _ = pol_d.evaluate(x, a)
    cat = torch.distributions.Categorical(logits=pol_d(x)[0])
    torch.testing.assert_close(lp, cat.log_prob(a))
    torch.testing.assert_close(lp2, lp)
    torch.testing.assert_close(ent, cat.entropy())


def test_fused_actor_critic_computes_two_separate_mlps() -> None:
    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    pol = ActorCritic(box, gym.spaces.Discrete(2), (8, 5), fused=True)
    x = torch.randn(4, 3)
    out, value = pol(x)
    h = [x, x]
    for layer in pol.trunk.layers:
        h = [torch.tanh(h[k] @ layer.weight[k] + layer.bias[k]) for k in range(2)]
    torch.testing.assert_close(out, pol.actor(h[0]))
    torch.testing.assert_close(value, pol.critic(h[1]).squeeze(-1))
    # Gradients of a policy-only loss do not reach the critic's member.
    out.sum().backward()
    assert pol.trunk.layers[0].weight.grad[1].abs().sum() == 0
    assert pol.trunk.layers[0].weight.grad[0].abs().sum() > 0


def test_normalize_advantages_and_return_normalizer() -> None:
    adv = normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    assert adv.mean().item() == pytest.approx(0.0, abs=1e-6) and adv.std().item() == pytest.approx(
        1.0, abs=1e-6
    )

    rng = np.random.default_rng(1)
    T, N, gamma = 20, 3, 0.9
    rew = rng.normal(size=(T, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.2
    z = np.zeros((T, N), np.float32)
    rollout = Rollout(
        obs=z[..., None], act=z, rew=rew, terminated=term, truncated=np.zeros((T, N), bool),
        valid=np.ones((T, N), bool), log_prob=z, value=z, final_value=z, last_value=z[0], env_rew=rew,
    )  # fmt: skip
    norm = ReturnNormalizer(N, gamma)
    scaled = norm(rollout)
    ret, rets = np.zeros(N), []
    for t in range(T):
        ret = ret * gamma + rew[t]
        rets.append(ret.copy())
        ret = np.where(term[t], 0.0, ret)
    np.testing.assert_allclose(scaled, np.clip(rew / np.sqrt(np.var(rets) + 1e-8), -10, 10), rtol=1e-5)


# --------------------------------------------------------------------------- algorithm smoke tests


def make_envs(env_id: str, n: int = 2, mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})


ALGOS: dict[str, tuple[Any, Any, Any, dict[str, Any]]] = {
    "vpg": (VPG, VPGConfig, VPGStats, {"value_iters": 3}),
    "vpg-nobaseline": (VPG, VPGConfig, VPGStats, {"baseline": False, "normalize_returns": True}),
    "a2c": (A2C, A2CConfig, A2CStats, {"normalize_obs": True, "normalize_advantages": True}),
    "ppo": (
        PPO,
        PPOConfig,
        PPOStats,
        {"n_epochs": 2, "minibatch_size": 32, "value_clip_coef": 0.2, "normalize_obs": True,
         "normalize_returns": True, "ent_coef": 0.01, "lr_anneal_env_steps": 1000},
    ),
}  # fmt: skip


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("name", list(ALGOS))
def test_algorithm_smoke(name: str, env_id: str) -> None:
    algo_cls, cfg_cls, stats_cls, kw = ALGOS[name]
    torch.manual_seed(0)
    envs = make_envs(env_id)
    algo = algo_cls.from_spaces(
        envs.single_observation_space, envs.single_action_space, cfg_cls(**kw), num_envs=2, device="cpu"
    )
    before = {k: v.clone() for k, v in algo.policy.state_dict().items()}
    trainer = OnPolicyTrainer(algo, envs, config=OnPolicyTrainerConfig(max_env_steps=200, num_steps=32))
    stats = list(trainer)
    assert len(stats) == 4 and stats[-1].env_steps >= 200
    for s in stats:
        assert isinstance(s.train, stats_cls)
        assert all(math.isfinite(v) for k, v in vars(s.train).items() if k != "explained_variance")
    after = algo.policy.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if "actor" in k)
    act = algo.act(envs.reset(seed=1)[0], deterministic=True)
    assert act.shape[0] == 2


def test_ppo_kl_early_stop_and_epochs() -> None:
    torch.manual_seed(0)
    envs = make_envs("CartPole-v1")
    cfg = PPOConfig(n_epochs=10, minibatch_size=16, lr=0.05, target_kl=1e-4)
    ppo = PPO.from_spaces(
        envs.single_observation_space, envs.single_action_space, cfg, num_envs=2, device="cpu"
    )
    sampler = RolloutSampler(envs)
    sampler.reset(seed=0)
    rollout, _ = sampler.sample(ppo, envs, 64)
    stats = ppo.update(rollout)
    assert stats.epochs < 10 and stats.grad_steps < 10 * 8
    full = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(n_epochs=3, minibatch_size=16),
        device="cpu",
    ).update(rollout)
    assert full.epochs == 3 and full.grad_steps == 3 * math.ceil(rollout.num_transitions / 16)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        PPOConfig(clip_coef=0)
    with pytest.raises(ValueError):
        PPOConfig(gae_lambda=1.5)
    with pytest.raises(ValueError):
        VPGConfig(value_iters=-1)
    with pytest.raises(ValueError):
        OnPolicyTrainerConfig(num_steps=0)
    envs = make_envs("CartPole-v1")
    pol = ActorCritic(envs.single_observation_space, envs.single_action_space, with_critic=False)
    with pytest.raises(ValueError, match="critic"):
        PPO(policy=pol, optimizer=torch.optim.Adam(pol.parameters()), num_envs=2, config=PPOConfig())


# --------------------------------------------------------------------------- trainer contract


def make_trainer(seed: int = 0, eval_every: int | None = 2) -> OnPolicyTrainer:
    torch.manual_seed(seed)
    envs = make_envs("CartPole-v1")
    cfg = PPOConfig(n_epochs=2, minibatch_size=32, normalize_obs=True, normalize_returns=True, seed=seed)
    ppo = PPO.from_spaces(
        envs.single_observation_space, envs.single_action_space, cfg, num_envs=2, device="cpu"
    )
    return OnPolicyTrainer(
        ppo,
        envs,
        eval_envs=make_envs("CartPole-v1", 2) if eval_every else None,
        config=OnPolicyTrainerConfig(
            max_env_steps=320, num_steps=32, eval_every=eval_every, eval_episodes=2, seed=seed
        ),
    )


def test_trainer_iterator_contract() -> None:
    trainer = make_trainer()
    assert iter(trainer) is trainer
    first = next(trainer)
    assert isinstance(first, EpochStats) and isinstance(first.train, PPOStats)
    assert first.iteration == 1 and first.eval is None and first.grad_steps == first.train.grad_steps
    for stats in trainer:  # continues, no reset
        assert stats.iteration == 2
        break
    assert isinstance(stats.eval, EvalStats) and stats.eval.episodes == 2
    rest = list(trainer)
    assert rest[-1].env_steps >= 320 and rest[-1].eval is not None
    with pytest.raises(StopIteration):
        next(trainer)
    keys = flatten_stats(rest[-1])
    assert "train/approx_kl" in keys and "time/env_steps_per_s" in keys


def test_trainers_advance_side_by_side_with_zip() -> None:
    a, b = make_trainer(0, None), make_trainer(1, None)
    pairs = list(zip(a, b, strict=False))
    assert len(pairs) >= 5
    assert all(x.iteration == y.iteration for x, y in pairs)


def test_checkpoint_resume_yields_the_same_stats(tmp_path: Any) -> None:
    trainer = make_trainer(eval_every=None)
    next(trainer)
    next(trainer)
    trainer.save_checkpoint(tmp_path / "ckpt")
    want = [next(trainer) for _ in range(2)]

    fresh = make_trainer(seed=5, eval_every=None)
    fresh.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    got = [next(fresh) for _ in range(2)]
    for w, g in zip(want, got, strict=True):
        assert g.env_steps == w.env_steps and g.iteration == w.iteration
        assert g.train == w.train
        np.testing.assert_equal(vars(g.rollout), vars(w.rollout))  # NaN-aware
    with pytest.raises(FileNotFoundError):
        fresh.load_checkpoint(tmp_path / "missing")


def test_resume_without_trusted_env_state_restarts_episodes_from_a_derived_seed(tmp_path: Any) -> None:
    """Without trust_env_state the envs are reset with resume_seed(seed, iteration): counters and
    the algorithm continue, every env starts a fresh episode, so the next rollout differs."""
    trainer = make_trainer(eval_every=None)
    next(trainer)
    next(trainer)
    trainer.save_checkpoint(tmp_path / "ckpt")
    saved_env_steps, saved_grad_steps = trainer.env_steps, trainer.grad_steps
    want = next(trainer)

    def resume() -> OnPolicyTrainer:
        fresh = make_trainer(eval_every=None)
        with pytest.warns(RuntimeWarning, match="fresh episode"):
            fresh.load_checkpoint(tmp_path / "ckpt")
        return fresh

    fresh = resume()
    obs, _ = make_envs("CartPole-v1").reset(seed=resume_seed(0, 2))
    np.testing.assert_array_equal(fresh.sampler.obs, obs)
    assert (fresh.iteration, fresh.env_steps, fresh.grad_steps) == (2, saved_env_steps, saved_grad_steps)
    got = next(fresh)
    assert got.iteration == want.iteration == 3
    assert got.train != want.train  # other observations: the documented difference
    if got.rollout.episodes:  # every episode that ended in this 32-step rollout started in it
        assert got.rollout.length_mean <= 32
    assert next(resume()).train == got.train  # the reset seed is deterministic


# --------------------------------------------------------------------------- CLI


def test_cli_trains_on_policy_algorithms(tmp_path: Any) -> None:
    from rlcore.cli import main

    for algo, env_id in (("ppo", "CartPole-v1"), ("a2c", "CartPole-v1")):
        out = tmp_path / algo
        args = [
            "train",
            "--algo",
            algo,
            "--env",
            env_id,
            "--steps",
            "300",
            "--out",
            str(out),
            "--no-progress",
        ]
        assert main([*args, "--device", "cpu"]) == 0
        assert (out / "metrics.jsonl").is_file() and (out / "checkpoint" / "checkpoint.json").is_file()
    assert main(["train", "--algo", "vpg", "--env", "CartPole-v1", "--her"]) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_on_cuda(env_id: str) -> None:
    envs = make_envs(env_id)
    cfg = PPOConfig(n_epochs=2, minibatch_size=32, normalize_obs=True, normalize_returns=True)
    ppo = PPO.from_spaces(
        envs.single_observation_space, envs.single_action_space, cfg, num_envs=2, device="cuda"
    )
    assert next(ppo.policy.parameters()).device.type == "cuda"
    stats = list(OnPolicyTrainer(ppo, envs, config=OnPolicyTrainerConfig(max_env_steps=128, num_steps=32)))
    assert math.isfinite(stats[-1].train.policy_loss)
