"""Double DQN on CartPole-v1 with the RL Baselines3 Zoo hyperparameters.

Two 256-unit hidden layers, Adam 2.3e-3, batch 64, gamma 0.99, epsilon decaying linearly from 1 to
0.04 over the first 8000 env steps, 1000 random warm-up steps, 128 gradient steps after every 256
env steps (Mnih et al. 2015; van Hasselt et al. 2016; rl-baselines3-zoo ``dqn.yml``). The target
network is copied every 128 gradient steps, i.e. once per collection round: the zoo's
``target_update_interval=10`` counts env steps, so SB3 syncs the target between rounds and never
during the 128 gradient steps. Two additions to the zoo's settings, as in the CartPole preset of
``rlcore train``: the learning rate decays linearly to 0 over the run, and the TD target is the
3-step return. Without them the policy reaches 500 but falls back, and where a run ends is luck
(docs/training.md). A return of 500 is the maximum; 195 counts as solved.

Usage::

    python examples/cartpole_dqn.py --steps 50000 --seed 0

Add ``--dueling``, ``--n-step 1`` or ``--prioritized`` to try the variants.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import torch
from rlcore.algos import DQN, DQNConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="training env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=2.3e-3, help="initial Adam learning rate")
    parser.add_argument("--dueling", action="store_true", help="dueling Q head")
    parser.add_argument("--n-step", type=int, default=3, help="n of the n-step return")
    parser.add_argument("--prioritized", action="store_true", help="prioritized replay")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    envs = gym.make_vec("CartPole-v1", num_envs=1, vectorization_mode="sync")
    eval_envs = gym.make_vec("CartPole-v1", num_envs=5, vectorization_mode="sync")
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    # Replay: uniform, or prioritized with beta annealed to 1 by the end of training.
    if args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(100_000, num_envs=1, alpha=0.6, beta=0.4, seed=args.seed)
    else:
        buffer = rlcore.ReplayBuffer(100_000, num_envs=1, seed=args.seed)

    # Agent: double DQN with a Huber loss and epsilon-greedy exploration.
    agent = DQN.from_spaces(
        obs_space,
        act_space,
        DQNConfig(
            hidden=(256, 256),
            lr=args.lr,
            lr_anneal_env_steps=args.steps,  # linear decay to 0 at the end of the run
            double_q=True,
            dueling=args.dueling,
            loss="huber",
            target_update_interval=128,
            eps_start=1.0,
            eps_end=0.04,
            eps_decay_env_steps=8_000,
            seed=args.seed,
        ),
        device=args.device,
    )

    # Trainer: collect 256 env steps, then 128 gradient steps; evaluate 10 episodes every 5120 steps.
    trainer = OffPolicyTrainer(
        agent,
        buffer,
        envs,
        config=OffPolicyTrainerConfig(
            max_env_steps=args.steps,
            collect_env_steps=256,
            utd_ratio=0.5,
            batch_size=64,
            n_step=args.n_step,
            gamma=0.99,
            warmup_env_steps=1_000,
            eval_every=20,
            eval_episodes=10,
            per_beta_end=1.0 if args.prioritized else None,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )

    sinks = [ConsoleLogger(args.steps, disable=args.no_progress)]
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
    print(f"wall-clock: {elapsed:.0f} s, gradient steps: {last.grad_steps}")
    print(
        f"final eval return: {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} over {last.eval.episodes} episodes"
    )


if __name__ == "__main__":
    main()
