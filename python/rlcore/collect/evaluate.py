"""Deterministic evaluation of a policy on a vector env, episodes spread evenly over the envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.envs.stepping import info_at
from rlcore.stats import EvalStats
from rlcore.types import Policy


def evaluate(
    policy: Policy, envs: gym.vector.VectorEnv, n_episodes: int, *, seed: int | None = None
) -> EvalStats:
    """Run ``n_episodes`` full episodes with ``policy`` on ``envs`` (reset first) and summarise them.

    Episodes are spread evenly over the N sub-envs (env i runs ``n_episodes // N`` episodes, plus
    one for the first ``n_episodes % N``), so short episodes are not over-represented.

    Raises:
        ValueError: ``n_episodes <= 0``.
    """
    if n_episodes <= 0:
        raise ValueError(f"n_episodes must be > 0, got {n_episodes}")
    n = int(envs.num_envs)
    quota_N = np.full(n, n_episodes // n) + (np.arange(n) < n_episodes % n)
    mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    obs, _ = envs.reset(seed=seed)
    ret_N = np.zeros(n)
    len_N = np.zeros(n, dtype=np.int64)
    reset_row_N = np.zeros(n, dtype=bool)
    returns: list[float] = []
    lengths: list[int] = []
    successes: list[float] = []
    while (quota_N > 0).any():
        obs, rew_N, term_N, trunc_N, info = envs.step(policy(obs))
        live_N = ~reset_row_N
        ret_N += np.where(live_N, rew_N, 0.0)
        len_N += live_N
        done_N = (term_N | trunc_N) & live_N
        for i in np.flatnonzero(done_N):
            if quota_N[i] > 0:
                quota_N[i] -= 1
                returns.append(float(ret_N[i]))
                lengths.append(int(len_N[i]))
                success = info_at(
                    info["final_info"] if mode == AutoresetMode.SAME_STEP else info, "is_success", int(i)
                )
                if success is not None:
                    successes.append(float(success))
            ret_N[i] = 0.0
            len_N[i] = 0
        if mode == AutoresetMode.DISABLED and done_N.any():
            obs, _ = envs.reset(options={"reset_mask": done_N})
        reset_row_N = done_N if mode == AutoresetMode.NEXT_STEP else np.zeros_like(done_N)
    return EvalStats.from_episodes(returns, lengths, successes)
