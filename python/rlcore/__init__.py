"""rlcore: reinforcement learning with a Rust replay core.

Replay storage, episode-aware indexing, n-step returns, hindsight relabeling, prioritized
sampling and GAE live in Rust (``rlcore._core``); networks, algorithms, collectors and trainers
are thin PyTorch layers (``rlcore.algos``, ``rlcore.collect``, ``rlcore.trainers``).
"""

from rlcore import errors
from rlcore._core import AddResult, __version__
from rlcore.batch import TransitionBatch
from rlcore.buffers.her import HERReplayBuffer
from rlcore.buffers.prioritized import PrioritizedReplayBuffer
from rlcore.buffers.replay import ReplayBuffer
from rlcore.buffers.sequences import SequenceBatch
from rlcore.returns import compute_gae, compute_nstep_returns
from rlcore.schedules import LinearSchedule

__all__ = [
    "AddResult",
    "HERReplayBuffer",
    "LinearSchedule",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "SequenceBatch",
    "TransitionBatch",
    "__version__",
    "compute_gae",
    "compute_nstep_returns",
    "errors",
]
