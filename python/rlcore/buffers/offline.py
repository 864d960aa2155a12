"""Offline streams (``from_arrays``): how many rows a stream of T steps needs, T plus one row per
episode or continuity cut, counted the way the core splits it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlcore.errors import ShapeError

__all__ = ["count_segments", "offline_capacity"]


def offline_capacity(
    obs: Any, rew: Any, terminated: Any, truncated: Any, obs_next: Any, capacity: int | None
) -> tuple[np.ndarray, int]:
    """The reward array and the capacity an offline stream needs (T plus one row per episode)."""
    rew_a = np.asarray(rew)
    if rew_a.ndim != 1:
        raise ShapeError(f"rew: expected shape [T], got {rew_a.shape}")
    if capacity is None:
        try:
            segments = count_segments(obs, obs_next, terminated, truncated)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            # malformed input: size for the worst case and let the core's validation raise
            # its typed error
            segments = rew_a.shape[0]
        capacity = max(2, rew_a.shape[0] + segments)
    return rew_a, capacity


def count_segments(obs: Any, obs_next: Any, terminated: Any, truncated: Any) -> int:
    """Episodes (and continuity cuts) an offline stream will be split into."""
    done = np.asarray(terminated).astype(bool) | np.asarray(truncated).astype(bool)
    t_len = done.shape[0]
    if t_len == 0:
        return 1

    def continues(a: Any, b: Any) -> np.ndarray:
        # byte equality, exactly like the core's continuity check (-0.0 != 0.0, NaN == NaN;
        # bools by truth value, as the core stores them: 0/1 whatever their byte)
        a = np.ascontiguousarray(a)
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
        b = np.ascontiguousarray(b, dtype=a.dtype)
        ab = a.view(np.uint8).reshape(t_len, -1)
        bb = b.view(np.uint8).reshape(t_len, -1)
        return (ab[1:] == bb[:-1]).all(axis=1)

    if isinstance(obs, Mapping):
        same = np.ones(t_len - 1, bool)
        for k in obs:
            same &= continues(obs[k], obs_next[k])
    else:
        same = continues(obs, obs_next)
    breaks = done[:-1] | ~same
    return 1 + int(breaks.sum())
