"""DAC (Discriminator-Actor-Critic, :mod:`rlcore.algos.dac`): config checks, the reward relabelling
(the SAC step sees the learned reward and never the env reward), the absorbing value at terminated
rows in its closed form, 1-step batches only, the checkpoint round trip, the CLI run with its
checkpoint, resume, ``load_policy`` and ``export-policy``, and one learning check on Pendulum."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.algos.adversarial import absorbing_reward, learned_reward
from rlcore.algos.dac import DAC, DACConfig, DACStats
from rlcore.algos.sac import SACConfig
from rlcore.batch import TransitionBatch
from rlcore.cli import main
from rlcore.errors import ApiUsageError, InvalidValueError
from rlcore.imitation import dac_settings, record_episodes
from rlcore.policy import load_policy
from rlcore.trainers.off_policy import OffPolicyTrainer

torch.set_num_threads(1)

F32 = np.float32
OBS_SPACE = gym.spaces.Box(-8.0, 8.0, (3,), F32)
ACT_SPACE = gym.spaces.Box(-2.0, 2.0, (1,), F32)
GAMMA = 0.99
B = 32


def swing_up(obs: np.ndarray) -> np.ndarray:
    """A hand-written Pendulum-v1 expert (energy pumping, then a PD hold near the top): about -143
    over 20 episodes, where uniformly random actions get about -1280."""
    c, s, w = obs[:, 0], obs[:, 1], obs[:, 2]
    energy = 0.5 * w**2 + 15.0 * c  # conserved by theta'' = 15 sin(theta) without torque; 15 at the top
    pump = np.clip(0.5 * (15.0 - energy) * np.sign(w + 1e-6), -2.0, 2.0)
    hold = np.clip(-(8.0 * np.arctan2(s, c) + 1.5 * w), -2.0, 2.0)
    return np.where(c > 0.85, hold, pump)[:, None].astype(F32)


def expert_with_terminations() -> rlcore.ReplayBuffer:
    """5 episodes of 10 random transitions; episodes 0, 2 and 4 end terminated, 1 and 3 truncated."""
    rng = np.random.default_rng(0)
    buf = rlcore.ReplayBuffer(100, num_envs=1, seed=0)
    for episode in range(5):
        obs = rng.normal(size=(1, 3)).astype(F32)
        for t in range(10):
            nxt = rng.normal(size=(1, 3)).astype(F32)
            last = t == 9
            term, trunc = last and episode % 2 == 0, last and episode % 2 == 1
            act = rng.uniform(-2, 2, (1, 1)).astype(F32)
            buf.add(obs, act, np.zeros(1, F32), np.array([term]), np.array([trunc]), nxt)
            obs = nxt
    return buf


def make_dac(expert: Any, *, seed: int = 0, **kw: Any) -> DAC:
    config = DACConfig(hidden=(16, 16), disc_batch_size=B, seed=seed, **kw)
    sac = SACConfig(hidden=(16, 16), seed=seed)
    return DAC.from_spaces(OBS_SPACE, ACT_SPACE, expert, config, sac, gamma=GAMMA, device="cpu")


def make_batch(seed: int, *, n_term: int = 0, rew: np.ndarray | None = None, discount: np.ndarray | None = None) -> TransitionBatch:
    """B random 1-step transitions (actions partly outside the bounds); the first ``n_term`` terminated."""
    rng = np.random.default_rng(seed)
    term = np.zeros(B, bool)
    term[:n_term] = True
    return TransitionBatch(
        obs=rng.normal(size=(B, 3)).astype(F32),
        act=rng.uniform(-3, 3, (B, 1)).astype(F32),
        rew=rng.normal(size=B).astype(F32) if rew is None else rew,
        obs_next=rng.normal(size=(B, 3)).astype(F32),
        terminated=term,
        truncated=np.zeros(B, bool),
        discount=(GAMMA * (1.0 - term)).astype(F32) if discount is None else discount,
        indices=np.arange(B, dtype=np.int64),
    )


@pytest.fixture(scope="module")
def expert() -> rlcore.ReplayBuffer:
    return expert_with_terminations()


def capture_generator_batches(dac: DAC) -> list[TransitionBatch]:
    """Record every batch that ``dac.generator.update`` is given."""
    seen: list[TransitionBatch] = []
    update = dac.generator.update

    def spy(batch: TransitionBatch) -> Any:
        seen.append(batch)
        return update(batch)

    dac.generator.update = spy  # type: ignore[method-assign]
    return seen


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "bad",
    [
        {"hidden": (0,)},
        {"lr": 0.0},
        {"lr": float("nan")},
        {"disc_batch_size": 0},
        {"grad_penalty": -1.0},
        {"reward": "airl"},
        {"disc_updates": 0},
        {"policy_share_grad_steps": 0},
    ],
    ids=lambda bad: next(iter(bad)),
)
def test_dac_config_rejects_each_bad_value(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidValueError):
        DACConfig(**bad)


def test_dac_refuses_a_gamma_it_cannot_use(expert: Any) -> None:
    with pytest.raises(InvalidValueError, match="gamma"):
        DAC.from_spaces(OBS_SPACE, ACT_SPACE, expert, DACConfig(hidden=(8,)), gamma=1.5)
    with pytest.raises(InvalidValueError, match="absorbing"):
        DAC.from_spaces(OBS_SPACE, ACT_SPACE, expert, DACConfig(hidden=(8,)), gamma=1.0)


# --------------------------------------------------------------------------- update


def test_the_generator_never_sees_the_env_reward(expert: Any) -> None:
    """Two batches that differ only in the env reward give identical updates."""
    a, b = make_dac(expert), make_dac(expert)
    batch = make_batch(1, n_term=2)
    other = batch._replace(rew=batch.rew * 100.0 + 7.0)
    sa, sb = a.update(batch), b.update(other)
    assert dataclasses.replace(sa, env_reward=0.0) == dataclasses.replace(sb, env_reward=0.0)
    assert sa.env_reward != sb.env_reward
    for pa, pb in zip(params(a.generator.critic) + params(a.generator.actor), params(b.generator.critic) + params(b.generator.actor), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)


def test_update_relabels_with_the_updated_discriminator(expert: Any) -> None:
    """The SAC step is given the batch with ``rew`` = the learned reward of the discriminator after
    this update's step (actions clipped), and everything else as sampled."""
    for form in ("logit", "softplus"):
        dac = make_dac(expert, reward=form, absorbing=False)
        before = params(dac.discriminator)
        seen = capture_generator_batches(dac)
        batch = make_batch(2)
        stats = dac.update(batch)
        assert isinstance(stats, DACStats) and np.isnan(stats.absorbing_reward)
        assert any(not torch.equal(p, q) for p, q in zip(before, params(dac.discriminator), strict=True))
        d = dac.discriminator
        with torch.no_grad():
            act = torch.as_tensor(batch.act).clamp(-2.0, 2.0)
            expected = learned_reward(d.logit(d.features(torch.as_tensor(batch.obs), act)), form)
        (given,) = seen
        torch.testing.assert_close(given.rew, expected)
        assert not torch.allclose(given.rew, torch.as_tensor(batch.rew))
        np.testing.assert_array_equal(given.obs.numpy(), batch.obs)
        np.testing.assert_array_equal(given.discount.numpy(), batch.discount)
        assert stats.learned_reward == pytest.approx(float(expected.mean()), rel=1e-5)


