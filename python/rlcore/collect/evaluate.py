"""Deterministic evaluation of a policy on a vector env, episodes spread evenly over the envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlcore.envs.stepping import EnvStepper, Episode, collect_stats
from rlcore.errors import InvalidValueError
from rlcore.stats import EvalStats
from rlcore.types import Policy, StatefulPolicy

__all__ = ["evaluate"]


def evaluate(
    policy: Policy | StatefulPolicy, envs: gym.vector.VectorEnv, n_episodes: int, *, seed: int | None = None
) -> EvalStats:
    """Run ``n_episodes`` full episodes with ``policy`` on ``envs`` (reset first) and summarise them.

    Episodes are spread evenly over the N sub-envs (env i runs ``n_episodes // N`` episodes, plus
    one for the first ``n_episodes % N``), so short episodes are not over-represented. Stepping,
    autoreset, returns and success are :class:`~rlcore.envs.stepping.EnvStepper`'s. A
    :class:`~rlcore.types.StatefulPolicy` (a recurrent policy's actor) is reset with the envs and
    driven with ``act(obs, env_ids)`` / ``observe(step)``.

    Raises:
        InvalidValueError: ``n_episodes <= 0`` (a ``ValueError``).
    """
    if n_episodes <= 0:
        raise InvalidValueError(f"n_episodes must be > 0, got {n_episodes}")
    stepper = EnvStepper(envs)
    n = stepper.num_envs
    quota_N = np.full(n, n_episodes // n) + (np.arange(n) < n_episodes % n)
    stepper.reset(seed=seed)
    stateful = isinstance(policy, StatefulPolicy)
    if stateful:
        policy.reset(n)  # type: ignore[union-attr]
    ended: list[Episode] = []
    while (quota_N > 0).any():
        if stateful:
            step = stepper.step(policy.act(stepper.ready_obs, stepper.ready_ids))  # type: ignore[union-attr]
            policy.observe(step)  # type: ignore[union-attr]
        else:
            step = stepper.step(policy(stepper.ready_obs))  # type: ignore[operator]
        for episode in step.episodes:
            if quota_N[episode.env] > 0:
                quota_N[episode.env] -= 1
                ended.append(episode)
    stats = collect_stats(ended, env_steps=0, vector_steps=0, duration_s=0.0)
    return EvalStats.from_episodes(stats.episode_returns, stats.episode_lengths, stats.episode_successes)
