"""Offline streams (``from_arrays``): next observations for a stream that has none
(:func:`complete_steps`), and how many rows a stream of T steps needs, T plus one row per episode or
continuity cut, counted the way the core splits it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlcore.errors import DTypeError, ShapeError

__all__ = ["OfflineSteps", "complete_steps", "count_segments", "offline_capacity"]


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


@dataclass(frozen=True)
class OfflineSteps:
    """A time-ordered stream of T steps of one env with every step's next observation, as
    :meth:`~rlcore.ReplayBuffer.from_arrays` and :meth:`~rlcore.ReplayBuffer.extend` take it.

    Shapes: ``obs``/``obs_next`` ``[T, *O]`` (or dicts of such), ``act`` ``[T, *A]``,
    ``rew``/``terminated``/``truncated`` ``[T]``, each extra ``[T, *shape]``. Dtypes are the
    data's own (flags bool).
    """

    obs: Any
    """Observation o_t, ``[T, *O]`` or a dict of such arrays."""
    act: np.ndarray
    """Action a_t, ``[T, *A]``."""
    rew: np.ndarray
    """Reward r_t, ``[T]``."""
    terminated: np.ndarray
    """bool ``[T]``: the episode ended in a terminal state at step t (no bootstrap)."""
    truncated: np.ndarray
    """bool ``[T]``: the episode was cut after step t (time limit, end of recording; bootstraps)."""
    obs_next: Any
    """Observation after step t, ``[T, *O]`` or a dict."""
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Extra per-step columns, each ``[T, *shape]``."""
    dropped: int = 0
    """Steps of the source left out because it has no next observation for them
    (:func:`complete_steps`)."""

    def __len__(self) -> int:
        return int(self.rew.shape[0])


def _take(x: Any, rows: np.ndarray | None) -> Any:
    if rows is None:
        return x
    if isinstance(x, Mapping):
        return {k: np.take(np.asarray(v), rows, axis=0) for k, v in x.items()}
    return np.take(np.asarray(x), rows, axis=0)


def complete_steps(
    obs: Any,
    act: Any,
    rew: Any,
    terminated: Any,
    truncated: Any,
    *,
    extras: Mapping[str, Any] | None = None,
) -> OfflineSteps:
    """Next observations for a stream of T steps that has none (D4RL's common layout: one
    ``observations`` array, episodes one after the other, ends flagged by ``terminals`` and
    ``timeouts``).

    Inside an episode the next observation of step t is ``obs[t + 1]``. At an episode's last step
    there is none in such data (``obs[t + 1]`` is the next episode's first observation), so:

    * a **terminated** step is kept and its ``obs_next`` is a copy of its own ``obs[t]``: a
      placeholder that no target reads (its ``discount`` is 0 and n-step windows end there);
    * a **truncated** step is left out (its final observation, which a target would bootstrap from,
      is unknown) and the step before it, whose next observation ``obs[t]`` is known, becomes the
      episode's last step, flagged truncated (so it bootstraps); an episode of one truncated step
      disappears;
    * the stream's **last** step, unless terminated, is left out the same way, but the step before
      it is not flagged: that episode is still running (bootstrapped by the buffer as any open
      episode).

    A step both terminated and truncated counts as terminated. Steps left out are counted in
    :attr:`OfflineSteps.dropped`. Arrays are copied only when a step is left out.

    Raises:
        ShapeError: the flags are not ``[T]`` like ``rew``.
        DTypeError: ``obs``, ``act``, ``rew``, a flag or an extra is missing (``None``).
    """
    named = {"obs": obs, "act": act, "rew": rew, "terminated": terminated, "truncated": truncated}
    named.update({f"extras[{k!r}]": v for k, v in (extras or {}).items()})
    for what, value in named.items():
        if value is None or (isinstance(value, Mapping) and any(v is None for v in value.values())):
            raise DTypeError(f"{what} is missing (got None); pass an array")
    rew_a = np.asarray(rew)
    term = np.asarray(terminated).astype(bool, copy=False)
    trunc = np.asarray(truncated).astype(bool, copy=False)
    if rew_a.ndim != 1 or term.shape != rew_a.shape or trunc.shape != rew_a.shape:
        raise ShapeError(
            f"rew, terminated and truncated must all be [T], got {rew_a.shape}, {term.shape}, {trunc.shape}"
        )
    t_len = rew_a.shape[0]
    extras = dict(extras or {})
    if t_len == 0:
        return OfflineSteps(
            obs=obs,
            act=np.asarray(act),
            rew=rew_a,
            terminated=term,
            truncated=trunc,
            obs_next=obs,
            extras=extras,
        )
    last = np.zeros(t_len, bool)
    last[-1] = True
    ends = term | trunc | last  # steps whose episode has no further step in the stream
    drop = ends & ~term  # no next observation and not terminated
    # the step before a left-out truncated step ends its episode, truncated
    before = np.flatnonzero(drop & trunc) - 1
    before = before[before >= 0]
    before = before[~ends[before]]
    new_trunc = trunc.copy() if before.size else trunc
    new_trunc[before] = True
    nxt = np.arange(1, t_len + 1)
    nxt[term] = np.flatnonzero(term)  # placeholder: the terminated step's own observation
    nxt[-1] = min(nxt[-1], t_len - 1)
    keep = np.flatnonzero(~drop)
    rows = keep if keep.size < t_len else None
    return OfflineSteps(
        obs=_take(obs, rows),
        act=_take(act, rows),
        rew=_take(rew_a, rows),
        terminated=_take(term, rows),
        truncated=_take(new_trunc, rows),
        obs_next=_take(obs, nxt[keep]),
        extras={k: _take(v, rows) for k, v in extras.items()},
        dropped=t_len - keep.size,
    )
