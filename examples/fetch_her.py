"""DDPG or SAC + hindsight experience replay on FetchReach-v4, the rlcore main job.

The recipe of the HER paper's implementation (Andrychowicz et al. 2017, appendix A), on rlcore's
Rust replay core:

* observations (``observation``, ``achieved_goal``, ``desired_goal``) are flattened and normalised
  with running statistics, clipped to [-5, 5];
* TD targets clipped to [-1 / (1 - gamma), 0], the range of returns of a -1/0 reward;
* HER "future" relabeling with k = 4 (80 % of sampled transitions get a goal achieved later in
  their episode) computed inside the buffer with the native Fetch reward ``-(|ag - g| > 0.05)``;
* 3 x 256 MLPs, Adam 1e-3, tau = 0.05, gamma = 0.98, batch 256, 0.5 gradient steps per env step;
* ``--algo ddpg`` (the paper's): exploration by Gaussian noise of 0.2 x the action range and a
  uniformly random action with probability 0.3, an L2 penalty on actions in the actor loss;
* ``--algo sac`` (Haarnoja et al. 2018): twin critics and a learned temperature (Adam 1e-3).

Needs ``pip install "gymnasium-robotics==1.4.2" "mujoco>=3.3.7,<3.12"`` (see the README).

Usage::

    python examples/fetch_her.py --algo ddpg --steps 5000 --seed 0
    python examples/fetch_her.py --algo sac --steps 8000 --seed 0

It prints one line per evaluation and ends with the final success rate.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import torch
from rlcore.algos import DDPG, SAC, DDPGConfig, SACConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ddpg", "sac"), default="ddpg")
    parser.add_argument("--steps", type=int, default=None, help="training env steps (ddpg: 5000, sac: 8000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=2, help="training envs")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def make_agent(args: argparse.Namespace, obs_space: gym.Space, act_space: gym.Space, gamma: float) -> DDPG | SAC:
    """The recipe's agent: the settings both algorithms share, and each one's own."""
    shared = dict(
        hidden=(256, 256, 256),
        actor_lr=1e-3,
        critic_lr=1e-3,
        tau=0.05,
        q_target_clip=(-1.0 / (1.0 - gamma), 0.0),
        normalize_obs=True,
        seed=args.seed,
    )
    if args.algo == "ddpg":
        config = DDPGConfig(**shared, exploration_noise=0.2, random_action_prob=0.3, action_l2=1.0)
        return DDPG.from_spaces(obs_space, act_space, config, device=args.device)
    return SAC.from_spaces(obs_space, act_space, SACConfig(**shared, alpha_lr=1e-3), device=args.device)


def main() -> None:
    args = parse_args()
    if args.steps is None:
        args.steps = 5_000 if args.algo == "ddpg" else 8_000
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import gymnasium_robotics  # prints a notice about Adroit envs on import

    gym.register_envs(gymnasium_robotics)

    # Environments: N training envs and 5 evaluation envs, default NEXT_STEP autoreset.
    envs = gym.make_vec("FetchReach-v4", num_envs=args.num_envs, vectorization_mode="sync")
    eval_envs = gym.make_vec("FetchReach-v4", num_envs=5, vectorization_mode="sync")
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    # Replay: HER with "future" goals; the Fetch reward is evaluated natively in the core.
    gamma = 0.98
    buffer = rlcore.HERReplayBuffer(
        200_000,
        num_envs=args.num_envs,
        seed=args.seed,
        strategy="future",
        future_k=4,
        distance_threshold=0.05,
    )

    agent = make_agent(args, obs_space, act_space, gamma)

    # Trainer: each iteration collects one 50-step episode per env (100 env steps with 2 envs),
    # then runs 0.5 gradient steps per env step; evaluate 10 episodes every 500 env steps.
    collect = 50 * args.num_envs
    trainer = OffPolicyTrainer(
        agent,
        buffer,
        envs,
        config=OffPolicyTrainerConfig(
            max_env_steps=args.steps,
            collect_env_steps=collect,
            utd_ratio=0.5,
            batch_size=256,
            gamma=gamma,
            eval_every=max(1, 500 // collect),
            eval_episodes=10,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )

    sinks = [ConsoleLogger(args.steps, disable=args.no_progress)]
    if args.out is not None:
        sinks.append(JsonlLogger(args.out / "metrics.jsonl"))
    logger = MultiLogger(*sinks)
    start = time.perf_counter()
    first_solved = None
    for stats in trainer:
        logger.write(stats)
        if stats.eval is not None and stats.eval.success_rate >= 0.9 and first_solved is None:
            first_solved = stats.env_steps
    logger.close()

    final = trainer.evaluate()
    print(f"wall-clock: {time.perf_counter() - start:.0f} s, gradient steps: {trainer.grad_steps}")
    print(f"first eval with success >= 0.9 at env step: {first_solved}")
    print(f"final success rate: {final.success_rate:.2f} over {final.episodes} episodes")


if __name__ == "__main__":
    main()
