"""``rlcore train --algo {vpg,a2c,ppo}``: the on-policy branch of the CLI (see :mod:`rlcore.cli`).

Examples::

    rlcore train --algo ppo --env CartPole-v1 --seed 0          # 30k env steps
    rlcore train --algo a2c --env CartPole-v1 --steps 100000
    rlcore train --algo ppo --env Pendulum-v1
    rlcore train --algo ppo --env HalfCheetah-v5 --steps 1000000

The run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard events under ``tb/`` and a
final ``checkpoint/``, as for the off-policy algorithms."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rlcore.presets import on_policy_preset_for

__all__ = ["train_on_policy"]


def train_on_policy(args: argparse.Namespace) -> int:
    """Run ``rlcore train`` for VPG, A2C or PPO (called by :func:`rlcore.cli.main`)."""
    import gymnasium as gym
    import torch

    from rlcore.algos.a2c import A2C, A2CConfig
    from rlcore.algos.common import resolve_device
    from rlcore.algos.ppo import PPO, PPOConfig
    from rlcore.algos.vpg import VPG, VPGConfig
    from rlcore.cli.common import (
        UsageError,
        _make_envs,
        default_run_dir,
        load_resume,
        prepare_run_dir,
        run_to_end,
    )
    from rlcore.envs.atari import is_atari
    from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

    if args.her or args.prioritized or args.n_step not in (None, 1):
        raise UsageError(f"--her, --prioritized and --n-step are replay options; {args.algo} is on-policy")
    if is_atari(args.env):
        raise UsageError(f"{args.env}: Atari games train with --algo dqn (the Atari wrappers and the Nature CNN)")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.num_envs is not None and args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    try:
        device = resolve_device(args.device)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as e:
        raise UsageError(f"--device {args.device!r} is not usable: {str(e).splitlines()[0]}") from e

    preset = on_policy_preset_for(args.env, args.algo)
    num_envs = args.num_envs or preset.num_envs
    steps = args.steps or preset.steps
    envs = _make_envs(args.env, num_envs, backend=args.backend, async_batch=args.async_batch, seed=args.seed)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    if not isinstance(obs_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box observation space; {args.env} has {obs_space}")
    if not isinstance(act_space, gym.spaces.Discrete | gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Discrete or Box action space; {args.env} has {act_space}")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    overrides = dict(preset.algo)
    if overrides.get("lr_anneal_env_steps") is True:
        overrides["lr_anneal_env_steps"] = steps
    if args.algo == "vpg":
        # VPG has separate policy/value learning rates and no minibatches.
        lr = overrides.pop("lr", None)
        if lr is not None:
            overrides["policy_lr"] = lr
    if args.algo != "ppo":
        overrides.pop("value_clip_coef", None)
    if args.algo == "ppo":
        overrides["seed"] = args.seed
    algo_cls: Any
    cfg_cls: Any
    algo_cls, cfg_cls = {"vpg": (VPG, VPGConfig), "a2c": (A2C, A2CConfig), "ppo": (PPO, PPOConfig)}[args.algo]
    algo_config = cfg_cls(**overrides)
    algorithm = algo_cls.from_spaces(obs_space, act_space, algo_config, num_envs=num_envs, device=device)

    per_iter = preset.num_steps * num_envs
    trainer_config = OnPolicyTrainerConfig(
        max_env_steps=steps,
        num_steps=preset.num_steps,
        eval_every=max(1, preset.eval_every_env_steps // per_iter),
        eval_episodes=10,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every or None,
    )
    trainer = OnPolicyTrainer(algorithm, envs, config=trainer_config, eval_envs=eval_envs)
    load_resume(trainer, args)

    out = prepare_run_dir(args, default_run_dir(args))
    details = {"algo_config": dataclasses.asdict(algo_config), "num_envs": num_envs, "device": str(device)}
    return run_to_end(trainer, args, out, details=details, total=steps)
