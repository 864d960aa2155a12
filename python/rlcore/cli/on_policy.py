"""The trainer of ``rlcore train --algo {vpg,a2c,ppo}`` from the flags and
:func:`rlcore.presets.on_policy_preset_for`.

Examples::

    rlcore train --algo ppo --env CartPole-v1 --seed 0          # 30k env steps
    rlcore train --algo a2c --env CartPole-v1 --steps 100000
    rlcore train --algo ppo --env Pendulum-v1
    rlcore train --algo ppo --env HalfCheetah-v5 --steps 1000000
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rlcore.cli.algorithms import ALGORITHMS
from rlcore.cli.common import Built, UsageError, _make_envs, torch_device

__all__ = ["build_on_policy"]


def build_on_policy(args: argparse.Namespace) -> Built:
    """The trainer of ``rlcore train --algo {vpg,a2c,ppo}``.

    Raises:
        UsageError: an Atari game, an observation or action space the algorithm does not take,
            or a device that is not usable.
    """
    import gymnasium as gym
    import torch

    from rlcore.envs.atari import is_atari
    from rlcore.presets import on_policy_preset_for
    from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

    if is_atari(args.env):
        raise UsageError(f"{args.env}: Atari games train with --algo dqn (the Atari wrappers and the Nature CNN)")
    device = torch_device(args.device)
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
    changes: dict[str, Any] = {"lr_anneal_env_steps": steps} if preset.anneal_lr_over_run else {}
    if hasattr(preset.config, "seed"):
        changes["seed"] = args.seed
    algo_config = dataclasses.replace(preset.config, **changes)
    algo_cls, _ = ALGORITHMS[args.algo].load()
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
    details = {"algo_config": dataclasses.asdict(algo_config), "num_envs": num_envs, "device": str(device)}
    return Built(trainer, details, total=steps)
