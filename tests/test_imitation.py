"""Imitation layer: expert recording (collect-expert), BC + OfflineTrainer, GAIL's discriminator,
its learned reward through ``reward_fn``, GAIL smoke runs and the trainer contract."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.algos.bc import BC, BCConfig, BCStats
from rlcore.algos.gail import GAIL, GAILConfig, GAILStats
from rlcore.algos.ppo import PPOConfig
from rlcore.cli import main
from rlcore.collect.collector import Collector
from rlcore.collect.sampler import RolloutSampler
from rlcore.imitation import (
    OfflineTrainer,
    OfflineTrainerConfig,
    record_episodes,
)
from rlcore.policy import load_policy
from rlcore.stats import EpochStats, flatten_stats
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

torch.set_num_threads(1)


def cartpole_expert(obs: np.ndarray) -> np.ndarray:
    """A hand-written CartPole controller (push towards the pole's fall): returns 500 from most starts."""
    obs = np.asarray(obs)
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


class RandomPolicy:
    """Uniform random actions with dummy log-probs and values (an ``ActorCriticPolicy``)."""

    def __init__(self, space: gym.Space, seed: int = 0) -> None:
        self.space = space
        self.space.seed(seed)

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(obs)
        act = np.stack([self.space.sample() for _ in range(n)])
        return act, np.zeros(n, np.float32), np.zeros(n, np.float32)

    def value(self, obs: np.ndarray) -> np.ndarray:
        return np.zeros(len(obs), np.float32)


@pytest.fixture(scope="module")
def cartpole_data() -> tuple[rlcore.ReplayBuffer, list[float]]:
    return record_episodes(cartpole_expert, "CartPole-v1", 3, seed=0)


def _vec(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")


# --------------------------------------------------------------------------- expert data


def test_record_episodes_stores_time_ordered_episodes(cartpole_data: Any) -> None:
    buf, returns = cartpole_data
    assert len(returns) == 3 and min(returns) > 100
    assert len(buf) == int(sum(returns))  # CartPole: reward 1 per step
    batch = buf.sample(64)
    assert batch.act.dtype == np.int64 and batch.obs.shape == (64, 4)
    np.testing.assert_array_equal(batch.act, cartpole_expert(batch.obs))


def test_collect_expert_trains_then_loads_and_writes_a_loadable_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, data = tmp_path / "run", tmp_path / "data"
    argv = ["collect-expert", "--algo", "ppo", "--env", "CartPole-v1", "--episodes", "2"]
    assert main([*argv, "--steps", "256", "--checkpoint", str(run), "--out", str(data)]) == 0
    out = capsys.readouterr().out
    assert "expert: CartPole-v1 ppo return_mean=" in out and "episodes=2" in out
    buf = rlcore.ReplayBuffer.load(data)
    assert len(buf) > 0 and buf.sample(8).obs.shape == (8, 4)
    # A second call loads the checkpoint instead of training again.
    mtime = (run / "checkpoint" / "checkpoint.json").stat().st_mtime
    assert main([*argv, "--checkpoint", str(run), "--out", str(tmp_path / "data2")]) == 0
    assert (run / "checkpoint" / "checkpoint.json").stat().st_mtime == mtime
    # The recorded actions are the loaded policy's deterministic actions.
    policy = load_policy(run)
    batch = rlcore.ReplayBuffer.load(tmp_path / "data2").sample(32)
    np.testing.assert_array_equal(policy(batch.obs), batch.act)


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--algo", "bc", "--env", "CartPole-v1"],  # no --expert
        ["train", "--algo", "dqn", "--env", "CartPole-v1", "--expert", "x"],  # --expert for RL
        ["train", "--algo", "gail", "--env", "CartPole-v1", "--expert", "/nonexistent/dataset"],
    ],
)
def test_bad_imitation_arguments_give_one_line_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlcore: error:") and "\n" not in err


