"""Training loops as iterators of typed stats: :class:`OffPolicyTrainer` (DQN, DDPG, TD3, SAC),
:class:`OnPolicyTrainer` (VPG, A2C, PPO; GAIL with a learned reward), :class:`OfflineTrainer`
(behaviour cloning); checkpoints in :mod:`rlcore.trainers.checkpoint`."""

from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
from rlcore.trainers.on_policy import GAILTrainer, OnPolicyTrainer, OnPolicyTrainerConfig

__all__ = [
    "GAILTrainer",
    "OffPolicyTrainer",
    "OffPolicyTrainerConfig",
    "OfflineTrainer",
    "OfflineTrainerConfig",
    "OnPolicyTrainer",
    "OnPolicyTrainerConfig",
]
