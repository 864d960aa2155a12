"""Imitation learning data: expert datasets recorded from a trained policy
(:mod:`~rlcore.imitation.datasets`) and their Minari export (:mod:`~rlcore.imitation.minari`).
The learners are :class:`~rlcore.algos.BC`, :class:`~rlcore.algos.gail.GAIL` and
:class:`~rlcore.algos.dac.DAC`, trained by :class:`~rlcore.trainers.OfflineTrainer`,
:class:`~rlcore.trainers.OnPolicyTrainer` and :class:`~rlcore.trainers.OffPolicyTrainer`; GAIL's and
DAC's settings are :func:`rlcore.presets.gail_settings` and :func:`rlcore.presets.dac_settings`."""

from rlcore.imitation.datasets import ExpertData, record_episodes, record_expert
from rlcore.imitation.minari import export_minari
from rlcore.presets import DACSettings, GAILSettings, dac_settings, gail_settings
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig

__all__ = [
    "DACSettings",
    "ExpertData",
    "GAILSettings",
    "OfflineTrainer",
    "OfflineTrainerConfig",
    "dac_settings",
    "export_minari",
    "gail_settings",
    "record_episodes",
    "record_expert",
]
