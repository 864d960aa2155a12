"""Recurrent DQN (R2D2's replay) on CartPole-v1 with the velocities hidden.

``rlcore/CartPoleNoVel-v1`` shows only the cart position and the pole angle; a feed-forward DQN
cannot tell which way the pole moves, a recurrent Q-network can infer it from the history. The
learner follows R2D2 (Kapturowski et al. 2019): sequences of ``burn_in + seq_len`` steps sampled
with ``buffer.sample_sequences``, the GRU state stored at collection (extra column ``h``) and
burned in over the first steps, double-Q n-step targets inside the sequence and, with
``--prioritized``, sequence priorities ``eta * max|delta| + (1 - eta) * mean|delta|``.

Usage::

    python examples/cartpole_r2d2.py --steps 200000 --seed 0 --out runs/r2d2-s0

Each evaluation (5 greedy episodes) is printed and appended to ``OUT/metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import rlcore
import rlcore.envs  # registers rlcore/CartPoleNoVel-v1
import torch
from rlcore.algos.r2d2 import R2D2, R2D2Config
from rlcore.trainers import OffPolicyTrainerConfig, RecurrentTrainer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000, help="training env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=8, help="training envs")
    parser.add_argument("--burn-in", type=int, default=8, help="burn-in steps of each sequence")
    parser.add_argument("--seq-len", type=int, default=16, help="training steps of each sequence")
    parser.add_argument("--n-step", type=int, default=3, help="n of the n-step return")
    parser.add_argument("--prioritized", action="store_true", help="prioritized sequences")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--train-every", type=int, default=8, help="env steps per gradient step")
    parser.add_argument("--target-update", type=int, default=500, help="gradient steps between target copies")
    parser.add_argument("--recurrent-size", type=int, default=64, help="GRU width")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per gradient step")
    parser.add_argument("--normalize-obs", action="store_true", help="running mean/std observation normalisation")
    parser.add_argument("--lr-anneal", action="store_true", help="anneal the learning rate linearly to 0 over --steps")
    parser.add_argument("--prev-action", action="store_true", help="feed the previous action to the network (R2D2)")
    parser.add_argument(
        "--value-rescaling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="learn h(Q), R2D2's invertible value rescaling h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x "
        "(default on; --no-value-rescaling for the configurations before G in docs/sequences.md)",
    )
    parser.add_argument("--eval-every", type=int, default=10_000, help="env steps between evaluations")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    env_id = "rlcore/CartPoleNoVel-v1"
    envs = gym.make_vec(env_id, num_envs=args.num_envs, vectorization_mode="sync")
    eval_envs = gym.make_vec(env_id, num_envs=5, vectorization_mode="sync")
    algo = R2D2.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        R2D2Config(
            burn_in=args.burn_in,
            seq_len=args.seq_len,
            lr=args.lr,
            target_update_interval=args.target_update,
            recurrent_size=args.recurrent_size,
            normalize_obs=args.normalize_obs,
            prev_action_input=args.prev_action,
            value_rescaling=args.value_rescaling,
            lr_anneal_env_steps=args.steps if args.lr_anneal else None,
            seed=args.seed,
        ),
    )
    capacity = min(args.steps + 1000, 200_000)
    if args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(capacity, num_envs=args.num_envs, seed=args.seed, alpha=0.6, beta=0.4)
    else:
        buffer = rlcore.ReplayBuffer(capacity, num_envs=args.num_envs, seed=args.seed)
    config = OffPolicyTrainerConfig(
        max_env_steps=args.steps,
        collect_env_steps=args.num_envs,  # one vector step per iteration
        utd_ratio=1 / args.train_every,
        batch_size=args.batch_size,
        n_step=args.n_step,
        warmup_env_steps=5_000,
        eval_every=max(1, args.eval_every // args.num_envs),
        eval_episodes=5,
        per_beta_end=1.0 if args.prioritized else None,
        seed=args.seed,
    )
    trainer = RecurrentTrainer(algo, buffer, envs, config=config, eval_envs=eval_envs)
    log = None
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        log = (args.out / "metrics.jsonl").open("a")
    start = time.perf_counter()
    for stats in trainer:
        if stats.eval is None:
            continue
        row = {
            "env_steps": stats.env_steps,
            "grad_steps": stats.grad_steps,
            "eval/return_mean": stats.eval.return_mean,
            "train/loss": None if stats.train is None else stats.train.loss,
            "time/elapsed_s": round(time.perf_counter() - start, 1),
        }
        print(json.dumps(row), flush=True)
        if log is not None:
            log.write(json.dumps(row) + "\n")
            log.flush()
    if log is not None:
        log.close()


if __name__ == "__main__":
    main()
