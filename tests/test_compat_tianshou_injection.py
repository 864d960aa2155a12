"""Draw injection for Tianshou: Tianshou's own buffers draw, rlcore's compat buffers are read at
the same transitions, and what Tianshou's algorithms read must be the same.

Both buffers get the same real CartPole-v1 stream (4 envs, random actions, done envs reset as
Tianshou's Collector does). Tianshou's ``add`` and rlcore's return the index each step was
written to, which maps Tianshou's indices to rlcore's. Batches Tianshou samples (its
``sample_indices``, seeded) are read from both buffers at the mapped indices: every field,
``prev``/``next``, ``unfinished_index`` and Tianshou's own n-step return code
(``Algorithm.compute_nstep_return``, what DQN/DDPG/SAC call) must agree bit for bit.
One stated difference: rlcore stores rewards as float32 (Tianshou keeps what it is given,
float64 from gymnasium), so ``rew`` is compared by value, which is exact for CartPole's 1.0.
"""

# Tianshou draws from NumPy's legacy global generator; seeding it is how its draws are fixed.
# ruff: noqa: NPY002

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

ts = pytest.importorskip("tianshou")
torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402
import tianshou.data as tsd  # noqa: E402
from rlcore.compat import tianshou as compat  # noqa: E402
from tianshou.algorithm.algorithm_base import Algorithm  # noqa: E402
from tianshou.data import Batch  # noqa: E402

N_ENVS = 4
FIELDS = ("obs", "act", "terminated", "truncated", "done", "obs_next")


def cartpole_stream(steps: int, seed: int = 0) -> Iterator[Batch]:
    envs = [gym.make("CartPole-v1") for _ in range(N_ENVS)]
    obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(envs)])
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        act = rng.integers(0, 2, N_ENVS)
        out = [e.step(int(a)) for e, a in zip(envs, act, strict=True)]
        nxt = np.stack([o[0] for o in out])
        term = np.array([o[2] for o in out])
        trunc = np.array([o[3] for o in out])
        rew = np.array([o[1] for o in out])
        yield Batch(obs=obs, act=act, rew=rew, terminated=term, truncated=trunc, obs_next=nxt, info={})
        obs = nxt.copy()
        for i in np.flatnonzero(term | trunc):
            obs[i] = envs[i].reset()[0]


def filled(ours: Any, theirs: Any, steps: int) -> dict[int, int]:
    """Add the stream to both; Tianshou's index -> rlcore's index of every stored step."""
    index = {}
    for batch in cartpole_stream(steps):
        mine = ours.add(batch, buffer_ids=np.arange(N_ENVS))[0]
        peer = theirs.add(batch, buffer_ids=np.arange(N_ENVS))[0]
        index.update(zip(peer.tolist(), mine.tolist(), strict=True))
    return index


def mapped(index: dict[int, int], idx: np.ndarray) -> np.ndarray:
    return np.array([index[int(i)] for i in idx], dtype=np.int64)


def assert_same_batch(a: Batch, b: Batch) -> None:
    for key in FIELDS:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), key
    np.testing.assert_array_equal(np.asarray(a.rew, np.float64), np.asarray(b.rew))


@pytest.mark.parametrize("n_step", [1, 3])
def test_vector_buffer_reads_like_tianshous_at_tianshous_draws(n_step: int) -> None:
    ours, theirs = compat.VectorReplayBuffer(20_000, N_ENVS), tsd.VectorReplayBuffer(20_000, N_ENVS)
    index = filled(ours, theirs, 600)
    assert sorted(mapped(index, theirs.unfinished_index()).tolist()) == sorted(ours.unfinished_index().tolist())

    def target_q(buf: Any, idx: np.ndarray) -> Any:  # a fixed Q' of the bootstrap observation
        return torch.as_tensor(buf[idx].obs_next.astype(np.float64) @ np.array([1.0, -2.0, 3.0, 0.5]))

    np.random.seed(5)
    for _ in range(8):
        it = theirs.sample_indices(64)
        io = mapped(index, it)
        assert_same_batch(ours[io], theirs[it])
        for step in ("prev", "next"):
            np.testing.assert_array_equal(getattr(ours, step)(io), mapped(index, getattr(theirs, step)(it)))
        ro = Algorithm.compute_nstep_return(ours[io], ours, io, target_q, gamma=0.9, n_step=n_step).returns
        rt = Algorithm.compute_nstep_return(theirs[it], theirs, it, target_q, gamma=0.9, n_step=n_step).returns
        assert ro.dtype == rt.dtype and torch.equal(ro, rt)


def test_prioritized_buffer_reads_like_tianshous_at_tianshous_draws() -> None:
    ours = compat.PrioritizedVectorReplayBuffer(20_000, N_ENVS, alpha=0.6, beta=0.4)
    theirs = tsd.PrioritizedVectorReplayBuffer(20_000, N_ENVS, alpha=0.6, beta=0.4)
    index = filled(ours, theirs, 400)
    np.random.seed(6)
    td = np.random.default_rng(1).exponential(size=64)
    for _ in range(6):
        it = theirs.sample_indices(64)
        io = mapped(index, it)
        assert_same_batch(ours[io], theirs[it])
        # IS weights: the same formula; rlcore computes them in float32 (rounding only)
        np.testing.assert_allclose(ours[io].weight, theirs[it].weight, rtol=2e-6)
        theirs.update_weight(it, td)
        ours.update_weight(io, td)
