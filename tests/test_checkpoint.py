"""rlcore.trainers.checkpoint: a checkpoint holds data, never code.

Crafted files whose unpickling creates a marker file (``trainer.pt``, pickles without a manifest,
``env_state.pkl``, the expert checkpoint of collect-expert, a BC/GAIL expert dataset) are refused
with a typed error and the marker never appears, except for the env snapshot with
``trust_env_state=True`` (the documented opt-in). Also: every algorithm's state loads with
``torch.load(weights_only=True)``, the plain-value and RNG conversions round-trip, and saves are
durable.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from generation_saves import resealed
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
from rlcore.cli import main as cli_main
from rlcore.errors import CheckpointError, SaveFileError
from rlcore.imitation import OfflineTrainer, OfflineTrainerConfig
from rlcore.policy import load_policy
from rlcore.stats import flatten_stats
from rlcore.trainers import checkpoint
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

torch.set_num_threads(1)


class Plant:
    """Unpickling this creates ``marker`` (a directory, via ``os.mkdir``): what a crafted file could
    do with any code."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def crafted_torch_file(path: Path, marker: Path) -> None:
    """A ``trainer.pt`` that looks like a checkpoint and plants ``marker`` when fully unpickled."""
    torch.save(
        {
            "format": checkpoint.FORMAT,
            "version": checkpoint.VERSION,
            "trainer": "off-policy",
            "algorithm": Plant(marker),
        },
        path,
    )


def crafted_pickle(path: Path, marker: Path) -> None:
    path.write_bytes(pickle.dumps({"config": {"kind": "replay"}, "payload": Plant(marker)}))


def comparable(stats: Any) -> dict[str, float]:
    return {k: v for k, v in flatten_stats(stats).items() if not k.endswith("_s")}


# -------------------------------------------------------------------------------- trainers


def pendulum(n: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec("Pendulum-v1", num_envs=n, vectorization_mode="sync")


def cartpole(n: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")


def off_policy(max_env_steps: int = 200) -> OffPolicyTrainer:
    torch.manual_seed(0)
    envs = pendulum()
    sac = SAC.from_spaces(
        envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(16,)), device="cpu"
    )
    cfg = OffPolicyTrainerConfig(
        max_env_steps=max_env_steps, collect_env_steps=20, batch_size=16, warmup_env_steps=20, seed=0
    )
    return OffPolicyTrainer(sac, rlcore.ReplayBuffer(1000, num_envs=2, seed=0), envs, config=cfg)


def on_policy(max_env_steps: int = 320) -> OnPolicyTrainer:
    torch.manual_seed(0)
    envs = cartpole()
    ppo = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(n_epochs=1, minibatch_size=32, normalize_returns=True, seed=0),
        num_envs=2,
        device="cpu",
    )
    return OnPolicyTrainer(ppo, envs, config=OnPolicyTrainerConfig(max_env_steps=max_env_steps, num_steps=32))


def expert_data() -> rlcore.ReplayBuffer:
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    act = (obs[:, 2] > 0).astype(np.int64)
    done = np.zeros(64, bool)
    done[-1] = True
    env.close()
    return rlcore.ReplayBuffer.from_arrays(obs, act, np.ones(64, np.float32), done, np.zeros(64, bool), obs)


def offline() -> OfflineTrainer:
    env = gym.make("CartPole-v1")
    bc = BC.from_spaces(env.observation_space, env.action_space, BCConfig(hidden=(16,)))
    return OfflineTrainer(
        bc, expert_data(), config=OfflineTrainerConfig(max_grad_steps=40, grad_steps_per_iteration=10)
    )


def gail() -> OnPolicyTrainer:
    torch.manual_seed(0)
    envs = cartpole()
    g = GAIL.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        expert_data(),
        GAILConfig(disc_updates=1, disc_batch_size=32, seed=0),
        PPOConfig(n_epochs=1, minibatch_size=32, seed=0),
        num_envs=2,
        device="cpu",
    )
    return OnPolicyTrainer(
        g, envs, config=OnPolicyTrainerConfig(max_env_steps=320, num_steps=32), reward_fn=g.reward
    )


