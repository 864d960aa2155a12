"""Hindsight experience replay (Andrychowicz et al. 2017): relabeled sampling in the Rust core."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from rlcore._core import RawBuffer
from rlcore.batch import TransitionBatch
from rlcore.buffers.offline import complete_steps, offline_capacity
from rlcore.buffers.prioritized import PER_ALPHA, PER_BETA, PER_EPS
from rlcore.buffers.replay import (
    ReplayBuffer,
    _index_array,
    _instance_state,
    _new_batch,
    _restore,
)
from rlcore.errors import ApiUsageError, InvalidValueError


class HERReplayBuffer(ReplayBuffer):
    """Hindsight Experience Replay (Andrychowicz et al. 2017) for goal envs with dict
    observations ``{observation, achieved_goal, desired_goal}``.

    Two sampling modes. By default every stored transition is drawn (the running episodes'
    stored part too) and each sampled transition is relabeled independently with probability
    ``future_k / (future_k + 1)``. ``finished_only=True`` draws only transitions of episodes that
    have ended and are whole in the ring (before the first episode ends, ``sample`` raises), and
    ``exact_ratio=True`` relabels exactly the last ``⌊B·(1 − 1/(k + 1))⌋`` samples of a batch of
    B, as Stable-Baselines3's ``HerReplayBuffer`` does (both are on in
    :class:`rlcore.compat.sb3.HerReplayBuffer`). Goals: strategy ``"future"`` picks t' uniformly in [t, e − 1] of
    its episode, ``"final"`` picks e − 1, ``"episode"`` picks uniformly in [s, e − 1]; the new
    goal is ``achieved_goal`` of o_{t'+1} (the goal reached *after* step t'). It replaces
    ``desired_goal`` in ``obs`` and ``obs_next``, and every reward of the (n-step) window is
    recomputed against it. Stored data is never modified. Running episodes relabel from their
    stored part; after the ring wraps no goal comes from an overwritten row or another episode.

    Args:
        capacity: total rows, shared equally by the envs (as :class:`ReplayBuffer`).
        num_envs: N, the envs whose steps each ``add`` receives.
        seed: seed of the buffer's generator (``None``: from the OS).
        strategy: ``"future"``, ``"final"`` or ``"episode"``.
        future_k: relabeled-to-real ratio k (relabel probability k / (k + 1)).
        compute_reward: vectorised ``f(achieved_goal [M, G], desired_goal [M, G], info) -> [M]``
            (gymnasium-robotics' ``env.unwrapped.compute_reward`` works as is); ``info`` is a dict
            of the extra columns stored with ``add(..., **extras)``, each ``[M, ...]`` at the step
            whose reward is recomputed (empty without extras); called once per ``sample``.
        distance_threshold: instead of ``compute_reward``: the native Fetch-style sparse reward
            ``-(||ag - g||_2 > distance_threshold)`` (float32), computed in Rust.
        goal_keys: names of the (observation, achieved goal, desired goal) keys.
        prioritized: prioritized HER: sample by priority (see :class:`PrioritizedReplayBuffer`).
        alpha: with ``prioritized``: priority exponent.
        beta: with ``prioritized``: importance-sampling exponent.
        eps: with ``prioritized``: added to every priority.
        finished_only: draw only transitions of finished episodes whole in the ring.
        exact_ratio: relabel exactly ``⌊B·(1 − 1/(k + 1))⌋`` samples per batch (the last ones).

    Raises:
        InvalidValueError: neither or both of ``compute_reward`` and ``distance_threshold``, a
            non-callable ``compute_reward``, unknown strategy, future_k < 0,
            ``finished_only`` with ``prioritized``.
        ShapeError: (at the first add) observations without the goal keys, or achieved and
            desired goals of different shapes.
    """

    _kind: ClassVar[str] = "her"
    __slots__ = ("_compute_reward", "_goal_keys")

    def __new__(
        cls,
        capacity: int,
        *,
        num_envs: int = 1,
        seed: int | None = None,
        strategy: str = "future",
        future_k: float = 4,
        compute_reward: Callable[..., Any] | None = None,
        distance_threshold: float | None = None,
        goal_keys: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal"),
        prioritized: bool = False,
        alpha: float = PER_ALPHA,
        beta: float = PER_BETA,
        eps: float = PER_EPS,
        finished_only: bool = False,
        exact_ratio: bool = False,
    ) -> HERReplayBuffer:
        if (compute_reward is None) == (distance_threshold is None):
            raise InvalidValueError(
                "HERReplayBuffer needs exactly one of compute_reward=callable (e.g. "
                "env.unwrapped.compute_reward) or distance_threshold=float (native sparse reward)"
            )
        if compute_reward is not None and not callable(compute_reward):
            raise InvalidValueError(f"compute_reward must be callable, got {type(compute_reward).__name__}")
        if len(goal_keys) != 3:
            raise InvalidValueError(
                f"goal_keys must name (observation, achieved_goal, desired_goal), got {goal_keys}"
            )
        self = RawBuffer.__new__(
            cls,
            capacity,
            num_envs=num_envs,
            seed=seed,
            prioritized=prioritized,
            alpha=alpha,
            beta=beta,
            eps=eps,
            her_strategy=strategy,
            future_k=future_k,
            distance_threshold=distance_threshold,
            achieved_goal_key=goal_keys[1],
            desired_goal_key=goal_keys[2],
            finished_only=bool(finished_only),
            exact_ratio=bool(exact_ratio),
        )
        self._compute_reward = compute_reward
        self._goal_keys = tuple(goal_keys)
        return self

    @classmethod
    def from_spaces(  # type: ignore[override]
        cls,
        observation_space: Any,
        action_space: Any,
        *,
        capacity: int,
        num_envs: int = 1,
        seed: int | None = None,
        strategy: str = "future",
        future_k: float = 4,
        compute_reward: Callable[..., Any] | None = None,
        distance_threshold: float | None = None,
        goal_keys: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal"),
        prioritized: bool = False,
        alpha: float = PER_ALPHA,
        beta: float = PER_BETA,
        eps: float = PER_EPS,
        extras: Mapping[str, Any] | None = None,
        finished_only: bool = False,
        exact_ratio: bool = False,
    ) -> HERReplayBuffer:
        """As :meth:`ReplayBuffer.from_spaces`, with the HER parameters.

        Raises:
            ShapeError: the observation space lacks one of ``goal_keys``.
        """
        from gymnasium import spaces

        from rlcore.errors import ShapeError

        if not isinstance(observation_space, spaces.Dict) or any(
            k not in observation_space.spaces for k in goal_keys
        ):
            raise ShapeError(
                f"HER needs a Dict observation space with keys {list(goal_keys)}, got {observation_space}"
            )
        buf = cls(
            capacity,
            num_envs=num_envs,
            seed=seed,
            strategy=strategy,
            future_k=future_k,
            compute_reward=compute_reward,
            distance_threshold=distance_threshold,
            goal_keys=goal_keys,
            prioritized=prioritized,
            alpha=alpha,
            beta=beta,
            eps=eps,
            finished_only=finished_only,
            exact_ratio=exact_ratio,
        )
        buf._declare_spaces(observation_space, action_space, extras)
        return buf

    @classmethod
    def from_arrays(  # type: ignore[override]
        cls,
        obs: Mapping[str, np.ndarray],
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: Mapping[str, np.ndarray] | None,
        *,
        capacity: int | None = None,
        seed: int | None = None,
        extras: Mapping[str, np.ndarray] | None = None,
        strategy: str = "future",
        future_k: float = 4,
        compute_reward: Callable[..., Any] | None = None,
        distance_threshold: float | None = None,
        goal_keys: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal"),
        prioritized: bool = False,
        alpha: float = PER_ALPHA,
        beta: float = PER_BETA,
        eps: float = PER_EPS,
        finished_only: bool = False,
        exact_ratio: bool = False,
    ) -> HERReplayBuffer:
        """As :meth:`ReplayBuffer.from_arrays` (an offline dataset of goal-env episodes), with
        the HER parameters of the class (``obs_next=None``: as there, from ``obs``)."""
        if obs_next is None:
            s = complete_steps(obs, act, rew, terminated, truncated, extras=extras)
            obs, act, rew, obs_next, extras = s.obs, s.act, s.rew, s.obs_next, s.extras
            terminated, truncated = s.terminated, s.truncated
        rew_a, capacity = offline_capacity(obs, rew, terminated, truncated, obs_next, capacity)
        buf = cls(
            capacity,
            num_envs=1,
            seed=seed,
            strategy=strategy,
            future_k=future_k,
            compute_reward=compute_reward,
            distance_threshold=distance_threshold,
            goal_keys=goal_keys,
            prioritized=prioritized,
            alpha=alpha,
            beta=beta,
            eps=eps,
            finished_only=finished_only,
            exact_ratio=exact_ratio,
        )
        buf._extend(obs, act, rew_a, terminated, truncated, obs_next, extras=dict(extras or {}))
        return buf

    def sample(
        self,
        batch_size: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        out: TransitionBatch | None = None,
    ) -> TransitionBatch:
        """As :meth:`ReplayBuffer.sample`, with hindsight relabeling (see the class docstring).

        Raises:
            ShapeError: ``compute_reward`` returned an array of another shape than ``[M]``.
            DTypeError: ``compute_reward`` returned something that is not numbers.
            Exception: any exception raised by ``compute_reward`` itself.
        """
        return _new_batch(TransitionBatch, self._sample(batch_size, n_step, gamma, out, self._compute_reward))

    def sample_at(  # type: ignore[override]
        self,
        indices: Any,
        goal_indices: Any = None,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        out: TransitionBatch | None = None,
    ) -> TransitionBatch:
        """The batch of the rows ``indices`` (as :meth:`ReplayBuffer.sample_at`) with chosen
        goals: sample i takes the achieved goal after the transition at row ``goal_indices[i]``
        (a transition of the same episode; -1 keeps the stored goal) and its rewards are
        recomputed. Without ``goal_indices`` no sample is relabeled. Uses no randomness.

        Raises:
            InvalidValueError: as :meth:`ReplayBuffer.sample_at`; a goal row of another episode
                or one that holds no transition; ``goal_indices`` of another length.
            DTypeError: non-integer indices.
        """
        idx = _index_array(indices)
        goals = None if goal_indices is None else _index_array(goal_indices)
        return _new_batch(
            TransitionBatch, self._sample(idx.size, n_step, gamma, out, self._compute_reward, idx, goals)
        )

    @property
    def strategy(self) -> str:
        return self._her_config()[0]

    @property
    def future_k(self) -> float:
        return self._her_config()[1]

    @property
    def distance_threshold(self) -> float | None:
        return self._her_config()[2]

    @property
    def finished_only(self) -> bool:
        return self._her_config()[5]

    @property
    def exact_ratio(self) -> bool:
        return self._her_config()[6]

    def _config(self) -> dict[str, Any]:
        strategy, future_k, threshold, _, _, finished_only, exact_ratio = self._her_config()
        cfg = {
            **super()._config(),
            "strategy": strategy,
            "future_k": future_k,
            "distance_threshold": threshold,
            "goal_keys": list(self._goal_keys),
            "prioritized": self.prioritized,
            "finished_only": finished_only,
            "exact_ratio": exact_ratio,
        }
        if self.prioritized:
            cfg.update(alpha=self.alpha, beta=self.beta, eps=self.eps)
        return cfg

    @classmethod
    def _from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> ReplayBuffer:
        """An empty buffer of ``config`` (:meth:`_config`'s), with ``kwargs``' ``compute_reward``
        (a Python reward is not in the config) and ``seed`` (``None``: from the OS)."""
        compute_reward = kwargs.get("compute_reward")
        threshold = config.get("distance_threshold")
        if threshold is None and compute_reward is None:
            raise ApiUsageError(
                "this HER buffer was saved with a Python compute_reward; pass "
                "HERReplayBuffer.load(path, compute_reward=...) to load it"
            )
        per = (
            dict(alpha=config["alpha"], beta=config["beta"], eps=config["eps"])
            if config.get("prioritized")
            else {}
        )
        return cls(
            config["capacity"],
            num_envs=config["num_envs"],
            seed=kwargs.get("seed"),
            strategy=config["strategy"],
            future_k=config["future_k"],
            compute_reward=None if threshold is not None else compute_reward,
            distance_threshold=threshold,
            goal_keys=tuple(config["goal_keys"]),
            prioritized=bool(config.get("prioritized")),
            finished_only=bool(config.get("finished_only", False)),
            exact_ratio=bool(config.get("exact_ratio", False)),
            **per,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.state_dict(), self._compute_reward), _instance_state(self))


def _restore_her(state: Mapping[str, Any], compute_reward: Callable[..., Any] | None) -> ReplayBuffer:
    """Unpickle a HER buffer pickled before subclasses kept their class."""
    return _restore(HERReplayBuffer, state, compute_reward)
