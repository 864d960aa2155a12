"""Synthetic single-env data shared by the benchmark modules (``memory.py`` runs as a plain
script, so this lives outside ``conftest.py``)."""

from __future__ import annotations

import numpy as np


def shifted_stream(
    n: int, shape: tuple[int, ...], dtype: type, *, seed: int, ep_len: int, act_dim: int
) -> dict[str, np.ndarray]:
    """``n`` steps of one env in ``ep_len``-step episodes ending in truncation, with
    ``obs_next[t] == obs[t + 1]`` (views of one array of n + 1 observations: the data costs one
    copy). uint8 observations are uniform bytes, float ones standard normal float32."""
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        all_obs = rng.integers(0, 256, (n + 1, *shape), dtype=np.uint8)
    else:
        all_obs = rng.standard_normal((n + 1, *shape), dtype=np.float32)
    trunc = np.zeros(n, bool)
    trunc[ep_len - 1 :: ep_len] = True
    return {
        "obs": all_obs[:-1],
        "obs_next": all_obs[1:],
        "act": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        "rew": rng.standard_normal(n).astype(np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": trunc,
    }


def frame_stack_stream(
    n: int, frame: tuple[int, ...], k: int, *, seed: int, ep_len: int, n_actions: int = 4
) -> dict[str, np.ndarray]:
    """``n`` steps of one env wrapped in gymnasium's ``FrameStackObservation(k)``: uniform uint8
    frames of shape ``frame``, ``ep_len``-step episodes ending in truncation, ``obs[t]`` the stack
    ``[k, *frame]`` of the k newest frames padded with the episode's first frame (gymnasium's
    default ``padding_type="reset"``), ``obs_next[t]`` the next stack, Discrete actions (int64)."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (n + n // ep_len + 1, *frame), dtype=np.uint8)
    t = np.arange(n)
    step, ep = t % ep_len, t // ep_len
    base = ep * (ep_len + 1)  # episode e's frames start here (ep_len + 1 frames each)
    j = np.arange(k)[None, :] - (k - 1)
    idx = base[:, None] + np.maximum(step[:, None] + j, 0)
    nidx = base[:, None] + np.maximum(step[:, None] + 1 + j, 0)
    trunc = np.zeros(n, bool)
    trunc[ep_len - 1 :: ep_len] = True
    return {
        "obs": frames[idx],
        "obs_next": frames[nidx],
        "act": rng.integers(0, n_actions, n).astype(np.int64),
        "rew": rng.standard_normal(n).astype(np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": trunc,
    }
