"""The recurrent DQN (rlcore.algos.r2d2), its trainer (rlcore.trainers.recurrent), the partially
observed CartPole (rlcore.envs.partial) and ``rlcore train --algo r2d2``."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import rlcore.envs  # registers rlcore/CartPoleNoVel-v1
import torch
from rlcore.algos.r2d2 import R2D2, R2D2Config
from rlcore.cli.main import main
from rlcore.envs.partial import HideObservationEntries
from rlcore.errors import ShapeError
from rlcore.trainers import OffPolicyTrainerConfig, RecurrentTrainer, checkpoint


def test_cartpole_no_velocity_shows_position_and_angle_only():
    full = gym.make("CartPole-v1")
    part = gym.make("rlcore/CartPoleNoVel-v1")
    assert part.observation_space.shape == (2,)
    o_full, _ = full.reset(seed=3)
    o_part, _ = part.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(40):
        np.testing.assert_array_equal(o_part, o_full[[0, 2]].astype(np.float32))
        a = int(rng.integers(2))
        o_full, r_full, t_full, tr_full, _ = full.step(a)
        o_part, r_part, t_part, tr_part, _ = part.step(a)
        assert (r_full, t_full, tr_full) == (r_part, t_part, tr_part)
        if t_full or tr_full:
            break
    with pytest.raises(ValueError):
        HideObservationEntries(gym.make("CartPole-v1"), [4])


def _trainer(prioritized: bool, steps: int = 400, seed: int = 0, lr: float = 1e-3):
    envs = gym.make_vec("rlcore/CartPoleNoVel-v1", num_envs=2, vectorization_mode="sync")
    eval_envs = gym.make_vec("rlcore/CartPoleNoVel-v1", num_envs=2, vectorization_mode="sync")
    torch.manual_seed(seed)
    algo = R2D2.from_spaces(
        envs.single_observation_space, envs.single_action_space,
        R2D2Config(burn_in=3, seq_len=5, recurrent_size=16, hidden=(16,), target_update_interval=10, seed=seed,
                   lr=lr),
    )
    buf = (rlcore.PrioritizedReplayBuffer(2_000, num_envs=2, seed=seed) if prioritized
           else rlcore.ReplayBuffer(2_000, num_envs=2, seed=seed))
    cfg = OffPolicyTrainerConfig(max_env_steps=steps, collect_env_steps=2, warmup_env_steps=200, utd_ratio=1 / 8,
                                 batch_size=8, n_step=3, eval_every=200, eval_episodes=2,
                                 per_beta_end=1.0 if prioritized else None, seed=seed)
    return RecurrentTrainer(algo, buf, envs, config=cfg, eval_envs=eval_envs), algo, buf


@pytest.mark.parametrize("prioritized", [False, True])
def test_trainer_stores_the_state_before_each_step_and_learns_on_sequences(prioritized):
    # without prioritized replay the network is frozen (lr 0), so the stored states can be replayed
    trainer, algo, buf = _trainer(prioritized, lr=1e-3 if prioritized else 0.0)
    records = list(trainer)
    assert 400 <= records[-1].env_steps <= 401 and algo.grad_steps > 0  # a vector step may pass the end
    assert records[-1].eval is not None and records[-1].eval.episodes == 2
    # the stored state is zero exactly at episode starts (flag 2), and it is the GRU's state
    flags = buf.column("flags")
    h = buf.column("h")
    trans = buf.is_transition(np.arange(buf.capacity))
    starts = trans & (flags & 2 > 0)
    assert starts.any() and np.all(h[starts] == 0)
    assert np.any(h[trans & ~starts] != 0)
    if prioritized:
        p = buf.priorities(np.flatnonzero(trans))
        assert len(np.unique(np.round(p, 12))) > 2, "sequence priorities were never updated"
        return
    # replaying an episode's observations through the network from zero gives the stored states
    row = int(np.flatnonzero(starts)[0])
    s, e, n = buf.episode_bounds([row])
    rows = np.arange(s[0], s[0] + min(int(n[0]), 6))
    with torch.no_grad():
        state = np.zeros((1, algo.recurrent_size), np.float32)
        for r in rows:
            np.testing.assert_allclose(h[r], state[0], atol=1e-5)
            _, state = algo.act(buf.obs[r][None], state, deterministic=True)


def test_update_trains_after_burn_in_except_where_a_sequence_starts_its_episode():
    trainer, algo, buf = _trainer(False, steps=300)
    list(trainer)
    batch = buf.sample_sequences(32, 5, burn_in=3, n_step=3, gamma=0.99, state="h")
    stats = algo.update(batch)
    k = np.arange(8)[None, :]
    want = batch.mask & ((k >= 3) | batch.is_first[:, :1])
    empty = want.sum(1) == 0
    want[empty, 0] = True
    np.testing.assert_array_equal(stats.td_mask, want)
    assert np.all(stats.td_abs[~want] == 0) and np.isfinite(stats.loss)
    # the same batch, repeated, is fitted
    losses = [algo.update(batch).loss for _ in range(60)]
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    with pytest.raises(ShapeError):
        algo.update(buf.sample_sequences(4, 1, burn_in=2, state="h"))


def test_cli_trains_r2d2_and_writes_metrics(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--algo", "r2d2", "--env", "rlcore/CartPoleNoVel-v1", "--steps", "300", "--num-envs", "2",
            "--out", str(out), "--no-progress", "--device", "cpu"]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["time/env_steps"] >= 300 and np.isfinite(rows[-1]["eval/return_mean"])
    algo = json.loads((out / "config.json").read_text())["algo_config"]
    # the preset's "anneal over --steps" is resolved to the run's length
    assert algo["lr_anneal_env_steps"] == 300 and algo["prev_action_input"] and algo["normalize_obs"]
    assert main([*argv[:-5], "--her", "--out", str(tmp_path / "x")]) != 0


def test_cli_resumes_an_r2d2_run_from_its_checkpoint(tmp_path):
    """The recurrent trainer is the shared loop: ``rlcore train --algo r2d2`` writes a checkpoint
    and ``--resume`` continues it (the old separate loop refused ``--resume``)."""
    base = ["train", "--algo", "r2d2", "--env", "rlcore/CartPoleNoVel-v1", "--num-envs", "2", "--no-progress",
            "--device", "cpu"]
    assert main([*base, "--steps", "200", "--out", str(tmp_path / "a")]) == 0
    ckpt = tmp_path / "a" / "checkpoint"
    assert checkpoint.load(ckpt, trainer="recurrent").counter("env_steps") == 200
    assert main([*base, "--steps", "400", "--out", str(tmp_path / "b"), "--resume", str(ckpt),
                 "--trust-env-state"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["time/env_steps"] > 200 and rows[-1]["time/env_steps"] == 400
    resumed = checkpoint.load(tmp_path / "b" / "checkpoint", trainer="recurrent")
    assert resumed.counter("env_steps") == 400 and resumed.counter("iteration") == 400 // 8
    # a checkpoint of another trainer is refused in one line
    assert main(["train", "--algo", "dqn", "--env", "rlcore/CartPoleNoVel-v1", "--num-envs", "2", "--no-progress",
                 "--steps", "500", "--out", str(tmp_path / "c"), "--resume", str(ckpt)]) != 0


def test_observation_normalisation_follows_the_collected_observations_and_is_checkpointed():
    envs = gym.make_vec("rlcore/CartPoleNoVel-v1", num_envs=2, vectorization_mode="sync")
    config = R2D2Config(burn_in=2, seq_len=4, hidden=(8,), recurrent_size=8, normalize_obs=True,
                        lr_anneal_env_steps=100, seed=0)
    algo = R2D2.from_spaces(envs.single_observation_space, envs.single_action_space, config)
    obs, _ = envs.reset(seed=0)
    seen = []
    state = algo.initial_state(2)
    for _ in range(60):
        seen.append(obs)
        act, state = algo.act(obs, state)
        obs, *_ = envs.step(act)
    algo.act(obs, state, deterministic=True)  # greedy calls do not move the statistics
    seen = np.concatenate(seen)
    assert algo.obs_rms is not None and int(algo.obs_rms.count) == len(seen)
    np.testing.assert_allclose(algo.obs_rms.mean.numpy(), seen.mean(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(algo.obs_rms.var.numpy(), seen.var(0), rtol=1e-5, atol=1e-12)
    # the learning rate has reached 0 after lr_anneal_env_steps (120 > 100 env steps explored)
    buf = rlcore.ReplayBuffer(500, num_envs=2, seed=0)
    h = np.zeros((2, 8), np.float32)
    o = np.zeros((2, 2), np.float32)
    for t in range(20):
        buf.add(o + t, np.zeros(2, np.int64), np.ones(2, np.float32), np.full(2, t == 19), np.zeros(2, bool),
                o + t + 1, h=h)
    algo.update(buf.sample_sequences(4, 4, burn_in=2, state="h"))
    assert all(g["lr"] == 0.0 for g in algo.optimizer.param_groups)
    # statistics travel with the state dict
    other = R2D2.from_spaces(envs.single_observation_space, envs.single_action_space, config)
    other.load_state_dict(algo.state_dict())
    assert other.obs_rms is not None
    torch.testing.assert_close(other.obs_rms.mean, algo.obs_rms.mean)
    torch.testing.assert_close(other.obs_rms.var, algo.obs_rms.var)


def test_previous_action_input_is_carried_in_the_stored_state():
    """With prev_action_input the stored state is [GRU state, one-hot of the action taken before
    the step]: zeros at an episode's first step, the stored previous action elsewhere; the
    learner reads the same actions from the sequence."""
    envs = gym.make_vec("rlcore/CartPoleNoVel-v1", num_envs=2, vectorization_mode="sync")
    torch.manual_seed(0)
    algo = R2D2.from_spaces(
        envs.single_observation_space, envs.single_action_space,
        R2D2Config(burn_in=2, seq_len=4, recurrent_size=8, hidden=(8,), prev_action_input=True, seed=0),
    )
    assert algo.initial_state(3).shape == (3, 10)
    buf = rlcore.ReplayBuffer(2_000, num_envs=2, seed=0)
    cfg = OffPolicyTrainerConfig(max_env_steps=300, collect_env_steps=2, warmup_env_steps=100, utd_ratio=1 / 4,
                                 batch_size=8, n_step=2, seed=0)
    list(RecurrentTrainer(algo, buf, envs, config=cfg))
    assert algo.grad_steps > 0
    h, act, flags = buf.column("h"), buf.column("act"), buf.column("flags")
    trans = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    starts = trans[(flags[trans] & 2) > 0]
    np.testing.assert_array_equal(h[starts, 8:], 0.0)
    inner = trans[(flags[trans] & 2) == 0]
    prev = buf.prev(inner)
    np.testing.assert_array_equal(h[inner, 8:], np.eye(2, dtype=np.float32)[act[prev]])
    batch = buf.sample_sequences(16, 4, burn_in=2, state="h")
    stats = algo.update(batch)
    assert np.isfinite(stats.loss)