def test_terminated_rows_get_the_closed_form_absorbing_value(expert: Any) -> None:
    """At terminated rows ``rew = r + gamma r_a / (1 - gamma)``, ``r_a`` the reward of
    ``clip(log(s_E / s_pi))`` with the expert's share and the running estimate of the replay's."""
    dac = make_dac(expert)  # reward "logit", absorbing on: DACConfig's defaults
    s_e = dac.expert_absorbing_share
    assert s_e == pytest.approx(3 / (50 + 3))
    seen = capture_generator_batches(dac)
    decay, t_count, r_count = 1.0 - 1.0 / 1000, 0.0, 0.0
    for k, n_term in enumerate((4, 0, 9)):
        stats = dac.update(make_batch(10 + k, n_term=n_term))
        t_count, r_count = decay * t_count + n_term, decay * r_count + B
        share = (t_count + 1) / (r_count + t_count + 2)
        r_a = float(np.log(s_e / share))  # inside the +-10 clip here
        assert stats.policy_absorbing_share == pytest.approx(share)
        assert stats.absorbing_reward == pytest.approx(r_a) == pytest.approx(absorbing_reward(s_e, share, "logit"))
        d = dac.discriminator
        batch = make_batch(10 + k, n_term=n_term)
        with torch.no_grad():
            act = torch.as_tensor(batch.act).clamp(-2.0, 2.0)
            learned = d.logit(d.features(torch.as_tensor(batch.obs), act))
        given = seen[-1].rew
        term = torch.as_tensor(batch.terminated)
        torch.testing.assert_close(given[term], learned[term] + GAMMA * r_a / (1 - GAMMA))
        torch.testing.assert_close(given[~term], learned[~term])


def test_an_expert_that_never_terminates_gives_the_clipped_absorbing_reward() -> None:
    buf, _ = record_episodes(swing_up, "Pendulum-v1", 1, seed=0)
    dac = make_dac(buf)
    assert dac.expert_absorbing_share == 0.0
    stats = dac.update(make_batch(3, n_term=1))
    assert stats.absorbing_reward == -10.0
    assert absorbing_reward(0.0, 0.5, "softplus") == pytest.approx(np.log1p(np.exp(-10.0)))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"discount": np.full(B, GAMMA**3, F32)}, "1-step batches"),  # n_step = 3
        ({"discount": np.full(B, 0.9, F32)}, "gamma=0.99"),  # another gamma
    ],
)
def test_a_batch_that_is_not_one_step_at_dacs_gamma_is_refused(expert: Any, change: dict[str, Any], message: str) -> None:
    dac = make_dac(expert)
    with pytest.raises(ApiUsageError, match=message):
        dac.update(make_batch(4)._replace(**change))


