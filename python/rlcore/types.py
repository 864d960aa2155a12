"""Callable and protocol types shared by the layers: policies and learned-reward functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["ActorCriticPolicy", "Policy", "RecurrentPolicy", "RewardFn", "StatefulPolicy"]

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


@runtime_checkable
class RecurrentPolicy(Protocol):
    """A policy with a recurrent state per env (R2D2's GRU Q-network,
    :class:`rlcore.algos.r2d2.R2D2`); :class:`rlcore.collect.recurrent.RecurrentActor` carries the
    state across the steps of a vector env."""

    def initial_state(self, n: int) -> np.ndarray:
        """The state of n envs at an episode's first step (float32 ``[n, *H]``)."""
        ...

    def act(self, obs: Any, state: np.ndarray, *, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[n, *A]`` and the next state ``[n, *H]`` for n observations and their states."""
        ...


@runtime_checkable
class StatefulPolicy(Protocol):
    """A policy that carries something per env from one step to the next (a recurrent state). The
    collector and evaluation drive it instead of calling ``policy(obs)``:
    :meth:`reset` after the envs are reset, :meth:`act` before each vector step, :meth:`observe`
    after it."""

    def reset(self, num_envs: int) -> None:
        """Every one of the ``num_envs`` envs starts an episode."""
        ...

    def act(self, obs: Any, env_ids: np.ndarray) -> np.ndarray:
        """Actions ``[K, *A]`` for the observations ``[K, *O]`` of the envs ``env_ids`` (int64 ``[K]``)."""
        ...

    def observe(self, step: Any) -> Mapping[str, np.ndarray]:
        """Take note of a vector step (:class:`rlcore.envs.stepping.Step`) and return the extra
        columns to store with its rows (row k for env ``step.env_ids[k]``; may be empty)."""
        ...
