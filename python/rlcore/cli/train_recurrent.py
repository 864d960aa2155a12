"""``rlcore train --algo r2d2``: a recurrent DQN on sequences (:mod:`rlcore.algos.r2d2`) trained
by :class:`~rlcore.trainers.recurrent.RecurrentTrainer`; writes ``config.json`` and one
``metrics.jsonl`` line per evaluation into the run directory."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from rlcore.cli.common import UsageError, _make_envs, prepare_run_dir


def train_recurrent(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import torch

    import rlcore
    from rlcore.algos.common import resolve_device
    from rlcore.algos.r2d2 import R2D2, R2D2Config
    from rlcore.trainers.recurrent import RecurrentTrainer, RecurrentTrainerConfig

    for flag, given in (("--her", args.her), ("--distributed", args.distributed), ("--resume", args.resume)):
        if given:
            raise UsageError(f"{flag} is not supported with --algo r2d2")
    if args.n_step < 1:
        raise UsageError(f"--n-step must be >= 1, got {args.n_step}")
    steps = args.steps or 200_000
    num_envs = args.num_envs or 8
    if steps < 1 or num_envs < 1:
        raise UsageError("--steps and --num-envs must be >= 1")
    envs = _make_envs(args.env, num_envs)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    if not isinstance(act_space, gym.spaces.Discrete) or not isinstance(obs_space, gym.spaces.Box):
        raise UsageError(f"r2d2 needs a Box observation and a Discrete action space; {args.env} has "
                         f"{obs_space} and {act_space}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = resolve_device(args.device)
    algo_config = R2D2Config(seed=args.seed)
    algorithm = R2D2.from_spaces(obs_space, act_space, algo_config, device=device)
    capacity = min(200_000, steps + 1000 * num_envs)
    if args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(capacity, num_envs=num_envs, seed=args.seed, alpha=0.6, beta=0.4)
    else:
        buffer = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=args.seed)
    config = RecurrentTrainerConfig(
        max_env_steps=steps,
        n_step=args.n_step if args.n_step > 1 else 3,
        per_beta_end=1.0 if args.prioritized else None,
        seed=args.seed,
    )
    trainer = RecurrentTrainer(algorithm, buffer, envs, config=config, eval_envs=eval_envs)
    tag = f"{args.env.replace('/', '-')}-r2d2{'-per' if args.prioritized else ''}-s{args.seed}"
    out = prepare_run_dir(args, Path("runs") / tag)
    (out / "config.json").write_text(json.dumps({
        "command": "rlcore " + " ".join(sys.argv[1:]),
        "algo_config": dataclasses.asdict(algo_config),
        "trainer_config": dataclasses.asdict(config),
        "num_envs": num_envs,
        "capacity": capacity,
    }, indent=2))
    last = None
    with (out / "metrics.jsonl").open("a") as log:
        for stats in trainer:
            last = stats
            if stats.eval is None:
                continue
            row = {"env_steps": stats.env_steps, "grad_steps": stats.grad_steps,
                   "eval/return_mean": stats.eval.return_mean, "rollout/return_mean": stats.rollout.return_mean}
            log.write(json.dumps(row) + "\n")
            log.flush()
            if not args.no_progress:
                print(json.dumps(row), flush=True)
    assert last is not None and last.eval is not None
    print(f"done: {args.env} r2d2 env_steps={last.env_steps} eval/return_mean={last.eval.return_mean:.2f} "
          f"(run dir: {out})")
    return 0
