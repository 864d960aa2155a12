"""The seeded sampling streams, pinned: at a fixed seed, over fixed data, ``sample`` returns the
same rows, and the same bytes in every field, from this release on (issue 20). A change that moves
a stream must update the pins below and say so in CHANGELOG.md; speed work must not move them.

Each case fills a small buffer through its ring (2 or 3 envs, episodes ending in termination and
truncation, envs filled unevenly through ``mask`` so that the partial-fill draw runs too), then
draws four batches in a row; the pin is the first batch's first 12 indices and a SHA-256 of every field of
all four batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pytest
import rlcore

F32 = np.float32


def _fill(
    buf: rlcore.ReplayBuffer, n_envs: int, steps: int, *, goal: bool = False, uneven: bool = False
) -> None:
    """``steps`` vector steps of deterministic data (episodes of 7 to 11 steps)."""
    rng = np.random.default_rng(123)
    dim = 4
    cur = rng.standard_normal((n_envs, dim)).astype(F32)
    t_in_ep = np.zeros(n_envs, int)
    for k in range(steps):
        nxt = rng.standard_normal((n_envs, dim)).astype(F32)
        t_in_ep += 1
        end = t_in_ep >= 7 + (np.arange(n_envs) + k // 13) % 5
        term = end & (np.arange(n_envs) % 2 == 0)
        trunc = end & ~term
        mask = np.ones(n_envs, bool)
        if uneven:
            mask[1:] = k % (1 + np.arange(1, n_envs)) == 0
        rew = rng.standard_normal(n_envs).astype(F32)
        act = rng.uniform(-1, 1, (n_envs, 2)).astype(F32)
        if goal:
            o = {
                "observation": cur,
                "achieved_goal": cur[:, :3] * 0.1,
                "desired_goal": np.full((n_envs, 3), 0.02, F32),
            }
            on = {
                "observation": nxt,
                "achieved_goal": nxt[:, :3] * 0.1,
                "desired_goal": np.full((n_envs, 3), 0.02, F32),
            }
            buf.add(o, act, rew, term, trunc, on, mask=mask)
        else:
            buf.add(cur, act, rew, term, trunc, nxt, mask=mask)
        upd = mask & ~end
        cur = np.where(
            upd[:, None], nxt, np.where(mask[:, None], rng.standard_normal((n_envs, dim)).astype(F32), cur)
        )
        t_in_ep[end & mask] = 0


def _reward(ag: np.ndarray, g: np.ndarray, info: object) -> np.ndarray:
    return -(np.linalg.norm(ag - g, axis=-1) > 0.05).astype(F32)


def _draws(buf: rlcore.ReplayBuffer, **kw: object) -> list[rlcore.TransitionBatch]:
    return [buf.sample(37, **kw) for _ in range(4)]


def _uniform() -> list[rlcore.TransitionBatch]:
    buf = rlcore.ReplayBuffer(90, num_envs=3, seed=7)
    _fill(buf, 3, 70)
    return _draws(buf)


def _uniform_partial_fill() -> list[rlcore.TransitionBatch]:
    buf = rlcore.ReplayBuffer(300, num_envs=3, seed=8)
    _fill(buf, 3, 60, uneven=True)
    return _draws(buf)


def _nstep() -> list[rlcore.TransitionBatch]:
    buf = rlcore.ReplayBuffer(90, num_envs=3, seed=9)
    _fill(buf, 3, 70)
    return _draws(buf, n_step=3, gamma=0.9)


def _nstep_partial_fill() -> list[rlcore.TransitionBatch]:
    buf = rlcore.ReplayBuffer(300, num_envs=3, seed=10)
    _fill(buf, 3, 60, uneven=True)
    return _draws(buf, n_step=4, gamma=0.8)


def _per() -> list[rlcore.TransitionBatch]:
    buf = rlcore.PrioritizedReplayBuffer(90, num_envs=3, seed=11, alpha=0.6, beta=0.4)
    _fill(buf, 3, 70)
    rows = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    buf.update_priorities(rows, np.linspace(0.1, 3.0, rows.size))
    return _draws(buf, n_step=2, gamma=0.9)


def _her_native() -> list[rlcore.TransitionBatch]:
    buf = rlcore.HERReplayBuffer(120, num_envs=2, seed=12, distance_threshold=0.05)
    _fill(buf, 2, 80, goal=True)
    return _draws(buf, n_step=2, gamma=0.9)


def _her_python_reward() -> list[rlcore.TransitionBatch]:
    buf = rlcore.HERReplayBuffer(120, num_envs=2, seed=13, strategy="episode", compute_reward=_reward)
    _fill(buf, 2, 80, goal=True)
    return _draws(buf)


def _her_finished_only() -> list[rlcore.TransitionBatch]:
    buf = rlcore.HERReplayBuffer(
        120, num_envs=2, seed=14, strategy="final", distance_threshold=0.05, finished_only=True
    )
    _fill(buf, 2, 80, goal=True)
    return _draws(buf)


CASES: dict[str, Callable[[], list[rlcore.TransitionBatch]]] = {
    "uniform": _uniform,
    "uniform_partial_fill": _uniform_partial_fill,
    "nstep": _nstep,
    "nstep_partial_fill": _nstep_partial_fill,
    "per": _per,
    "her_native": _her_native,
    "her_python_reward": _her_python_reward,
    "her_finished_only": _her_finished_only,
}


def fingerprint(batches: list[rlcore.TransitionBatch]) -> tuple[list[int], str]:
    """(first 12 rows of the first batch, SHA-256 over every field of every batch). Indices count
    by their rows: a prioritized buffer's also carry the generation of their transition (issue 38),
    which names the same draws."""
    h = hashlib.sha256()
    mask = (1 << 40) - 1
    batches = [b._replace(indices=b.indices & mask) for b in batches]
    for b in batches:
        for name in b._fields:
            v = getattr(b, name)
            items = sorted(v.items()) if isinstance(v, dict) else [("", v)]
            for key, a in items:
                if a is not None:
                    h.update(f"{name}.{key}:{a.dtype}:{a.shape}".encode())
                    h.update(np.ascontiguousarray(a).tobytes())
    return batches[0].indices[:12].tolist(), h.hexdigest()


PINS: dict[str, tuple[list[int], str]] = {
    "uniform": (
        [4, 15, 64, 38, 86, 41, 65, 29, 88, 6, 10, 15],
        "226f89b4f112cab3dd125a4210b0cfd00b9ccab4b054a76f1cd7ce8795f44c87",
    ),
    "uniform_partial_fill": (
        [50, 54, 44, 122, 52, 213, 38, 119, 39, 203, 115, 30],
        "9205ffb595141c440954766429741fc191c48718bc9f06226e78799db0233c50",
    ),
    "nstep": (
        [53, 38, 79, 6, 12, 19, 73, 65, 85, 31, 24, 41],
        "850443615d4588fb2d51153f2fb364522e4926b006b1d0e47762f9577aedc2ab",
    ),
    "nstep_partial_fill": (
        [28, 201, 11, 133, 132, 41, 124, 8, 49, 17, 55, 100],
        "7049de8c54d0a63cda1953566bd6da90541cd9cf7071f216782b041eb2846980",
    ),
    "per": (
        [6, 11, 15, 18, 20, 25, 26, 29, 33, 35, 38, 40],
        "cb3607c473386cef247bf29969e00b9607dc7e9e4035111e6ffc58f3346eb47e",
    ),
    "her_native": (
        [69, 105, 80, 31, 115, 11, 78, 58, 71, 82, 118, 28],
        "c7bf201ba23de0e49d9d7a2ebab1e4f5dde12ec7044eb8943527eb7fb5261941",
    ),
    "her_python_reward": (
        [1, 11, 68, 113, 74, 31, 4, 8, 96, 16, 101, 90],
        "6a5fcb2266a76a98df2b4b5ff1ff88438d0a99bd46b468d23fdd171ebc1fde7e",
    ),
    "her_finished_only": (
        [71, 45, 112, 64, 63, 8, 45, 75, 105, 105, 37, 115],
        "f173d8cb3164ea4d92cdebd304b6a28b24a20cb85b35d758208ebb8abf5660a9",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_seeded_sampling_stream_is_pinned(case: str) -> None:
    idx, digest = fingerprint(CASES[case]())
    want_idx, want_digest = PINS[case]
    assert idx == want_idx, f"{case}: the drawn rows moved"
    assert digest == want_digest, f"{case}: the rows are the same but a field's bytes moved"
