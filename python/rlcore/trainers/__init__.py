"""Training loops as iterators of typed stats: :class:`OffPolicyTrainer` (DQN, DDPG, TD3, SAC),
:class:`OnPolicyTrainer` (VPG, A2C, PPO; GAIL with ``reward_fn=gail.reward``), :class:`OfflineTrainer`
(behaviour cloning), :class:`RecurrentTrainer` (R2D2: the off-policy loop on sequences). What they share (evaluation, stats, ``run``, checkpoints with the RNG states)
is :class:`~rlcore.trainers.loop.Trainer`; the checkpoint format is :mod:`rlcore.trainers.checkpoint`."""

from rlcore.trainers.loop import Trainer
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
from rlcore.trainers.on_policy import GAILTrainer, OnPolicyTrainer, OnPolicyTrainerConfig
from rlcore.trainers.recurrent import RecurrentTrainer

__all__ = [
    "GAILTrainer",
    "OffPolicyTrainer",
    "OffPolicyTrainerConfig",
    "OfflineTrainer",
    "OfflineTrainerConfig",
    "OnPolicyTrainer",
    "OnPolicyTrainerConfig",
    "RecurrentTrainer",
    "Trainer",
]
