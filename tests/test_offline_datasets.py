"""The parts of ``benches/offline_datasets.py`` that run in milliseconds: each env's defaults (the
``rlcore train`` preset, the medium target against the committed experts) and the rollouts that
fill the medium and expert files (exactly N steps, the cut last step a timeout)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from rlcore.presets import preset_for

_ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("offline_datasets", _ROOT / "benches" / "offline_datasets.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["offline_datasets"] = bench
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5"])
def test_mujoco_recipe_is_the_preset_with_a_medium_target_of_a_third_to_half_the_expert(env_id: str) -> None:
    r = bench.recipe(env_id)
    preset = preset_for(env_id, her=False)
    assert r.sac == preset.configs["sac"]
    assert r.trainer == preset.trainer
    assert r.expert == _ROOT / "experts" / f"{env_id}-sac.npz" and r.expert.is_file()
    manifest = json.loads((_ROOT / "experts" / "manifest.json").read_text())["experts"]
    recorded = {e["env"]: e["eval_return_mean"] for e in manifest}
    assert recorded[env_id] / 3 <= r.medium_return <= recorded[env_id] / 2
    assert r.transitions == 200_000


def test_pendulum_recipe_keeps_the_first_datasets_settings_and_other_envs_are_refused() -> None:
    r = bench.recipe("Pendulum-v1")
    assert (r.sac.actor_lr, r.sac.critic_lr, r.sac.alpha_lr) == (1e-3, 1e-3, 1e-3)
    assert (r.medium_return, r.medium_at, r.check_every, r.check_episodes) == (-700.0, 2_000, 250, 3)
    assert r.expert is None and r.transitions == 10_000
    with pytest.raises(ValueError, match="CartPole-v1"):
        bench.recipe("CartPole-v1")


def test_dataset_prefix_is_d4rls_task_name() -> None:
    assert [bench.dataset_prefix(e) for e in ("Hopper-v5", "HalfCheetah-v5", "Pendulum-v1")] == [
        "hopper",
        "halfcheetah",
        "pendulum",
    ]


def test_rollouts_stop_at_n_transitions_and_flag_the_cut_step_as_a_timeout() -> None:
    rng = np.random.default_rng(0)
    steps, returns = bench.rollouts(
        "Pendulum-v1", lambda o: rng.uniform(-2.0, 2.0, (1, 1)), transitions=250, seed=0
    )
    assert {k: v.shape[0] for k, v in steps.items()} == dict.fromkeys(steps, 250)
    assert np.flatnonzero(steps["truncated"]).tolist() == [199, 249]  # time limit, then the cut
    assert not steps["terminated"].any()
    inside = ~steps["truncated"][:-1]
    np.testing.assert_array_equal(steps["obs"][1:][inside], steps["obs_next"][:-1][inside])
    assert len(returns) == 1 and returns[0] == pytest.approx(float(steps["rew"][:200].sum()), rel=1e-5)
    assert steps["obs"].dtype == steps["act"].dtype == np.float32
    with pytest.raises(ValueError, match="one of them"):
        bench.rollouts("Pendulum-v1", lambda o: o, seed=0)


def test_random_only_writes_uniform_random_steps_and_their_reference(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    from rlcore.datasets import read_d4rl

    args = bench.argparse.Namespace(
        env="Pendulum-v1", out=str(tmp_path), seed=0, transitions=250, ref_episodes=1
    )
    refs = bench.make_random_dataset(args)
    assert refs["env"] == "Pendulum-v1" and list(refs["files"]) == ["pendulum-random"]
    assert refs["files"]["pendulum-random"]["transitions"] == 250
    assert json.loads((tmp_path / "references.json").read_text())["files"] == refs["files"]
    steps = read_d4rl(tmp_path / "pendulum-random.hdf5")
    act = np.asarray(steps.act)
    assert act.shape == (250, 1) and (np.abs(act) <= 2.0).all() and act.std() > 0.5


def test_from_run_takes_the_medium_policy_and_replay_from_a_sac_checkpoint(tmp_path: Path) -> None:
    """``--from-run``: the checkpoint's SAC acts, and medium-replay is its buffer, every step in the
    order collected (rewards as the env gave them; obs_next of a step is the next step's obs
    inside an episode)."""
    from rlcore.cli import main

    run = tmp_path / "run"
    assert main(["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "450", "--seed", "3",
                 "--no-progress", "--device", "cpu", "--out", str(run)]) == 0  # fmt: skip
    medium = bench.medium_from_run("Pendulum-v1", run)
    replay = medium.replay
    assert medium.env_steps == 450 and replay["rew"].shape == (450,)
    assert replay["obs"].shape == (450, 3) and replay["act"].shape == (450, 1)
    assert replay["truncated"][199] and replay["truncated"][399] and replay["truncated"].sum() == 2
    inside = ~(replay["terminated"] | replay["truncated"])[:-1]
    np.testing.assert_array_equal(replay["obs_next"][:-1][inside], replay["obs"][1:][inside])
    assert "env step 450" in medium.source
    act = medium.sac.act(replay["obs"][:4], deterministic=True)
    assert act.shape == (4, 1) and np.all(np.abs(act) <= 2.0)
    with pytest.raises(SystemExit, match="not SAC on Hopper-v5"):
        bench.medium_from_run("Hopper-v5", run)
