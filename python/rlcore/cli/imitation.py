"""``rlcore collect-expert`` and ``rlcore train --algo {bc,gail} --expert PATH``."""


from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

import rlcore
from rlcore.algos.bc import BC
from rlcore.algos.gail import GAIL
from rlcore.presets import gail_settings
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
from rlcore.trainers.on_policy import OnPolicyTrainer


def train_imitation(args: argparse.Namespace) -> int:
    """``rlcore train --algo {bc,gail} --expert PATH --env ID`` (called by :func:`rlcore.cli.main`).

    BC: ``--steps`` counts gradient steps (default 20k, batch 256). GAIL: ``--steps`` counts env
    steps; the generator, discriminator and schedule are :func:`gail_settings`.
    """
    from rlcore.algos.bc import BCConfig
    from rlcore.cli.common import UsageError, _make_envs, load_resume, prepare_run_dir
    from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger, TensorBoardLogger

    if args.expert is None:
        raise UsageError(f"--algo {args.algo} needs --expert PATH (a dataset of `rlcore collect-expert`)")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.num_envs is not None and args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    try:
        expert = rlcore.ReplayBuffer.load(args.expert)
    except rlcore.errors.RlcoreError as e:
        raise UsageError(f"--expert {args.expert}: {e}") from e
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space
    trainer: Any
    if args.algo == "bc":
        steps = args.steps or 20_000
        algo_config: Any = BCConfig()
        bc = BC.from_spaces(obs_space, act_space, algo_config, device=args.device)
        trainer_config: Any = OfflineTrainerConfig(
            max_grad_steps=steps, grad_steps_per_iteration=500, eval_every=4, seed=args.seed
        )
        trainer = OfflineTrainer(bc, expert, config=trainer_config, eval_envs=eval_envs)
        total = steps
    else:
        settings = gail_settings(args.env, steps=args.steps, num_envs=args.num_envs, seed=args.seed)
        algo_config, trainer_config = settings.gail, settings.trainer
        steps = trainer_config.max_env_steps
        envs = _make_envs(args.env, settings.num_envs)
        gail = GAIL.from_spaces(
            obs_space,
            act_space,
            expert,
            algo_config,
            settings.ppo,
            num_envs=settings.num_envs,
            device=args.device,
        )
        trainer = OnPolicyTrainer(
            gail, envs, config=trainer_config, eval_envs=eval_envs, reward_fn=gail.reward
        )
        total = steps
    load_resume(trainer, args)
    out = prepare_run_dir(args, Path("runs") / f"{args.env}-{args.algo}-s{args.seed}")
    (out / "config.json").write_text(
        json.dumps(
            {
                "command": "rlcore " + " ".join(sys.argv[1:]),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "algo_config": dataclasses.asdict(algo_config),
                "trainer_config": dataclasses.asdict(trainer_config),
                "ppo_config": dataclasses.asdict(trainer.algorithm.generator.config)
                if args.algo == "gail"
                else None,
                "expert_transitions": len(expert),
            },
            indent=2,
            default=str,
        )
    )
    logger = MultiLogger(
        ConsoleLogger(total if args.algo == "gail" else None, disable=args.no_progress),
        JsonlLogger(out / "metrics.jsonl"),
        TensorBoardLogger(out / "tb"),
    )
    try:
        last = trainer.run(logger)
    finally:
        logger.close()
    trainer.save_checkpoint(out / "checkpoint")
    assert last is not None and last.eval is not None
    print(
        f"done: {args.env} {args.algo} grad_steps={last.grad_steps} env_steps={last.env_steps} "
        f"eval/return_mean={last.eval.return_mean:.2f} (run dir: {out})"
    )
    return 0
