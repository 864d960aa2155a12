"""SB3's ``HerReplayBuffer`` backed by the rlcore core's HER (see :mod:`rlcore.compat.sb3`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.her import her_replay_buffer as _sb3_her
from stable_baselines3.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy

from rlcore.buffers.her import HERReplayBuffer as _CoreHER
from rlcore.buffers.replay import ReplayBuffer as _CoreBuffer
from rlcore.compat.sb3.storage import CoreStorage, obs_specs
from rlcore.errors import ApiUsageError

__all__ = ["HerReplayBuffer"]


class HerReplayBuffer(CoreStorage, _sb3_her.HerReplayBuffer):
    """SB3's ``HerReplayBuffer`` (Andrychowicz et al. 2017) backed by the rlcore core's HER.

    With ``exact_parity`` (the default, as SB3) batches are drawn from finished episodes only
    and exactly ``int(B * k / (k + 1))`` of them, the last ones, are relabeled (k =
    ``n_sampled_goal``); without it every stored transition is drawn and each is relabeled with
    probability ``k / (k + 1)``. ``"future"`` takes the achieved goal after a step t' uniform
    in [t, end of episode] (inclusive of t, as SB3), ``"final"`` after the episode's last step,
    ``"episode"`` after a step uniform over the episode. The new goal replaces ``desired_goal`` in ``observations``
    and ``next_observations`` and the reward is recomputed in one batched call of
    ``env.env_method("compute_reward", next_achieved_goal [M, G], new_goal [M, G], infos,
    indices=[0])`` — exactly SB3's call — or, with ``distance_threshold``, natively in Rust as
    ``-(||ag - g||_2 > distance_threshold)`` (gymnasium-robotics' Fetch sparse reward).

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        env: the training VecEnv (for ``compute_reward``); SB3 passes it.
        n_sampled_goal: k, relabeled-to-real ratio.
        goal_selection_strategy: ``"future"``, ``"final"``, ``"episode"`` or SB3's enum.
        copy_info_dict: must be False (see the module docstring).
        distance_threshold: use the native Fetch-style reward instead of ``env``'s
            ``compute_reward`` (it must be the env's own threshold and sparse reward).
        exact_parity: sample as SB3's buffer does (default): finished episodes only, exactly
            ``int(B * k / (k + 1))`` relabeled samples, last in the batch. False: rlcore's own
            HER sampling (see the module docstring, "Differences").

    Raises:
        ValueError: ``optimize_memory_usage=True``, a non-Dict observation space or one
            without ``observation``/``achieved_goal``/``desired_goal``.
        NotImplementedError: ``copy_info_dict=True``.
        KeyError: unknown ``goal_selection_strategy``.
    """

    env: Any

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: Any,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        copy_info_dict: bool = False,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
        distance_threshold: float | None = None,
        exact_parity: bool = True,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict) or any(
            k not in observation_space.spaces for k in ("observation", "achieved_goal", "desired_goal")
        ):
            raise ValueError(
                "HerReplayBuffer needs a Dict observation space with keys observation, achieved_goal, "
                f"desired_goal; got {observation_space}"
            )
        if copy_info_dict:
            raise NotImplementedError(
                "copy_info_dict=True is not supported by rlcore.compat.sb3.HerReplayBuffer: the core's "
                "reward callback does not receive the relabeled rows, so stored infos cannot be matched"
            )
        if isinstance(goal_selection_strategy, str):
            goal_selection_strategy = KEY_TO_GOAL_STRATEGY[goal_selection_strategy.lower()]
        self.env = env
        self.copy_info_dict = False
        self.goal_selection_strategy = goal_selection_strategy
        self.n_sampled_goal = n_sampled_goal
        self.her_ratio = 1 - (1.0 / (n_sampled_goal + 1))
        self.distance_threshold = distance_threshold
        self.exact_parity = bool(exact_parity)
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

    def _make_core(self) -> _CoreBuffer:
        rows = max(2, self.buffer_size + self.extra_rows) * self.n_envs
        core = _CoreHER(
            rows,
            num_envs=self.n_envs,
            seed=self.seed,
            strategy=self.goal_selection_strategy.name.lower(),
            future_k=float(self.n_sampled_goal),
            compute_reward=None if self.distance_threshold is not None else self._compute_reward,
            distance_threshold=self.distance_threshold,
            finished_only=getattr(self, "exact_parity", False),
            exact_ratio=getattr(self, "exact_parity", False),
        )
        core._declare(obs_specs(self.observation_space), [("act", self._act_dtype.name, (self.action_dim,))])
        return core

    def _compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """SB3's reward call for relabeled samples: ``[M, G]``, ``[M, G]`` -> float32 ``[M]``."""
        if self.env is None:
            raise ApiUsageError(
                "HerReplayBuffer has no env to compute rewards with (it is dropped when pickled): call set_env(env)"
            )
        infos: list[dict[str, Any]] = [{} for _ in range(len(achieved_goal))]
        rewards = self.env.env_method("compute_reward", achieved_goal, desired_goal, infos, indices=[0])
        return np.asarray(rewards[0], dtype=np.float32)

    def set_env(self, env: Any) -> None:
        """Set the VecEnv whose ``compute_reward`` relabels rewards (after unpickling).

        Raises:
            ValueError: an env is already set (as SB3).
        """
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self.env = env

    def sample(self, batch_size: int, env: Any = None) -> DictReplayBufferSamples:  # type: ignore[override]
        """As :meth:`ReplayBuffer.sample`, with hindsight relabeling (see the class docstring).

        Raises:
            rlcore.errors.EmptyBufferError: nothing stored yet.
            rlcore.errors.ApiUsageError: no env to compute rewards with (call ``set_env``); with
                ``exact_parity``, no episode has finished yet (a ``RuntimeError``, as SB3's).
        """
        return self._samples(self._core.sample(batch_size), env)

    def truncate_last_trajectory(self) -> None:
        """SB3 marks still-running episodes as ended (and bootstrapped) after loading a buffer.

        Nothing to do here: the core samples running episodes from their stored part already,
        and when the next ``add`` brings an observation that does not continue an episode (the
        env was reset) the core ends it as a cut, which bootstraps like a time limit.
        """
