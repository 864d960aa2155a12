"""Env wrappers that change what an episode end means.

Why rlcore keeps ``terminated`` and ``truncated`` apart by default: a time limit is usually not
part of the task. When an episode is cut by ``TimeLimit`` the state it stopped in still has a
future, so the learner must bootstrap from it: the buffer's ``discount`` is ``γ^m`` at a
truncation and ``0`` only at a termination (docs/n-step.md). Treating a
truncation as a termination teaches the agent that the world ends at step T, which biases every
value near the limit (Pardo et al. 2018, "Time Limits in Reinforcement Learning").

Some users *do* treat the limit as part of the task (the observation carries the remaining time,
or the benchmark is defined with a hard horizon and a dying agent). For them
:class:`TruncatedAsTerminated` (one env) and :class:`TruncatedAsTerminatedVector` (a gymnasium
vector env) report every truncation as a termination, so the buffer stores ``terminated=True,
truncated=False`` there and the bootstrap is masked (``discount = 0``).
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv, VectorWrapper

__all__ = ["TruncatedAsTerminated", "TruncatedAsTerminatedVector"]


class TruncatedAsTerminated(gym.Wrapper[Any, Any, Any, Any]):
    """Report a truncation (time limit) as a termination: ``step`` returns
    ``terminated = terminated or truncated`` and ``truncated = False``. Observations, rewards and
    infos pass through unchanged.

    Wrap *outside* the ``TimeLimit`` (``gym.make`` puts it innermost, so
    ``TruncatedAsTerminated(gym.make(env_id))`` is right).
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, rew, terminated, truncated, info = self.env.step(action)
        return obs, rew, bool(terminated or truncated), False, info


class TruncatedAsTerminatedVector(VectorWrapper):
    """The vector-env form of :class:`TruncatedAsTerminated`: ``terminated_N | truncated_N`` as
    ``terminated`` (bool ``[N]``) and all-False ``truncated``. The vector env's autoreset mode is
    unchanged (under NEXT_STEP the row after the end is still a reset row)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rew, terminated, truncated, info = self.env.step(actions)
        terminated = np.logical_or(terminated, truncated)
        return obs, rew, terminated, np.zeros_like(terminated), info
