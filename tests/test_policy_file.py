"""A trained policy as one data-only file: ``TrainedPolicy.save`` / ``rlcore export-policy`` write the
acting networks and the run's configuration to an ``.npz``; ``load_policy``, ``rlcore enjoy`` and
``rlcore collect-expert --checkpoint`` read it back and act exactly as the run directory does. A
save never costs the file that was there; a damaged or foreign file is refused in one line."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import rlcore
from rlcore.cli import main
from rlcore.errors import CheckpointError


def _train(tmp_path_factory: pytest.TempPathFactory, *argv: str) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["train", *argv, "--out", str(out), "--no-progress", "--checkpoint-every", "0"]) == 0
    return out


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(
        tmp_path_factory,
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "--steps",
        "300",
        "--warmup-env-steps",
        "100",
    )


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "--algo", "dqn", "--env", "CartPole-v1", "--steps", "600")


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1024")


def _obs(space: object, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    low, high = np.maximum(space.low, -3), np.minimum(space.high, 3)  # type: ignore[attr-defined]
    return rng.uniform(low, high, size=(n, *space.shape)).astype(np.float32)  # type: ignore[attr-defined]


@pytest.mark.parametrize("run", ["sac_run", "dqn_run", "ppo_run"])
def test_a_policy_file_acts_as_its_run_directory(
    run: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run_dir: Path = request.getfixturevalue(run)
    from_run = rlcore.load_policy(run_dir)
    path = from_run.save(tmp_path / "policy")
    assert path == tmp_path / "policy.npz" and path.is_file()
    from_file = rlcore.load_policy(path)
    assert (from_file.algo, from_file.env_id) == (from_run.algo, from_run.env_id)
    obs = _obs(from_run.observation_space, 64, seed=1)
    np.testing.assert_array_equal(from_file(obs), from_run(obs))
    np.testing.assert_array_equal(from_file(obs[0]), from_run(obs[0]))
    with np.load(path, allow_pickle=False) as npz:  # acting networks only: no critic, no optimizer
        parts = {k.partition("/")[0] for k in npz.files if not k.startswith("__")}
    assert parts <= {"encoder", "actor", "q_net", "policy"} and parts


def test_export_policy_keeps_what_the_run_measured(
    sac_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "experts" / "pendulum.npz"
    assert main(["export-policy", str(sac_run), str(out)]) == 0
    assert "Pendulum-v1 sac: acting networks written to" in capsys.readouterr().out
    with np.load(out, allow_pickle=False) as npz:
        header = json.loads(str(npz["__rlcore_policy__"]))
    last = [
        json.loads(x) for x in (sac_run / "metrics.jsonl").read_text().splitlines() if "eval/return_mean" in x
    ][-1]
    assert header["algo"] == "sac" and header["env_id"] == "Pendulum-v1" and header["version"] == 1
    assert header["meta"]["env_steps"] == last["time/env_steps"] == 300
    assert header["meta"]["eval_return_mean"] == pytest.approx(last["eval/return_mean"], abs=0.006)
    assert header["meta"]["command"].startswith("rlcore train --algo sac --env Pendulum-v1")
    # refused without --overwrite, and the file stays as it was
    before = out.read_bytes()
    assert main(["export-policy", str(sac_run), str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["export-policy", str(sac_run), str(out), "--overwrite"]) == 0


def test_enjoy_and_collect_expert_read_a_policy_file(
    dqn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rlcore.load_policy(dqn_run).save(tmp_path / "dqn.npz")
    capsys.readouterr()
    lines = []
    for source in (dqn_run, path):
        assert main(["enjoy", str(source), "--episodes", "3", "--seed", "5"]) == 0
        lines.append(capsys.readouterr().out.split("; deterministic")[0])
    assert lines[0] == lines[1]
    argv = ["collect-expert", "--algo", "dqn", "--env", "CartPole-v1", "--episodes", "2"]
    assert main([*argv, "--checkpoint", str(path), "--out", str(tmp_path / "data")]) == 0
    assert not (tmp_path / "runs").exists()  # loaded, nothing trained
    batch = rlcore.ReplayBuffer.load(tmp_path / "data").sample(32)
    np.testing.assert_array_equal(rlcore.load_policy(dqn_run)(batch.obs), batch.act)
    # a policy of another env is refused, nothing recorded
    wrong = [
        "collect-expert",
        "--algo",
        "dqn",
        "--env",
        "Acrobot-v1",
        "--episodes",
        "1",
        "--checkpoint",
        str(path),
    ]
    assert main([*wrong, "--out", str(tmp_path / "wrong")]) == 2
    assert "trained on CartPole-v1, not Acrobot-v1" in capsys.readouterr().err
    assert not (tmp_path / "wrong").exists()


def test_a_failed_save_keeps_the_previous_file(sac_run: Path, tmp_path: Path) -> None:
    policy = rlcore.load_policy(sac_run)
    path = policy.save(tmp_path / "p.npz", meta={"note": "first"})
    before = path.read_bytes()
    with pytest.raises(ValueError, match="not JSON-able"):
        policy.save(path, overwrite=True, meta={"bad": object()})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.npz"]  # no temporary left behind
    with pytest.raises(FileExistsError):
        policy.save(path)


def _header(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as npz:
        return json.loads(str(npz["__rlcore_policy__"]))


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncated", "not a policy file"),
        ("npy", "not a policy file"),
        ("pickled", "not a policy file"),
        ("no_header", "no __rlcore_policy__"),
        ("bad_json", "header is damaged"),
        ("version", "version 99"),
        ("missing_part", "holds the networks"),
        ("wrong_shape", "do not fit"),
    ],
)
def test_damaged_or_foreign_files_are_refused(
    sac_run: Path, tmp_path: Path, damage: str, message: str
) -> None:
    good = rlcore.load_policy(sac_run).save(tmp_path / "good.npz")
    with np.load(good, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    bad = tmp_path / "bad.npz"
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[:200])
    elif damage == "npy":
        np.save(tmp_path / "bad.npy", np.zeros(3))
        (tmp_path / "bad.npy").rename(bad)
    elif damage == "pickled":
        np.savez(bad, **{**arrays, "actor/x": np.array([object()], dtype=object)})
    elif damage == "no_header":
        np.savez(bad, **{k: v for k, v in arrays.items() if not k.startswith("__")})
    elif damage == "bad_json":
        np.savez(bad, **{**arrays, "__rlcore_policy__": np.array("{not json")})
    elif damage == "version":
        np.savez(
            bad, **{**arrays, "__rlcore_policy__": np.array(json.dumps({**_header(good), "version": 99}))}
        )
    elif damage == "missing_part":
        np.savez(bad, **{k: v for k, v in arrays.items() if not k.startswith("actor/")})
    else:
        key = next(k for k in arrays if k.startswith("actor/") and arrays[k].ndim == 2)
        np.savez(bad, **{**arrays, key: np.zeros((3, 3), np.float32)})
    assert zipfile.is_zipfile(bad) or damage in ("truncated", "npy")
    with pytest.raises(CheckpointError, match=message):
        rlcore.load_policy(bad)
