"""Deprecated alias of rlcore.trainers.on_policy (``rlcore.onpolicy_trainer`` before 0.2); removed in 0.3."""

import warnings

from rlcore.logging import Logger
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

__all__ = ["Logger", "OnPolicyTrainer", "OnPolicyTrainerConfig"]

warnings.warn(
    "rlcore.onpolicy_trainer is deprecated and will be removed in rlcore 0.3: import from rlcore.trainers.on_policy",
    DeprecationWarning,
    stacklevel=2,
)
