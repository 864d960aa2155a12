"""`rlcore` CLI: one-line errors, a short training run, logging files and `rlcore plot`."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import runpy
import sys
from pathlib import Path

import pytest
import torch
from rlcore.cli import main

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--algo", "sac", "--env", "NoSuchEnv-v0"], "unknown environment 'NoSuchEnv-v0'"),
        (["train", "--algo", "dqn", "--env", "Pendulum-v1"], "dqn needs a Discrete action space"),
        (["train", "--algo", "sac", "--env", "CartPole-v1"], "sac needs a Box action space"),
        (["train", "--algo", "sac", "--env", "Pendulum-v1", "--her"], "--her needs a goal env"),
        (
            ["train", "--algo", "sac", "--env", "Pendulum-v1", "--device", "nodevice"],
            "--device 'nodevice' is not usable",
        ),
        (["plot", "/nonexistent/run"], "no metrics.jsonl in /nonexistent/run"),
    ],
)
def test_bad_arguments_give_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcore: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--algo", "reinforce++", "--env", "Pendulum-v1"],
        ["train", "--env", "Pendulum-v1"],
        ["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "many"],
        ["train", "--algo", "sac", "--env", "Pendulum-v1", "--n-step", "0"],
        ["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "-5"],
        ["fly"],
    ],
)
def test_argparse_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcore: error: ") and err.count("\n") == 1


def test_train_writes_run_dir_and_plot_draws_curves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "1200", "--out", str(out)]
    assert main([*argv, "--no-progress", "--device", "cpu"]) == 0
    stdout = capsys.readouterr().out
    assert "done: Pendulum-v1 sac env_steps=1200 eval/return_mean=" in stdout
    config = json.loads((out / "config.json").read_text())
    assert config["trainer_config"]["max_env_steps"] == 1200 and config["device"] == "cpu"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(k.split("/")[0] in {"rollout", "train", "eval", "time"} for r in rows for k in r)
    assert any("eval/return_mean" in r for r in rows) and any("train/critic_loss" in r for r in rows)
    assert any(p.name.startswith("events.out.tfevents") for p in (out / "tb").iterdir())
    assert (out / "checkpoint" / "checkpoint.json").is_file()
    assert main(["plot", str(out)]) == 0
    # a namespace gets a PNG when one of its metrics changes; in 1,200 steps train/ is logged once
    # (updates start at 1,000), so it has only constants and no train.png (rlcore.logging.plot_run)
    from rlcore.logging import learning_curves

    for c in learning_curves(out):
        png = out / f"{c.namespace}.png"
        if c.drawn:
            assert png.stat().st_size > 1000, c.namespace
        else:
            assert not png.exists() and c.constant, c.namespace
    assert (out / "rollout.png").is_file() and (out / "eval.png").is_file()


def test_dqn_with_nstep_and_prioritized_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "train",
        "--algo",
        "dqn",
        "--env",
        "CartPole-v1",
        "--steps",
        "1500",
        "--n-step",
        "3",
        "--prioritized",
    ]
    assert main([*argv, "--out", str(tmp_path / "dqn"), "--no-progress", "--device", "cpu"]) == 0
    assert "done: CartPole-v1 dqn" in capsys.readouterr().out
    # the CartPole preset anneals the learning rate to 0 over the run's --steps
    config = json.loads((tmp_path / "dqn" / "config.json").read_text())
    assert config["algo_config"]["lr_anneal_env_steps"] == 1500


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _has(module: str) -> bool:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            importlib.import_module(module)
    except ImportError:
        return False
    return True


def run_example(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [name, *argv])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


@pytest.mark.parametrize(
    ("name", "argv", "needs"),
    [
        ("pendulum_sac.py", ["--steps", "1100", "--n-step", "3", "--prioritized"], None),
        ("cartpole_dqn.py", ["--steps", "1300", "--dueling"], None),
        ("ppo.py", ["--env", "CartPole-v1", "--steps", "600"], None),
        ("ppo.py", ["--env", "Pendulum-v1", "--steps", "2048"], None),
        ("halfcheetah_sac.py", ["--steps", "300", "--checkpoint-every", "100"], "mujoco"),
        ("fetch_her.py", ["--algo", "ddpg", "--steps", "200"], "gymnasium_robotics"),
        ("fetch_her.py", ["--algo", "sac", "--steps", "200"], "gymnasium_robotics"),
    ],
)
def test_examples_run_short(
    name, argv, needs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    if needs is not None and not _has(needs):
        pytest.skip(f"needs {needs}")
    run_example(
        name, [*argv, "--no-progress", "--device", "cpu", "--out", str(tmp_path / "run")], monkeypatch
    )
    out = capsys.readouterr().out
    assert "final" in out


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_imports_and_answers_help(name: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Each example's imports resolve and its parser builds (an example that fails at import is
    broken for every user, and most examples are too long to run in the suite)."""
    with pytest.raises(SystemExit) as exit_info:
        run_example(name, ["--help"], monkeypatch)
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_gail_example_trains_an_expert_records_it_and_runs_bc_and_gail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """``examples/gail.py`` end to end on CartPole, shortened (its import of ``collect_expert`` once
    broke unnoticed: no test ran the GAIL examples)."""
    argv = ["--env", "CartPole-v1", "--steps", "2048", "--expert-steps", "1000", "--episodes", "3",
            "--expert", str(tmp_path / "expert"), "--checkpoint", str(tmp_path / "expert-run"),
            "--no-progress", "--out", str(tmp_path / "run")]  # fmt: skip
    run_example("gail.py", argv, monkeypatch)
    out = capsys.readouterr().out
    assert "expert: return" in out and "3 episodes" in out
    assert "BC: eval return" in out and "GAIL: final eval return" in out
    assert (tmp_path / "expert" / "manifest.json").is_file() and (tmp_path / "run" / "metrics.jsonl").is_file()


