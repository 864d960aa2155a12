"""Imitation learning data: expert datasets recorded from a trained policy, for behaviour cloning
(:class:`~rlcore.trainers.OfflineTrainer`) and GAIL (:class:`~rlcore.trainers.OnPolicyTrainer` with
``reward_fn=gail.reward``) and the CLI commands ``rlcore collect-expert`` and
``rlcore train --algo {bc,gail} --expert PATH``.

Expert data cannot be downloaded here (no D4RL / Minari at run time), so an expert is trained with
the ordinary trainers (``rlcore train``), its *deterministic* policy is rolled out for N episodes
on one env, and the transitions are saved with :meth:`rlcore.ReplayBuffer.save` (a directory of
``.npy`` files plus ``manifest.json``; ``rlcore.ReplayBuffer.load(PATH)`` reads it back)::

    rlcore collect-expert --algo ppo --env CartPole-v1 --episodes 10 --out data/cartpole-expert
    rlcore train --algo bc --env CartPole-v1 --expert data/cartpole-expert
    rlcore train --algo gail --env CartPole-v1 --expert data/cartpole-expert

Stored actions are the ones the env received (clipped to a ``Box``'s bounds)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore import buffers
from rlcore.envs.stepping import EnvStepper, Episode
from rlcore.errors import InvalidValueError
from rlcore.imitation.minari import export_minari
from rlcore.trainers import checkpoint as ckpt_format

__all__ = ["ExpertData", "load_expert_policy", "record_episodes", "record_expert"]













_ON_POLICY = ("vpg", "a2c", "ppo")


@dataclass(frozen=True)
class ExpertData:
    """What :func:`collect_expert` recorded."""

    path: Path
    """Directory of the saved buffer (``rlcore.ReplayBuffer.load(path)``)."""
    episodes: int
    """Recorded episodes."""
    transitions: int
    """Recorded transitions (env steps)."""
    return_mean: float
    """Mean undiscounted return of the recorded episodes (env reward)."""
    return_std: float
    """Standard deviation of those returns."""


def load_expert_policy(
    run_dir: str | Path, observation_space: gym.Space, action_space: gym.Space
) -> Callable[[np.ndarray], np.ndarray]:
    """The deterministic policy of a run directory written by ``rlcore train`` (any algorithm).

    Reads ``run_dir/config.json`` (algorithm and its config) and the checkpoint in
    ``run_dir/checkpoint`` (:func:`rlcore.trainers.checkpoint.load`: ``trainer.pt`` with
    ``torch.load(weights_only=True)``; nothing from the files runs as code).

    Returns:
        ``policy(obs [N, *O]) -> act`` (int64 ``[N]`` or float32 ``[N, A]``, unclipped).

    Raises:
        FileNotFoundError: no ``config.json`` or checkpoint in ``run_dir``.
        CheckpointError: the checkpoint is of the old pickle format (the message says how to convert
            a trusted one) or holds more than data.
        ValueError: the run's algorithm is unknown.
    """
    from rlcore import algos

    run_dir = Path(run_dir)
    cfg_path, ckpt_dir = run_dir / "config.json", run_dir / "checkpoint"
    if not cfg_path.is_file() or not ckpt_format.is_checkpoint(ckpt_dir):
        missing = cfg_path if not cfg_path.is_file() else ckpt_dir
        raise FileNotFoundError(f"{run_dir} is not a run directory of `rlcore train` ({missing} is missing)")
    meta = json.loads(cfg_path.read_text())
    name = meta["args"]["algo"]
    classes: dict[str, tuple[Any, Any]] = {
        "dqn": (algos.DQN, algos.DQNConfig),
        "ddpg": (algos.DDPG, algos.DDPGConfig),
        "td3": (algos.TD3, algos.TD3Config),
        "sac": (algos.SAC, algos.SACConfig),
        "vpg": (algos.VPG, algos.VPGConfig),
        "a2c": (algos.A2C, algos.A2CConfig),
        "ppo": (algos.PPO, algos.PPOConfig),
    }
    if name not in classes:
        raise ValueError(f"{run_dir}: unknown algorithm {name!r}")
    algo_cls, cfg_cls = classes[name]
    fields = {f.name for f in dataclasses.fields(cfg_cls)}
    config = cfg_cls(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in meta["algo_config"].items() if k in fields}
    )
    kw = {"num_envs": int(meta.get("num_envs", 1))} if name in _ON_POLICY else {}
    algo = algo_cls.from_spaces(observation_space, action_space, config, device="cpu", **kw)
    algo.load_state_dict(ckpt_format.load(ckpt_dir).part("algorithm"))
    return lambda obs: algo.act(obs, deterministic=True)


def _record_rows(
    policy: Callable[[np.ndarray], np.ndarray], env_id: str, n_episodes: int, *, seed: int
) -> tuple[dict[str, np.ndarray], list[float]]:
    """Roll out ``policy`` for ``n_episodes`` episodes on one env with the env stepper (episode k
    from ``reset(seed=seed + k)``); the time-ordered arrays ``obs``, ``act``, ``rew``, ``term``,
    ``trunc``, ``obs_next`` (leading dimension T) and the episode returns. The rows are the
    stepper's own copies (so envs that rewrite the array they returned record right rows)."""
    if n_episodes < 1:
        raise InvalidValueError(f"n_episodes must be >= 1, got {n_episodes}")
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)])
    stepper = EnvStepper(envs)
    space = envs.single_action_space
    clip = (space.low, space.high) if isinstance(space, gym.spaces.Box) else None
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc", "obs_next")}
    returns: list[float] = []
    for k in range(n_episodes):
        stepper.reset(seed=seed + k)
        episode: tuple[Episode, ...] = ()
        while not episode:
            act = np.asarray(policy(stepper.obs))
            if clip is not None:
                act = np.clip(act, *clip).astype(np.float32)
            step = stepper.step(act)
            row = (step.obs, act, step.rew_N, step.terminated_N, step.truncated_N, step.obs_next)
            for key, v in zip(rows, row, strict=True):
                rows[key].append(v[0])
            episode = step.episodes
        returns.append(episode[0].ret)
    envs.close()
    arrays = {
        "obs": np.asarray(rows["obs"]),
        "act": np.asarray(rows["act"]),
        "rew": np.asarray(rows["rew"], dtype=np.float32),
        "term": np.asarray(rows["term"], dtype=bool),
        "trunc": np.asarray(rows["trunc"], dtype=bool),
        "obs_next": np.asarray(rows["obs_next"]),
    }
    return arrays, returns


