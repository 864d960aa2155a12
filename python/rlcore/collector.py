"""Deprecated alias of rlcore.collect (``rlcore.collector`` before 0.2); removed in 0.3."""

import warnings

from rlcore.collect.collector import Collector
from rlcore.collect.evaluate import evaluate
from rlcore.types import Policy, RewardFn

__all__ = ["Collector", "Policy", "RewardFn", "evaluate"]

warnings.warn(
    "rlcore.collector is deprecated and will be removed in rlcore 0.3: import from rlcore.collect",
    DeprecationWarning,
    stacklevel=2,
)
