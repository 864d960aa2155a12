"""PPO on CartPole-v1, Pendulum-v1 or HalfCheetah-v5, each with settings that solve it.

* ``--env CartPole-v1``: 500 (the maximum) within 30k env steps. Eight envs, rollouts of 32 steps
  (256 transitions), 20 epochs of minibatches of 256, Adam 1e-3 and clip range 0.2 both decaying
  linearly towards 0 at 100k env steps, gamma 0.98, GAE lambda 0.8, no entropy bonus: the
  rl-baselines3-zoo hyperparameters for CartPole (whose schedules run over 100k steps; annealing to
  0 at 30k instead let 2 of 5 seeds collapse after reaching 500). A time-limit truncation
  (CartPole stops at 500 steps) bootstraps from the value of the true final observation, not the
  reset one.
* ``--env Pendulum-v1``: better than -400 within 150k env steps. Eight envs, rollouts of 256 steps
  (2048 transitions), 10 epochs of minibatches of 256, Adam 1e-3 annealed linearly to 0, gamma 0.9
  (the zoo's), GAE lambda 0.95, clip 0.2, observation normalisation and reward scaling by the
  running return std. Episodes always end by truncation at 200 steps, so every episode end
  bootstraps from the value of its final observation. Returns range from about -1500 (random) to
  about -150 (solved).
* ``--env HalfCheetah-v5``: CleanRL's ``ppo_continuous_action.py`` settings. One env, rollouts of
  2048 steps, 10 epochs of minibatches of 64, Adam 3e-4 annealed linearly to 0, gamma 0.99, GAE
  lambda 0.95, clip 0.2 for the ratio and for the value change, gradient norm 0.5, observation
  normalisation and reward scaling. HalfCheetah never terminates; its 1000-step time limit
  truncates. Published PPO results at 1M steps are roughly 1500-3000 (CleanRL, SB3 zoo). Needs
  ``mujoco>=3.3.7,<3.12`` (docs/training.md).

All three: separate 64x64 tanh networks (a Gaussian policy with a state-independent log-std for
continuous actions: actions clipped to the bounds by the sampler, log-probabilities of the
unclipped sample), advantages from the Rust ``rlcore.compute_gae``. ``rlcore train --algo ppo
--env ENV`` runs the same presets. Usage::

    python examples/ppo.py --env CartPole-v1 --steps 30000 --seed 0
    python examples/ppo.py --env Pendulum-v1
    python examples/ppo.py --env HalfCheetah-v5 --steps 1000000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch
from rlcore.algos import PPO, PPOConfig
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OnPolicyTrainer, OnPolicyTrainerConfig


@dataclass(frozen=True)
class Recipe:
    """One env's settings: its default budget, envs, rollout length, evaluation schedule and PPO."""

    steps: int
    """Default training env steps."""
    num_envs: int
    num_steps: int
    """Steps per env per rollout."""
    eval_every: int
    """Rollouts between evaluations."""
    eval_episodes: int
    ppo: dict
    """PPOConfig fields (the learning rate anneals over the run unless they set ``lr_anneal_env_steps``)."""


RECIPES = {
    "CartPole-v1": Recipe(
        steps=30_000, num_envs=8, num_steps=32, eval_every=10, eval_episodes=10,
        ppo=dict(lr=1e-3, lr_anneal_env_steps=100_000, clip_anneal_env_steps=100_000, gamma=0.98,
                 gae_lambda=0.8, n_epochs=20, minibatch_size=256, clip_coef=0.2, ent_coef=0.0),
    ),
    "Pendulum-v1": Recipe(
        steps=150_000, num_envs=8, num_steps=256, eval_every=5, eval_episodes=10,
        ppo=dict(lr=1e-3, gamma=0.9, gae_lambda=0.95, n_epochs=10, minibatch_size=256, clip_coef=0.2,
                 normalize_obs=True, normalize_returns=True),
    ),
    "HalfCheetah-v5": Recipe(
        steps=1_000_000, num_envs=1, num_steps=2048, eval_every=10, eval_episodes=5,
        ppo=dict(lr=3e-4, gamma=0.99, gae_lambda=0.95, n_epochs=10, minibatch_size=64, clip_coef=0.2,
                 value_clip_coef=0.2, ent_coef=0.0, max_grad_norm=0.5, normalize_obs=True,
                 normalize_returns=True),
    ),
}  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=list(RECIPES), default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=None, help="training env steps (default: the env's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    recipe = RECIPES[args.env]
    steps = args.steps if args.steps is not None else recipe.steps
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    # Envs: N for training (default NEXT_STEP autoreset; the sampler handles it), 5 for evaluation.
    envs = gym.make_vec(args.env, num_envs=recipe.num_envs, vectorization_mode="sync")
    eval_envs = gym.make_vec(args.env, num_envs=5, vectorization_mode="sync")

    ppo = {"lr_anneal_env_steps": steps, **recipe.ppo}
    agent = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(**ppo, seed=args.seed),
        num_envs=recipe.num_envs,
        device=args.device,
    )

    # Trainer: each iteration samples num_steps vector steps and runs one PPO update; every
    # eval_every iterations it evaluates deterministic episodes.
    trainer = OnPolicyTrainer(
        agent,
        envs,
        config=OnPolicyTrainerConfig(
            max_env_steps=steps,
            num_steps=recipe.num_steps,
            eval_every=recipe.eval_every,
            eval_episodes=recipe.eval_episodes,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )

    sinks: list = [ConsoleLogger(steps, disable=args.no_progress)]
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