TRAINERS: dict[str, Callable[[], Any]] = {
    "off-policy": off_policy,
    "on-policy": on_policy,
    "offline": offline,
    "gail": gail,
}


def saved(make: Callable[[], Any], path: Path) -> Path:
    trainer = make()
    next(trainer)
    trainer.save_checkpoint(path)
    return path


def generation(path: Path) -> Path:
    return path / json.loads((path / "checkpoint.json").read_text())["data_dir"]


# -------------------------------------------------------------------------------- crafted files


def test_the_crafted_files_run_code_when_unpickled_unrestricted(tmp_path: Path) -> None:
    """The payloads are real: the loaders rlcore used before (torch.load(weights_only=False),
    pickle.load) create the marker from them."""
    marker = tmp_path / "marker"
    crafted_torch_file(tmp_path / "trainer.pt", marker)
    torch.load(tmp_path / "trainer.pt", weights_only=False)  # noqa: S614 - the point of the test
    assert marker.exists()
    marker.rmdir()
    crafted_pickle(tmp_path / "buffer.pkl", marker)
    with open(tmp_path / "buffer.pkl", "rb") as f:
        pickle.load(f)  # noqa: S301 - the point of the test
    assert marker.exists()


@pytest.mark.parametrize("kind", sorted(TRAINERS))
def test_crafted_trainer_pt_is_refused_and_runs_nothing(kind: str, tmp_path: Path) -> None:
    path = saved(TRAINERS[kind], tmp_path / "ckpt")
    marker = tmp_path / "marker"
    crafted_torch_file(generation(path) / "trainer.pt", marker)
    resealed(path)
    with pytest.raises(CheckpointError, match=r"weights_only=True"):
        TRAINERS[kind]().load_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize("kind", sorted(TRAINERS))
@pytest.mark.parametrize(
    "files", [("trainer.pt", "buffer.pkl", "meta.json"), ("buffer.pkl",), ("trainer.pt",)]
)
def test_pickles_without_a_manifest_are_no_checkpoint_and_never_opened(
    kind: str, files: tuple[str, ...], tmp_path: Path
) -> None:
    """A directory of pickles (trainer.pt / buffer.pkl, the layout of rlcore before its first
    release) holds no checkpoint: FileNotFoundError, and none of its files is opened."""
    old, marker = tmp_path / "old", tmp_path / "marker"
    old.mkdir()
    if "trainer.pt" in files:
        crafted_torch_file(old / "trainer.pt", marker)
    if "buffer.pkl" in files:
        crafted_pickle(old / "buffer.pkl", marker)
    if "meta.json" in files:
        (old / "meta.json").write_text('{"iteration": 1, "env_steps": 20}')
    with pytest.raises(FileNotFoundError, match=f"no checkpoint in {old}"):
        TRAINERS[kind]().load_checkpoint(old)
    assert not marker.exists()
    assert isinstance(CheckpointError("x"), SaveFileError)


def test_stray_pickles_beside_a_checkpoint_are_never_read(tmp_path: Path) -> None:
    path = saved(off_policy, tmp_path / "ckpt")
    marker = tmp_path / "marker"
    crafted_pickle(path / "buffer.pkl", marker)
    crafted_pickle(generation(path) / "buffer.pkl", marker)
    crafted_torch_file(path / "trainer.pt", marker)
    with pytest.warns(RuntimeWarning, match="fresh episode"):
        off_policy().load_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["off-policy", "on-policy", "gail"])
def test_env_snapshot_runs_only_when_trusted(kind: str, tmp_path: Path) -> None:
    path = saved(TRAINERS[kind], tmp_path / "ckpt")
    gen, marker = generation(path), tmp_path / "marker"
    assert (gen / "env_state.pkl").is_file()  # classic-control envs pickle
    crafted_pickle(gen / "env_state.pkl", marker)
    resealed(path)
    with pytest.warns(RuntimeWarning, match="trust_env_state=True"):
        TRAINERS[kind]().load_checkpoint(path)
    assert not marker.exists()
    ckpt = checkpoint.load(path)
    assert ckpt.has_env_state and ckpt.env_state is None and not marker.exists()
    trusted = checkpoint.load(path, trust_env_state=True)  # the documented opt-in runs the pickle
    assert marker.exists() and trusted.env_state["payload"] is None


