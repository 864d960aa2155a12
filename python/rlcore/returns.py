"""Advantage and return estimators computed in Rust."""

from __future__ import annotations

import numpy as np

from rlcore._core import _compute_gae, _compute_nstep_returns
from rlcore.errors import ShapeError

__all__ = ["compute_gae", "compute_nstep_returns"]


def _f32(x: object) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _flags(x: object) -> np.ndarray:
    a = np.ascontiguousarray(x)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype.kind not in "biu":
        from rlcore.errors import DTypeError

        raise DTypeError(f"flags must be bool or integer arrays, got {a.dtype}")
    return np.ascontiguousarray(a != 0).view(np.uint8)


def compute_gae(
    rew: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.

    ``delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)``,
    ``A_t = delta_t + gamma lambda (1 - (term_t | trunc_t)) A_{t+1}``, ``returns = A + V``.

    Args:
        rew: ``[T, N]`` (or ``[T]``) rewards, cast to float32.
        values: ``[T, N]`` (or ``[T]``) values V(s_t), cast to float32.
        next_values: ``[T, N]`` value of the observation after step t: the true final
            observation when step t was truncated, the next observation otherwise (so a rollout
            cut mid-episode bootstraps from ``next_values[T - 1]``). Ignored where terminated.
        terminated: ``[T, N]`` bool (or 0/1 integer) flags: the episode ended in a terminal state.
        truncated: ``[T, N]`` bool (or 0/1 integer) flags: the episode was cut (time limit).
        gamma: discount in [0, 1].
        gae_lambda: λ in [0, 1].

    Returns:
        (advantages, returns), float32 ``[T, N]`` (``[T]`` for 1-d input).

    Raises:
        ShapeError: shapes differ or are not 1-d/2-d. InvalidValueError: gamma or λ outside
        [0, 1]. DTypeError: non-integer flags.
    """
    r = _f32(rew)
    if r.ndim not in (1, 2):
        raise ShapeError(f"rew: expected shape [T, N] or [T], got {r.shape}")
    flat = r.ndim == 1
    shape2 = (r.shape[0], 1) if flat else r.shape

    def two(a: np.ndarray, what: str) -> np.ndarray:
        if a.shape != r.shape:
            raise ShapeError(f"{what}: expected shape {r.shape} like rew, got {a.shape}")
        return a.reshape(shape2)

    adv, ret = _compute_gae(
        r.reshape(shape2),
        two(_f32(values), "values"),
        two(_f32(next_values), "next_values"),
        two(_flags(terminated), "terminated"),
        two(_flags(truncated), "truncated"),
        float(gamma),
        float(gae_lambda),
    )
    if flat:
        return adv.reshape(-1), ret.reshape(-1)
    return adv, ret


def compute_nstep_returns(
    rew: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    n_step: int,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns over one env's stream of steps ``[T]`` in time order.

    An episode ends at a terminated or truncated step; the last step of the stream ends a
    running episode. For step t with m = min(n, steps left in its episode):
    ``returns[t] = sum_{k<m} gamma^k r_{t+k}``, ``discounts[t] = gamma^m (1 - term_{t+m-1})``,
    ``horizons[t] = m`` (bootstrap from the observation after step t + m − 1; Sutton & Barto
    2018, eq. 7.1).

    Returns:
        (returns float32 [T], discounts float32 [T], horizons int64 [T]).

    Raises:
        ShapeError: the arrays are not 1-d of one length T.
        InvalidValueError: n_step < 1, gamma outside [0, 1].
        DTypeError: an array or number of a type that is not numeric.
    """
    return _compute_nstep_returns(_f32(rew), _flags(terminated), _flags(truncated), int(n_step), float(gamma))
