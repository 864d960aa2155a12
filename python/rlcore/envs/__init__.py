"""Small environments shipped with rlcore (for tests, CI smoke runs and examples).

Importing this module registers them with gymnasium:

- ``rlcore/PointGoal-v0``: :class:`~rlcore.envs.point_goal.PointGoalEnv`, a 2-d point that must
  reach a goal; goal-env dict observations and sparse reward like gymnasium-robotics' Fetch tasks,
  50 times cheaper to step. Episode length via ``gym.make(..., max_episode_steps=T)``.
- ``rlcore/CartPoleNoVel-v1``: ``CartPole-v1`` with the velocities hidden
  (:func:`~rlcore.envs.partial.make_cartpole_no_velocity`), a POMDP for recurrent agents.

Vector envs: :func:`~rlcore.envs.make.make_vec` (gymnasium or EnvPool, lock-step or asynchronous),
stepped through the ``send``/``recv`` protocol of :mod:`rlcore.envs.backends` by the one stepper,
:class:`~rlcore.envs.stepping.EnvStepper`.

Wrappers: :class:`~rlcore.envs.wrappers.TruncatedAsTerminated` (and its vector-env form) for users
who treat a time limit as part of the task (why the default keeps them apart: the module's docs).
"""

from __future__ import annotations

import gymnasium as gym

from rlcore.envs.backends import EnvPoolBackend, GymVectorBackend, VecBackend
from rlcore.envs.make import make_vec
from rlcore.envs.point_goal import PointGoalEnv
from rlcore.envs.wrappers import TruncatedAsTerminated, TruncatedAsTerminatedVector

__all__ = [
    "EnvPoolBackend",
    "GymVectorBackend",
    "PointGoalEnv",
    "TruncatedAsTerminated",
    "TruncatedAsTerminatedVector",
    "VecBackend",
    "make_vec",
]

if "rlcore/PointGoal-v0" not in gym.registry:
    gym.register(
        id="rlcore/PointGoal-v0",
        entry_point="rlcore.envs.point_goal:PointGoalEnv",
        max_episode_steps=20,
    )
if "rlcore/CartPoleNoVel-v1" not in gym.registry:
    gym.register(id="rlcore/CartPoleNoVel-v1", entry_point="rlcore.envs.partial:make_cartpole_no_velocity")
