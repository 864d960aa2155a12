"""Resume without the env snapshot (the default: ``--resume`` without ``--trust-env-state``): the
envs restart from a seeded reset by design, but the learner is restored whole. After
``load_checkpoint(trust_env_state=False)`` the algorithm's state (networks, target networks,
optimizers, entropy temperature, observation and return normalisers, exploration and sampling
generators, counters) equals the saved one, the buffer draws the same batches, and given the same
batches the resumed learner's next updates equal, bit for bit, those of the run that went on without
a stop. The warning that says the envs were reset is one line, in Python and on the command line."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.algos import DDPG, DQN, PPO, SAC, TD3, DDPGConfig, DQNConfig, PPOConfig, SACConfig, TD3Config
from rlcore.cli import main
from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig, OnPolicyTrainer, OnPolicyTrainerConfig

torch.set_num_threads(1)

OFF_POLICY = {
    "dqn": ("CartPole-v1", lambda o, a: DQN.from_spaces(o, a, DQNConfig(hidden=(16,), normalize_obs=True, seed=3))),
    "ddpg": ("Pendulum-v1", lambda o, a: DDPG.from_spaces(o, a, DDPGConfig(hidden=(16,), seed=3))),
    "td3": ("Pendulum-v1", lambda o, a: TD3.from_spaces(o, a, TD3Config(hidden=(16,), normalize_obs=True, seed=3))),
    "sac": ("Pendulum-v1", lambda o, a: SAC.from_spaces(o, a, SACConfig(hidden=(16,), normalize_obs=True, seed=3))),
}


def _vec(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")


def _off_policy(name: str) -> OffPolicyTrainer:
    torch.manual_seed(3)
    env_id, make = OFF_POLICY[name]
    envs = _vec(env_id, 2)
    config = OffPolicyTrainerConfig(
        collect_env_steps=20, batch_size=16, warmup_env_steps=40, eval_every=1_000, eval_episodes=1, seed=3,
        max_env_steps=1_000,
    )
    algo = make(envs.single_observation_space, envs.single_action_space)
    buffer = rlcore.PrioritizedReplayBuffer(1_000, num_envs=2, seed=3)
    return OffPolicyTrainer(algo, buffer, envs, config=config, eval_envs=_vec(env_id, 1))


def _ppo() -> OnPolicyTrainer:
    torch.manual_seed(3)
    envs = _vec("Pendulum-v1", 2)
    config = PPOConfig(n_epochs=2, minibatch_size=16, normalize_obs=True, normalize_returns=True, seed=3)
    algo = PPO.from_spaces(envs.single_observation_space, envs.single_action_space, config, num_envs=2, device="cpu")
    trainer_config = OnPolicyTrainerConfig(num_steps=16, eval_every=1_000, eval_episodes=1, seed=3, max_env_steps=1_000)
    return OnPolicyTrainer(algo, envs, config=trainer_config, eval_envs=_vec("Pendulum-v1", 1))


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` are equal, tensors and arrays bit for bit (NaN equal to NaN)."""
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{k}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan()) and
                                     torch.equal(a.nan_to_num(), b.nan_to_num())), where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _resumed(make: Any, path: Path) -> Any:
    trainer = make()
    with pytest.warns(RuntimeWarning, match="no env snapshot") as record:
        trainer.load_checkpoint(path)  # trust_env_state=False: the envs restart from a seeded reset
    assert len(record) == 1 and "\n" not in str(record[0].message)
    return trainer


@pytest.mark.parametrize("name", sorted(OFF_POLICY))
def test_off_policy_learner_is_restored_whole_without_the_env_snapshot(name: str, tmp_path: Path) -> None:
    straight = _off_policy(name)
    for _ in range(5):  # past the warm-up: networks, optimizers, targets and normaliser have moved
        next(straight)
    assert straight.grad_steps > 0
    straight.save_checkpoint(tmp_path / "ckpt")
    saved = copy.deepcopy(straight.algorithm.state_dict())
    batches = [straight.buffer.sample(16, n_step=1, gamma=0.99) for _ in range(4)]

    resumed = _resumed(lambda: _off_policy(name), tmp_path / "ckpt")
    assert_same(resumed.algorithm.state_dict(), saved)
    assert (resumed.env_steps, resumed.grad_steps, resumed.iteration) == (
        straight.env_steps, straight.grad_steps, straight.iteration)
    assert resumed.buffer.beta == straight.buffer.beta
    # the buffer draws what the uninterrupted run's buffer drew (contents, priorities, generator)
    assert_same(resumed.buffer.sample(16, n_step=1, gamma=0.99).obs, batches[0].obs)

    # the same batches: the same updates, bit for bit (losses, new priorities, every weight)
    for batch in batches:
        assert_same(resumed.algorithm.update(batch), straight.algorithm.update(batch), "stats")
    assert_same(resumed.algorithm.state_dict(), straight.algorithm.state_dict())
    obs = batches[0].obs
    assert_same(resumed.algorithm.act(obs), straight.algorithm.act(obs), "exploring actions")


def test_on_policy_learner_is_restored_whole_without_the_env_snapshot(tmp_path: Path) -> None:
    straight = _ppo()
    for _ in range(3):
        next(straight)
    straight.save_checkpoint(tmp_path / "ckpt")
    saved = copy.deepcopy(straight.algorithm.state_dict())

    resumed = _resumed(_ppo, tmp_path / "ckpt")
    assert_same(resumed.algorithm.state_dict(), saved)
    # one more rollout of the uninterrupted run, given to both learners
    rollout, _ = straight.sampler.sample(straight.algorithm, straight.sampler.envs, 16)
    assert_same(resumed.algorithm.update(rollout), straight.algorithm.update(rollout), "stats")
    after_straight, after_resumed = straight.algorithm.state_dict(), resumed.algorithm.state_dict()
    for key in ("act_rng", "torch_rng"):  # the rollout drew its actions from the straight run's generators
        after_straight.pop(key, None), after_resumed.pop(key, None)
    assert_same(after_resumed, after_straight)


def test_cli_resume_without_the_env_snapshot_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--algo", "dqn", "--env", "CartPole-v1", "--out", str(tmp_path / "run"), "--no-progress"]
    assert main([*argv, "--steps", "600"]) == 0
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Python warning would fail here: the CLI prints its own line
        assert main([*argv, "--steps", "700", "--resume"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "env snapshot" in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("rlcore: ") and "--trust-env-state" in lines[0], lines[0]
    assert "Warning" not in err
