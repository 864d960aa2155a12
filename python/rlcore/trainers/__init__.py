"""Training loops as iterators of typed stats: :class:`OffPolicyTrainer` (DQN, DDPG, TD3, SAC),
:class:`OnPolicyTrainer` (VPG, A2C, PPO; GAIL with ``reward_fn=gail.reward``), :class:`OfflineTrainer`
(behaviour cloning), :class:`RecurrentTrainer` (R2D2: the off-policy loop on sequences). What they
share (evaluation, stats, ``run`` with periodic and on-signal checkpoints, checkpoints with the RNG
states) is :class:`~rlcore.trainers.loop.Trainer`; the checkpoint format is :mod:`rlcore.trainers.checkpoint`."""

from rlcore.trainers.loop import Trainer
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig
from rlcore.trainers.recurrent import RecurrentTrainer
from rlcore.trainers.signals import RunInterrupted

__all__ = [
    "OffPolicyTrainer",
    "OffPolicyTrainerConfig",
    "OfflineTrainer",
    "OfflineTrainerConfig",
    "OnPolicyTrainer",
    "OnPolicyTrainerConfig",
    "RecurrentTrainer",
    "RunInterrupted",
    "Trainer",
]
