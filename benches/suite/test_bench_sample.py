"""sample(256) and sample(256, n_step=3) from a full buffer at capacity 10k, 200k and 1M: the
learner's per-gradient-step cost, which must not grow with capacity; and sample(32) and
sample(1024) at 200k (the per-call overhead against the per-row cost); and sample(256) from 200k
steps stored over 100k envs (2 rows each) and over one env, filled alike (issue 20: the draw
locates a row's env in O(log N) and replaces rejected rows from its prefetched queue, so the cost
must not grow with num_envs).

Each sample(256) group also times the *floor* (issue 20): ``RawBuffer._floor_gather``, a bench-only
Rust gather into the same fresh output arrays of the same bytes (observation, next row's
observation, action, reward, flags, index) of uniformly drawn rows, without validity, n-step or
discount work, behind the same one PyO3 call. It runs ``sample``'s own draw and prefetch pipeline
with that work taken out, so the distance is the per-row work alone. The sample(256, n_step=3)
groups time the floor with n_step=3: the same gather reading each row's window as it comes (the
rewards of rows t .. t + 2 summed as stored, the observation of row t + 3), without the window's
cut at an episode end or its discount. The report shows rlcore's time over the floor's."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from conftest import (
    ACT_DIM,
    BATCH,
    CAPACITY,
    GAMMA,
    LIBS,
    N_STEP,
    OBS_DIM,
    build_cpprb,
    build_or_skip,
    build_rlcore,
    build_rlox,
    build_sb3,
    build_tianshou,
    build_torchrl,
    tag,
)

CAPACITIES = [10_000, 200_000, 1_000_000]
MANY_ENVS = 100_000


def _sample_op(lib: str, cap: int, batch: int = BATCH) -> tuple[Any, str]:
    if lib == "floor":
        buf = build_rlcore(cap)
        seeds = itertools.count(1).__next__
        return (
            lambda: buf._floor_gather(batch, seeds())
        ), "bare Rust gather of the same bytes into the same arrays (no validity, n-step or discount)"
    if lib == "rlcore":
        buf = build_rlcore(cap)
        return (lambda: buf.sample(batch)), "TransitionBatch of numpy arrays"
    if lib == "rlox":
        buf = build_rlox(cap)
        seeds = itertools.count(1).__next__
        return (lambda: buf.sample(batch, seeds())), "dict of numpy arrays; a fresh seed per call"
    if lib == "cpprb":
        buf = build_cpprb(cap)
        return (lambda: buf.sample(batch)), ""
    if lib == "sb3":
        buf = build_sb3(cap)
        return (lambda: buf.sample(batch)), "returns torch tensors"
    if lib == "tianshou":
        buf = build_tianshou(cap)
        return (lambda: buf.sample(batch)), ""
    if lib == "torchrl":
        buf = build_torchrl(cap)
        if batch == BATCH:
            return (lambda: buf.sample()), "LazyTensorStorage, TensorDict out"
        return (lambda: buf.sample(batch)), "LazyTensorStorage, TensorDict out"
    raise AssertionError(lib)


def _nstep_op(lib: str, cap: int) -> tuple[Any, str]:
    if lib == "floor":
        buf = build_rlcore(cap)
        seeds = itertools.count(1).__next__
        return (lambda: buf._floor_gather(BATCH, seeds(), N_STEP)), (
            "bare Rust gather of the same bytes (rows t .. t + n read as they come, no window cut or discount)"
        )
    if lib == "rlcore":
        buf = build_rlcore(cap)
        return (lambda: buf.sample(BATCH, n_step=N_STEP, gamma=GAMMA)), ""
    if lib == "sb3":
        buf = build_sb3(cap, nstep=True)
        return (lambda: buf.sample(BATCH)), "NStepReplayBuffer; returns torch tensors"
    if lib == "cpprb":
        buf = build_cpprb(cap, nstep=True)
        return (
            lambda: buf.sample(BATCH)
        ), "Nstep: returns are accumulated at add time, sample is a plain gather"
    if lib == "tianshou":
        import torch
        from tianshou.algorithm.algorithm_base import Algorithm

        buf = build_tianshou(cap)

        def target_q(b: Any, idx: Any) -> Any:
            _ = b[idx].obs_next  # the gather a real target network would read
            return torch.zeros(len(idx), 1)

        def op() -> Any:
            batch, idx = buf.sample(BATCH)
            return Algorithm.compute_nstep_return(batch, buf, idx, target_q, gamma=GAMMA, n_step=N_STEP)

        return op, "sample + Algorithm.compute_nstep_return (target Q = 0, obs_next gathered)"
    if lib == "rlox":
        pytest.skip("rlox 1.2.0 ReplayBuffer has no n-step sampling")
    if lib == "torchrl":
        pytest.skip("TorchRL computes n-step in the collector (MultiStep transform), not in sample()")
    raise AssertionError(lib)


@pytest.mark.parametrize("cap", CAPACITIES, ids=lambda c: f"cap{c}")
@pytest.mark.parametrize("lib", [*LIBS, "floor"])
def test_sample(benchmark: Any, lib: str, cap: int) -> None:
    tag(benchmark, f"sample({BATCH})", lib, capacity=cap)
    op, note = build_or_skip(lib, lambda: _sample_op(lib, cap))
    op()
    tag(benchmark, f"sample({BATCH})", lib, note, capacity=cap)
    benchmark(op)


@pytest.mark.parametrize("cap", CAPACITIES, ids=lambda c: f"cap{c}")
@pytest.mark.parametrize("lib", [*LIBS, "floor"])
def test_sample_nstep(benchmark: Any, lib: str, cap: int) -> None:
    tag(benchmark, f"sample({BATCH}, n_step={N_STEP})", lib, capacity=cap)
    op, note = build_or_skip(lib, lambda: _nstep_op(lib, cap))
    op()
    tag(benchmark, f"sample({BATCH}, n_step={N_STEP})", lib, note, capacity=cap)
    benchmark(op)


@pytest.mark.parametrize("batch", [32, 1024], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("lib", LIBS)
def test_sample_batch_size(benchmark: Any, lib: str, batch: int) -> None:
    tag(benchmark, f"sample({batch})", lib, capacity=CAPACITY)
    op, note = build_or_skip(lib, lambda: _sample_op(lib, CAPACITY, batch))
    op()
    tag(benchmark, f"sample({batch})", lib, note, capacity=CAPACITY)
    benchmark(op)


def build_rlcore_many_envs(cap: int, n_envs: int) -> Any:
    """``cap`` rows over ``n_envs`` env segments of ``cap // n_envs`` rows, every ring wrapped once
    (one more vector step than a segment holds), no episode ending: what a large vectorised
    collector leaves."""
    import numpy as np
    import rlcore

    buf = rlcore.ReplayBuffer(cap, num_envs=n_envs, seed=0)
    rng = np.random.default_rng(0)
    act = rng.uniform(-1, 1, (n_envs, ACT_DIM)).astype(np.float32)
    rew, flags = rng.standard_normal(n_envs).astype(np.float32), np.zeros(n_envs, bool)
    obs = rng.standard_normal((n_envs, OBS_DIM)).astype(np.float32)
    for _ in range(cap // n_envs + 1):
        obs_next = rng.standard_normal((n_envs, OBS_DIM)).astype(np.float32)
        buf.add(obs, act, rew, flags, flags, obs_next)
        obs = obs_next
    return buf


@pytest.mark.parametrize("n_envs", [1, MANY_ENVS], ids=lambda n: f"envs{n}")
def test_sample_many_envs(benchmark: Any, n_envs: int) -> None:
    """rlcore only, both rows in one group so that they are timed back to back (the target
    compares them: the machine's speed drifts between groups timed minutes apart)."""
    group, lib = f"sample({BATCH}) over envs", f"rlcore ({_envs(n_envs)})"
    tag(benchmark, group, lib, capacity=CAPACITY)
    buf = build_rlcore_many_envs(CAPACITY, n_envs)
    buf.sample(BATCH)
    note = f"{n_envs} env segment(s) of {CAPACITY // n_envs} rows, one running episode each"
    tag(benchmark, group, lib, note, capacity=CAPACITY)
    benchmark(lambda: buf.sample(BATCH))


def _envs(n: int) -> str:
    return "1 env" if n == 1 else f"{n // 1000}k envs"