def test_crafted_expert_checkpoint_of_collect_expert_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """collect-expert --checkpoint RUN and load_policy read RUN/checkpoint like a resume."""
    marker = tmp_path / "marker"
    for layout in ("old", "new"):
        run = tmp_path / layout
        (run / "checkpoint").mkdir(parents=True)
        (run / "config.json").write_text(
            json.dumps({"args": {"algo": "ppo"}, "algo_config": {}, "num_envs": 1})
        )
        if layout == "old":  # pickles without a manifest: no checkpoint, never opened
            crafted_torch_file(run / "checkpoint" / "trainer.pt", marker)
            expected = "is not a run directory"
        else:
            saved(on_policy, run / "checkpoint")
            crafted_torch_file(generation(run / "checkpoint") / "trainer.pt", marker)
            resealed(run / "checkpoint")
            expected = "weights_only=True"
        with pytest.raises((CheckpointError, FileNotFoundError), match=expected):
            load_policy(run)
        argv = ["collect-expert", "--algo", "ppo", "--env", "CartPole-v1", "--episodes", "1"]
        assert cli_main([*argv, "--checkpoint", str(run), "--out", str(tmp_path / f"data-{layout}")]) == 2
        err = capsys.readouterr().err
        # pickles without a manifest are no checkpoint, so collect-expert would train there: the
        # directory already holds a run and is refused; a crafted trainer.pt is refused unread
        assert err.startswith("rlcore: error: ")
        assert ("already holds a run" if layout == "old" else expected) in err
        assert err.count("\n") == 1
        assert not marker.exists()
        assert not (tmp_path / f"data-{layout}").exists()


