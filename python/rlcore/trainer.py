"""Deprecated alias of rlcore.trainers (``rlcore.trainer`` before 0.2); removed in 0.3."""

import warnings

from rlcore.logging import Logger
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

__all__ = ["Logger", "OffPolicyTrainer", "OffPolicyTrainerConfig", "OnPolicyTrainer", "OnPolicyTrainerConfig"]

warnings.warn(
    "rlcore.trainer is deprecated and will be removed in rlcore 0.3: import from rlcore.trainers",
    DeprecationWarning,
    stacklevel=2,
)
