"""`rlcore train --backend envpool [--async-batch B]`: short runs and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from rlcore.cli import main

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "--async-batch", "2", "--num-envs", "4"],
            "gymnasium vector envs step all",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "--backend", "envpool", "--distributed"],
            "not --distributed",
        ),
        (
            [
                "--algo",
                "sac",
                "--env",
                "Pendulum-v1",
                "--backend",
                "envpool",
                "--num-envs",
                "4",
                "--async-batch",
                "3",
            ],
            "multiple of it",
        ),
    ],
    ids=["gymnasium_partial", "distributed", "indivisible"],
)
def test_backend_flags_refuse_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "envpool" in argv and "--distributed" not in argv:
        pytest.importorskip("envpool")
    assert main(["train", *argv, "--steps", "10", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "argv",
    [
        ["--algo", "ppo", "--env", "CartPole-v1", "--steps", "600"],
        ["--algo", "sac", "--env", "Pendulum-v1", "--steps", "300", "--num-envs", "4", "--async-batch", "2"],
        ["--algo", "ppo", "--env", "CartPole-v1", "--steps", "600", "--num-envs", "4", "--async-batch", "2"],
    ],
    ids=["ppo_lock_step", "sac_async", "ppo_async"],
)
def test_train_runs_on_envpool(argv: list[str], tmp_path: Path) -> None:
    pytest.importorskip("envpool")
    out = tmp_path / "run"
    assert (
        main(["train", *argv, "--backend", "envpool", "--out", str(out), "--no-progress", "--device", "cpu"])
        == 0
    )
    config = json.loads((out / "config.json").read_text())
    assert config["args"]["backend"] == "envpool"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and max(r.get("time/env_steps", 0) for r in rows) >= int(argv[argv.index("--steps") + 1])
