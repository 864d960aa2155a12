"""``rlcore train --algo {td3bc,iql,cql} --dataset ...`` on a tiny D4RL-format file, and
``--expert`` of bc accepting such a file."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from rlcore.cli import main
from rlcore.cli.offline import normalized_scores

pytest.importorskip("h5py")


@pytest.fixture(scope="module")
def d4rl_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rlcore.datasets import write_d4rl

    env = gym.make("Pendulum-v1", max_episode_steps=100)
    env.action_space.seed(0)
    rows: dict[str, list[object]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc")}
    obs, _ = env.reset(seed=0)
    for _ in range(400):
        act = env.action_space.sample()
        nxt, rew, term, trunc, _ = env.step(act)
        for k, v in zip(rows, (obs, act, rew, term, trunc), strict=True):
            rows[k].append(v)
        obs = env.reset()[0] if term or trunc else nxt
    a = {k: np.asarray(v) for k, v in rows.items()}
    path = tmp_path_factory.mktemp("data") / "pendulum-random.hdf5"
    return write_d4rl(
        path,
        obs=a["obs"].astype(np.float32),
        act=a["act"].astype(np.float32),
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
    )


@pytest.mark.parametrize("algo", ["td3bc", "iql", "cql"])
def test_train_offline_algorithm_on_a_d4rl_file(algo: str, d4rl_file: Path, tmp_path: Path) -> None:
    out = tmp_path / algo
    argv = ["train", "--algo", algo, "--dataset", str(d4rl_file), "--env", "Pendulum-v1", "--steps", "20"]
    argv += ["--ref-returns", "-1500", "-150", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["reference_returns"] == [-1500.0, -150.0]
    assert config["dataset_transitions"] == 396  # 400 steps, the 4 timed-out last steps left out
    ((steps, ret, score),) = normalized_scores(out)
    assert steps == 20 and score == pytest.approx(100 * (ret + 1500) / 1350)


def _exit_code(argv: list[str]) -> object:
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_offline_algorithms_need_a_dataset_and_only_they_take_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["train", "--algo", "iql", "--env", "Pendulum-v1"]) not in (0, None)
    assert "needs --dataset" in capsys.readouterr().err
    assert _exit_code(["train", "--algo", "sac", "--env", "Pendulum-v1", "--dataset", "x.hdf5"]) not in (
        0,
        None,
    )
    assert "--dataset does not apply to --algo sac" in capsys.readouterr().err


def test_a_malformed_dataset_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\nnot really")
    code = None
    try:
        code = main(
            ["train", "--algo", "td3bc", "--dataset", str(bad), "--env", "Pendulum-v1", "--steps", "5"]
        )
    except SystemExit as e:
        code = e.code
    assert code not in (0, None)
    assert "--dataset" in capsys.readouterr().err


def test_bc_expert_accepts_a_d4rl_file(d4rl_file: Path, tmp_path: Path) -> None:
    argv = ["train", "--algo", "bc", "--expert", str(d4rl_file), "--env", "Pendulum-v1", "--steps", "20"]
    assert main([*argv, "--no-progress", "--out", str(tmp_path / "bc")]) == 0
