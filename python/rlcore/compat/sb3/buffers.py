"""SB3's ``ReplayBuffer``, ``DictReplayBuffer`` and ``NStepReplayBuffer`` backed by the rlcore core
(see :mod:`rlcore.compat.sb3`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common import buffers as _sb3_buffers
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from rlcore.compat.sb3.storage import CoreStorage

__all__ = ["DictReplayBuffer", "NStepReplayBuffer", "ReplayBuffer"]


class ReplayBuffer(CoreStorage, _sb3_buffers.ReplayBuffer):
    """SB3's ``ReplayBuffer`` backed by the rlcore core (see the module docstring).

    Args:
        buffer_size: transitions to keep in total (``buffer_size // n_envs`` per env, as SB3).
        observation_space: Box, Discrete, MultiDiscrete or MultiBinary space of one env.
        action_space: the action space of one env.
        device: torch device of the sampled tensors.
        n_envs: N, envs per ``add``.
        optimize_memory_usage: must be False (see the module docstring).
        handle_timeout_termination: store time-limit ends as truncations (bootstrapped).
        seed: seed of the core's generator (``None``: derived from NumPy's global state).
        extra_rows: rows per env for episodes' final observations (default ``buffer_size // 8 + 2``).

    Raises:
        ValueError: ``optimize_memory_usage=True``.
        rlcore.errors.ApiUsageError: an unsupported observation space.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )


class DictReplayBuffer(CoreStorage, _sb3_buffers.DictReplayBuffer):
    """SB3's ``DictReplayBuffer`` (Dict observation spaces) backed by the rlcore core; arguments
    as :class:`ReplayBuffer`. Samples are ``DictReplayBufferSamples``.

    Raises:
        ValueError: ``optimize_memory_usage=True``, or a non-Dict observation space.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(f"DictReplayBuffer needs a Dict observation space, got {observation_space}")
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )


class NStepReplayBuffer(CoreStorage, _sb3_buffers.NStepReplayBuffer):
    """SB3's ``NStepReplayBuffer`` backed by the rlcore core (Sutton & Barto 2018, eq. 7.1).

    For a sampled step t whose window ends after m = min(n, steps to the episode's end or to
    the newest stored step) steps: ``rewards = sum_{k<m} gamma^k r_{t+k}``,
    ``next_observations = o_{t+m}``, ``dones`` = termination of step t+m-1 and
    ``discounts = gamma^m`` (``[B, 1]`` float32), so SB3's target is
    ``rewards + (1 - dones) * discounts * Q'(next_observations)``.

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        n_steps: n >= 1.
        gamma: discount in [0, 1].

    Raises:
        ValueError: ``optimize_memory_usage=True``, n_steps < 1 or gamma outside [0, 1].
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_steps: int = 3,
        gamma: float = 0.99,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        if n_steps < 1 or not 0.0 <= gamma <= 1.0:
            raise ValueError(
                f"NStepReplayBuffer needs n_steps >= 1 and gamma in [0, 1], got {n_steps}, {gamma}"
            )
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )
        self.n_steps = self._n_step = int(n_steps)
        self.gamma = self._gamma = float(gamma)

    def sample(self, batch_size: int, env: Any = None) -> ReplayBufferSamples:
        """As :meth:`ReplayBuffer.sample`, with n-step ``rewards``, ``next_observations``,
        ``dones`` and ``discounts = gamma^m`` (see the class docstring)."""
        batch = self._core.sample(batch_size, n_step=self._n_step, gamma=self._gamma)
        return self._samples(batch, env, self._discounts(batch))

    def _discounts(self, batch: Any) -> np.ndarray:
        """SB3's ``discounts = gamma^m`` ``[B]`` float32, computed as SB3 computes it (a float32
        power), where the core's ``discount`` is ``gamma^m * (1 - terminated)`` in float64.

        A window ends at the n-th step, at its episode's last row e (terminal row, or the open
        row of a running episode) or at the newest stored step, which is that open row: so
        ``m = min(n, e - t)`` (rows counted in the ring)."""
        _, end, _ = self._core.episode_bounds(batch.indices)
        m = np.minimum((end - batch.indices) % self._core.segment_len, self._n_step)
        return np.float32(self._gamma) ** m.astype(np.float32)
