"""Type stubs of the native module ``rlcore._core`` (the PyO3 binding of rlcore-core)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import numpy as np
from typing_extensions import disjoint_base

# the exception classes are defined in rlcore.errors; the native module re-exports them
from rlcore.errors import ApiUsageError as ApiUsageError
from rlcore.errors import DTypeError as DTypeError
from rlcore.errors import EmptyBufferError as EmptyBufferError
from rlcore.errors import InvalidValueError as InvalidValueError
from rlcore.errors import RlcoreError as RlcoreError
from rlcore.errors import SaveFileError as SaveFileError
from rlcore.errors import ShapeError as ShapeError

__version__: str
MAX_PRIORITY: float
INDEX_ROW_BITS: int
"""An index of a prioritized buffer is ``row | generation << INDEX_ROW_BITS`` (40): it names one
transition; an update through a stale one (its row rewritten by the ring since) is skipped and
counted. Bare rows (below ``2**40``) name whatever their row holds now."""
RESERVED_NAMES: tuple[str, ...]
__all__ = [
    "AddResult",
    "ApiUsageError",
    "DTypeError",
    "EmptyBufferError",
    "InvalidValueError",
    "INDEX_ROW_BITS",
    "MAX_PRIORITY",
    "RESERVED_NAMES",
    "RawBuffer",
    "RlcoreError",
    "SaveFileError",
    "ShapeError",
    "__version__",
    "_compute_gae",
    "_compute_nstep_returns",
    "_crc32c",
    "_priority_update",
    "_sequence_update",
    "_state_layout",
]

@final
class AddResult:
    """Result of one ``add``: the rows written and the episodes that ended."""

    @property
    def indices(self) -> np.ndarray:
        """int64 [N]: row of each env's transition, -1 where the env was masked."""
    @property
    def done_envs(self) -> np.ndarray:
        """int64 [D]: envs whose episode ended with this step."""
    @property
    def episode_returns(self) -> np.ndarray:
        """float64 [D]: undiscounted returns of those episodes."""
    @property
    def episode_lengths(self) -> np.ndarray:
        """int64 [D]: lengths (steps) of those episodes."""