def _buffer_from_rows(arrays: Mapping[str, np.ndarray], seed: int) -> buffers.ReplayBuffer:
    return buffers.ReplayBuffer.from_arrays(
        arrays["obs"],
        arrays["act"],
        arrays["rew"],
        arrays["term"],
        arrays["trunc"],
        arrays["obs_next"],
        seed=seed,
    )


def record_episodes(
    policy: Callable[[np.ndarray], np.ndarray], env_id: str, n_episodes: int, *, seed: int = 0
) -> tuple[buffers.ReplayBuffer, list[float]]:
    """Roll out ``policy`` for ``n_episodes`` full episodes on one env and store them in time order.

    Episode k starts from ``env.reset(seed=seed + k)``. Actions are clipped to a ``Box``'s bounds
    (what the env executed) before they are stored.

    Returns:
        ``(buffer, returns)``: a single-env :class:`rlcore.ReplayBuffer` sized to the data
        (``from_arrays``) and the undiscounted return of each episode.

    Raises:
        ValueError: ``n_episodes < 1``.
    """
    arrays, returns = _record_rows(policy, env_id, n_episodes, seed=seed)
    return _buffer_from_rows(arrays, seed), returns


def record_expert(
    run_dir: str | Path,
    env_id: str,
    episodes: int,
    out: str | Path,
    *,
    seed: int = 0,
    minari: str | None = None,
    algo: str | None = None,
) -> ExpertData:
    """Record ``episodes`` deterministic episodes of the expert trained in ``run_dir`` (a run
    directory of ``rlcore train`` holding a checkpoint) and save them to ``out``.

    Episode k starts from ``env.reset(seed=seed + 100_000 + k)`` (apart from the training seeds).

    Args:
        run_dir: the expert's run directory (``config.json`` and ``checkpoint/``).
        env_id: gymnasium env id.
        episodes: episodes to record (>= 1).
        out: directory for :meth:`rlcore.ReplayBuffer.save`.
        seed: the expert's seed; the recorded episodes' resets are derived from it.
        minari: also write the episodes as the Minari dataset of this id (:func:`export_minari`).
        algo: the algorithm's name, for the Minari metadata (default: read from ``run_dir``).

    Raises:
        FileNotFoundError, CheckpointError, ValueError: as :func:`load_expert_policy` and
            :func:`record_episodes`.
        ImportError, ValueError: as :func:`export_minari`.
    """
    run_dir = Path(run_dir)
    env = gym.make(env_id)
    policy = load_expert_policy(run_dir, env.observation_space, env.action_space)
    env.close()
    arrays, returns = _record_rows(policy, env_id, episodes, seed=seed + 100_000)
    buffer = _buffer_from_rows(arrays, seed + 100_000)
    out = Path(out)
    buffer.save(out)
    if minari is not None:
        export_minari(
            minari,
            env_id,
            arrays,
            seeds=[seed + 100_000 + k for k in range(episodes)],
            algorithm_name=f"rlcore {algo or json.loads((run_dir / 'config.json').read_text())['args']['algo']} (deterministic policy of {run_dir})",
        )
    return ExpertData(
        path=out,
        episodes=len(returns),
        transitions=len(buffer),
        return_mean=float(np.mean(returns)),
        return_std=float(np.std(returns)),
    )
