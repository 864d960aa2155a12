"""Replay buffers backed by the Rust core: uniform (:mod:`~rlcore.buffers.replay`), prioritized
(:mod:`~rlcore.buffers.prioritized`), hindsight (:mod:`~rlcore.buffers.her`) and their save
directory format (:mod:`~rlcore.buffers.persist`)."""

from rlcore.buffers.her import HERReplayBuffer
from rlcore.buffers.prioritized import PrioritizedReplayBuffer
from rlcore.buffers.replay import ReplayBuffer

__all__ = ["HERReplayBuffer", "PrioritizedReplayBuffer", "ReplayBuffer"]
