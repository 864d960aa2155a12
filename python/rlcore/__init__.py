"""rlcore: reinforcement learning with a Rust replay core.

Replay storage, episode-aware indexing, n-step returns, hindsight relabeling, prioritized
sampling and GAE live in Rust (``rlcore._core``); networks, algorithms, collectors and trainers
are thin PyTorch layers (``rlcore.algos``, ``rlcore.collect``, ``rlcore.trainers``).
``rlcore.load_policy(RUN_DIR)`` (:mod:`rlcore.policy`) acts with a trained run's policy; it imports
torch when first used, so ``import rlcore`` needs only numpy and gymnasium.
"""

from typing import Any

from rlcore import errors
from rlcore._core import AddResult, __version__
from rlcore.batch import SequenceBatch, TransitionBatch
from rlcore.buffers.her import HERReplayBuffer
from rlcore.buffers.prioritized import PrioritizedReplayBuffer
from rlcore.buffers.replay import ReplayBuffer
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
    "load_policy",
]


def __getattr__(name: str) -> Any:
    if name == "load_policy":  # imports torch: only when asked for
        from rlcore.policy import load_policy

        return load_policy
    raise AttributeError(f"module 'rlcore' has no attribute {name!r}")
