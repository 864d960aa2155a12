"""Partially observed variants of classic-control tasks, for recurrent agents.

``rlcore/CartPoleNoVel-v1`` is gymnasium's ``CartPole-v1`` (500-step time limit) whose observation
keeps only the cart position and the pole angle: the two velocities are hidden, so a memoryless
policy cannot tell a falling pole from a rising one and a recurrent agent must infer them from the
history (the POMDP of Hausknecht & Stone 2015, "Deep Recurrent Q-Learning", and of Meng et al.
2021, "Memory-based Deep Reinforcement Learning for POMDPs").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["HideObservationEntries", "make_cartpole_no_velocity"]

CARTPOLE_VISIBLE = (0, 2)
"""Entries of CartPole's observation that stay visible: cart position (m), pole angle (rad)."""


class HideObservationEntries(gym.ObservationWrapper):
    """Keep only the entries ``keep`` of a 1-d ``Box`` observation (float32 ``[len(keep)]``).

    Args:
        env: an env with a 1-d ``Box`` observation space.
        keep: indices of the entries to keep, in that order.

    Raises:
        ValueError: the observation space is not a 1-d Box, or ``keep`` is empty or out of range.
    """

    def __init__(self, env: gym.Env, keep: Sequence[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            raise ValueError(f"HideObservationEntries needs a 1-d Box observation space, got {space}")
        idx = np.asarray(keep, np.int64)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= space.shape[0]:
            raise ValueError(f"keep must name entries of [0, {space.shape[0]}), got {list(keep)}")
        self._keep = idx
        self.observation_space = gym.spaces.Box(
            low=space.low[idx].astype(np.float32), high=space.high[idx].astype(np.float32), dtype=np.float32
        )

    def observation(self, observation: Any) -> np.ndarray:
        """The kept entries, float32 ``[len(keep)]``."""
        return np.asarray(observation, np.float32)[self._keep]


def make_cartpole_no_velocity(**kwargs: Any) -> gym.Env:
    """``CartPole-v1`` with the cart velocity and the pole's angular velocity hidden (obs ``[2]``)."""
    return HideObservationEntries(gym.make("CartPole-v1", **kwargs), CARTPOLE_VISIBLE)
