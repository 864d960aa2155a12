"""Runs that survive a stop and several seeds at once: periodic and on-signal checkpoints, exact
resume (evaluations included), independent random streams per algorithm (zip), a failed load that
changes nothing, ``--seeds`` and ``rlcore plot`` over several runs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import rlcore.envs  # registers rlcore/CartPoleNoVel-v1
import torch
from rlcore.algos import (
    A2C,
    DDPG,
    DQN,
    PPO,
    SAC,
    TD3,
    VPG,
    A2CConfig,
    DDPGConfig,
    DQNConfig,
    PPOConfig,
    SACConfig,
    TD3Config,
    VPGConfig,
)
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL, GAILConfig
from rlcore.algos.r2d2 import R2D2, R2D2Config
from rlcore.cli import main
from rlcore.errors import CheckpointError
from rlcore.stats import flatten_stats
from rlcore.trainers import (
    OfflineTrainer,
    OfflineTrainerConfig,
    OffPolicyTrainer,
    OffPolicyTrainerConfig,
    OnPolicyTrainer,
    OnPolicyTrainerConfig,
    RecurrentTrainer,
)
from rlcore.trainers.signals import RunInterrupted, StopSignals

torch.set_num_threads(1)


def vec(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")


def expert_data() -> rlcore.ReplayBuffer:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    done = np.zeros(64, bool)
    done[-1] = True
    act = (obs[:, 2] > 0).astype(np.int64)
    return rlcore.ReplayBuffer.from_arrays(obs, act, np.ones(64, np.float32), done, np.zeros(64, bool), obs, seed=0)


def _off_policy(make_algo: Callable[[Any, Any, int], Any], env_id: str, seed: int, **cfg: Any) -> OffPolicyTrainer:
    envs = vec(env_id, 2)
    algo = make_algo(envs.single_observation_space, envs.single_action_space, seed)
    config = OffPolicyTrainerConfig(
        **{"collect_env_steps": 20, "batch_size": 16, "warmup_env_steps": 40, "utd_ratio": 0.5, "eval_every": 2,
           "eval_episodes": 1, "seed": seed, "max_env_steps": 200, **cfg}
    )
    buffer = rlcore.ReplayBuffer(1_000, num_envs=2, seed=seed)
    return OffPolicyTrainer(algo, buffer, envs, config=config, eval_envs=vec(env_id, 1))


def _on_policy(make_algo: Callable[[Any, Any, int], Any], env_id: str, seed: int, **cfg: Any) -> OnPolicyTrainer:
    envs = vec(env_id, 2)
    algo = make_algo(envs.single_observation_space, envs.single_action_space, seed)
    config = OnPolicyTrainerConfig(
        **{"num_steps": 16, "eval_every": 2, "eval_episodes": 1, "seed": seed, "max_env_steps": 192, **cfg}
    )
    return OnPolicyTrainer(algo, envs, config=config, eval_envs=vec(env_id, 1))


def make_trainer(name: str, seed: int, **cfg: Any) -> Any:
    """A small trainer of algorithm ``name`` built the way a user would (torch.manual_seed first:
    the global generator must not matter afterwards)."""
    torch.manual_seed(seed)
    if name == "dqn":
        return _off_policy(lambda o, a, s: DQN.from_spaces(o, a, DQNConfig(hidden=(16,), seed=s), device="cpu"), "CartPole-v1", seed, **cfg)
    if name == "ddpg":
        return _off_policy(lambda o, a, s: DDPG.from_spaces(o, a, DDPGConfig(hidden=(16,), seed=s), device="cpu"), "Pendulum-v1", seed, **cfg)
    if name == "td3":
        return _off_policy(lambda o, a, s: TD3.from_spaces(o, a, TD3Config(hidden=(16,), seed=s), device="cpu"), "Pendulum-v1", seed, **cfg)
    if name == "sac":
        return _off_policy(lambda o, a, s: SAC.from_spaces(o, a, SACConfig(hidden=(16,), seed=s), device="cpu"), "Pendulum-v1", seed, **cfg)
    if name == "ppo":
        return _on_policy(lambda o, a, s: PPO.from_spaces(o, a, PPOConfig(n_epochs=1, minibatch_size=16, seed=s), num_envs=2, device="cpu"), "Pendulum-v1", seed, **cfg)
    if name == "a2c":
        return _on_policy(lambda o, a, s: A2C.from_spaces(o, a, A2CConfig(), num_envs=2, device="cpu"), "CartPole-v1", seed, **cfg)
    if name == "vpg":
        return _on_policy(lambda o, a, s: VPG.from_spaces(o, a, VPGConfig(), num_envs=2, device="cpu"), "CartPole-v1", seed, **cfg)
    if name == "r2d2":
        envs = vec("rlcore/CartPoleNoVel-v1", 2)
        r2d2 = R2D2.from_spaces(
            envs.single_observation_space, envs.single_action_space,
            R2D2Config(burn_in=2, seq_len=4, hidden=(8,), recurrent_size=8, target_update_interval=5, seed=seed),
            device="cpu",
        )
        config = OffPolicyTrainerConfig(
            **{"collect_env_steps": 20, "utd_ratio": 0.25, "batch_size": 4, "n_step": 2, "eval_every": 2,
               "eval_episodes": 1, "seed": seed, "max_env_steps": 200, **cfg}
        )
        buffer = rlcore.PrioritizedReplayBuffer(500, num_envs=2, seed=seed)
        return RecurrentTrainer(r2d2, buffer, envs, config=config, eval_envs=vec("rlcore/CartPoleNoVel-v1", 1))
    if name == "bc":
        env = gym.make("CartPole-v1")
        bc = BC.from_spaces(env.observation_space, env.action_space, BCConfig(hidden=(8,)))
        horizon = {"max_grad_steps": cfg.pop("max_env_steps", 40)} if "max_grad_steps" not in cfg else {}
        config = OfflineTrainerConfig(
            **{"grad_steps_per_iteration": 5, "batch_size": 16, "eval_every": 2, "eval_episodes": 1, "seed": seed,
               **horizon, **cfg}
        )
        expert = expert_data()
        return OfflineTrainer(bc, expert, config=config, eval_envs=vec("CartPole-v1", 1))
    if name == "gail":
        envs = vec("CartPole-v1", 2)
        gail = GAIL.from_spaces(
            envs.single_observation_space, envs.single_action_space, expert_data(),
            GAILConfig(disc_updates=2, disc_batch_size=32, grad_penalty=1.0, seed=seed),
            PPOConfig(n_epochs=1, minibatch_size=32, seed=seed), num_envs=2, device="cpu",
        )
        config = OnPolicyTrainerConfig(
            **{"num_steps": 32, "eval_every": 2, "eval_episodes": 1, "seed": seed, "max_env_steps": 320, **cfg}
        )
        return OnPolicyTrainer(gail, envs, config=config, eval_envs=vec("CartPole-v1", 1), reward_fn=gail.reward)
    raise AssertionError(name)


ALGOS = ["dqn", "ddpg", "td3", "sac", "ppo", "a2c", "vpg", "r2d2", "bc", "gail"]


def row(stats: Any) -> dict[str, float]:
    """Every metric of an iteration but the wall-clock timings."""
    return {k: v for k, v in flatten_stats(stats).items() if not k.startswith("time/") or k in ("time/env_steps", "time/grad_steps")}


# --------------------------------------------------------------------------- independent seeds


@pytest.mark.parametrize("name", ALGOS)
def test_zipped_trainers_give_bit_for_bit_what_each_gives_alone(name: str) -> None:
    """Two trainers of different seeds advanced side by side never touch each other's random
    streams: each one's stats equal, bit for bit, its stats when run alone (on the CPU)."""
    alone = [row(s) for s in make_trainer(name, 0)]
    a, b = make_trainer(name, 0), make_trainer(name, 1)
    zipped = [(row(x), row(y)) for x, y in zip(a, b, strict=True)]
    assert [x for x, _ in zipped] == alone
    assert [y for _, y in zipped] != alone  # two different runs
    assert any(r.get("eval/return_mean") is not None for r in alone)


