"""Imitation learning data: expert datasets recorded from a trained policy
(:mod:`~rlcore.imitation.datasets`) and their Minari export (:mod:`~rlcore.imitation.minari`).
The learners are :class:`~rlcore.algos.BC` and :class:`~rlcore.algos.gail.GAIL`, trained by
:class:`~rlcore.trainers.OfflineTrainer` and :class:`~rlcore.trainers.OnPolicyTrainer`; GAIL's
settings are :func:`rlcore.presets.gail_settings`."""

from rlcore.imitation.datasets import ExpertData, record_episodes, record_expert
from rlcore.imitation.minari import export_minari
from rlcore.presets import GAILSettings, gail_settings
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig

__all__ = [
    "ExpertData",
    "GAILSettings",
    "OfflineTrainer",
    "OfflineTrainerConfig",
    "export_minari",
    "gail_settings",
    "record_episodes",
    "record_expert",
]
