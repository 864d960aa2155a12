"""SAC on Pendulum-v1 with Stable-Baselines3's default hyperparameters.

One env, one gradient step per env step, batch 256, two 256-unit hidden layers, learning rate
3e-4, tau 0.005, gamma 0.99, learned entropy temperature with target -dim(A), 1000 random warm-up
steps (Haarnoja et al. 2018; SB3's ``SAC`` defaults). Pendulum returns range from about -1600
(random) to about -150 (solved).

Usage::

    python examples/pendulum_sac.py --steps 15000 --seed 0

Add ``--n-step 3`` for 3-step returns or ``--prioritized`` for prioritized replay.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import torch
from rlcore.algos import SAC, SACConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15_000, help="training env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-step", type=int, default=1, help="n of the n-step return")
    parser.add_argument("--prioritized", action="store_true", help="prioritized replay")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    envs = gym.make_vec("Pendulum-v1", num_envs=1, vectorization_mode="sync")
    eval_envs = gym.make_vec("Pendulum-v1", num_envs=5, vectorization_mode="sync")
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    # Replay: uniform, or prioritized with beta annealed to 1 by the end of training.
    if args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(
            args.steps + 10, num_envs=1, alpha=0.6, beta=0.4, seed=args.seed
        )
    else:
        buffer = rlcore.ReplayBuffer(args.steps + 10, num_envs=1, seed=args.seed)

    # Agent: SAC with SB3's defaults.
    agent = SAC.from_spaces(
        obs_space,
        act_space,
        SACConfig(hidden=(256, 256), actor_lr=3e-4, critic_lr=3e-4, alpha_lr=3e-4, tau=0.005),
        device=args.device,
    )

    # Trainer: collect 1 env step, take 1 gradient step; evaluate 5 episodes every 1000 env steps.
    trainer = OffPolicyTrainer(
        agent,
        buffer,
        envs,
        config=OffPolicyTrainerConfig(
            max_env_steps=args.steps,
            collect_env_steps=1,
            utd_ratio=1.0,
            batch_size=256,
            n_step=args.n_step,
            gamma=0.99,
            warmup_env_steps=1_000,
            eval_every=1_000,
            eval_episodes=5,
            per_beta_end=1.0 if args.prioritized else None,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )

    sinks = [ConsoleLogger(args.steps, disable=args.no_progress)]
    if args.out is not None:
        sinks.append(JsonlLogger(args.out / "metrics.jsonl", every_iterations=1_000))
    logger = MultiLogger(*sinks)
    start = time.perf_counter()
    last = None
    for stats in trainer:
        logger.write(stats)
        last = stats
    logger.close()

    elapsed = time.perf_counter() - start
    assert last is not None and last.eval is not None
    print(
        f"wall-clock: {elapsed:.0f} s ({last.env_steps / elapsed:.0f} env steps/s), gradient steps: {last.grad_steps}"
    )
    print(
        f"final eval return: {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} over {last.eval.episodes} episodes"
    )


if __name__ == "__main__":
    main()
