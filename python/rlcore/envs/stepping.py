"""Stepping gymnasium vector envs: observation copies and per-env info lookup shared by the
collector, the rollout sampler and evaluation.

Observations may be a NumPy array ``[N, *O]`` or a dict of such arrays (dict observation spaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["copy_obs", "info_at", "obs_rows", "set_obs_row"]


def obs_rows(obs: Any, idx: np.ndarray) -> Any:
    """The rows ``idx`` of a batch of observations (a new array, or a dict of them)."""
    if isinstance(obs, Mapping):
        return {k: v[idx] for k, v in obs.items()}
    return obs[idx]


def copy_obs(obs: Any) -> Any:
    """A copy the caller owns: vector envs made with ``copy=False`` overwrite the arrays they
    returned at the next step (CASES.md #15)."""
    if isinstance(obs, Mapping):
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    return np.array(obs, copy=True)


def set_obs_row(dst: Any, i: int, src: Any) -> None:
    """Write one env's observation ``src`` into row ``i`` of the batch ``dst``."""
    if isinstance(dst, Mapping):
        for k in dst:
            dst[k][i] = src[k]
    else:
        dst[i] = src


def info_at(info: Mapping[str, Any], key: str, i: int) -> Any | None:
    """``info[key][i]`` of a vector-env info dict, or ``None`` when env i did not report ``key``."""
    if key not in info:
        return None
    mask = info.get("_" + key)
    if mask is not None and not mask[i]:
        return None
    return info[key][i]
