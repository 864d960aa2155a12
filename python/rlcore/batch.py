"""What a learner is handed: a sampled :class:`TransitionBatch` (off-policy), a
:class:`SequenceBatch` of B sequences (recurrent agents, R2D2) or a ``[T, N]`` :class:`Rollout`
(on-policy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rlcore.errors import DTypeError
from rlcore.returns import compute_gae

if TYPE_CHECKING:
    import torch

__all__ = ["Rollout", "SequenceBatch", "TransitionBatch", "state_names"]

Obs = "np.ndarray | dict[str, np.ndarray]"


class TransitionBatch(NamedTuple):
    """A frozen batch of B transitions, gathered by the Rust core.

    Shapes use B for the batch size; ``O`` is the observation shape (or, for dict observations,
    a dict of arrays keyed like the observation space) and ``A`` the action shape.

    Attributes:
        obs: ``[B, *O]`` observation o_t, dtype as stored (dict of arrays for dict observations).
        act: ``[B, *A]`` action a_t, dtype as stored.
        rew: ``[B]`` float32, the n-step return ``sum_{k<m} gamma^k r_{t+k}`` (the plain reward
            when ``n_step == 1``; the recomputed reward for HER-relabeled samples).
        obs_next: ``[B, *O]`` observation ``o_{t+m}`` to bootstrap from (the true final observation
            of a terminated or truncated episode, never a reset observation).
        terminated: ``[B]`` bool, ``terminated`` of the window's last step t+m-1.
        truncated: ``[B]`` bool, ``truncated`` of the window's last step t+m-1.
        discount: ``[B]`` float32, ``gamma**m * (1 - terminated)``; the TD target is
            ``rew + discount * Q'(obs_next)`` (Sutton & Barto 2018, eq. 7.1).
        indices: ``[B]`` int64: rows in the buffer's storage (``buffer.column(name)[indices]``);
            on a prioritized buffer each names its transition, ``row | generation << 40``
            (``buffer.rows_of(indices)`` gives the rows), so that ``update_priorities`` skips
            and counts an index whose row the ring has rewritten since.
        weights: ``[B]`` float32 importance-sampling weights for prioritized buffers
            (Schaul et al. 2016, sec. 3.4), ``None`` otherwise.
        extras: extra per-step columns (``add(..., name=array)``), each ``[B, *shape]`` at step t.
    """

    obs: Any
    act: Any
    rew: Any
    obs_next: Any
    terminated: Any
    truncated: Any
    discount: Any
    indices: Any
    weights: Any = None
    extras: dict[str, Any] = {}  # noqa: RUF012 - NamedTuple default is never mutated

    @property
    def batch_size(self) -> int:
        """B, the number of transitions."""
        return int(self.indices.shape[0])

    def __repr__(self) -> str:
        """Field shapes and dtypes, not the values (a batch holds thousands of numbers)."""

        return describe_fields("TransitionBatch", self)

    def to_torch(self, device: str | torch.device = "cpu", *, non_blocking: bool = True) -> TransitionBatch:
        """Return the same batch as torch tensors on ``device``.

        On CPU this is zero-copy (``torch.from_numpy``): the tensors share memory with the arrays.
        On a CUDA device the copy is asynchronous when the arrays live in pinned memory (pass
        pinned arrays through ``sample(..., out=...)``). ``terminated``/``truncated`` stay bool;
        ``indices`` stay int64.

        Raises:
            ModuleNotFoundError: torch is not installed.
        """
        conv = torch_converter(device, non_blocking=non_blocking)
        return TransitionBatch(*map(conv, self))


class SequenceBatch(NamedTuple):
    """A frozen batch of B sequences of L = burn_in + seq_len steps, gathered by the Rust core.

    ``O`` is the observation shape (a dict of arrays for dict observations), ``A`` the action
    shape. Steps past an episode's end are padding: zero, ``mask`` False, ``indices`` -1.

    Attributes:
        obs: ``[B, L, *O]`` observation o_{t+k}, dtype as stored.
        act: ``[B, L, *A]`` action a_{t+k}, dtype as stored.
        rew: ``[B, L]`` float32 n-step return inside the sequence (below).
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

    Exact semantics (the Rust core's sequence sampler follows the same rules). Let
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
        return SequenceBatch(*map(conv, self))


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


@dataclass(frozen=True)
class Rollout:
    """``T`` vector steps of ``N`` envs, time-major. Arrays are owned by the rollout (not reused).

    ``act`` holds the policy's raw sample (before clipping to a ``Box`` action space), so its
    ``log_prob`` is exact; the env received the clipped action.
    """

    obs: np.ndarray
    """``[T, N, *O]`` observation at each step (NEXT_STEP reset rows: the final observation o_L)."""
    act: np.ndarray
    """``[T, N, *A]`` sampled actions (int64 for Discrete, float32 for Box)."""
    rew: np.ndarray
    """float32 ``[T, N]`` rewards to learn from (``reward_fn``'s output when one is given); 0 on invalid rows."""
    terminated: np.ndarray
    """bool ``[T, N]``: the episode ended in a terminal state at this step (no bootstrap)."""
    truncated: np.ndarray
    """bool ``[T, N]``: the episode was cut at this step (time limit); bootstraps from ``final_value``."""
    valid: np.ndarray
    """bool ``[T, N]``: the row is a transition (False only for NEXT_STEP reset rows)."""
    log_prob: np.ndarray
    """float32 ``[T, N]`` log pi(act | obs) under the sampling policy."""
    value: np.ndarray
    """float32 ``[T, N]`` V(obs) under the sampling critic."""
    final_value: np.ndarray
    """float32 ``[T, N]`` V(final observation) where ``truncated``; 0 elsewhere."""
    last_value: np.ndarray
    """float32 ``[N]`` V of the observation after the last step (bootstrap of rollouts cut mid-episode)."""
    env_rew: np.ndarray
    """float32 ``[T, N]`` the env's own rewards (episode statistics; equal to ``rew`` without ``reward_fn``)."""

    @property
    def num_steps(self) -> int:
        """T, vector steps."""
        return int(self.rew.shape[0])

    @property
    def num_envs(self) -> int:
        """N, envs."""
        return int(self.rew.shape[1])

    @property
    def num_transitions(self) -> int:
        """Valid rows (env steps)."""
        return int(self.valid.sum())

    def next_value(self) -> np.ndarray:
        """float32 ``[T, N]`` value of the observation after each step.

        ``value[t + 1]`` inside the rollout, ``last_value`` after the last step, and
        ``final_value`` where the step was truncated (the true final observation, not the reset one).
        Terminated rows carry a value here too; GAE ignores it.
        """
        next_TN = np.empty_like(self.value)
        next_TN[:-1] = self.value[1:]
        next_TN[-1] = self.last_value
        return np.where(self.truncated, self.final_value, next_TN).astype(np.float32)

    def advantages(
        self,
        gamma: float,
        gae_lambda: float,
        *,
        rew: np.ndarray | None = None,
        value: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """GAE advantages and returns ``(adv [T, N], ret [T, N])`` from the Rust :func:`rlcore.compute_gae`.

        Schulman et al. 2016, eq. 16: ``delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)``,
        ``A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}``, ``ret = A + V``; ``V(s_{t+1})`` is
        :meth:`next_value`. Invalid rows get whatever the recursion gives and must be masked by the
        caller (they never leak into valid rows: the row before a reset row is a done row).

        Args:
            gamma: discount; gae_lambda: lambda (1.0: Monte-Carlo returns minus the baseline).
            rew: rewards to use instead of ``self.rew`` (e.g. scaled by a return normaliser).
            value: values to use instead of ``self.value``/``final_value``/``last_value``; pass zeros
                (``np.zeros_like(self.value)``) for a baseline-free REINFORCE: then every bootstrap is 0.
        """
        rew_TN = self.rew if rew is None else rew
        if value is None:
            value_TN, next_TN = self.value, self.next_value()
        else:
            value_TN, next_TN = value, np.zeros_like(value)
        return compute_gae(rew_TN, value_TN, next_TN, self.terminated, self.truncated, gamma, gae_lambda)


def describe_fields(kind: str, batch: Any) -> str:
    """``Kind(field=ndarray[B, ...] dtype, ...)`` of a NamedTuple batch: shapes and dtypes, not values."""

    def desc(x: Any) -> str:
        if x is None:
            return "None"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {desc(v)}" for k, v in x.items()) + "}"
        return f"{type(x).__name__}{list(x.shape)} {x.dtype}"

    fields = ", ".join(f"{name}={desc(getattr(batch, name))}" for name in batch._fields)
    return f"{kind}({fields})"


def torch_converter(device: Any, *, non_blocking: bool) -> Any:
    """``conv(x)``: an array (or a dict of them, or ``None``) as torch tensors on ``device``,
    zero-copy on CPU (``torch.from_numpy``), dtypes kept.

    Raises:
        ModuleNotFoundError: torch is not installed.
    """
    import torch

    dev = torch.device(device)

    def conv(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.to(dev, non_blocking=non_blocking)
        t = torch.from_numpy(np.asarray(x))
        return t if dev.type == "cpu" else t.to(dev, non_blocking=non_blocking)

    return conv
