"""Deprecated alias of rlcore.collect.sampler and rlcore.batch (``rlcore.rollout`` before 0.2); removed in 0.3."""

import warnings

from rlcore.batch import Rollout
from rlcore.collect.sampler import RolloutSampler
from rlcore.types import ActorCriticPolicy, RewardFn

__all__ = ["ActorCriticPolicy", "RewardFn", "Rollout", "RolloutSampler"]

warnings.warn(
    "rlcore.rollout is deprecated and will be removed in rlcore 0.3: import from rlcore.collect.sampler and rlcore.batch",
    DeprecationWarning,
    stacklevel=2,
)