@pytest.mark.skipif(not _has("gymnasium_robotics"), reason="needs gymnasium-robotics and mujoco<3.12")
def test_fetchreach_ddpg_her_learns_in_2000_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The main job, shortened: DDPG+HER on FetchReach-v4 (seed 0 reaches 1.0 at 1000 steps here)."""
    run_example(
        "fetch_her.py",
        ["--algo", "ddpg", "--steps", "2000", "--seed", "0", "--no-progress", "--device", "cpu"],
        monkeypatch,
    )
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("final success rate:")][0]
    assert float(line.split()[3]) >= 0.8, line


def test_resume_continues_a_run_and_trusting_the_env_snapshot_is_opt_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["train", "--algo", "sac", "--env", "Pendulum-v1", "--no-progress", "--device", "cpu"]
    first = tmp_path / "first"
    assert main([*base, "--steps", "1100", "--out", str(first)]) == 0
    ckpt = str(first / "checkpoint")
    capsys.readouterr()
    assert main([*base, "--steps", "1300", "--trust-env-state"]) == 2
    assert "--trust-env-state needs --resume" in capsys.readouterr().err
    assert (
        main([*base, "--steps", "1100", "--resume", ckpt, "--trust-env-state", "--out", str(tmp_path / "x")])
        == 2
    )
    assert "already reached its --steps" in capsys.readouterr().err
    out = tmp_path / "exact"
    assert main([*base, "--steps", "1300", "--resume", ckpt, "--trust-env-state", "--out", str(out)]) == 0
    assert "env_steps=1300" in capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and min(r["time/env_steps"] for r in rows) > 1100
    assert main([*base, "--steps", "1300", "--resume", ckpt, "--out", str(tmp_path / "fresh")]) == 0
    out, err = capsys.readouterr()
    assert "env_steps=1300" in out
    assert "rlcore: resuming without the env snapshot (--trust-env-state loads it): every env starts a fresh episode" in err


def test_resume_refuses_old_and_crafted_checkpoints_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    class Plant:
        def __reduce__(self) -> tuple:
            return (os.mkdir, (str(tmp_path / "marker"),))

    old = tmp_path / "old"
    old.mkdir()
    torch.save({"algorithm": Plant()}, old / "trainer.pt")
    (old / "buffer.pkl").write_bytes(__import__("pickle").dumps(Plant()))
    for algo, env in (("sac", "Pendulum-v1"), ("ppo", "CartPole-v1")):
        argv = ["train", "--algo", algo, "--env", env, "--steps", "500", "--resume", str(old)]
        assert main([*argv, "--out", str(tmp_path / algo), "--no-progress", "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("rlcore: error: --resume ") and err.count("\n") == 1
        assert f"no checkpoint in {old}" in err
    assert not (tmp_path / "marker").exists()


def test_every_help_page_reads_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """No help page shows argparse's escaping ("95 %%") or a format placeholder."""
    from rlcore.cli.parser import build_parser

    parser = build_parser()
    commands = [a for a in parser._actions if a.dest == "command"][0].choices  # type: ignore[union-attr]
    for name, sub in commands.items():
        text = sub.format_help()
        assert "%%" not in text and "%(" not in text, name
