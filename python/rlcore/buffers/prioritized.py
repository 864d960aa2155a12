"""Prioritized experience replay (Schaul et al. 2016) on the Rust core's sum tree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from rlcore._core import INDEX_ROW_BITS, RawBuffer, _priority_update, _sequence_update
from rlcore._core import MAX_PRIORITY as _MAX_PRIORITY
from rlcore.buffers.replay import ReplayBuffer

INDEX_ROW_MASK = (1 << INDEX_ROW_BITS) - 1
"""``index & INDEX_ROW_MASK`` is an index's row: a prioritized buffer's indices carry the generation
of their transition above bit ``INDEX_ROW_BITS`` (40)."""

PER_ALPHA = 0.6
"""Default priority exponent alpha of every prioritized buffer (Schaul et al. 2016, Table 3,
proportional variant)."""
PER_BETA = 0.4
"""Default initial importance-sampling exponent beta (Schaul et al. 2016, Table 3; annealed to 1
by ``OffPolicyTrainerConfig.per_beta_end`` or a :class:`~rlcore.schedules.LinearSchedule`)."""
PER_EPS = 1e-6
"""Default constant added to every priority ``|delta|`` so that none is zero."""


class PrioritizedReplayBuffer(ReplayBuffer):
    """Prioritized experience replay (Schaul et al. 2016, "Prioritized Experience Replay").

    Rows are sampled with probability ``P(i) = p_i / sum_j p_j`` where ``p_i = (|delta_i| +
    eps)^alpha`` (sec. 3.3), stratified over B equal slices of the priority mass; new transitions
    get the largest priority set so far. ``sample`` also returns ``weights = (N P(i))^-beta /
    max_j (N P(j))^-beta`` (sec. 3.4, float32 [B]) with the max taken over all stored
    transitions. Priorities live in a sum tree and a min tree of float64 in the core; terminal
    rows and overwritten rows have priority 0 and are never sampled.

    Indices name transitions: ``sample``'s, ``sample_at``'s, ``sample_sequences``' start
    indices and ``add``'s are ``row | generation << 40`` (``rows_of`` gives the rows). An update
    through an index whose row the ring has rewritten since is skipped
    and counted in ``update_priorities``' return value, never given to the newer transition;
    bare rows name whatever their row holds now. ``restore`` refuses a save of other
    ``alpha``/``eps`` (``SaveFileError``); ``load`` adopts the save's.

    A stored priority is at most :attr:`MAX_PRIORITY` (1e280): ``update_priorities`` refuses
    larger ones, so the total priority mass of any buffer stays finite whatever adds and
    updates come. Weights are computed from the priority ratio ``p_i / p_min`` (from logarithms
    where that ratio overflows), never through ``p / total``; a weight below float32's
    smallest normal number ``2**-126`` is returned as ``2**-126``, so every weight lies in
    ``[2**-126, 1]``.

    Args:
        capacity: total rows, shared equally by the envs (as :class:`ReplayBuffer`).
        num_envs: N, the envs whose steps each ``add`` receives.
        seed: seed of the buffer's generator (``None``: from the OS).
        alpha: priority exponent (0 = uniform).
        beta: importance-sampling exponent; settable any time (``buf.beta = 1.0``), see
            :class:`LinearSchedule`.
        eps: added to every priority so none is zero.
        frame_stack: store stacked observations one frame per row (as :class:`ReplayBuffer`).

    Raises:
        InvalidValueError: alpha < 0, beta < 0, eps <= 0, or ``eps ** alpha`` (the smallest
            priority) outside ``(0, MAX_PRIORITY]``.
        DTypeError: alpha, beta or eps not a number (bool, None, a string).
    """

    MAX_PRIORITY: ClassVar[float] = _MAX_PRIORITY

    _kind: ClassVar[str] = "prioritized"
    __slots__ = ()

    def __new__(
        cls,
        capacity: int,
        *,
        num_envs: int = 1,
        alpha: float = PER_ALPHA,
        beta: float = PER_BETA,
        eps: float = PER_EPS,
        seed: int | None = None,
        frame_stack: int | None = None,
    ) -> PrioritizedReplayBuffer:
        return RawBuffer.__new__(
            cls,
            capacity,
            num_envs=num_envs,
            seed=seed,
            prioritized=True,
            alpha=alpha,
            beta=beta,
            eps=eps,
            frame_stack=frame_stack,
        )

    @classmethod
    def from_spaces(  # type: ignore[override]
        cls,
        observation_space: Any,
        action_space: Any,
        *,
        capacity: int,
        num_envs: int = 1,
        alpha: float = PER_ALPHA,
        beta: float = PER_BETA,
        eps: float = PER_EPS,
        seed: int | None = None,
        extras: Mapping[str, Any] | None = None,
        frame_stack: int | None = None,
    ) -> PrioritizedReplayBuffer:
        """As :meth:`ReplayBuffer.from_spaces`, with the PER parameters."""
        buf = cls(capacity, num_envs=num_envs, alpha=alpha, beta=beta, eps=eps, seed=seed, frame_stack=frame_stack)
        buf._declare_spaces(observation_space, action_space, extras)
        return buf

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "alpha": self.alpha, "beta": self.beta, "eps": self.eps}

    @classmethod
    def _from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> ReplayBuffer:
        return cls(
            config["capacity"],
            num_envs=config["num_envs"],
            seed=kwargs.get("seed"),
            alpha=config["alpha"],
            beta=config["beta"],
            eps=config["eps"],
            frame_stack=config.get("frame_stack"),
        )


def checked_priority_update(
    indices: Any, priorities: Any, *, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(indices int64 [B], priorities float64 [B])`` converted and checked exactly as
    :meth:`PrioritizedReplayBuffer.update_priorities` of a buffer of ``rows`` rows with these
    ``alpha`` and ``eps`` does before it writes (the core's conversions and checks), for a front
    that splits one update over several buffers and must refuse all of it first
    (:class:`rlcore.distributed.ShardedReplayBuffer`).

    Raises:
        DTypeError, ShapeError, InvalidValueError: as ``update_priorities``.
    """
    return _priority_update(indices, priorities, alpha, eps, rows)


def checked_sequence_update(
    start_indices: Any, td_errors: Any, mask: Any, eta: Any, *, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(start_indices int64 [B], priorities float64 [B])``: R2D2's mixture
    ``eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|`` of each sequence's valid TD errors
    (Kapturowski et al. 2019, sec. 2.3), converted and checked exactly as
    ``update_sequence_priorities`` of a buffer of ``rows`` rows with these ``alpha`` and ``eps``
    does before it writes; the priorities are the ones it passes on to ``update_priorities``.

    Raises:
        DTypeError, ShapeError, InvalidValueError: as ``update_sequence_priorities``.
    """
    return _sequence_update(start_indices, td_errors, mask, eta, alpha, eps, rows)
