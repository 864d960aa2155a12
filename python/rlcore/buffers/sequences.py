"""Sequence replay for recurrent agents (R2D2, Kapturowski et al. 2019): the frozen
:class:`SequenceBatch` that ``buffer.sample_sequences`` returns, gathered by the Rust core in
one call.

Exact semantics (the same text is in ``rust/rlcore-core/src/sequences.rs``). Let
``L = burn_in + seq_len``. An episode whose surviving transitions are the steps ``s .. end - 1``
(``end``: its terminal row, or for a running episode the row of its newest observation) has
``n = end - s`` transitions. A start ``t`` is **eligible** when

- ``s <= t`` and ``t + L <= end`` (the whole sequence lies in the episode), or
- ``pad=True``, ``n < L`` and ``t = s`` (a short episode, taken once from its first surviving
  step and padded at the end).

Starts are drawn with replacement, **uniformly over all eligible starts** of all envs (each with
probability ``1 / E``); on a prioritized buffer with probability ``p_t / sum_{eligible u} p_u``.
So a sequence never crosses an episode end, the write cursor (the newest step of a running
episode) or an overwritten row; the surviving start of a partially overwritten episode is ``s``.

Step ``k`` of a sequence starting at ``t`` is valid (``mask``) when ``k < v = min(L, end - t)``.
The n-step window of a valid step stays inside the sequence: ``m = min(n_step, v - k)``,
``rew = sum_{j<m} gamma^j r_{t+k+j}``, ``obs_next = o_{t+k+m}``,
``discount = gamma^m (1 - terminated_{t+k+m-1})`` (Sutton & Barto 2018, eq. 7.1), ``terminated``
and ``truncated`` of step ``t+k+m-1`` and ``horizon = m``. Padded steps are zero everywhere with
``indices = -1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rlcore.batch import describe_fields, torch_converter
from rlcore.errors import DTypeError

if TYPE_CHECKING:
    import torch

__all__ = ["SequenceBatch", "state_names"]


class SequenceBatch(NamedTuple):
    """A frozen batch of B sequences of L = burn_in + seq_len steps, gathered by the Rust core.

    ``O`` is the observation shape (a dict of arrays for dict observations), ``A`` the action
    shape. Steps past an episode's end are padding: zero, ``mask`` False, ``indices`` -1.

    Attributes:
        obs: ``[B, L, *O]`` observation o_{t+k}, dtype as stored.
        act: ``[B, L, *A]`` action a_{t+k}, dtype as stored.
        rew: ``[B, L]`` float32 n-step return inside the sequence (module docs).
        obs_next: ``[B, L, *O]`` observation o_{t+k+m} to bootstrap from.
        terminated: ``[B, L]`` bool, ``terminated`` of the window's last step.
        truncated: ``[B, L]`` bool, ``truncated`` of the window's last step.
        discount: ``[B, L]`` float32 ``gamma**m * (1 - terminated)``; 0 on padding.
        mask: ``[B, L]`` bool, the step is valid (inside the episode).
        is_first: ``[B, L]`` bool, the step is the first step its episode was written with
            (reset the recurrent state there); False for the surviving start of an episode
            whose first steps the ring overwrote.
        horizon: ``[B, L]`` int64 window length m (0 on padding): the bootstrap observation is
            step ``k + m`` of the sequence (``obs_next[:, k]``).
        indices: ``[B, L]`` int64 storage row of each step, -1 on padding.
        start_indices: ``[B]`` int64 row of each sequence's first step; pass them back to
            ``update_sequence_priorities``.
        weights: ``[B]`` float32 importance-sampling weights of the starts on prioritized
            buffers (as for transitions), ``None`` otherwise.
        extras: per-step extra columns, each ``[B, L, *shape]`` (those not in ``state``).
        state: recurrent-state extras named by ``state=``, each ``[B, *shape]`` from the
            sequence's first step (R2D2's stored state; the learner burns in from it).
    """

    obs: Any
    act: Any
    rew: Any
    obs_next: Any
    terminated: Any
    truncated: Any
    discount: Any
    mask: Any
    is_first: Any
    horizon: Any
    indices: Any
    start_indices: Any
    weights: Any = None
    extras: dict[str, Any] = {}  # noqa: RUF012 - NamedTuple default is never mutated
    state: dict[str, Any] = {}  # noqa: RUF012 - NamedTuple default is never mutated

    @property
    def batch_size(self) -> int:
        """B, the number of sequences."""
        return int(self.start_indices.shape[0])

    @property
    def seq_steps(self) -> int:
        """L = burn_in + seq_len, the steps of each sequence."""
        return int(self.mask.shape[1])

    def __repr__(self) -> str:
        """Field shapes and dtypes, not the values."""

        return describe_fields("SequenceBatch", self)

    def to_torch(self, device: str | torch.device = "cpu", *, non_blocking: bool = True) -> SequenceBatch:
        """The same batch as torch tensors on ``device`` (zero-copy on CPU; bool stays bool).

        Raises:
            ModuleNotFoundError: torch is not installed.
        """
        conv = torch_converter(device, non_blocking=non_blocking)
        return SequenceBatch(*(conv(getattr(self, name)) for name in self._fields))


def state_names(state: str | Sequence[str]) -> tuple[str, ...]:
    """The ``state=`` argument of ``sample_sequences`` as a tuple of column names.

    Raises:
        DTypeError: anything but a str or a sequence of str.
    """
    if isinstance(state, str):
        return (state,)
    if isinstance(state, Sequence) and all(isinstance(s, str) for s in state):
        return tuple(state)
    raise DTypeError(f"state: expected a column name or a sequence of names, got {state!r}")
