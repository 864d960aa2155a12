"""Replay buffers backed by the Rust core: uniform (:mod:`~rlcore.buffers.replay`), prioritized
(:mod:`~rlcore.buffers.prioritized`), hindsight (:mod:`~rlcore.buffers.her`) and their save
directory format (:mod:`~rlcore.buffers.persist`)."""

from rlcore.buffers.her import HERReplayBuffer, _restore_her
from rlcore.buffers.prioritized import PrioritizedReplayBuffer
from rlcore.buffers.replay import ReplayBuffer, _restore
from rlcore.schedules import LinearSchedule  # here too until 0.3 (it moved to rlcore.schedules)

__all__ = ["HERReplayBuffer", "LinearSchedule", "PrioritizedReplayBuffer", "ReplayBuffer"]

# pickles written before 0.2 name rlcore.buffers._restore / _restore_her
_PICKLE_NAMES = (_restore, _restore_her)