@disjoint_base
class RawBuffer:
    """The Rust replay core. Use ``rlcore.ReplayBuffer``, ``rlcore.HERReplayBuffer`` or
    ``rlcore.PrioritizedReplayBuffer``, which subclass it."""

    def __new__(
        cls,
        capacity: int,
        *,
        num_envs: int = 1,
        seed: int | None = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        her_strategy: str | None = None,
        future_k: float = 4.0,
        distance_threshold: float | None = None,
        achieved_goal_key: str = "achieved_goal",
        desired_goal_key: str = "desired_goal",
        finished_only: bool = False,
        exact_ratio: bool = False,
        frame_stack: int | None = None,
    ) -> RawBuffer: ...
    def add(
        self,
        obs: Any,
        act: Any,
        rew: Any,
        terminated: Any,
        truncated: Any,
        obs_next: Any,
        *,
        mask: Any = None,
        env_ids: Any = None,
        **extras: Any,
    ) -> AddResult:
        """Add one vector-env step of N = num_envs envs: row i of every array belongs to env i;
        with env_ids ([K] integers, distinct, each in [0, N)) row i belongs to env env_ids[i]
        (a partial step: K <= N envs in any order, e.g. EnvPool's async recv), and every array
        has K rows instead of N.

        obs, obs_next: [N, *O] arrays (or dicts of them for dict observations); obs_next holds
        the true next observation (the final one where the episode ended). act: [N, *A].
        rew: [N] finite rewards, stored as float32. terminated, truncated: [N] bool or integer
        flags (nonzero means set). mask: [N] bool, False where the env's step is not a
        transition (gymnasium's NEXT_STEP autoreset). **extras: [N, *shape] extra columns.
        A single-env buffer also takes arrays without the leading N. The first add (or
        from_spaces) fixes the columns; later adds must match them.

        Returns an AddResult: indices [N] (or [K]) rows written (-1 where masked), and done_envs,
        episode_returns, episode_lengths of the episodes that ended.

        Raises ShapeError (shapes), DTypeError (dtypes or values a column cannot hold),
        InvalidValueError (non-finite rewards, env ids out of range or repeated), ApiUsageError
        (missing or unknown extras, re-entrant use). Everything is validated before a byte is
        written."""
    def _extend(
        self,
        obs: Any,
        act: Any,
        rew: Any,
        terminated: Any,
        truncated: Any,
        obs_next: Any,
        *,
        mask: Any = None,
        extras: Mapping[str, Any] | None = None,
    ) -> AddResult:
        """Add T consecutive steps (offline data); see ``ReplayBuffer.extend`` and ``from_arrays``.
        ``extras`` is a dict (not keyword arguments), so that every name, reserved ones included,
        reaches the core's declaration check."""
    def _sample(
        self,
        batch_size: int,
        n_step: int,
        gamma: float,
        out: Any,
        compute_reward: Callable[..., Any] | None,
        indices: Any = None,
        goal_indices: Any = None,
    ) -> tuple[Any, ...]:
        """Sample into fresh (or ``out``) arrays; returns the fields of a TransitionBatch as a tuple.
        With ``indices`` (and for HER ``goal_indices``) the batch of those rows instead of a draw
        (``batch_size`` must then be their count)."""
    def _floor_gather(self, batch_size: int, seed: int, n_step: int = 1) -> tuple[Any, ...]:
        """Benchmark only (not API; built with the cargo feature ``bench``): the floor of
        ``sample(batch_size, n_step=n_step)``, i.e. the same output arrays filled by a bare gather of
        uniformly drawn alive rows and the rows of their windows (no validity, window cut or discount
        work); the fields of a TransitionBatch as a tuple."""
    def _sample_sequences(
        self,
        batch_size: int,
        seq_len: int,
        burn_in: int,
        n_step: int,
        gamma: float,
        pad: bool,
        state: Sequence[str],
        out: Any,
        compute_reward: Callable[..., Any] | None,
    ) -> tuple[Any, ...]:
        """Sample sequences into fresh (or ``out``) arrays; returns the fields of a SequenceBatch as
        a tuple (see ``ReplayBuffer.sample_sequences``)."""
    def sequence_start_mass(self, seq_len: int, *, burn_in: int, pad: bool) -> tuple[int, float]:
        """``(count, mass)`` of the eligible starts of sequences of ``burn_in + seq_len`` steps: their
        number, and the sum of their priorities (their number without prioritized replay).
        O(stored episodes). Raises InvalidValueError (seq_len < 1), DTypeError (non-integers)."""
    def update_sequence_priorities(
        self, start_indices: Any, td_errors: Any, *, mask: Any = None, eta: float = 0.9
    ) -> int:
        """Set each sequence's priority from its TD errors with R2D2's mixture
        ``eta * max|delta| + (1 - eta) * mean|delta|`` over its valid steps, then
        ``(p + eps) ** alpha`` at its start row; returns how many start rows were skipped (see
        ``update_priorities``).

        start_indices: int [B] (``SequenceBatch.start_indices``). td_errors: float [B, T].
        mask: bool [B, T] valid steps (None: all). eta: in [0, 1].

        Raises ShapeError (shapes), DTypeError (non-integer indices, bool TD errors, a float
        mask), InvalidValueError (a non-finite TD error, eta outside [0, 1], a row of mask
        without a valid step, an index outside [0, capacity)), ApiUsageError (not a prioritized
        buffer). Nothing is written unless the whole call is valid."""
    def __len__(self) -> int: ...
    @property
    def capacity(self) -> int:
        """Total rows of storage (``num_envs * segment_len``)."""
    @property
    def num_envs(self) -> int: ...
    @property
    def segment_len(self) -> int:
        """Rows per env segment (``capacity // num_envs``)."""
    @property
    def frame_stack(self) -> int | None:
        """k of a buffer that stores observations as stacks of k frames (one frame per row), or None."""
    @property
    def nbytes(self) -> int:
        """Bytes of memory the buffer holds: row records (allocated with the columns), episode
        index, priorities, sampler scratch. Resident once every row has been written."""
    @property
    def prioritized(self) -> bool: ...
    @property
    def alpha(self) -> float | None: ...
    @property
    def eps(self) -> float | None: ...
    @property
    def beta(self) -> float | None:
        """Importance-sampling exponent β of prioritized buffers; settable at any time."""
    @beta.setter
    def beta(self, beta: float) -> None: ...
    def _her_config(self) -> tuple[str, float, float | None, str, str, bool, bool] | None:
        """(strategy, future_k, distance_threshold, achieved goal key, desired goal key,
        finished_only, exact_ratio)."""
    def update_priorities(self, indices: Any, priorities: Any) -> int:
        """Set ``(|p| + eps) ** alpha`` for the transition each index names; returns how many were
        skipped: stale indices (the row was rewritten since the index was handed out)
        and rows holding no transition. InvalidValueError for a row out of range."""
    def priority_stats(self) -> tuple[float, float, float] | None:
        """(total priority mass, smallest positive priority or inf, priority of new transitions),
        O(1); None for a buffer without prioritized replay."""
    def priorities(self, indices: Any) -> np.ndarray:
        """float64 [K]: current ``(p + eps) ** alpha`` of rows ``indices`` (0 for non-transition rows)."""
    def prev(self, indices: Any) -> np.ndarray:
        """int64 [K]: row of the previous step of the same episode (clamped at its first row)."""
    def next(self, indices: Any) -> np.ndarray:
        """int64 [K]: row of the next step of the same episode (clamped at its last transition)."""
    def episode_bounds(self, indices: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, length), int64 [K] each: first surviving row of each index's episode, the row
        holding its final (or newest) observation, and its number of surviving transitions."""
    def unfinished_index(self) -> np.ndarray:
        """int64 [U]: newest transition row of every env whose episode is still running."""
    def last_index(self) -> np.ndarray:
        """int64 [N]: newest transition row of each env, -1 where an env holds none."""
    def is_transition(self, indices: Any) -> np.ndarray:
        """bool [K]: whether each index names a sampleable transition its row holds now."""
    def rows_of(self, indices: Any) -> np.ndarray:
        """int64 rows of indices (for ``column(name)[rows]``); InvalidValueError for a stale one."""
    def clear(self) -> None:
        """Forget every stored step; memory, columns and the RNG stream are kept."""
    def _column(self, name: str) -> np.ndarray:
        """A read-only zero-copy view ``[capacity, *shape]`` of a stored column."""
    def _declare(
        self, obs: Sequence[tuple[str, str, Sequence[int]]], step: Sequence[tuple[str, str, Sequence[int]]]
    ) -> None:
        """Declare columns up front: lists of (name, dtype name, shape)."""
    def _schema(
        self,
    ) -> tuple[list[tuple[str, str, tuple[int, ...]]], list[tuple[str, str, tuple[int, ...]]]]:
        """(obs specs, step specs) as lists of (name, dtype name, shape); empty before the first add."""
    def _state_parts(self) -> list[tuple[str, np.ndarray]]:
        """The whole state as a list of (name, array); every array is a fresh copy."""
    def _load_state(
        self,
        parts: Mapping[str, np.ndarray],
        obs: Sequence[tuple[str, str, Sequence[int]]] | None = None,
        step: Sequence[tuple[str, str, Sequence[int]]] | None = None,
    ) -> None:
        """Replace the whole state from a dict name -> array (validated before anything changes).
        ``obs``/``step`` column specs declare the columns of a buffer that has none yet."""

def _compute_gae(
    rew: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE over ``[T, N]`` float32 arrays; returns (advantages, returns). See ``rlcore.compute_gae``."""

