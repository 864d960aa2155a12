"""Settings known to learn on each environment family: the defaults of ``rlcore train``, of the
examples, of GAIL (:func:`gail_settings`) and of DAC (:func:`dac_settings`). Typed data: each preset holds the algorithms' own
config objects and a trainer config, checked when the preset is built; the CLI overrides them
field by field (``dataclasses.replace``) with its flags and the run's seed and length."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlcore.algos.a2c import A2CConfig
from rlcore.algos.dac import DACConfig
from rlcore.algos.ddpg import DDPGConfig
from rlcore.algos.dqn import DQNConfig
from rlcore.algos.gail import GAILConfig
from rlcore.algos.ppo import PPOConfig
from rlcore.algos.r2d2 import R2D2Config
from rlcore.algos.sac import SACConfig
from rlcore.algos.td3 import TD3Config
from rlcore.algos.vpg import VPGConfig
from rlcore.buffers.replay import ReplayBuffer
from rlcore.envs.atari import is_atari
from rlcore.trainers.off_policy import OffPolicyTrainerConfig
from rlcore.trainers.on_policy import OnPolicyTrainerConfig

__all__ = [
    "ATARI_CAPACITY",
    "MUJOCO_ENVS",
    "AlgoConfig",
    "DACSettings",
    "GAILSettings",
    "OffPolicyPreset",
    "OnPolicyPreset",
    "atari_replay_buffer",
    "dac_settings",
    "gail_settings",
    "on_policy_preset_for",
    "preset_for",
    "recurrent_preset_for",
]

MUJOCO_ENVS: tuple[str, ...] = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "Swimmer", "InvertedPendulum", "Reacher")
"""Prefixes of the MuJoCo locomotion env ids (``HalfCheetah-v5``, ...), which share presets."""


AlgoConfig = DQNConfig | DDPGConfig | TD3Config | SACConfig | R2D2Config | PPOConfig | A2CConfig | VPGConfig
"""The config of any algorithm a preset names."""


@dataclass(frozen=True, kw_only=True)
class OffPolicyPreset:
    """Per-environment defaults of ``rlcore train`` for the off-policy algorithms (DQN, DDPG, TD3,
    SAC) and R2D2; every field is overridable by a flag where one exists."""

    num_envs: int = 1
    """Training envs (a SyncVectorEnv; ``--num-envs``)."""
    steps: int = 50_000
    """Default ``--steps`` (env steps)."""
    capacity: int = 1_000_000
    """Replay capacity in rows (cut to ``--steps`` plus room for the run's episodes)."""
    eval_every_env_steps: int = 5_000
    """Evaluate about every this many env steps."""
    trainer: OffPolicyTrainerConfig = field(default_factory=OffPolicyTrainerConfig)
    """The schedule (collect steps, update-to-data ratio, batch size, warm-up, n-step, gamma,
    evaluation episodes); ``max_env_steps``, ``eval_every``, ``seed`` and the checkpoint interval
    are set per run."""
    configs: Mapping[str, AlgoConfig] = field(default_factory=dict)
    """The config of each algorithm that differs from its defaults, by ``--algo`` name; its
    ``seed`` and the schedules tied to ``--steps`` are set per run."""
    anneal_lr_over_run: bool = False
    """Anneal the learning rate of DQN and R2D2 linearly to 0 over ``--steps``."""
    dqn_eps_decay_fraction: float | None = None
    """Decay DQN's epsilon over this fraction of ``--steps`` (``None``: the config's
    ``eps_decay_env_steps``)."""


ATARI_CAPACITY = 100_000
"""Replay capacity of Atari runs: SB3 zoo's ``buffer_size`` for Atari DQN (each frame stored once:
about 0.7 GB)."""


def atari_replay_buffer(capacity: int, *, num_envs: int, seed: int) -> ReplayBuffer:
    """The replay buffer of every Atari DQN run (``rlcore train`` and ``examples/atari_dqn.py``):
    a uniform :class:`~rlcore.buffers.replay.ReplayBuffer` of ``capacity`` rows that stores each
    84x84 frame once and rebuilds the uint8 ``[4, 84, 84]`` stacks at sample time
    (``frame_stack=4``, docs/frames.md: 7.1 kB per row instead of 28 kB)."""
    return ReplayBuffer(capacity, num_envs=num_envs, seed=seed, frame_stack=4)


_PLAIN_DDPG = DDPGConfig(random_action_prob=0.0, action_l2=0.0, exploration_noise=0.1, tau=0.005)
"""DDPG without the HER paper's random actions and action penalty (TD3 paper's DDPG settings)."""


def preset_for(env_id: str, *, her: bool) -> OffPolicyPreset:
    """The defaults for ``env_id`` (goal envs with HER, Atari, Pendulum, CartPole, MuJoCo, anything else)."""
    if not her and is_atari(env_id):
        # DQN's Atari settings: RL Baselines3 Zoo's dqn.yml for Atari (lr 1e-4, batch 32, buffer
        # 100k, train_freq 4, target_update_interval 1000 env steps = 250 gradient steps,
        # exploration_fraction 0.1, final eps 0.01, Huber loss, gradient norm 10), with 20k
        # random warm-up steps (the zoo: 100k of 10M) for a 500k-step run; gamma 0.99. Evaluation
        # with epsilon 0.05 (Mnih et al. 2015) on whole games with the raw score.
        return OffPolicyPreset(
            steps=500_000,
            capacity=ATARI_CAPACITY,
            trainer=OffPolicyTrainerConfig(
                collect_env_steps=4, utd_ratio=0.25, batch_size=32, warmup_env_steps=20_000, eval_episodes=10
            ),
            eval_every_env_steps=25_000,
            configs={
                "dqn": DQNConfig(
                    lr=1e-4,
                    loss="huber",
                    huber_delta=1.0,
                    max_grad_norm=10.0,
                    target_update_interval=250,
                    eps_start=1.0,
                    eps_end=0.01,
                    double_q=False,
                    eval_epsilon=0.05,
                )
            },
            dqn_eps_decay_fraction=0.1,
        )
    if her:
        gamma = 0.98
        clip = (-1.0 / (1.0 - gamma), 0.0)
        fetch = {"normalize_obs": True, "hidden": (256, 256, 256), "actor_lr": 1e-3, "critic_lr": 1e-3, "tau": 0.05}
        return OffPolicyPreset(
            num_envs=2,
            steps=5_000,
            trainer=OffPolicyTrainerConfig(
                collect_env_steps=50, utd_ratio=0.5, batch_size=256, warmup_env_steps=0, eval_episodes=10, gamma=gamma
            ),
            eval_every_env_steps=500,
            configs={
                "ddpg": DDPGConfig(q_target_clip=clip),
                "td3": TD3Config(q_target_clip=clip, exploration_noise=0.2, **fetch),
                "sac": SACConfig(q_target_clip=clip, alpha_lr=1e-3, **fetch),
            },
        )
    if env_id.startswith(("CartPole", "rlcore/CartPole")):  # rlcore/CartPoleNoVel-v1 too
        # DQN: rl-baselines3-zoo's dqn.yml for CartPole-v1 (2x256, Adam 2.3e-3, batch 64, 256 env
        # steps then 128 gradient steps, target copied once per round, epsilon 1 -> 0.04 over 8k
        # steps, 1k warm-up, gamma 0.99) with the learning rate annealed to 0 over the run and
        # 3-step returns (issue 43). Each target copy (about 190 in a run) is one backup of n steps
        # of reward: with n = 1 mean Q was still climbing at 50k (75 at 36k, 121 at 50k, past the
        # 100 that 1/(1-gamma) allows) and seed 0 fell from 500 at 34k to 62; with n = 3 it stays
        # below 100 (88-98 at 50k) and 5/5 seeds end at 500 (docs/training.md, "CartPole-v1, DQN").
        return OffPolicyPreset(
            steps=50_000,
            capacity=100_000,
            trainer=OffPolicyTrainerConfig(
                collect_env_steps=256, utd_ratio=0.5, batch_size=64, warmup_env_steps=1_000, n_step=3
            ),
            eval_every_env_steps=5_000,
            configs={
                "dqn": DQNConfig(
                    hidden=(256, 256), lr=2.3e-3, target_update_interval=128, eps_decay_env_steps=8_000, eps_end=0.04
                )
            },
            anneal_lr_over_run=True,
        )
    if env_id.startswith("Pendulum"):
        return OffPolicyPreset(
            steps=20_000,
            capacity=200_000,
            trainer=OffPolicyTrainerConfig(collect_env_steps=1, utd_ratio=1.0, batch_size=256, warmup_env_steps=1_000),
            eval_every_env_steps=1_000,
            configs={"ddpg": _PLAIN_DDPG},
        )
    if env_id.startswith(MUJOCO_ENVS):
        # SAC: Tianshou's MuJoCo SAC settings (examples/mujoco/mujoco_sac.py: actor and critic
        # learning rates 1e-3, a fixed alpha of 0.2, 256x256, batch 256, 10k random steps, one
        # update per env step, 10 evaluation episodes every 5k steps), the ones behind the published
        # curves that docs/training.md compares with. SB3's 3e-4 learns HalfCheetah more slowly
        # early on; a learned alpha (SB3's default) fell to 0.05 on Hopper-v5 and one of two seeds
        # ended at 1285 (docs/training.md).
        return OffPolicyPreset(
            steps=100_000,
            trainer=OffPolicyTrainerConfig(
                collect_env_steps=1, utd_ratio=1.0, batch_size=256, warmup_env_steps=10_000, eval_episodes=10
            ),
            eval_every_env_steps=5_000,
            configs={
                "sac": SACConfig(
                    actor_lr=1e-3, critic_lr=1e-3, init_alpha=0.2, autotune_alpha=False, hidden=(256, 256)
                ),
                "ddpg": dataclasses.replace(_PLAIN_DDPG, hidden=(256, 256)),
            },
        )
    return OffPolicyPreset(
        trainer=OffPolicyTrainerConfig(collect_env_steps=1, utd_ratio=1.0, batch_size=256, warmup_env_steps=1_000),
        configs={"ddpg": _PLAIN_DDPG},
    )


def recurrent_preset_for(env_id: str) -> OffPolicyPreset:
    """The defaults of ``rlcore train --algo r2d2`` (:class:`~rlcore.trainers.recurrent.RecurrentTrainer`):
    8 envs, one gradient step on 32 sequences every 4 env steps after 5,000 env steps, 3-step
    returns; the R2D2 config of the best configuration measured on ``rlcore/CartPoleNoVel-v1``
    (docs/sequences.md, configuration G: F's previous action as input, observation normalisation,
    8 + 24-step sequences, Adam 5e-4 annealed over the run, plus R2D2's value rescaling h)."""
    del env_id  # one preset for every env so far
    return OffPolicyPreset(
        num_envs=8,
        steps=200_000,
        capacity=200_000,
        trainer=OffPolicyTrainerConfig(
            collect_env_steps=8, utd_ratio=1 / 4, batch_size=32, warmup_env_steps=5_000, eval_episodes=5, n_step=3
        ),
        eval_every_env_steps=10_000,
        configs={
            "r2d2": R2D2Config(
                lr=5e-4,
                target_update_interval=1_000,
                seq_len=24,
                normalize_obs=True,
                prev_action_input=True,
                value_rescaling=True,
            )
        },
        anneal_lr_over_run=True,
    )


@dataclass(frozen=True, kw_only=True)
class OnPolicyPreset:
    """Per-environment defaults of ``rlcore train`` for one on-policy algorithm (flags override)."""

    num_envs: int = 8
    """Training envs (a SyncVectorEnv)."""
    steps: int = 100_000
    """Default ``--steps``."""
    num_steps: int = 128
    """Vector steps per rollout."""
    eval_every_env_steps: int = 10_000
    """Evaluate about every this many env steps."""
    config: PPOConfig | A2CConfig | VPGConfig
    """The algorithm's config; its ``seed`` (PPO) and, with :attr:`anneal_lr_over_run`, its
    learning-rate schedule are set per run."""
    anneal_lr_over_run: bool = False
    """Anneal the learning rate linearly to 0 over ``--steps``."""


_ON_POLICY = {"ppo": PPOConfig, "a2c": A2CConfig, "vpg": VPGConfig}


def on_policy_preset_for(env_id: str, algo: str) -> OnPolicyPreset:
    """Defaults for ``algo`` (``"ppo"``, ``"a2c"`` or ``"vpg"``) on ``env_id``: the tuned CartPole /
    Pendulum / MuJoCo settings of docs/training.md ("On-policy"), SB3's defaults elsewhere."""
    cls = _ON_POLICY[algo]
    if env_id.startswith("CartPole"):
        return {
            "ppo": OnPolicyPreset(
                steps=30_000,
                num_steps=32,
                eval_every_env_steps=2_560,
                config=PPOConfig(
                    gamma=0.98,
                    gae_lambda=0.8,
                    n_epochs=20,
                    minibatch_size=256,
                    lr=1e-3,
                    lr_anneal_env_steps=100_000,
                    clip_anneal_env_steps=100_000,
                ),
            ),
            "a2c": OnPolicyPreset(num_steps=5, eval_every_env_steps=5_000, config=A2CConfig(), anneal_lr_over_run=True),
            "vpg": OnPolicyPreset(num_steps=250, eval_every_env_steps=6_000, config=VPGConfig()),
        }[algo]
    if env_id.startswith("Pendulum"):
        shared: dict[str, Any] = {"gamma": 0.9, "gae_lambda": 0.95, "normalize_obs": True, "normalize_returns": True}
        config: PPOConfig | A2CConfig | VPGConfig
        if algo == "ppo":
            config = PPOConfig(**shared, lr=1e-3, n_epochs=10, minibatch_size=256)
        elif algo == "a2c":
            config = A2CConfig(**shared, lr=1e-3)
        else:
            config = VPGConfig(**shared, policy_lr=1e-3)  # VPG: separate policy and value learning rates
        return OnPolicyPreset(
            num_envs=8, steps=150_000, num_steps=256, eval_every_env_steps=10_240, config=config, anneal_lr_over_run=True
        )
    if env_id.startswith(MUJOCO_ENVS):
        extra = {"value_clip_coef": 0.2} if algo == "ppo" else {}
        return OnPolicyPreset(
            num_envs=1,
            steps=1_000_000,
            num_steps=2048,
            eval_every_env_steps=20_480,
            config=cls(normalize_obs=True, normalize_returns=True, **extra),
            anneal_lr_over_run=True,
        )
    return OnPolicyPreset(config=cls())


@dataclass(frozen=True)
class GAILSettings:
    """The configs of ``rlcore train --algo gail`` for one env (:func:`gail_settings`)."""

    gail: GAILConfig
    """Discriminator and learned reward."""
    ppo: PPOConfig
    """The PPO generator."""
    trainer: OnPolicyTrainerConfig
    """Rollout length, env-step budget, evaluation schedule."""
    num_envs: int
    """Training envs."""


def gail_settings(
    env_id: str,
    *,
    steps: int | None = None,
    num_envs: int | None = None,
    seed: int = 0,
) -> GAILSettings:
    """Defaults of ``rlcore train --algo gail --env ENV_ID`` (the measurements behind them are in
    docs/imitation.md, "Stability").

    The generator is a conservative PPO: large rollouts (2048 rows per iteration), no entropy
    bonus, no clip-range annealing, and the learning rate annealed linearly to 0 over the GAIL run
    (the last stretch then keeps the policy that matches the expert instead of drifting with a
    discriminator at chance). MuJoCo and other envs use their ``rlcore train --algo ppo`` preset
    (:func:`on_policy_preset_for`) as it is; CartPole replaces its preset
    (256-row rollouts, 20 epochs at Adam 1e-3, clip range annealed: tuned for 30k env-reward steps)
    by 8 envs x 256 steps, 10 epochs of 64 at 3e-4 over a default of 200k env steps; Pendulum keeps
    its preset with gamma 0.95 instead of 0.9 and Adam 3e-4 instead of 1e-3, over 300k env steps. The discriminator takes one pass of 256-pair
    minibatches over each rollout, with a gradient penalty of 10 (1 on Pendulum), and absorbing
    states at terminations on MuJoCo envs (``GAILConfig.absorbing``).

    Args:
        env_id: gymnasium id.
        steps: env-step budget (default: 200k on CartPole, 300k on Pendulum, the PPO preset's 1M on
            MuJoCo envs, else 3x the PPO preset's).
        num_envs: training envs (default: the PPO preset's).
        seed: seed of PPO's shuffling, the discriminator's sampling and the trainer.
    """
    preset = on_policy_preset_for(env_id, "ppo")
    ppo = preset.config
    assert isinstance(ppo, PPOConfig)
    if env_id.startswith("CartPole"):
        # The `rlcore train --algo ppo` preset (8 x 32 steps, 20 epochs of 256 at 1e-3, clip range
        # annealed over 100k steps) ended seed 1 at 293 (seed 0: 500); with a constant clip range
        # seeds 0-2 ended at 118 / 188 / 500. These settings: 500 / 500 / 500 (docs/imitation.md).
        steps = steps or 200_000
        num_steps, eval_every_env_steps = 256, 4_096
        ppo = PPOConfig(gamma=0.98, gae_lambda=0.95, lr=3e-4, n_epochs=10, minibatch_size=64)
    else:
        if env_id.startswith("Pendulum"):
            steps = steps or 300_000
        steps = steps or (preset.steps if env_id.startswith(MUJOCO_ENVS) else 3 * preset.steps)
        num_steps, eval_every_env_steps = preset.num_steps, preset.eval_every_env_steps
        ppo = dataclasses.replace(ppo, lr_anneal_env_steps=None, clip_anneal_env_steps=None)
        if env_id.startswith("Pendulum"):
            # gamma 0.9 -> 0.95 and Adam 1e-3 -> 3e-4: final evaluations -381 (1e-3, gamma 0.9, one
            # seed), then -145 / -401 / -142 (1e-3), then -222 / -182 / -171 (3e-4) for seeds 0-2
            # at 300k env steps (docs/imitation.md).
            ppo = dataclasses.replace(ppo, gamma=0.95, lr=3e-4)
    num_envs = num_envs or preset.num_envs
    ppo = dataclasses.replace(ppo, lr_anneal_env_steps=steps, seed=seed)
    per_iter = num_steps * num_envs
    gail = GAILConfig(
        disc_updates=max(1, per_iter // 256),
        disc_batch_size=256,
        grad_penalty=1.0 if env_id.startswith("Pendulum") else 10.0,
        # Locomotion episodes end by falling: without absorbing states the Hopper generator learned
        # to stand still for 1000 steps instead of imitating (docs/imitation.md).
        absorbing=env_id.startswith(MUJOCO_ENVS),
        seed=seed,
    )
    trainer = OnPolicyTrainerConfig(
        max_env_steps=steps,
        num_steps=num_steps,
        eval_every=max(1, eval_every_env_steps // per_iter),
        seed=seed,
    )
    return GAILSettings(gail=gail, ppo=ppo, trainer=trainer, num_envs=num_envs)


@dataclass(frozen=True)
class DACSettings:
    """The configs of ``rlcore train --algo dac`` for one env (:func:`dac_settings`)."""

    dac: DACConfig
    """Discriminator and learned reward."""
    sac: SACConfig
    """The SAC generator."""
    trainer: OffPolicyTrainerConfig
    """The schedule: env-step budget, warm-up, updates per env step, batch, evaluation (n_step 1)."""
    num_envs: int
    """Training envs."""
    capacity: int
    """Replay capacity in rows."""


def dac_settings(
    env_id: str,
    *,
    steps: int | None = None,
    num_envs: int | None = None,
    seed: int = 0,
) -> DACSettings:
    """Defaults of ``rlcore train --algo dac --env ENV_ID``: the SAC generator and the schedule of
    the env's ``rlcore train --algo sac`` preset (:func:`preset_for`; on MuJoCo envs Tianshou's
    MuJoCo SAC settings: 10k random warm-up steps, one update of batch 256 per env step, 10
    evaluation episodes every 5k env steps), 1-step batches, and the discriminator of
    :class:`~rlcore.algos.dac.DACConfig` (the paper's code's defaults; one 256-pair step per
    gradient step) with absorbing states on MuJoCo envs, whose episodes end by falling.

    Args:
        env_id: gymnasium id.
        steps: env-step budget (default: 300k on MuJoCo envs, 30k on Pendulum, else the SAC
            preset's).
        num_envs: training envs (default: the SAC preset's).
        seed: seed of the generator, the discriminator's draws and the trainer.
    """
    preset = preset_for(env_id, her=False)
    mujoco = env_id.startswith(MUJOCO_ENVS)
    if steps is None:
        steps = 300_000 if mujoco else 30_000 if env_id.startswith("Pendulum") else preset.steps
    num_envs = num_envs or preset.num_envs
    sac = preset.configs.get("sac") or SACConfig()
    assert isinstance(sac, SACConfig)
    trainer = dataclasses.replace(
        preset.trainer,
        max_env_steps=steps,
        n_step=1,  # the reward is relabelled per transition
        eval_every=max(1, preset.eval_every_env_steps // preset.trainer.collect_env_steps),
        seed=seed,
    )
    dac = DACConfig(disc_batch_size=trainer.batch_size, absorbing=mujoco, seed=seed)
    capacity = min(preset.capacity, max(steps + 1000 * num_envs, 1000))
    return DACSettings(
        dac=dac, sac=dataclasses.replace(sac, seed=seed), trainer=trainer, num_envs=num_envs, capacity=capacity
    )
