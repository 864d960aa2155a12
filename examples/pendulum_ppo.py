"""PPO on Pendulum-v1 (continuous actions): better than -400 within 150k env steps.

Eight envs, rollouts of 256 steps (2048 transitions), 10 epochs of minibatches of 256, Adam 1e-3
annealed linearly to 0, gamma 0.9 (the zoo's), GAE lambda 0.95, clip 0.2, a diagonal Gaussian policy with a
state-independent log-std (actions clipped to the bounds by the sampler, log-probabilities of the
unclipped sample), observation normalisation and reward scaling by the running return std.
Pendulum episodes always end by truncation at 200 steps, so every episode end bootstraps from the
value of its final observation. Returns range from about -1500 (random) to about -150 (solved).

Usage::

    python examples/pendulum_ppo.py --steps 150000 --seed 0
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
    parser.add_argument("--steps", type=int, default=150_000, help="training env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    num_envs = 8
    envs = gym.make_vec("Pendulum-v1", num_envs=num_envs, vectorization_mode="sync")
    eval_envs = gym.make_vec("Pendulum-v1", num_envs=5, vectorization_mode="sync")

    # Agent: PPO with normalised observations and scaled rewards.
    agent = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(
            lr=1e-3,
            lr_anneal_env_steps=args.steps,
            gamma=0.9,
            gae_lambda=0.95,
            n_epochs=10,
            minibatch_size=256,
            clip_coef=0.2,
            normalize_obs=True,
            normalize_returns=True,
            seed=args.seed,
        ),
        num_envs=num_envs,
        device=args.device,
    )

    # Trainer: 256 vector steps per rollout; evaluate 10 episodes every 5 rollouts (~10k env steps).
    trainer = OnPolicyTrainer(
        agent,
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
    print(
        f"final eval return: {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} over {last.eval.episodes} episodes"
    )


if __name__ == "__main__":
    main()