def test_a_batch_smaller_than_the_discriminator_batch_is_refused(expert: Any) -> None:
    dac = make_dac(expert)
    small = TransitionBatch(*(x[: B // 2] for x in make_batch(5)[:8]))
    with pytest.raises(ApiUsageError, match="disc_batch_size"):
        dac.update(small)


def test_state_dict_round_trip_gives_the_same_next_update(expert: Any) -> None:
    dac = make_dac(expert)
    dac.update(make_batch(6, n_term=3))
    state = copy.deepcopy(dac.state_dict())
    after = dac.update(make_batch(7, n_term=1))
    fresh = make_dac(expert, seed=5)  # other weights and streams: all replaced by the state
    fresh.load_state_dict(state)
    assert fresh.update(make_batch(7, n_term=1)) == after
    for p, q in zip(params(dac.discriminator) + params(dac.generator.actor), params(fresh.discriminator) + params(fresh.generator.actor), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


# --------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def pendulum_expert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 episodes (2,000 transitions) of :func:`swing_up`, saved as `rlcore collect-expert` does."""
    buf, returns = record_episodes(swing_up, "Pendulum-v1", 10, seed=0)
    assert np.mean(returns) > -250
    path = tmp_path_factory.mktemp("expert") / "pendulum"
    buf.save(path)
    return path


def test_cli_trains_dac_checkpoints_resumes_and_exports(
    pendulum_expert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = ["train", "--algo", "dac", "--env", "Pendulum-v1", "--expert", str(pendulum_expert), "--out", str(run)]
    assert main([*argv, "--steps", "1200", "--checkpoint-every", "600", "--no-progress"]) == 0
    assert "done: Pendulum-v1 dac" in capsys.readouterr().out
    info = json.loads((run / "config.json").read_text())
    assert info["algo_config"]["disc_batch_size"] == 256 and info["sac_config"]["seed"] == 0
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [row for row in lines if "train/disc_loss" in row]
    assert trained and {"train/learned_reward", "train/env_reward", "train/critic_loss"} <= set(trained[-1])
    assert any("eval/return_mean" in row for row in lines)
    # Resume the finished run to a larger budget.
    assert main([*argv, "--steps", "1400", "--resume", "--no-progress"]) == 0
    capsys.readouterr()
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(row.get("time/env_steps", 0) for row in lines) == 1400
    # The acting network is the SAC actor: load_policy, export-policy and the file agree.
    policy = load_policy(run)
    assert policy.algo == "dac" and type(policy.algorithm).__name__ == "SAC"
    obs = np.array([1.0, 0.0, 0.5], F32)
    assert main(["export-policy", str(run), str(tmp_path / "dac.npz")]) == 0
    from_file = load_policy(tmp_path / "dac.npz")
    np.testing.assert_array_equal(policy(obs), from_file(obs))
    assert main(["enjoy", str(tmp_path / "dac.npz"), "--episodes", "1"]) == 0


def test_dac_on_a_discrete_env_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    buf, _ = record_episodes(lambda o: np.zeros(len(o), np.int64), "CartPole-v1", 1, seed=0)
    buf.save(tmp_path / "data")
    argv = ["train", "--algo", "dac", "--env", "CartPole-v1", "--expert", str(tmp_path / "data"), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "dac needs a Box action space" in capsys.readouterr().err


# --------------------------------------------------------------------------- learning


def test_dac_learns_pendulum_from_a_hand_written_expert(pendulum_expert: Path) -> None:
    """The Pendulum preset (``dac_settings``: SAC's Pendulum schedule, 1k random steps, one update
    of 256 1-step transitions per env step) with 128-wide networks instead of 256 (3x cheaper; ~90 s
    on a loaded 2-core machine), from 2,000 expert transitions (the expert: about -143; uniformly
    random actions: about -1280). Measured (5 eval envs, 10 episodes, every 1k env steps): seed 0
    -1101, -1309, -1265, -233 at 1k-4k; seed 1 -1386, -1253, -1202, -826, -232 at 1k-5k; with the
    256-wide preset, seed 0 -168 at 4k and -170 at 5k."""
    s = dac_settings("Pendulum-v1", steps=5_000, seed=0)
    envs = gym.make_vec("Pendulum-v1", num_envs=1, vectorization_mode="sync")
    eval_envs = gym.make_vec("Pendulum-v1", num_envs=5, vectorization_mode="sync")
    expert = rlcore.ReplayBuffer.load(pendulum_expert)
    torch.manual_seed(0)
    dac = DAC.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        expert,
        dataclasses.replace(s.dac, hidden=(128, 128)),
        dataclasses.replace(s.sac, hidden=(128, 128)),
        gamma=s.trainer.gamma,
        device="cpu",
    )
    trainer = OffPolicyTrainer(
        dac, rlcore.ReplayBuffer(s.capacity, num_envs=1, seed=0), envs, config=s.trainer, eval_envs=eval_envs
    )
    evals = [stats.eval.return_mean for stats in trainer if stats.eval is not None]
    assert len(evals) == 5 and max(evals[-2:]) > -700, evals
