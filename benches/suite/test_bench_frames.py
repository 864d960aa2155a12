"""Atari-sized replay (issue 19): ``sample(32)`` of stacked frames, obs and obs_next uint8
``[32, 4, 84, 84]``, from a full buffer of 50,000 transitions (1,000-step episodes).

rlcore is built with ``frame_stack=4`` (one 84x84 frame per row; the stacks are rebuilt in Rust at
sample time), and is also timed with ``n_step=3`` and as a prioritized buffer, each against its
plain ``sample(32)`` (``benches/targets.toml``). Stable-Baselines3's ``ReplayBuffer`` stores every
stack (obs and next_obs, or with ``optimize_memory_usage=True`` obs once) and returns torch
tensors, as its DQN reads them. The floor (``build_floor_frames``) is the plainest code doing the same
memory work: one numpy gather of each sample's frames from a plain frame array. 50k rather than 1M transitions: SB3 needs 56 GB at 1M; at 50k
both buffers are far larger than the caches, so each sample reads main memory as it would at 1M.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from _data import frame_stack_stream
from conftest import build_or_skip, require, tag

CAP = 50_000
B = 32
K = 4
FRAME = (84, 84)
EP = 1000
CHUNK = 5_000


def _chunks() -> Any:
    for r in range(CAP // CHUNK):
        yield frame_stack_stream(CHUNK, FRAME, K, seed=r, ep_len=EP)


def build_rlcore_frames(kind: str = "uniform") -> Any:
    import rlcore

    cls = rlcore.PrioritizedReplayBuffer if kind == "per" else rlcore.ReplayBuffer
    buf = cls(CAP + CAP // EP, seed=0, frame_stack=K)
    for d in _chunks():
        buf.extend(d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"])
    assert len(buf) == CAP
    return buf


def build_sb3_frames(optimize: bool) -> Any:
    require("stable_baselines3")
    from gymnasium import spaces
    from stable_baselines3.common import buffers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SB3 warns about the memory a buffer may need
        buf = buffers.ReplayBuffer(
            CAP,
            spaces.Box(0, 255, (K, *FRAME), np.uint8),
            spaces.Discrete(4),
            device="cpu",
            optimize_memory_usage=optimize,
            handle_timeout_termination=not optimize,
        )
    for r, d in enumerate(_chunks()):  # what add() writes, a chunk at a time
        a, b = r * CHUNK, (r + 1) * CHUNK
        buf.observations[a:b, 0] = d["obs"]
        if not optimize:
            buf.next_observations[a:b, 0] = d["obs_next"]
        buf.actions[a:b, 0, 0] = d["act"]
        buf.rewards[a:b, 0] = d["rew"]
        buf.dones[a:b, 0] = d["terminated"] | d["truncated"]
        if not optimize:
            buf.timeouts[a:b, 0] = d["truncated"]
    buf.full, buf.pos = True, 0
    return buf


def build_floor_frames() -> Any:
    """The floor: the plainest code doing a sample's memory work, on the same frames without
    rlcore's row records: one ``numpy.take`` of each sample's 8 frame rows (obs = frames t-3..t,
    obs_next = t-2..t+1) from a plain ``[CAP, 84, 84]`` uint8 array into a fresh
    ``[32, 2, 4, 84, 84]`` array. No episode bounds, padding or flags."""
    frames = np.concatenate([d["obs"][:, -1] for d in _chunks()])
    rng = np.random.default_rng(0)
    rows = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    take = np.take

    def op() -> Any:
        return take(frames, rng.integers(0, len(frames) - K, B)[:, None, None] + rows, axis=0)

    return op


def _op(lib: str) -> tuple[Any, str]:
    if lib == "floor":
        return build_floor_frames(), "one numpy.take of the 8 frame rows of each sample from a plain frame array"
    if lib == "rlcore":
        buf = build_rlcore_frames()
        return (lambda: buf.sample(B)), "frame_stack=4: stacks rebuilt in Rust; TransitionBatch of numpy arrays"
    if lib == "rlcore (out=)":
        buf = build_rlcore_frames()
        out = buf.sample(B)
        return (lambda: buf.sample(B, out=out)), "frame_stack=4, into preallocated arrays"
    if lib == "sb3":
        buf = build_sb3_frames(False)
        return (lambda: buf.sample(B)), "stores obs and next_obs stacks; returns torch tensors"
    if lib == "sb3 (optimize_memory_usage)":
        buf = build_sb3_frames(True)
        return (lambda: buf.sample(B)), "stores each stack once; returns torch tensors"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", ["rlcore", "rlcore (out=)", "sb3", "sb3 (optimize_memory_usage)", "floor"])
def test_sample_atari_frames(benchmark: Any, lib: str) -> None:
    op_name = f"Atari frames sample({B})"
    tag(benchmark, op_name, lib, capacity=CAP)
    op, note = build_or_skip(lib, lambda: _op(lib))
    batch = op()
    if lib == "floor":
        assert batch.shape == (B, 2, K, *FRAME)
    else:
        obs = batch.obs if lib.startswith("rlcore") else batch.observations
        assert tuple(obs.shape) == (B, K, *FRAME)
    tag(benchmark, op_name, lib, note, capacity=CAP)
    benchmark(op)


@pytest.mark.parametrize("variant", ["n_step=3", "prioritized"])
def test_sample_atari_frames_options(benchmark: Any, variant: str) -> None:
    """rlcore's n-step and prioritized sampling of the same stacks, each in its own group."""
    op_name = f"Atari frames sample({B}, {variant})"
    tag(benchmark, op_name, "rlcore", capacity=CAP)
    if variant == "prioritized":
        buf = build_rlcore_frames("per")
        rng = np.random.default_rng(0)
        buf.update_priorities(np.arange(CAP + CAP // EP), rng.uniform(0.1, 2.0, CAP + CAP // EP))

        def op() -> Any:
            return buf.sample(B)
    else:
        buf = build_rlcore_frames()

        def op() -> Any:
            return buf.sample(B, n_step=3, gamma=0.99)

    op()
    tag(benchmark, op_name, "rlcore", "frame_stack=4", capacity=CAP)
    benchmark(op)