def test_collect_expert_checks_its_episode_count_in_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["collect-expert", "--algo", "ppo", "--env", "CartPole-v1", "--episodes", "0", "--out", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlcore: error: argument --episodes: must be >= 1") and "\n" not in err


# --------------------------------------------------------------------------- BC + OfflineTrainer


def test_bc_clones_a_discrete_expert(cartpole_data: Any) -> None:
    buf, _ = cartpole_data
    eval_envs = _vec("CartPole-v1", 2)
    bc = BC.from_spaces(
        eval_envs.single_observation_space, eval_envs.single_action_space, BCConfig(hidden=(64, 64))
    )
    cfg = OfflineTrainerConfig(
        max_grad_steps=600, grad_steps_per_iteration=300, eval_every=2, eval_episodes=2
    )
    stats = list(OfflineTrainer(bc, buf, config=cfg, eval_envs=eval_envs))
    assert [s.grad_steps for s in stats] == [300, 600]
    assert isinstance(stats[-1].train, BCStats) and stats[-1].train.accuracy > 0.9
    assert stats[-1].eval is not None and stats[-1].eval.return_mean > 150


def test_bc_regresses_continuous_actions() -> None:
    env = gym.make("Pendulum-v1")
    buf, _ = record_episodes(lambda obs: -np.clip(obs[:, 2:3], -2, 2) / 4, "Pendulum-v1", 2, seed=0)
    bc = BC.from_spaces(env.observation_space, env.action_space, BCConfig(hidden=(64, 64)))
    first = bc.update(buf.sample(256)).loss
    for _ in range(300):
        last = bc.update(buf.sample(256))
    assert np.isnan(last.accuracy) and last.loss < 0.2 * first
    act = bc.act(buf.sample(5).obs)
    assert act.shape == (5, 1) and act.dtype == np.float32 and np.all(np.abs(act) <= 2.0)


def test_offline_trainer_contract(cartpole_data: Any, tmp_path: Path) -> None:
    buf, _ = cartpole_data
    space = gym.make("CartPole-v1")
    make = lambda: BC.from_spaces(space.observation_space, space.action_space, BCConfig(hidden=(16,)))  # noqa: E731
    cfg = OfflineTrainerConfig(max_grad_steps=25, grad_steps_per_iteration=10)
    a, b = OfflineTrainer(make(), buf, config=cfg), OfflineTrainer(make(), buf, config=cfg)
    assert iter(a) is a
    pairs = list(zip(a, b, strict=True))  # side by side
    assert [s.grad_steps for s, _ in pairs] == [10, 20, 25] and a.done
    assert all(isinstance(s, EpochStats) and dataclasses.is_dataclass(s.train) for s, _ in pairs)
    assert list(a) == []  # no implicit reset
    c = OfflineTrainer(make(), buf, config=cfg)
    for _ in c:
        break  # leaving early keeps the state
    assert next(c).grad_steps == 20
    c.save_checkpoint(tmp_path / "ckpt")
    d = OfflineTrainer(make(), buf, config=cfg)
    d.load_checkpoint(tmp_path / "ckpt")
    assert d.grad_steps == 20 and next(d).grad_steps == 25
    obs = buf.sample(16).obs
    with pytest.raises(ValueError, match="eval_envs"):
        OfflineTrainer(make(), buf, config=OfflineTrainerConfig(eval_every=1))
    np.testing.assert_array_equal(c.algorithm.act(obs), c.algorithm.act(obs))


# --------------------------------------------------------------------------- GAIL


def _gail(buf: Any, envs: gym.vector.VectorEnv, **kw: Any) -> GAIL:
    return GAIL.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        buf,
        GAILConfig(**kw),
        PPOConfig(n_epochs=1, minibatch_size=64),
        num_envs=envs.num_envs,
        device="cpu",
    )


def test_discriminator_separates_expert_from_random(cartpole_data: Any) -> None:
    buf, _ = cartpole_data
    envs = _vec("CartPole-v1", 4)
    # No gradient penalty: it deliberately keeps D smooth (and less sharp) for the generator.
    gail = _gail(buf, envs, disc_updates=25, lr=1e-3, hidden=(64, 64), grad_penalty=0.0)
    sampler = RolloutSampler(envs)  # random data with the env reward
    sampler.reset(seed=0)
    policy = RandomPolicy(envs.single_action_space)
    for _ in range(8):
        rollout, _ = sampler.sample(policy, envs, 64)
        stats = gail.discriminator_update(rollout)
    assert stats.expert_acc > 0.8 and stats.policy_acc > 0.7
    expert = buf.sample(512)
    rollout, _ = sampler.sample(policy, envs, 128)
    r_expert = gail.reward(expert.obs, expert.act, expert.obs_next, expert.rew)
    r_random = gail.reward(rollout.obs.reshape(-1, 4), rollout.act.reshape(-1), None, None)  # type: ignore[arg-type]
    assert r_expert.dtype == np.float32 and r_expert.shape == (512,)
    assert r_expert.mean() > r_random.mean() + 0.3