def _compute_nstep_returns(
    rew: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, n_step: int, gamma: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns over a flat stream ``[T]``; returns (returns, discounts, horizons)."""

def _state_layout(
    capacity: int,
    num_envs: int,
    obs: Sequence[tuple[str, str, Sequence[int]]],
    step: Sequence[tuple[str, str, Sequence[int]]],
    prioritized: bool,
    frame_stack: int | None = None,
) -> list[tuple[str, str, list[int]]]:
    """The (name, dtype name, shape) of every state part a buffer of ``capacity`` rows over
    ``num_envs`` envs with columns ``obs`` + ``step`` (lists of (name, dtype name, shape); both
    empty before the first add), prioritized replay on or off and ``frame_stack`` (None or k)
    has, in ``_state_parts`` order, computed without building the buffer (a loader checks a
    save's files against it before allocating anything). Raises InvalidValueError for a capacity
    or num_envs the buffer refuses, DTypeError for an unknown dtype name,
    ShapeError/InvalidValueError for columns a frame stack of k refuses."""

def _crc32c(data: np.ndarray, value: int = 0) -> int:
    """CRC-32C of the bytes of ``data`` (a numpy array, read in C order) following bytes whose
    CRC-32C is ``value`` (0 to start): ``_crc32c(b, _crc32c(a)) == _crc32c(a + b)``. Releases the
    GIL for large arrays. Raises DTypeError for an unsupported dtype."""

def _priority_update(
    indices: Any, priorities: Any, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(indices int64 [B], priorities float64 [B])`` converted and checked exactly as
    ``update_priorities`` of a prioritized buffer of ``rows`` rows with these ``alpha`` and
    ``eps`` does before it writes. Raises what that method raises: DTypeError (non-integer
    indices, non-numeric priorities), ShapeError (not both [B]), InvalidValueError (an index
    outside [0, rows), a negative, NaN or infinite priority, one whose (p + eps) ** alpha exceeds
    MAX_PRIORITY, alpha/eps a prioritized buffer refuses)."""

def _sequence_update(
    start_indices: Any, td_errors: Any, mask: Any, eta: Any, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(start_indices int64 [B], priorities float64 [B])``: each sequence's priority from its
    TD errors ``td_errors`` [B, T] with R2D2's mixture ``eta * max_k |delta_k| + (1 - eta) *
    mean_k |delta_k|`` over its valid steps (``mask`` [B, T], None: all), converted and checked
    exactly as ``update_sequence_priorities`` of a prioritized buffer of ``rows`` rows with these
    ``alpha`` and ``eps`` does before it writes. Raises what that method raises: DTypeError,
    ShapeError, InvalidValueError."""
