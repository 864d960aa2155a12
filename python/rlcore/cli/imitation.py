"""``rlcore collect-expert`` and ``rlcore train --algo {bc,gail} --expert PATH``."""


from __future__ import annotations

import argparse
import dataclasses
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
    from rlcore.cli.common import (
        UsageError,
        _make_envs,
        default_run_dir,
        load_resume,
        prepare_run_dir,
        run_to_end,
    )

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
            max_grad_steps=steps,
            grad_steps_per_iteration=500,
            eval_every=4,
            seed=args.seed,
            checkpoint_every=args.checkpoint_every or None,
        )
        trainer = OfflineTrainer(bc, expert, config=trainer_config, eval_envs=eval_envs)
        total = steps
    else:
        settings = gail_settings(args.env, steps=args.steps, num_envs=args.num_envs, seed=args.seed)
        algo_config = settings.gail
        trainer_config = dataclasses.replace(settings.trainer, checkpoint_every=args.checkpoint_every or None)
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
    out = prepare_run_dir(args, default_run_dir(args))
    details = {
        "algo_config": dataclasses.asdict(algo_config),
        "ppo_config": dataclasses.asdict(trainer.algorithm.generator.config) if args.algo == "gail" else None,
        "expert_transitions": len(expert),
    }
    return run_to_end(trainer, args, out, details=details, total=total if args.algo == "gail" else None)