def test_reward_hook_replaces_env_reward_in_stored_transitions(cartpole_data: Any) -> None:
    buf, _ = cartpole_data
    envs = _vec("CartPole-v1", 2)
    gail = _gail(buf, envs)
    # Replay buffer written by the collector: stored rewards are the discriminator's.
    store = rlcore.ReplayBuffer(2_000, num_envs=2, seed=0)
    collector = Collector(envs, store, reward_fn=gail.reward)
    collector.reset(seed=0)
    collector.collect(300)
    rows = np.flatnonzero(store.column("flags") & 1)
    obs, act, rew = store.obs[rows], store.act[rows], store.rew[rows]
    np.testing.assert_allclose(rew, gail.reward(obs, act, obs, rew), rtol=1e-5, atol=1e-6)
    assert not np.allclose(rew, 1.0)  # CartPole's own reward is 1 everywhere
    # Rollouts of the on-policy sampler: ``rew`` is learned, ``env_rew`` the env's.
    sampler = RolloutSampler(envs, reward_fn=gail.reward)
    sampler.reset(seed=1)
    rollout, _ = sampler.sample(gail, envs, 64)
    v = rollout.valid
    np.testing.assert_allclose(
        rollout.rew[v], gail.reward(rollout.obs[v], rollout.act[v], None, None), rtol=1e-5, atol=1e-6
    )  # type: ignore[arg-type]
    np.testing.assert_array_equal(rollout.env_rew[v], 1.0)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_gail_trainer_smoke(env_id: str, cartpole_data: Any, tmp_path: Path) -> None:
    if env_id == "CartPole-v1":
        buf = cartpole_data[0]
    else:
        buf, _ = record_episodes(lambda o: -o[:, 2:3].clip(-2, 2), env_id, 1, seed=0)
    envs, eval_envs = _vec(env_id, 2), _vec(env_id, 1)
    gail = _gail(buf, envs, grad_penalty=1.0, reward="logit" if env_id == "Pendulum-v1" else "softplus")
    cfg = OnPolicyTrainerConfig(max_env_steps=256, num_steps=32, eval_every=2, eval_episodes=1)
    trainer = OnPolicyTrainer(gail, envs, config=cfg, eval_envs=eval_envs, reward_fn=gail.reward)
    stats = list(itertools.islice(trainer, 10))
    assert [s.env_steps for s in stats][-1] >= 256 and trainer.done
    last = stats[-1].train
    assert isinstance(last, GAILStats) and last.grad_penalty >= 0
    assert all(np.isfinite([last.disc_loss, last.learned_reward, last.policy_loss]))
    assert stats[-1].eval is not None
    flat = flatten_stats(stats[-1])
    assert {"train/disc_loss", "train/learned_reward", "train/policy_loss", "eval/return_mean"} <= set(flat)
    trainer.save_checkpoint(tmp_path / "ckpt")
    fresh_gail = _gail(buf, envs)
    fresh = OnPolicyTrainer(fresh_gail, envs, config=cfg, eval_envs=eval_envs, reward_fn=fresh_gail.reward)
    fresh.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    assert fresh.env_steps == trainer.env_steps


def test_gail_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        GAILConfig(reward="airl")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        GAILConfig(grad_penalty=-1.0)
    with pytest.raises(ValueError):
        OfflineTrainerConfig(batch_size=0)


