"""GAIL on Pendulum-v1 from 20k expert transitions (100 episodes), with behaviour cloning alongside.

1. Expert data: a SAC expert is trained (``rlcore train --algo sac``, 15k env steps) unless
   ``--checkpoint`` already holds one; its deterministic policy is rolled out for ``--episodes``
   200-step episodes and saved with ``ReplayBuffer.save`` (what ``rlcore collect-expert`` does).
2. BC: 10k gradient steps of mean squared action error on the expert's (obs, act) pairs.
3. GAIL (Ho & Ermon 2016): a discriminator on (obs, act) pairs (actions rescaled to [-1, 1]) whose
   reward ``-log(1 - D)`` replaces the env reward in the rollouts (the sampler's ``reward_fn``),
   and a PPO generator with the Pendulum settings of ``rlcore train --algo ppo`` (8 envs x 256
   steps, 10 epochs of 256, Adam 1e-3 annealed, gamma 0.95, normalised observations and returns).
   The discriminator takes 8 steps of 256 expert and 256 policy pairs per rollout (one pass over
   its 2048 rows) with a gradient penalty of weight 1; with 1 step and weight 10 (the CartPole
   setting) it stayed near chance and the generator got worse (docs/imitation.md).
   The env reward is only used for the episode statistics and the evaluation.

Usage::

    python examples/pendulum_gail.py --steps 300000 --seed 0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import torch
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL, GAILConfig
from rlcore.algos.ppo import PPOConfig
from rlcore.cli.imitation import collect_expert
from rlcore.imitation import GAILTrainer, OfflineTrainer, OfflineTrainerConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OnPolicyTrainerConfig

ENV = "Pendulum-v1"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300_000, help="GAIL env steps")
    parser.add_argument("--episodes", type=int, default=100, help="expert episodes")
    parser.add_argument("--expert", type=Path, default=Path("runs/imitation/data/pendulum-expert-20k"))
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/imitation/expert-Pendulum-v1-sac"))
    parser.add_argument("--grad-penalty", type=float, default=1.0, help="discriminator gradient penalty")
    parser.add_argument("--disc-lr", type=float, default=3e-4, help="discriminator learning rate")
    parser.add_argument("--disc-updates", type=int, default=8, help="discriminator steps per rollout")
    parser.add_argument("--ent-coef", type=float, default=0.0, help="PPO entropy bonus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    # 1. Expert data (recorded once, then reused).
    if not (args.expert / "manifest.json").is_file():
        data = collect_expert(
            algo="sac",
            env_id=ENV,
            episodes=args.episodes,
            out=args.expert,
            checkpoint=args.checkpoint,
            steps=15_000,
        )
        print(f"expert: return {data.return_mean:.1f} over {data.episodes} episodes")
    expert = rlcore.ReplayBuffer.load(args.expert)
    print(f"expert data: {len(expert)} transitions from {args.expert}")

    envs = gym.make_vec(ENV, num_envs=8, vectorization_mode="sync")
    eval_envs = gym.make_vec(ENV, num_envs=5, vectorization_mode="sync")
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    # 2. Behaviour cloning on the same data.
    bc = BC.from_spaces(obs_space, act_space, BCConfig(hidden=(64, 64)))
    bc_trainer = OfflineTrainer(
        bc,
        expert,
        config=OfflineTrainerConfig(
            max_grad_steps=5_000,
            grad_steps_per_iteration=1_000,
            eval_every=5,
            eval_episodes=20,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )
    bc_last = bc_trainer.run()
    assert bc_last is not None and bc_last.eval is not None
    print(f"BC: eval return {bc_last.eval.return_mean:.1f} +- {bc_last.eval.return_std:.1f} (20 episodes)")

    # 3. GAIL: discriminator + PPO generator; the sampler's reward_fn is the discriminator's reward.
    gail = GAIL.from_spaces(
        obs_space,
        act_space,
        expert,
        GAILConfig(
            lr=args.disc_lr, disc_updates=args.disc_updates, grad_penalty=args.grad_penalty, seed=args.seed
        ),
        PPOConfig(
            lr=1e-3,
            lr_anneal_env_steps=args.steps,
            gamma=0.95,
            gae_lambda=0.95,
            n_epochs=10,
            minibatch_size=256,
            normalize_obs=True,
            normalize_returns=True,
            ent_coef=args.ent_coef,
            seed=args.seed,
        ),
        num_envs=8,
    )
    trainer = GAILTrainer(
        gail,
        envs,
        config=OnPolicyTrainerConfig(
            max_env_steps=args.steps, num_steps=256, eval_every=5, eval_episodes=10, seed=args.seed
        ),
        eval_envs=eval_envs,
    )
    sinks: list = [ConsoleLogger(args.steps, disable=args.no_progress)]
    if args.out is not None:
        sinks.append(JsonlLogger(args.out / "metrics.jsonl"))
    logger = MultiLogger(*sinks)
    start = time.perf_counter()
    last = None
    for stats in trainer:
        logger.write(stats)
        last = stats
    logger.close()

    elapsed = time.perf_counter() - start
    assert last is not None and last.eval is not None
    print(f"wall-clock: {elapsed:.0f} s ({last.env_steps / elapsed:.0f} env steps/s)")
    print(f"GAIL: final eval return {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} (10 episodes)")


if __name__ == "__main__":
    main()
