"""``rlcore train``'s one driver: every flag that does not apply to ``--algo`` is refused in one
line, before torch is imported (a mistake is answered at once), and the flags' ranges are checked
by argparse."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rlcore.cli import main
from rlcore.cli.algorithms import ALGORITHMS, FLAG_FAMILIES

# a value for each family-bound flag (its dest) that differs from the default
GIVEN = {
    "her": ["--her"],
    "n_step": ["--n-step", "3"],
    "prioritized": ["--prioritized"],
    "warmup_env_steps": ["--warmup-env-steps", "100"],
    "value_rescaling": ["--value-rescaling"],
    "distributed": ["--distributed"],
    "expert": ["--expert", "somewhere"],
    "dataset": ["--dataset", "somewhere"],
    "ref_returns": ["--ref-returns", "0", "100"],
    "num_envs": ["--num-envs", "2"],
    "backend": ["--backend", "envpool"],
    "async_batch": ["--async-batch", "2"],
}
ENV = {"off-policy": "Pendulum-v1", "recurrent": "CartPole-v1", "on-policy": "CartPole-v1", "imitation": "CartPole-v1",
       "offline": "CartPole-v1", "offline-rl": "Pendulum-v1"}
NEEDED = {"imitation": ["--expert", "x"], "offline": ["--expert", "x"], "offline-rl": ["--dataset", "x"]}
"""The dataset flag each family needs (so the refusal under test is the only one)."""

REFUSED = [
    (algo.name, dest)
    for algo in ALGORITHMS.values()
    for dest, families in FLAG_FAMILIES.items()
    if algo.family not in families
]


def test_every_family_bound_flag_has_a_case() -> None:
    assert set(GIVEN) == set(FLAG_FAMILIES)
    assert len(REFUSED) >= 30


@pytest.mark.parametrize(("algo", "dest"), REFUSED, ids=[f"{a}-{d}" for a, d in REFUSED])
def test_a_flag_that_does_not_apply_to_the_algorithm_is_refused_in_one_line(
    algo: str, dest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    family = ALGORITHMS[algo].family
    needed = NEEDED.get(family, [])
    argv = ["train", "--algo", algo, "--env", ENV[family], *needed, *GIVEN[dest]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    flag = GIVEN[dest][0]
    assert err == f"rlcore: error: {flag} does not apply to --algo {algo} ({family}); it is for " + err.split("it is for ")[1]
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--num-collectors", "3"], "--num-collectors needs --distributed"),
        (["--ray-address", "auto"], "--ray-address needs --distributed"),
        (["--trust-env-state"], "--trust-env-state needs --resume"),
        (["--jobs", "2"], "--jobs needs --seeds"),
        (["--distributed", "--backend", "envpool"], "--backend and --async-batch are for single-process training"),
    ],
)
def test_flags_that_need_another_flag(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--algo", "sac", "--env", "Pendulum-v1", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcore: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("algo", ["bc", "gail", "dac"])
def test_imitation_needs_an_expert(algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--algo", algo, "--env", "CartPole-v1"]) == 2
    assert "needs --expert PATH" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--steps", "0"), ("--n-step", "0"), ("--num-envs", "0"), ("--warmup-env-steps", "-1"), ("--threads", "0"),
     ("--checkpoint-every", "-5"), ("--async-batch", "0"), ("--num-collectors", "0"), ("--steps", "many")],
)
def test_ranges_are_argparse_errors(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", "--algo", "sac", "--env", "Pendulum-v1", f"{flag}={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlcore: error: argument {flag}: ") and err.count("\n") == 1


def test_did_you_mean_for_an_algorithm_and_an_env(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--algo", "sacc", "--env", "Pendulum-v1"])
    assert "did you mean 'sac'?" in capsys.readouterr().err
    assert main(["train", "--algo", "sac", "--env", "HalfCheeta-v5"]) == 2
    assert "did you mean 'HalfCheetah-v5'" in capsys.readouterr().err


def test_a_bad_flag_is_answered_before_torch_is_imported() -> None:
    code = (
        "import sys; from rlcore.cli import main; "
        "rc = main(['train', '--algo', 'ppo', '--env', 'CartPole-v1', '--warmup-env-steps', '5']); "
        "print(rc, 'torch' in sys.modules, 'gymnasium' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False", "False"], out
    assert "--warmup-env-steps does not apply to --algo ppo" in out.stderr


def test_version_and_examples_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("rlcore ")
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "--seeds 0-4" in out and "--checkpoint-every" in out
