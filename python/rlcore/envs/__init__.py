"""Small environments shipped with rlcore (for tests, CI smoke runs and examples).

Importing this module registers them with gymnasium:

- ``rlcore/PointGoal-v0``: :class:`~rlcore.envs.point_goal.PointGoalEnv`, a 2-d point that must
  reach a goal; goal-env dict observations and sparse reward like gymnasium-robotics' Fetch tasks,
  50 times cheaper to step. Episode length via ``gym.make(..., max_episode_steps=T)``.

Wrappers: :class:`~rlcore.envs.wrappers.TruncatedAsTerminated` (and its vector-env form) for users
who treat a time limit as part of the task (why the default keeps them apart: the module's docs).
"""

from __future__ import annotations

import gymnasium as gym

from rlcore.envs.point_goal import PointGoalEnv
from rlcore.envs.wrappers import TruncatedAsTerminated, TruncatedAsTerminatedVector

__all__ = ["PointGoalEnv", "TruncatedAsTerminated", "TruncatedAsTerminatedVector"]

if "rlcore/PointGoal-v0" not in gym.registry:
    gym.register(
        id="rlcore/PointGoal-v0",
        entry_point="rlcore.envs.point_goal:PointGoalEnv",
        max_episode_steps=20,
    )