def test_the_issue_repro_sac_critic_losses_alone_and_zipped() -> None:
    """The report's case: a seed-0 SAC run's critic losses do not change when a seed-1 run is
    zipped beside it (the global torch generator is seeded by each ``make`` in between)."""

    def make(seed: int) -> OffPolicyTrainer:
        torch.manual_seed(seed)
        envs = gym.make_vec("Pendulum-v1", num_envs=1, vectorization_mode="sync")
        agent = SAC.from_spaces(envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(32, 32), seed=seed))
        return OffPolicyTrainer(agent, rlcore.ReplayBuffer(10_000, seed=seed), envs, config=OffPolicyTrainerConfig(
            max_env_steps=300, collect_env_steps=10, warmup_env_steps=100, seed=seed))

    alone = [s.train.critic_loss for s in make(0) if s.train]
    a, b = make(0), make(1)
    zipped = [sa.train.critic_loss for sa, sb in zip(a, b, strict=True) if sa.train]
    assert alone == zipped and len(alone) >= 5


# --------------------------------------------------------------------------- exact resume


@pytest.mark.parametrize("name", ["sac", "ppo", "gail", "bc"])
def test_a_run_stopped_at_its_horizon_and_resumed_gives_every_metric_of_the_uninterrupted_run(
    name: str, tmp_path: Path
) -> None:
    """The report's case: a run that ends at a smaller horizon (and so evaluates at its last
    iteration) and is resumed to the full one writes every metric line of the uninterrupted run
    after the stop, evaluations included."""
    full, part = (40, 20) if name == "bc" else (320, 160)
    key = "max_grad_steps" if name == "bc" else "max_env_steps"
    straight = [row(s) for s in make_trainer(name, 3, **{key: full})]
    first = make_trainer(name, 3, **{key: part})
    first_rows = [row(s) for s in first]
    assert first_rows[-1].get("eval/return_mean") is not None  # the stop evaluated
    first.save_checkpoint(tmp_path / "ckpt")
    torch.manual_seed(999)  # disturb the global generators: resume must not depend on them
    np.random.seed(999)  # noqa: NPY002
    resumed = make_trainer(name, 3, **{key: full})
    resumed.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    after = [row(s) for s in resumed]
    assert after == straight[len(first_rows):]
    assert sum(r.get("eval/return_mean") is not None for r in after) >= 2


