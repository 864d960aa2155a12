"""Callable and protocol types shared by the layers: policies and learned-reward functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["ActorCriticPolicy", "Policy", "RewardFn"]

Policy = Callable[[Any], np.ndarray]
"""``policy(obs) -> act``: a NumPy batch of N observations to N actions."""

RewardFn = Callable[[Any, np.ndarray, Any, np.ndarray], np.ndarray]
"""``reward_fn(obs, act, obs_next, rew) -> rew``: float ``[N]`` rewards to store instead of ``rew``."""


@runtime_checkable
class ActorCriticPolicy(Protocol):
    """What the sampler needs from a policy (VPG, A2C and PPO implement it).

    Both methods take a NumPy batch of N observations and return NumPy arrays.
    """

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions; return ``(act [N, *A], log_prob float32 [N], value float32 [N])``."""
        ...

    def value(self, obs: np.ndarray) -> np.ndarray:
        """State values float32 ``[N]`` (on the scale the critic learns, i.e. normalised returns)."""
        ...
