"""``shard_factory_like``: the shards of a sharded buffer get every parameter of the local buffer
(kind, frame stacking, PER and HER settings) and the seed the sharded buffer hands them. Builds the
shards in this process (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from rlcore.distributed.trainer import shard_factory_like

F32 = np.float32


def test_shard_factory_gives_her_shards_every_parameter_of_the_local_buffer():
    """Shards like a HER buffer get all its HER parameters (a second copy of the keyword list once
    dropped finished_only and exact_ratio) and the seed the sharded buffer gives them."""
    local = rlcore.HERReplayBuffer(
        1000, num_envs=2, seed=0, distance_threshold=0.1, strategy="final", future_k=2, prioritized=True,
        alpha=0.7, finished_only=False, exact_ratio=True,
    )
    make = shard_factory_like(local, num_shards=2, num_envs=2)
    shard = make(num_envs=2, seed=7)
    assert shard._config() == {**local._config(), "capacity": shard.capacity}
    plain = rlcore.HERReplayBuffer(1000, num_envs=2, seed=0, distance_threshold=0.1, finished_only=True)
    assert shard_factory_like(plain, num_shards=2, num_envs=2)(num_envs=2, seed=7).finished_only
    a, b = make(num_envs=2, seed=7), make(num_envs=2, seed=7)
    obs = {"observation": np.zeros((2, 1), F32), "achieved_goal": np.zeros((2, 1), F32),
           "desired_goal": np.ones((2, 1), F32)}
    for buf in (a, b):
        for t in range(20):
            o = {k: v + t for k, v in obs.items()}
            buf.add(o, np.zeros((2, 1), F32), np.zeros(2, F32), np.zeros(2, bool), np.full(2, t % 5 == 4),
                    {k: v + 1 for k, v in o.items()})
    assert np.array_equal(a.sample(64).indices, b.sample(64).indices)


@pytest.mark.parametrize(
    "local",
    [
        lambda: rlcore.ReplayBuffer(1000, num_envs=2, seed=0, frame_stack=4),
        lambda: rlcore.PrioritizedReplayBuffer(1000, num_envs=2, seed=0, frame_stack=4, alpha=0.5, beta=0.3),
        lambda: rlcore.PrioritizedReplayBuffer(1000, num_envs=2, seed=0, alpha=0.7, eps=1e-3),
        lambda: rlcore.ReplayBuffer(1000, num_envs=2, seed=0),
    ],
    ids=["replay-frames", "per-frames", "per", "replay"],
)
def test_shard_factory_keeps_frame_stacking_and_per_settings(local) -> None:
    """Plain and PER shards once dropped ``frame_stack`` (a frame-stacked local buffer got shards
    that stored whole stacks per row); PER settings and the kind carry over; the seed is used."""
    buf = local()
    make = shard_factory_like(buf, num_shards=2, num_envs=2)
    shard = make(num_envs=2, seed=7)
    assert type(shard) is type(buf)
    assert shard._config() == {**buf._config(), "capacity": shard.capacity}
    a, b = make(num_envs=2, seed=7), make(num_envs=2, seed=7)
    c = make(num_envs=2, seed=8)
    for s in (a, b, c):
        _fill(s, buf.frame_stack)
    np.testing.assert_array_equal(a.sample(64).indices, b.sample(64).indices)
    assert not np.array_equal(a.sample(64).indices, c.sample(64).indices)
    if buf.frame_stack:  # stacks come back whole from single stored frames
        batch = a.sample(8)
        newest = batch.obs[:, -1, 0]
        np.testing.assert_array_equal(batch.obs[:, :, 0], newest[:, None] + np.arange(-3, 1)[None, :])


def _obs(t: int, k: int | None) -> np.ndarray:
    """[2, k, 3] stacks of frames t-k+1 .. t (each frame filled with its number), or [2, 3]."""
    if k is None:
        return np.full((2, 3), t, np.uint8)
    return np.broadcast_to(np.arange(t - k + 1, t + 1, dtype=np.uint8)[None, :, None], (2, k, 3)).copy()


def _fill(buf: rlcore.ReplayBuffer, k: int | None) -> None:
    for t in range(10, 40):
        buf.add(_obs(t, k), np.zeros((2, 1), F32), np.zeros(2, F32), np.zeros(2, bool), np.zeros(2, bool),
                _obs(t + 1, k))