@pytest.mark.parametrize("algo", ["bc", "gail"])
def test_crafted_expert_dataset_of_bc_and_gail_is_refused(
    algo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--expert DIR is read with ReplayBuffer.load: .npy files with allow_pickle=False."""
    data, marker = tmp_path / "data", tmp_path / "marker"
    expert_data().save(data)
    manifest = json.loads((data / "manifest.json").read_text())
    victim = data / manifest["data_dir"] / sorted(e["file"] for e in manifest["files"].values())[0]
    bomb = np.empty(1, dtype=object)
    bomb[0] = Plant(marker)
    np.save(victim, bomb, allow_pickle=True)
    crafted_pickle(data / "buffer.pkl", marker)
    argv = ["train", "--algo", algo, "--env", "CartPole-v1", "--expert", str(data), "--steps", "10"]
    assert cli_main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert "--expert" in capsys.readouterr().err
    assert not marker.exists()


# -------------------------------------------------------------------------------- states are data


class _Mode(enum.Enum):
    A = 1


@dataclasses.dataclass
class _Cfg:
    x: int = 1


def _algorithms() -> list[tuple[str, Any, Any]]:
    pend, cart = gym.make("Pendulum-v1"), gym.make("CartPole-v1")
    box = (pend.observation_space, pend.action_space)
    disc = (cart.observation_space, cart.action_space)
    return [
        ("dqn", DQN.from_spaces(*disc, DQNConfig(hidden=(8,)), device="cpu"), disc),
        ("ddpg", DDPG.from_spaces(*box, DDPGConfig(hidden=(8,)), device="cpu"), box),
        ("td3", TD3.from_spaces(*box, TD3Config(hidden=(8,)), device="cpu"), box),
        ("sac", SAC.from_spaces(*box, SACConfig(hidden=(8,), normalize_obs=True), device="cpu"), box),
        ("vpg", VPG.from_spaces(*box, VPGConfig(normalize_returns=True), num_envs=2, device="cpu"), box),
        ("a2c", A2C.from_spaces(*disc, A2CConfig(normalize_returns=True), num_envs=2, device="cpu"), disc),
        (
            "ppo",
            PPO.from_spaces(
                *disc, PPOConfig(normalize_returns=True, normalize_obs=True), num_envs=2, device="cpu"
            ),
            disc,
        ),
        ("bc", BC.from_spaces(*disc, BCConfig(hidden=(8,))), disc),
        ("gail", gail().algorithm, disc),
    ]


def test_every_algorithm_state_loads_with_weights_only_after_training(tmp_path: Path) -> None:
    """Optimizer states (after steps), normalisers, schedules, RNG states: all tensors and plain values."""
    trainers = {"sac": off_policy(), "ppo": on_policy(), "bc": offline(), "gail": gail()}
    for trainer in trainers.values():
        for _ in range(3):
            next(trainer)
    states = {f"trained-{name}": t.algorithm.state_dict() for name, t in trainers.items()}
    states.update({name: algo.state_dict() for name, algo, _ in _algorithms()})
    for name, state in states.items():
        torch.save(state, tmp_path / f"{name}.pt")
        loaded = torch.load(tmp_path / f"{name}.pt", weights_only=True)  # no to_plain needed
        assert loaded.keys() == state.keys(), name
    # and a trained state loads back into a fresh algorithm with the same behaviour
    fresh = on_policy()
    fresh.algorithm.load_state_dict(torch.load(tmp_path / "trained-ppo.pt", weights_only=True))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        fresh.algorithm.act(obs, deterministic=True), trainers["ppo"].algorithm.act(obs, deterministic=True)
    )


def test_to_plain_round_trips_arrays_scalars_and_containers(tmp_path: Path) -> None:
    state = {
        "arrays": [
            np.arange(6).astype(dt).reshape(2, 3)
            for dt in ("bool", "uint8", "int64", "uint64", "float16", "float64")
        ],
        "obs": {"observation": np.ones((2, 10), np.float32), "desired_goal": np.zeros((2, 3), np.float32)},
        "scalars": (np.float32(1.5), np.int64(-3), np.bool_(True)),
        "big_int": 2**127 + 1,
        "plain": {"s": "x", "b": b"\x00", "n": None, "f": 0.1, "set": {1, 2}},
        "tensor": torch.nn.Parameter(torch.ones(2)),
        "non_contiguous": np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],
        "big_endian": np.arange(3, dtype=">f8"),
    }
    torch.save(checkpoint.to_plain(state), tmp_path / "s.pt")
    back = checkpoint.from_plain(torch.load(tmp_path / "s.pt", weights_only=True))
    for want, got in zip(state["arrays"], back["arrays"], strict=True):
        assert got.dtype == want.dtype and isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(back["obs"]["observation"], state["obs"]["observation"])
    assert [type(x) for x in back["scalars"]] == [np.float32, np.int64, np.bool_] and back[
        "scalars"
    ] == state["scalars"]
    assert back["big_int"] == 2**127 + 1 and back["plain"] == state["plain"]
    assert type(back["tensor"]) is torch.Tensor and torch.equal(back["tensor"], torch.ones(2))
    np.testing.assert_array_equal(back["non_contiguous"], state["non_contiguous"])
    np.testing.assert_array_equal(back["big_endian"], state["big_endian"])


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (_Mode.A, "state.algo.mode"),
        (_Cfg(), "state.algo.mode"),
        (np.array([object()]), "state.algo.mode"),
        (lambda: 0, "state.algo.mode"),
    ],
)
def test_to_plain_refuses_objects_and_names_where(value: Any, where: str, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=f"^{where}"):
        checkpoint.to_plain({"algo": {"mode": value}})
    with pytest.raises(CheckpointError):  # save refuses before writing anything
        checkpoint.save(tmp_path / "c", trainer="off-policy", state={"algo": {"mode": value}}, counters={})
    assert not (tmp_path / "c" / "checkpoint.json").exists()


@pytest.mark.parametrize(
    "bit_generator", [np.random.PCG64, np.random.MT19937, np.random.SFC64, np.random.Philox]
)
def test_numpy_rng_state_round_trips_through_weights_only(bit_generator: Any, tmp_path: Path) -> None:
    gen = np.random.Generator(bit_generator(7))
    gen.random(3)
    torch.save(checkpoint.numpy_rng_to_plain(gen.bit_generator.state), tmp_path / "rng.pt")
    plain = torch.load(tmp_path / "rng.pt", weights_only=True)
    want = gen.random(5)
    gen.random(100)
    gen.bit_generator.state = checkpoint.numpy_rng_from_plain(plain)
    np.testing.assert_array_equal(gen.random(5), want)


def test_capture_and_restore_rng_reproduce_torch_numpy_and_python_draws(tmp_path: Path) -> None:
    torch.save(checkpoint.capture_rng(), tmp_path / "rng.pt")
    want = (torch.rand(3), np.random.random(3), [random.random() for _ in range(3)])  # noqa: NPY002
    checkpoint.restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    got = (torch.rand(3), np.random.random(3), [random.random() for _ in range(3)])  # noqa: NPY002
    assert torch.equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2] == want[2]
    state = random.getstate()
    assert checkpoint.python_rng_from_plain(checkpoint.python_rng_to_plain(state)) == state


def test_resume_seed_is_deterministic_and_apart_from_the_run_seeds() -> None:
    seeds = {checkpoint.resume_seed(0, it) for it in range(1000)}
    assert len(seeds) == 1000 and checkpoint.resume_seed(3, 7) == checkpoint.resume_seed(3, 7)
    assert checkpoint.resume_seed(0, 4) != checkpoint.resume_seed(1, 4)
    assert all(0 <= s < 2**31 for s in seeds) and not seeds & set(range(20_000))


# -------------------------------------------------------------------------------- the directory


def test_save_is_durable_and_replaces_only_its_own_generation(tmp_path: Path) -> None:
    trainer = off_policy()
    next(trainer)
    path = tmp_path / "ckpt"
    trainer.save_checkpoint(path)
    first = generation(path)
    (path / "notes.txt").write_text("mine")
    next(trainer)
    trainer.save_checkpoint(path)
    second = generation(path)
    assert second != first and not first.exists() and (path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in path.iterdir()) == sorted(
        ["checkpoint.json", second.name, "notes.txt", "rlcore.lock"]
    )

    class Failing:
        def save(self, path: Path) -> None:
            Path(path).mkdir()
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(path, trainer="off-policy", state={}, counters={}, buffer=Failing())
    assert generation(path) == second and sorted(p.name for p in path.iterdir()) == sorted(
        ["checkpoint.json", second.name, "notes.txt", "rlcore.lock"]
    )
    fresh = off_policy()
    with pytest.warns(RuntimeWarning, match="fresh episode"):
        fresh.load_checkpoint(path)
    assert fresh.iteration == 2 and len(fresh.buffer) == len(trainer.buffer)


def test_damaged_or_foreign_checkpoints_give_typed_errors(tmp_path: Path) -> None:
    path = saved(offline, tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match="'offline' trainer, not of a 'on-policy'"):
        on_policy().load_checkpoint(path)
    with pytest.raises(FileNotFoundError):
        offline().load_checkpoint(tmp_path / "nothing")
    manifest = json.loads((path / "checkpoint.json").read_text())
    for bad, match in [
        ({**manifest, "data_dir": "../elsewhere"}, "not a plain name"),
        ({**manifest, "version": 3}, "format version 3"),
        ({**manifest, "data_dir": "gen-missing"}, "missing"),
    ]:
        resealed(path, bad)
        with pytest.raises(CheckpointError, match=match):
            offline().load_checkpoint(path)
    (path / "checkpoint.json").write_text(json.dumps(manifest))
    (generation(path) / "counters.json").write_text("{")
    with pytest.raises(CheckpointError, match="counters.json fails its checksum"):
        offline().load_checkpoint(path)
    resealed(path)
    with pytest.raises(CheckpointError, match="counters.json is missing or corrupt"):
        offline().load_checkpoint(path)
    (generation(path) / "counters.json").write_text("{}")
    resealed(path)
    with pytest.raises(CheckpointError, match="no 'iteration' counter"):
        offline().load_checkpoint(path)
    (generation(path) / "trainer.pt").write_bytes(b"not a zip")
    resealed(path)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        offline().load_checkpoint(path)