@pytest.mark.parametrize(("algo", "steps"), [("bc", "50"), ("gail", "512")])
def test_cli_trains_bc_and_gail_from_a_dataset(
    algo: str, steps: str, cartpole_data: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cartpole_data[0].save(tmp_path / "data")
    argv = ["train", "--algo", algo, "--env", "CartPole-v1", "--expert", str(tmp_path / "data")]
    assert main([*argv, "--steps", steps, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert f"done: CartPole-v1 {algo}" in capsys.readouterr().out
    for name in ("config.json", "metrics.jsonl", "checkpoint/checkpoint.json"):
        assert (tmp_path / "run" / name).is_file()


def test_collect_expert_exports_a_minari_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    minari = pytest.importorskip("minari")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINARI_DATASETS_PATH", "minari")  # relative: minari 0.5.4 mishandles it alone
    run, data = tmp_path / "run", tmp_path / "data"
    argv = ["collect-expert", "--algo", "ppo", "--env", "CartPole-v1", "--episodes", "3", "--steps", "256"]
    argv += ["--checkpoint", str(run), "--out", str(data), "--minari", "rlcore/cartpole-test-v0"]
    assert main(argv) == 0
    assert "minari: dataset rlcore/cartpole-test-v0 written" in capsys.readouterr().out
    assert (tmp_path / "minari" / "rlcore" / "cartpole-test-v0").is_dir()
    ds = minari.load_dataset("rlcore/cartpole-test-v0")
    buf = rlcore.ReplayBuffer.load(data)
    assert ds.total_episodes == 3 and ds.total_steps == len(buf)
    env = gym.make("CartPole-v1")
    policy = load_policy(run)
    for k, ep in enumerate(ds.iterate_episodes()):
        n = len(ep.actions)
        assert ep.observations.shape == (n + 1, 4) and ep.rewards.shape == (n,)
        assert ep.terminations[-1] or ep.truncations[-1]
        assert not (ep.terminations[:-1].any() or ep.truncations[:-1].any())
        # The episode replays in the env: same reset seed, same actions -> same observations.
        obs, _ = env.reset(seed=100_000 + k)
        np.testing.assert_allclose(ep.observations[0], obs)
        np.testing.assert_array_equal(ep.actions, policy(ep.observations[:-1]))
        for t in range(n):
            obs, *_ = env.step(int(ep.actions[t]))
            np.testing.assert_allclose(ep.observations[t + 1], obs, rtol=1e-6)
    # The same id twice is Minari's error, reported as a one-line usage error.
    argv[-3] = str(tmp_path / "data2")
    assert main(argv) == 2


def test_gail_settings_run_one_hopper_iteration() -> None:
    """The MuJoCo settings of ``rlcore train --algo gail`` run on Hopper-v5 (one iteration on a
    512-step rollout instead of 2048, to stay fast) with a crude 'expert'."""
    pytest.importorskip("mujoco")
    from rlcore.imitation import gail_settings

    env_id = "Hopper-v5"
    buf, _ = record_episodes(lambda o: np.zeros((len(o), 3), np.float32), env_id, 2, seed=0)
    envs, eval_envs = _vec(env_id, 1), _vec(env_id, 2)
    s = gail_settings(env_id, steps=2048, seed=0)
    assert (s.num_envs, s.trainer.num_steps, s.gail.disc_updates) == (1, 2048, 8)
    assert s.ppo.lr_anneal_env_steps == 2048 and s.ppo.normalize_obs and s.ppo.ent_coef == 0.0
    assert s.gail.absorbing
    gail = GAIL.from_spaces(
        envs.single_observation_space, envs.single_action_space, buf, s.gail, s.ppo, num_envs=1
    )
    cfg = dataclasses.replace(s.trainer, num_steps=512, eval_every=1, eval_episodes=2)
    trainer = OnPolicyTrainer(gail, envs, config=cfg, eval_envs=eval_envs, reward_fn=gail.reward)
    (stats,) = itertools.islice(trainer, 1)
    assert 0 < stats.env_steps <= 512 and stats.eval is not None
    train = stats.train
    assert isinstance(train, GAILStats) and train.grad_steps == 8 + 10 * -(-stats.env_steps // 64)
    assert np.isfinite([train.disc_loss, train.learned_reward, train.policy_loss]).all()
    assert train.learned_reward > 0  # -log(1 - D) > 0


def test_absorbing_state_value_follows_the_termination_shares() -> None:
    """Absorbing states (Kostrikov et al. 2019): D(s_a) = s_E / (s_E + s_pi) from the shares of
    absorbing pairs, and a terminated step gets gamma r_a / (1 - gamma) added to its reward."""
    # The 'expert' always pushes left: CartPole terminates after ~10 steps, every episode.
    falling, returns = record_episodes(lambda o: np.zeros(len(o), np.int64), "CartPole-v1", 20, seed=0)
    envs = _vec("CartPole-v1", 4)
    gail = _gail(falling, envs, absorbing=True)
    s_e = gail.expert_absorbing_share
    assert s_e == pytest.approx(20 / (len(falling) + 20)) and len(falling) == int(sum(returns))
    assert gail.absorbing_reward(s_e) == pytest.approx(np.log(2.0))  # D(s_a) = 0.5
    assert gail.absorbing_reward(s_e / 3) == pytest.approx(np.log1p(3.0))  # softplus(log 3)
    assert gail.absorbing_reward(3 * s_e) == pytest.approx(np.log1p(1 / 3))
    # A rollout of a random policy: terminated rows get the discounted absorbing value.
    sampler = RolloutSampler(envs, reward_fn=gail.reward)
    sampler.reset(seed=1)
    rollout, _ = sampler.sample(gail, envs, 64)
    term = rollout.terminated & rollout.valid
    n_term, n_valid = int(term.sum()), int(rollout.valid.sum())
    assert n_term > 0
    share = (n_term + 1) / (n_valid + n_term + 2)
    r_abs, gamma, before = gail.absorbing_reward(share), gail.generator.config.gamma, rollout.rew.copy()
    stats = gail.update(rollout)
    assert stats.absorbing_reward == pytest.approx(r_abs) and stats.policy_absorbing_share == pytest.approx(
        share
    )
    np.testing.assert_allclose(rollout.rew[term], before[term] + gamma * r_abs / (1 - gamma), rtol=1e-5)
    np.testing.assert_array_equal(rollout.rew[~term], before[~term])
    assert stats.learned_reward == pytest.approx(before[rollout.valid].mean())
    # Off by default: no absorbing statistics, and asking for r_a is an error.
    plain = _gail(falling, envs)
    assert np.isnan(plain.update(sampler.sample(plain, envs, 16)[0]).absorbing_reward)
    with pytest.raises(ValueError, match="absorbing"):
        plain.absorbing_reward(0.1)
