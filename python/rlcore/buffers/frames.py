"""Which frame stack an env produces, so that a buffer stores each frame once
(``ReplayBuffer(..., frame_stack=k)``; docs/frames.md)."""

from __future__ import annotations

from typing import Any

from gymnasium.wrappers import FrameStackObservation

__all__ = ["frame_stack_of"]


def frame_stack_of(env: Any) -> int | None:
    """``stack_size`` of the outermost gymnasium ``FrameStackObservation`` wrapping ``env`` (a
    gymnasium env, or a vector env whose sub-envs are reached through ``envs``), or ``None`` when
    no such wrapper is found. Only a stack that is the observation itself, ``[k, *F]``, is what
    ``frame_stack=k`` expects: a ``FrameStackObservation`` under a wrapper that reshapes the
    observation is reported too, so check the observation space as well."""
    sub = getattr(env, "envs", None)
    if isinstance(sub, (list, tuple)) and sub:
        env = sub[0]
    while env is not None:
        if isinstance(env, FrameStackObservation):
            return int(env.stack_size)
        env = getattr(env, "env", None)
    return None
