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

__all__ = ["ExpertData", "record_episodes", "record_expert"]


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
    directory of ``rlcore train`` holding a checkpoint, or a policy file of ``rlcore
    export-policy``: :func:`rlcore.policy.load_policy`) and save them to ``out``.

    Episode k starts from ``env.reset(seed=seed + 100_000 + k)`` (apart from the training seeds).

    Args:
        run_dir: the expert's run directory (``config.json`` and ``checkpoint/``) or policy file.
        env_id: gymnasium env id.
        episodes: episodes to record (>= 1).
        out: directory for :meth:`rlcore.ReplayBuffer.save`.
        seed: the expert's seed; the recorded episodes' resets are derived from it.
        minari: also write the episodes as the Minari dataset of this id (:func:`export_minari`).
        algo: the algorithm's name, for the Minari metadata (default: read from ``run_dir``).

    Raises:
        FileNotFoundError, CheckpointError, ValueError: as :func:`rlcore.policy.load_policy` and
            :func:`record_episodes`.
        ImportError, ValueError: as :func:`export_minari`.
    """
    from rlcore.policy import load_policy

    run_dir = Path(run_dir)
    policy = load_policy(run_dir)
    if policy.env_id != env_id:
        raise ValueError(f"{run_dir}: the expert was trained on {policy.env_id}, not {env_id}")
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
            algorithm_name=f"rlcore {algo or policy.algo} (deterministic policy of {run_dir})",
        )
    return ExpertData(
        path=out,
        episodes=len(returns),
        transitions=len(buffer),
        return_mean=float(np.mean(returns)),
        return_std=float(np.std(returns)),
    )
