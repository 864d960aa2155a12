"""GAIL on CartPole-v1 from 10 expert episodes, with behaviour cloning on the same data alongside.

1. Expert data: a PPO expert is trained (``rlcore train --algo ppo``, 30k env steps) unless
   ``--checkpoint`` already holds one; its deterministic policy is rolled out for ``--episodes``
   episodes and saved with ``ReplayBuffer.save`` (what ``rlcore collect-expert`` does).
2. BC: 5k gradient steps of cross-entropy on the expert's (obs, act) pairs.
3. GAIL (Ho & Ermon 2016): a discriminator on (obs, act) pairs whose reward ``-log(1 - D)``
   replaces the env reward in the rollouts (the sampler's ``reward_fn``), and a PPO generator, with
   the settings of ``rlcore train --algo gail --env CartPole-v1``
   (:func:`rlcore.imitation.gail_settings`: 8 envs x 256 steps, 10 epochs of 64, Adam 3e-4 annealed
   to 0 over the run, no entropy bonus; discriminator 8 x 256 pairs per rollout, gradient penalty
   10); the flags override single values. The env reward is only used for the episode statistics
   and the evaluation.

Usage::

    python examples/cartpole_gail.py --steps 200000 --seed 0
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import torch
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL
from rlcore.cli.imitation import collect_expert
from rlcore.imitation import GAILTrainer, OfflineTrainer, OfflineTrainerConfig, gail_settings
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger

ENV = "CartPole-v1"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000, help="GAIL env steps")
    parser.add_argument("--episodes", type=int, default=10, help="expert episodes")
    parser.add_argument("--expert", type=Path, default=Path("runs/imitation/data/cartpole-expert-10ep"))
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/imitation/expert-CartPole-v1-ppo"))
    parser.add_argument("--grad-penalty", type=float, default=None, help="discriminator gradient penalty")
    parser.add_argument("--disc-lr", type=float, default=None, help="discriminator learning rate")
    parser.add_argument("--disc-updates", type=int, default=None, help="discriminator steps per rollout")
    parser.add_argument("--ent-coef", type=float, default=None, help="PPO entropy bonus")
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
            algo="ppo", env_id=ENV, episodes=args.episodes, out=args.expert, checkpoint=args.checkpoint
        )
        print(f"expert: return {data.return_mean:.1f} over {data.episodes} episodes")
    expert = rlcore.ReplayBuffer.load(args.expert)
    print(f"expert data: {len(expert)} transitions from {args.expert}")

    eval_envs = gym.make_vec(ENV, num_envs=5, vectorization_mode="sync")
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space

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
    settings = gail_settings(ENV, steps=args.steps, seed=args.seed)
    disc_overrides = {
        "grad_penalty": args.grad_penalty,
        "lr": args.disc_lr,
        "disc_updates": args.disc_updates,
    }
    gail_config = dataclasses.replace(
        settings.gail, **{k: v for k, v in disc_overrides.items() if v is not None}
    )
    ppo_config = (
        settings.ppo if args.ent_coef is None else dataclasses.replace(settings.ppo, ent_coef=args.ent_coef)
    )
    envs = gym.make_vec(ENV, num_envs=settings.num_envs, vectorization_mode="sync")
    gail = GAIL.from_spaces(obs_space, act_space, expert, gail_config, ppo_config, num_envs=settings.num_envs)
    trainer = GAILTrainer(gail, envs, config=settings.trainer, eval_envs=eval_envs)
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
