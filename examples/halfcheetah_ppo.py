"""PPO on HalfCheetah-v5 (MuJoCo) with CleanRL's ``ppo_continuous_action.py`` settings.

One env, rollouts of 2048 steps, 10 epochs of minibatches of 64, Adam 3e-4 annealed linearly to 0,
gamma 0.99, GAE lambda 0.95, clip 0.2 for the ratio and for the value change, gradient norm 0.5,
separate 64x64 tanh networks, a Gaussian policy with a state-independent log-std, observation
normalisation and reward scaling by the running return std. HalfCheetah never terminates; its
1000-step time limit truncates, and the sampler bootstraps those steps from the value of the true
final observation. Published PPO results at 1M steps are roughly 1500-3000 (CleanRL, SB3 zoo).

Needs ``mujoco>=3.3.7,<3.12`` (docs/training.md). Usage::

    python examples/halfcheetah_ppo.py --steps 1000000 --seed 0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import torch
from rlcore.algos import PPO, PPOConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OnPolicyTrainer, OnPolicyTrainerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="training env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    envs = gym.make_vec("HalfCheetah-v5", num_envs=1, vectorization_mode="sync")
    eval_envs = gym.make_vec("HalfCheetah-v5", num_envs=5, vectorization_mode="sync")

    # Agent: CleanRL's PPO for MuJoCo.
    agent = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(
            lr=3e-4,
            lr_anneal_env_steps=args.steps,
            gamma=0.99,
            gae_lambda=0.95,
            n_epochs=10,
            minibatch_size=64,
            clip_coef=0.2,
            value_clip_coef=0.2,
            ent_coef=0.0,
            max_grad_norm=0.5,
            normalize_obs=True,
            normalize_returns=True,
            seed=args.seed,
        ),
        num_envs=1,
        device=args.device,
    )

    # Trainer: 2048 env steps per rollout; evaluate 5 episodes every 10 rollouts (~20k env steps).
    trainer = OnPolicyTrainer(
        agent,
        envs,
        config=OnPolicyTrainerConfig(
            max_env_steps=args.steps, num_steps=2048, eval_every=10, eval_episodes=5, seed=args.seed
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
    print(
        f"final eval return: {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} over {last.eval.episodes} episodes"
    )


if __name__ == "__main__":
    main()
