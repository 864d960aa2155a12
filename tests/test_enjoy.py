"""A trained agent, used: ``rlcore.load_policy(RUN_DIR)`` (one observation or a batch, numpy in and
out, any algorithm of ``rlcore train``) and ``rlcore enjoy RUN_DIR`` (the evaluation protocol of the
trainers: it reproduces a run's own evaluation line, and records videos)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.cli import main
from rlcore.trainers.loop import eval_seed


def _train(tmp_path_factory: pytest.TempPathFactory, *argv: str) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["train", *argv, "--out", str(out), "--no-progress", "--checkpoint-every", "0"]) == 0
    return out


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1024")


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(
        tmp_path_factory, "--algo", "sac", "--env", "Pendulum-v1", "--steps", "300", "--warmup-env-steps", "100"
    )


def _last_eval(run: Path) -> dict[str, float]:
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if "eval/return_mean" in x][-1]


def test_enjoy_reproduces_the_runs_own_last_evaluation(ppo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same policy, same protocol: ``rlcore enjoy`` with the seed and env count of the run's last
    evaluation prints that evaluation's mean and std."""
    last = _last_eval(ppo_run)
    seed = eval_seed(0, int(last["time/iteration"]))
    capsys.readouterr()
    argv = ["enjoy", str(ppo_run), "--episodes", str(int(last["eval/episodes"])), "--num-envs", "5", "--seed", str(seed)]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    m = re.match(r"CartPole-v1 ppo: return (-?[\d.]+) ± ([\d.]+) over (\d+) episodes", out[0])
    assert m, out[0]
    assert float(m.group(1)) == pytest.approx(last["eval/return_mean"], abs=0.006)
    assert float(m.group(2)) == pytest.approx(last["eval/return_std"], abs=0.006)
    assert int(m.group(3)) == last["eval/episodes"]


def test_load_policy_acts_on_one_observation_or_a_batch(ppo_run: Path, sac_run: Path) -> None:
    policy = rlcore.load_policy(ppo_run)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    act = policy(obs)
    assert isinstance(act, np.integer | np.ndarray) and np.ndim(act) == 0
    assert env.action_space.contains(int(act))
    batch = np.stack([obs, obs * 0.5, -obs])
    acts = policy(batch)
    assert acts.shape == (3,) and acts.dtype == np.int64
    assert [int(policy(o)) for o in batch] == acts.tolist()  # deterministic, row by row the same

    policy = rlcore.load_policy(sac_run)
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    act = policy(obs)
    assert act.shape == (1,) and act.dtype == np.float32 and env.action_space.contains(act)
    acts = policy(np.stack([obs] * 4))
    assert acts.shape == (4, 1)
    np.testing.assert_allclose(acts[0], act, rtol=1e-5)  # a batch of one and of four: same rounding or nearly
    assert np.all(np.abs(acts) <= 2.0)  # clipped to the Box
    env.step(act)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_load_policy_on_the_gpu_takes_and_gives_numpy(sac_run: Path) -> None:
    cpu, gpu = rlcore.load_policy(sac_run), rlcore.load_policy(sac_run, device="cuda")
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    a_cpu, a_gpu = cpu(obs), gpu(obs)
    assert isinstance(a_gpu, np.ndarray) and a_gpu.shape == (8, 1)
    np.testing.assert_allclose(a_gpu, a_cpu, atol=1e-4)


def test_load_policy_of_a_goal_env_run_takes_dict_observations(tmp_path_factory: pytest.TempPathFactory) -> None:
    import rlcore.envs  # noqa: F401 - registers rlcore/PointGoal-v0

    run = _train(tmp_path_factory, "--algo", "ddpg", "--env", "rlcore/PointGoal-v0", "--her", "--steps", "200")
    policy = rlcore.load_policy(run)
    env = gym.make("rlcore/PointGoal-v0")
    obs, _ = env.reset(seed=0)
    act = policy(obs)
    assert act.shape == env.action_space.shape and env.action_space.contains(act)
    batch = {k: np.stack([v, v]) for k, v in obs.items()}
    assert policy(batch).shape == (2, *env.action_space.shape)


def test_enjoy_records_a_video_per_episode(sac_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("moviepy", "pygame"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs the video extra ({module} is not installed)")
    videos = tmp_path / "videos"
    assert main(["enjoy", str(sac_run), "--episodes", "2", "--video", str(videos)]) == 0
    files = sorted(videos.glob("*.mp4"))
    assert [f.name for f in files] == ["Pendulum-v1-sac-episode-0.mp4", "Pendulum-v1-sac-episode-1.mp4"]
    assert all(f.stat().st_size > 1000 for f in files)
    assert "videos: 2 MP4 files in" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enjoy", "{tmp}"], "is not a run directory of `rlcore train`"),
        (["enjoy", "{run}", "--video", "{tmp}/v", "--num-envs", "2"], "--video records one env"),
    ],
)
def test_enjoy_mistakes_are_one_line(
    argv: list[str], message: str, sac_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.format(tmp=tmp_path, run=sac_run) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlcore: error: ") and message in err[0], err


def test_enjoy_refuses_a_bad_episode_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["enjoy", "runs/x", "--episodes", "0"])
    assert e.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err
