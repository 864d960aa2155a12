"""Deprecated alias of rlcore.cli.train_on_policy and rlcore.presets (``rlcore.cli_onpolicy`` before 0.2); removed in 0.3."""

import warnings

from rlcore.cli.train_on_policy import train_on_policy
from rlcore.presets import OnPolicyPreset, on_policy_preset_for

__all__ = ["OnPolicyPreset", "on_policy_preset_for", "train_on_policy"]

warnings.warn(
    "rlcore.cli_onpolicy is deprecated and will be removed in rlcore 0.3: import from rlcore.cli.train_on_policy and rlcore.presets",
    DeprecationWarning,
    stacklevel=2,
)
