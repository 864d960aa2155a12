"""A point that must reach a goal: the smallest goal environment with Fetch's interface."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PointGoalEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """A point in the square [-1, 1]^2 moves by ``step_size * action`` per step and must come
    within ``distance_threshold`` of a goal drawn uniformly in the square at reset.

    Observation: dict of float32 arrays, ``observation`` (2,) the position, ``achieved_goal`` (2,)
    the position, ``desired_goal`` (2,) the goal. Action: float32 (2,) in [-1, 1]. Reward: the
    sparse Fetch-style ``-(||achieved - desired||_2 > distance_threshold)`` as float32 (−1 or 0),
    from :meth:`compute_reward`, which is vectorised over a leading batch dimension and takes
    ``(achieved_goal, desired_goal, info)`` in that order like gymnasium-robotics. Never
    terminates; episodes end by truncation (register with ``max_episode_steps``).
    ``info["is_success"]`` is 1.0 within the threshold.

    Args:
        step_size: distance moved by a unit action.
        distance_threshold: success radius ε.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, step_size: float = 0.2, distance_threshold: float = 0.1) -> None:
        self.step_size = float(step_size)
        self.distance_threshold = float(distance_threshold)
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._pos = np.zeros(2, np.float32)
        self._goal = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self._pos.copy(),
            "achieved_goal": self._pos.copy(),
            "desired_goal": self._goal.copy(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        self._goal = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._obs(), {"is_success": self._success()}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        a = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self._pos = np.clip(self._pos + self.step_size * a, -1.0, 1.0).astype(np.float32)
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], {}))
        return obs, reward, False, False, {"is_success": self._success()}

    def _success(self) -> float:
        return float(np.linalg.norm(self._pos - self._goal) <= self.distance_threshold)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """float32 ``[...]``: −1 where ``||achieved − desired||_2 > distance_threshold``, else 0
        (shapes ``[..., 2]``; the leading dimensions are broadcast)."""
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(d > self.distance_threshold).astype(np.float32)
