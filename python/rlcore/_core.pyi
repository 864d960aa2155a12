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
    @property
    def indices(self) -> np.ndarray: ...
    @property
    def done_envs(self) -> np.ndarray: ...
    @property
    def episode_returns(self) -> np.ndarray: ...
    @property
    def episode_lengths(self) -> np.ndarray: ...

@disjoint_base
class RawBuffer:
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
    ) -> AddResult: ...
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
    ) -> AddResult: ...
    def _sample(
        self,
        batch_size: int,
        n_step: int,
        gamma: float,
        out: Any,
        compute_reward: Callable[..., Any] | None,
        indices: Any = None,
        goal_indices: Any = None,
    ) -> tuple[Any, ...]: ...
    def _floor_gather(self, batch_size: int, seed: int, n_step: int = 1) -> tuple[Any, ...]: ...
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
    ) -> tuple[Any, ...]: ...
    def sequence_start_mass(self, seq_len: int, *, burn_in: int, pad: bool) -> tuple[int, float]: ...
    def update_sequence_priorities(
        self, start_indices: Any, td_errors: Any, *, mask: Any = None, eta: float = 0.9
    ) -> int: ...
    def __len__(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def segment_len(self) -> int: ...
    @property
    def frame_stack(self) -> int | None: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def prioritized(self) -> bool: ...
    @property
    def alpha(self) -> float | None: ...
    @property
    def eps(self) -> float | None: ...
    @property
    def beta(self) -> float | None: ...
    @beta.setter
    def beta(self, beta: float) -> None: ...
    def _her_config(self) -> tuple[str, float, float | None, str, str, bool, bool] | None: ...
    def update_priorities(self, indices: Any, priorities: Any) -> int:
        """Set ``(|p| + eps) ** alpha`` for the transition each index names; returns how many were
        skipped: stale indices (the row was rewritten since the index was handed out)
        and rows holding no transition. InvalidValueError for a row out of range."""
    def priority_stats(self) -> tuple[float, float, float] | None: ...
    def priorities(self, indices: Any) -> np.ndarray: ...
    def prev(self, indices: Any) -> np.ndarray: ...
    def next(self, indices: Any) -> np.ndarray: ...
    def episode_bounds(self, indices: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
    def unfinished_index(self) -> np.ndarray: ...
    def last_index(self) -> np.ndarray: ...
    def is_transition(self, indices: Any) -> np.ndarray: ...
    def rows_of(self, indices: Any) -> np.ndarray:
        """int64 rows of indices (for ``column(name)[rows]``); InvalidValueError for a stale one."""
    def clear(self) -> None: ...
    def _column(self, name: str) -> np.ndarray: ...
    def _declare(
        self, obs: Sequence[tuple[str, str, Sequence[int]]], step: Sequence[tuple[str, str, Sequence[int]]]
    ) -> None: ...
    def _schema(
        self,
    ) -> tuple[list[tuple[str, str, tuple[int, ...]]], list[tuple[str, str, tuple[int, ...]]]]: ...
    def _state_parts(self) -> list[tuple[str, np.ndarray]]: ...  # fresh arrays
    def _load_state(
        self,
        parts: Mapping[str, np.ndarray],
        obs: Sequence[tuple[str, str, Sequence[int]]] | None = None,
        step: Sequence[tuple[str, str, Sequence[int]]] | None = None,
    ) -> None: ...

def _compute_gae(
    rew: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]: ...
def _compute_nstep_returns(
    rew: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, n_step: int, gamma: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def _state_layout(
    capacity: int,
    num_envs: int,
    obs: Sequence[tuple[str, str, Sequence[int]]],
    step: Sequence[tuple[str, str, Sequence[int]]],
    prioritized: bool,
    frame_stack: int | None = None,
) -> list[tuple[str, str, list[int]]]: ...
def _crc32c(data: np.ndarray, value: int = 0) -> int: ...
def _priority_update(
    indices: Any, priorities: Any, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]: ...
def _sequence_update(
    start_indices: Any, td_errors: Any, mask: Any, eta: Any, alpha: float, eps: float, rows: int
) -> tuple[np.ndarray, np.ndarray]: ...