@pytest.mark.parametrize("name", ["sac", "dqn", "ppo", "gail", "bc"])
def test_run_with_a_checkpoint_dir_saves_every_checkpoint_every_and_resumes_exactly(name: str, tmp_path: Path) -> None:
    """``run(checkpoint_dir=)`` writes a checkpoint whenever the progress passes a multiple of
    ``checkpoint_every`` and at the end; a trainer resumed from a periodic one (its later lines
    thrown away, as after kill -9) continues with the uninterrupted run's metrics."""
    every = 10 if name == "bc" else 100
    horizon = {"max_grad_steps": 40} if name == "bc" else {"max_env_steps": 320}
    trainer = make_trainer(name, 5, checkpoint_every=every, **horizon)
    progress = "grad_steps" if name == "bc" else "env_steps"
    saves: list[int] = []
    lines: list[dict[str, float]] = []
    save = trainer.save_checkpoint

    def spy(path: Any) -> Any:
        saves.append(getattr(trainer, progress))
        if len(saves) == 2:
            save(tmp_path / "second")
        return save(path)

    class Sink:
        def write(self, stats: Any) -> None:
            lines.append(row(stats))

        def close(self) -> None:
            pass

    trainer.save_checkpoint = spy  # type: ignore[method-assign]
    last = trainer.run(Sink(), checkpoint_dir=tmp_path / "ckpt")
    assert last is not None and trainer.done
    crossings = [s for s in saves[:-1]]
    assert saves[-1] == getattr(trainer, progress)  # the one at the end
    assert len(crossings) == len({s // every for s in crossings}) >= 2  # one per multiple passed
    assert all(s // every > p // every for p, s in zip([0, *crossings], crossings, strict=False))
    resumed = make_trainer(name, 5, checkpoint_every=every, **horizon)
    resumed.load_checkpoint(tmp_path / "second", trust_env_state=True)
    done_before = resumed.iteration
    assert [row(s) for s in resumed] == lines[done_before:]


def test_a_signal_during_run_checkpoints_after_the_iteration_and_raises_run_interrupted(tmp_path: Path) -> None:
    trainer = make_trainer("sac", 0, max_env_steps=400)
    seen: list[int] = []

    class Sink:
        def write(self, stats: Any) -> None:
            seen.append(stats.env_steps)
            if stats.iteration == 3:
                os.kill(os.getpid(), signal.SIGTERM)  # delivered to the handler run() installed

        def close(self) -> None:
            pass

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as exc:
        trainer.run(Sink(), checkpoint_dir=tmp_path / "ckpt")
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    assert exc.value.signum == signal.SIGTERM and exc.value.env_steps == 60 == seen[-1]
    assert isinstance(exc.value, KeyboardInterrupt)
    resumed = make_trainer("sac", 0, max_env_steps=400)
    resumed.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    assert (resumed.iteration, resumed.env_steps, len(resumed.buffer)) == (3, 60, len(trainer.buffer))


def test_a_second_signal_aborts_at_once() -> None:
    """The second SIGINT goes to the handler that was there before (Python's default, which raises
    KeyboardInterrupt; set here because a shell's background job starts with SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with StopSignals() as signals:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            assert signals.caught == signal.SIGINT
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


# --------------------------------------------------------------------------- a failed load


def test_a_checkpoint_of_another_network_shape_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    saved = make_trainer("sac", 0, max_env_steps=200)
    for s in saved:
        if s.iteration == 4:
            break
    saved.save_checkpoint(tmp_path / "ckpt")
    torch.manual_seed(1)
    envs = vec("Pendulum-v1", 2)
    other = OffPolicyTrainer(
        SAC.from_spaces(envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(32, 32), seed=1), device="cpu"),
        rlcore.ReplayBuffer(1_000, num_envs=2, seed=1), envs,
        config=OffPolicyTrainerConfig(collect_env_steps=20, batch_size=16, warmup_env_steps=40, max_env_steps=200),
        eval_envs=vec("Pendulum-v1", 1),
    )
    next(other)
    state = {k: v.clone() for k, v in other.algorithm.actor.state_dict().items()}
    counters = (other.iteration, other.env_steps, other.grad_steps, len(other.buffer))
    obs = other.collector.stepper.obs.copy() if hasattr(other.collector, "stepper") else None
    torch_state = torch.get_rng_state()
    with pytest.raises(CheckpointError, match="does not fit this trainer's SAC"):
        other.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    assert (other.iteration, other.env_steps, other.grad_steps, len(other.buffer)) == counters
    assert all(torch.equal(state[k], v) for k, v in other.algorithm.actor.state_dict().items())
    assert torch.equal(torch.get_rng_state(), torch_state)
    if obs is not None:
        np.testing.assert_array_equal(other.collector.stepper.obs, obs)
    assert next(other).iteration == 2  # it goes on as if nothing had happened


# --------------------------------------------------------------------------- the command line


def _cli(*argv: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rlcore.cli", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _counters(ckpt: Path) -> dict[str, Any]:
    manifest = json.loads((ckpt / "checkpoint.json").read_text())
    return json.loads((ckpt / manifest["data_dir"] / "counters.json").read_text())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_dqn_repro_leaves_a_checkpoint_at_a_signal_and_resume_continues_it(signum: int, tmp_path: Path) -> None:
    """``rlcore train`` stopped by SIGINT or SIGTERM writes RUN_DIR/checkpoint (with the buffer)
    before it exits with 128 + the signal, and says how to continue; ``--resume`` continues it."""
    base = ["train", "--algo", "dqn", "--env", "CartPole-v1", "--seed", "0", "--no-progress", "--out", "run"]
    proc = _cli(*base, "--steps", "200000", cwd=tmp_path)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.exists() and metrics.read_text().count("\n") >= 3) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    assert f"stopped by {signal.Signals(signum).name}" in err and "--resume" in err
    ckpt = tmp_path / "run" / "checkpoint"
    stopped_at = _counters(ckpt)["env_steps"]
    assert stopped_at > 0
    proc = _cli(*base, "--steps", str(stopped_at + 1024), "--resume", cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"done: CartPole-v1 dqn env_steps={stopped_at + 1024}" in out
    assert "continuing the run" in out
    steps = [json.loads(line)["time/env_steps"] for line in metrics.read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == stopped_at + 1024
    assert _counters(ckpt)["env_steps"] == stopped_at + 1024


def test_seeds_run_resume_skips_finished_ones_and_plot_draws_them_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "600", "--warmup-env-steps", "100",
            "--seeds", "0-1", "--jobs", "2", "--out", str(tmp_path / "sweep"), "--no-progress"]
    assert main(argv) == 0
    for seed in (0, 1):
        run = tmp_path / "sweep" / f"s{seed}"
        assert _counters(run / "checkpoint")["env_steps"] == 600
        config = json.loads((run / "config.json").read_text())
        assert config["args"]["seed"] == seed and config["args"]["seeds"] is None
        assert config["command"].split().count("--no-progress") == 1  # was added again for quiet seeds
    finals = [json.loads((tmp_path / "sweep" / f"s{s}" / "metrics.jsonl").read_text().splitlines()[-1]) for s in (0, 1)]
    assert finals[0]["eval/return_mean"] != finals[1]["eval/return_mean"]
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0
    assert capsys.readouterr().out.count("finished before") == 2
    assert main(["plot", str(tmp_path / "sweep" / "s0"), str(tmp_path / "sweep" / "s1")]) == 0
    out = capsys.readouterr().out
    assert "| mean ± std (2 runs) |" in out and "| IQM |" in out
    with open(tmp_path / "sweep" / "eval_return_mean.csv") as f:
        table = list(csv.DictReader(f))
    assert [int(r["step"]) for r in table] == [600]  # Pendulum evaluates every 1,000 steps and at the end
    mean = np.mean([finals[0]["eval/return_mean"], finals[1]["eval/return_mean"]])
    assert float(table[-1]["mean"]) == pytest.approx(mean, abs=1e-3)
    assert float(table[-1]["ci_low"]) <= mean <= float(table[-1]["ci_high"])
    assert (tmp_path / "sweep" / "eval_return_mean.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "0-1", "--seed", "3"], "--seed and --seeds exclude each other"),
        (["--jobs", "2"], "--jobs needs --seeds"),
        (["--seeds", "0-1", "--resume", "x/checkpoint"], "with --seeds, --resume takes no value"),
        (["--resume"], "no checkpoint in"),
    ],
)
def test_seeds_flags_are_checked_in_one_line(argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--algo", "sac", "--env", "Pendulum-v1", "--out", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcore: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("text", ["4-2", "a", "1,1", "-1"])
def test_bad_seed_lists_are_argparse_errors(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--algo", "sac", "--env", "Pendulum-v1", f"--seeds={text}"])
    assert "--seeds" in capsys.readouterr().err
