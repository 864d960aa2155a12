"""Run directories of `rlcore train`: a second run never appends to an earlier one by accident;
`--overwrite` and `--resume` say what they do."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from rlcore.cli import main
from rlcore.cli.common import RUN_FILES, UsageError, prepare_run_dir

# the cheapest real run: 200 env steps of DQN on CartPole, one evaluation
DQN = ["train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "200", "--no-progress", "--device", "cpu"]


def _args(out: Path | None = None, resume: Path | None = None, overwrite: bool = False) -> argparse.Namespace:
    return argparse.Namespace(out=out, resume=resume, overwrite=overwrite)


def _fake_run(path: Path) -> None:
    (path / "tb").mkdir(parents=True)
    (path / "tb" / "events.out.tfevents.1").write_bytes(b"x")
    (path / "checkpoint").mkdir()
    (path / "config.json").write_text("{}")
    (path / "metrics.jsonl").write_text('{"time/env_steps": 1}\n')


def test_the_same_command_twice_writes_two_run_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(DQN) == 0
    first = tmp_path / "runs" / "CartPole-v1-dqn-s0"
    metrics = (first / "metrics.jsonl").read_bytes()
    events = sorted(p.name for p in (first / "tb").iterdir())
    capsys.readouterr()
    assert main(DQN) == 0
    out = capsys.readouterr().out
    second = tmp_path / "runs" / "CartPole-v1-dqn-s0-run2"
    assert f"{first.relative_to(tmp_path)} holds an earlier run; this one writes" in out
    assert f"(run dir: {second.relative_to(tmp_path)})" in out
    assert (first / "metrics.jsonl").read_bytes() == metrics  # not appended to
    assert sorted(p.name for p in (first / "tb").iterdir()) == events  # no second event file
    assert len((second / "metrics.jsonl").read_text().splitlines()) == len(metrics.splitlines())
    assert json.loads((second / "config.json").read_text())["trainer_config"]["max_env_steps"] == 200


def test_an_out_that_holds_a_run_is_refused_in_one_line_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _fake_run(run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main([*DQN, "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"rlcore: error: --out {run} already holds a run: pass --overwrite to replace it, "
        f"--resume {run / 'checkpoint'} to continue it, or another --out\n"
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_overwrite_removes_the_earlier_run_files_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _fake_run(run)
    (run / "notes.txt").write_text("mine")
    (run / "rollout.png").write_bytes(b"png")
    assert prepare_run_dir(_args(out=run, overwrite=True), tmp_path / "default") == run
    assert "--overwrite: removed the earlier run's config.json, metrics.jsonl, tb, checkpoint, rollout.png" in (
        capsys.readouterr().out
    )
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    assert not any((run / name).exists() for name in RUN_FILES)


def test_resume_continues_the_run_that_holds_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _fake_run(run)
    assert prepare_run_dir(_args(resume=run / "checkpoint"), tmp_path / "default") == run
    assert f"continuing the run in {run} (appending to metrics.jsonl and tb/)" in capsys.readouterr().out
    assert (run / "metrics.jsonl").read_text() == '{"time/env_steps": 1}\n'  # nothing removed
    other = tmp_path / "elsewhere"
    assert prepare_run_dir(_args(out=other, resume=run / "checkpoint"), tmp_path / "default") == other
    assert other.is_dir()


def test_overwrite_and_resume_exclude_each_other(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _fake_run(run)
    with pytest.raises(UsageError, match="--overwrite and --resume exclude each other"):
        prepare_run_dir(_args(resume=run / "checkpoint", overwrite=True), tmp_path / "default")
    assert (run / "metrics.jsonl").exists()


def test_default_names_count_up_past_every_earlier_run(tmp_path: Path) -> None:
    default = tmp_path / "runs" / "X-s0"
    got = []
    for _ in range(3):
        d = prepare_run_dir(_args(), default)
        (d / "metrics.jsonl").write_text("")
        got.append(d.name)
    assert got == ["X-s0", "X-s0-run2", "X-s0-run3"]
    empty = tmp_path / "runs" / "Y-s0"
    empty.mkdir()
    assert prepare_run_dir(_args(), empty) == empty  # an empty directory holds no run
