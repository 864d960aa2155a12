"""Algorithms: one file each, built from networks and optimizers, returning typed stats.

Off-policy: :class:`DQN`, :class:`DDPG`, :class:`TD3`, :class:`SAC`; recurrent, on sequences:
:class:`R2D2`. Each has a frozen config
dataclass, ``from_spaces(observation_space, action_space, config, device=...)``,
``act(obs, *, deterministic)``, ``update(batch) -> XStats``, ``state_dict()`` and
``load_state_dict()``; none holds an env, a buffer or a logger.

Offline (on a fixed dataset, with :class:`~rlcore.trainers.OfflineTrainer`): :class:`TD3BC`,
:class:`IQL`, :class:`CQL` and behaviour cloning, :class:`BC`.

On-policy: :class:`VPG`, :class:`A2C`, :class:`PPO`, with ``act_value(obs)``/``value(obs)`` for the
:class:`~rlcore.collect.sampler.RolloutSampler` and ``update(rollout) -> XStats``; :class:`GAIL`
(PPO with a learned reward) for imitation.

Imitation off-policy: :class:`DAC` (Discriminator-Actor-Critic: SAC on the learned reward of
replayed transitions), an off-policy algorithm for the :class:`~rlcore.trainers.OffPolicyTrainer`.
"""

from rlcore.algos.a2c import A2C, A2CConfig, A2CStats
from rlcore.algos.actor_critic import OnPolicyAlgorithm
from rlcore.algos.bc import BC, BCConfig, BCStats
from rlcore.algos.common import OffPolicyAlgorithm
from rlcore.algos.cql import CQL, CQLConfig, CQLStats
from rlcore.algos.dac import DAC, DACConfig, DACStats
from rlcore.algos.ddpg import DDPG, DDPGConfig, DDPGStats
from rlcore.algos.dqn import DQN, DQNConfig, DQNStats
from rlcore.algos.gail import GAIL, GAILConfig, GAILStats
from rlcore.algos.iql import IQL, IQLConfig, IQLStats
from rlcore.algos.ppo import PPO, PPOConfig, PPOStats
from rlcore.algos.r2d2 import R2D2, R2D2Config, R2D2Stats
from rlcore.algos.sac import SAC, SACConfig, SACStats
from rlcore.algos.td3 import TD3, TD3Config, TD3Stats
from rlcore.algos.td3bc import TD3BC, TD3BCConfig, TD3BCStats
from rlcore.algos.vpg import VPG, VPGConfig, VPGStats
from rlcore.nets import ActorCritic

__all__ = [
    "A2C",
    "PPO",
    "R2D2",
    "VPG",
    "A2CConfig",
    "A2CStats",
    "ActorCritic",
    "OnPolicyAlgorithm",
    "PPOConfig",
    "R2D2Config",
    "R2D2Stats",
    "PPOStats",
    "VPGConfig",
    "VPGStats",
    "DDPG",
    "DQN",
    "SAC",
    "TD3",
    "DDPGConfig",
    "DDPGStats",
    "DQNConfig",
    "DQNStats",
    "OffPolicyAlgorithm",
    "SACConfig",
    "SACStats",
    "TD3Config",
    "TD3Stats",
    "CQL",
    "CQLConfig",
    "CQLStats",
    "IQL",
    "IQLConfig",
    "IQLStats",
    "TD3BC",
    "TD3BCConfig",
    "TD3BCStats",
    "BC",
    "BCConfig",
    "BCStats",
    "GAIL",
    "GAILConfig",
    "GAILStats",
    "DAC",
    "DACConfig",
    "DACStats",
]
