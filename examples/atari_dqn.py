"""DQN on an Atari game (ALE/Breakout-v5 by default) with the settings of Mnih et al. 2015 as the
RL Baselines3 Zoo runs them.

The Nature CNN on 4 stacked 84 x 84 grayscale frames (uint8 up to the network, which scales them
by 1/255 on its device), Adam 1e-4, batch 32, gamma 0.99, Huber loss, gradient norm clipped at
10, one gradient step every 4 agent steps, the target network copied every 250 gradient steps
(the zoo's ``target_update_interval=1000`` counts env steps), 20k random warm-up steps, then
epsilon decaying linearly from 1 to 0.01 over the first 10 % of the run, a replay of 100k
transitions. Training envs clip rewards to their sign and end an episode at every lost life;
the evaluation env plays whole games, reports the raw score and acts epsilon-greedily with
epsilon 0.05. The same settings are ``rlcore train --algo dqn --env ALE/Breakout-v5``'s defaults.

Needs ``pip install -e '.[atari]'``. Usage::

    python examples/atari_dqn.py --steps 500000 --seed 0 --out runs/breakout-dqn

A Nature-CNN update of batch 32 costs about 40 ms on one CPU core: 500k agent steps take hours on
a CPU (docs/atari.md), much less on a GPU (``--device cuda``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from rlcore.algos import DQN, DQNConfig
from rlcore.envs.atari import make_atari_vec
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.presets import atari_replay_buffer
from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Breakout-v5", help="an ale-py game id")
    parser.add_argument("--steps", type=int, default=500_000, help="training agent steps (4 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=1, help="training envs (a SyncVectorEnv)")
    parser.add_argument("--capacity", type=int, default=100_000, help="replay capacity in transitions")
    parser.add_argument("--warmup-env-steps", type=int, default=20_000, help="random steps before learning")
    parser.add_argument("--eval-every", type=int, default=25_000, help="evaluate every this many agent steps")
    parser.add_argument("--eval-episodes", type=int, default=10, help="whole games per evaluation")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    # Envs: reward sign and life loss as episode end for training; whole games, raw score for eval.
    envs = make_atari_vec(args.env, args.num_envs, clip_reward=True, terminal_on_life_loss=True)
    eval_envs = make_atari_vec(args.env, 1, clip_reward=False, terminal_on_life_loss=False)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space  # uint8 [4, 84, 84]

    # Replay: whole frame stacks, 28 kB per transition (2.8 GB for 100k).
    buffer = atari_replay_buffer(args.capacity, num_envs=args.num_envs, seed=args.seed)

    # Agent: the Nature CNN (from_spaces picks it for uint8 image observations), DQN targets.
    agent = DQN.from_spaces(
        obs_space,
        act_space,
        DQNConfig(
            lr=1e-4,
            double_q=False,
            loss="huber",
            huber_delta=1.0,
            max_grad_norm=10.0,
            target_update_interval=250,  # gradient steps = 1000 agent steps
            eps_start=1.0,
            eps_end=0.01,
            eps_decay_env_steps=max(1, args.steps // 10),  # counted after the warm-up
            eval_epsilon=0.05,
            seed=args.seed,
        ),
        device=args.device,
    )

    # Trainer: 4 agent steps, then one gradient step on 32 transitions.
    collect = 4 * args.num_envs
    trainer = OffPolicyTrainer(
        agent,
        buffer,
        envs,
        config=OffPolicyTrainerConfig(
            max_env_steps=args.steps,
            collect_env_steps=collect,
            utd_ratio=0.25,
            batch_size=32,
            gamma=0.99,
            warmup_env_steps=args.warmup_env_steps,
            eval_every=max(1, args.eval_every // collect),
            eval_episodes=args.eval_episodes,
            seed=args.seed,
        ),
        eval_envs=eval_envs,
    )

    sinks = [ConsoleLogger(args.steps, disable=args.no_progress)]
    if args.out is not None:
        sinks.append(JsonlLogger(args.out / "metrics.jsonl", every_iterations=250))
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
        f"final eval return: {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} "
        f"over {last.eval.episodes} games (raw score)"
    )


if __name__ == "__main__":
    main()
