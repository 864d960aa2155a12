"""The trainer of ``rlcore train`` for the off-policy algorithms (DQN, DDPG, TD3, SAC, with or
without HER, PER, n-step, Atari, EnvPool, ``--distributed``) and the recurrent one (R2D2, on
sequences: :class:`~rlcore.trainers.recurrent.RecurrentTrainer`), from the flags and
:func:`rlcore.presets.preset_for` / :func:`~rlcore.presets.recurrent_preset_for`."""

from __future__ import annotations

import argparse
import dataclasses
import functools
from typing import Any

from rlcore.cli.algorithms import ALGORITHMS
from rlcore.cli.common import Built, UsageError, _make_envs, _resumed_capacity, torch_device


def _make_atari_envs(args: argparse.Namespace, num_envs: int) -> tuple[Any, Any]:
    """Training and evaluation envs of an Atari game (:mod:`rlcore.envs.atari`) on ``--backend``:
    training envs clip rewards to their sign and end an episode at every lost life; the one
    evaluation env plays whole games and reports the raw score."""
    from rlcore.envs.atari import make_atari_vec
    from rlcore.errors import ApiUsageError, InvalidValueError

    try:
        envs = make_atari_vec(
            args.env, num_envs, backend=args.backend, seed=args.seed, async_batch=args.async_batch,
            clip_reward=True, terminal_on_life_loss=True,
        )
        eval_envs = make_atari_vec(
            args.env, 1, backend=args.backend,
            seed=(args.seed + 10_000) % 2**31,  # EnvPool takes int32 seeds only
            clip_reward=False, terminal_on_life_loss=False,
        )
    except (ApiUsageError, InvalidValueError) as e:
        raise UsageError(str(e)) from e
    return envs, eval_envs


def build_off_policy(args: argparse.Namespace) -> Built:
    """The trainer of ``rlcore train --algo {dqn,ddpg,td3,sac,r2d2}``.

    Raises:
        UsageError: the env does not fit the algorithm (action or observation space, a goal env
            for ``--her``, Atari with another algorithm), or the device is not usable.
    """
    import gymnasium as gym
    import torch

    import rlcore
    from rlcore.envs.atari import is_atari
    from rlcore.presets import atari_replay_buffer, preset_for, recurrent_preset_for
    from rlcore.trainers.off_policy import OffPolicyTrainer
    from rlcore.trainers.recurrent import RecurrentTrainer

    entry = ALGORITHMS[args.algo]
    recurrent = entry.family == "recurrent"
    atari = is_atari(args.env)
    if atari and (args.algo != "dqn" or args.her or args.distributed):
        raise UsageError(f"{args.env}: Atari games train with --algo dqn (no --her, no --distributed)")
    device = torch_device(args.device)

    preset = recurrent_preset_for(args.env) if recurrent else preset_for(args.env, her=args.her)
    num_envs = args.num_envs or preset.num_envs
    steps = args.steps or preset.steps
    if atari:
        envs, eval_envs = _make_atari_envs(args, num_envs)
    else:
        envs = _make_envs(args.env, num_envs, backend=args.backend, async_batch=args.async_batch, seed=args.seed)
        eval_envs = _make_envs(args.env, 5 if args.her or recurrent else 1)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    is_goal = isinstance(obs_space, gym.spaces.Dict) and {"achieved_goal", "desired_goal"} <= set(obs_space.spaces)
    if args.her and not is_goal:
        raise UsageError(
            f"--her needs a goal env with dict observations (achieved_goal, desired_goal); {args.env} has {obs_space}"
        )
    discrete = args.algo in ("dqn", "r2d2")
    if discrete and not isinstance(act_space, gym.spaces.Discrete):
        raise UsageError(f"{args.algo} needs a Discrete action space; {args.env} has {act_space} (use ddpg, td3 or sac)")
    if recurrent and not isinstance(obs_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box observation space; {args.env} has {obs_space}")
    if not discrete and not isinstance(act_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box action space; {args.env} has {act_space} (use dqn)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    algo_cls, cfg_cls = entry.load()
    algo_config = _algo_config(preset, args, cfg_cls, steps=steps, is_goal=is_goal)
    algorithm = algo_cls.from_spaces(obs_space, act_space, algo_config, device=device)

    capacity = min(preset.capacity, max(steps + 1000 * num_envs, 1000))
    if args.resume is not None and not args.distributed:
        capacity = _resumed_capacity(args.resume, capacity)
    buffer: Any
    if args.her:
        reward_env = gym.make(args.env).unwrapped
        buffer = rlcore.HERReplayBuffer(
            capacity, num_envs=num_envs, seed=args.seed,
            compute_reward=getattr(reward_env, "compute_reward", None), prioritized=args.prioritized,
        )
    elif args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(capacity, num_envs=num_envs, seed=args.seed)
    elif atari:
        buffer = atari_replay_buffer(capacity, num_envs=num_envs, seed=args.seed)
    else:
        buffer = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=args.seed)

    schedule = preset.trainer
    trainer_config = dataclasses.replace(
        schedule,
        max_env_steps=steps,
        n_step=args.n_step if args.n_step is not None else schedule.n_step,
        warmup_env_steps=args.warmup_env_steps if args.warmup_env_steps is not None else schedule.warmup_env_steps,
        eval_every=max(1, preset.eval_every_env_steps // schedule.collect_env_steps),
        per_beta_end=1.0 if args.prioritized else None,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every or None,
    )
    trainer: Any
    if args.distributed:
        from rlcore.cli.distributed import trainer_from_cli

        make_policy = functools.partial(algo_cls.from_spaces, obs_space, act_space, algo_config, device="cpu")
        trainer = trainer_from_cli(
            args, algorithm, buffer, functools.partial(_make_envs, args.env, num_envs), make_policy,
            config=trainer_config, eval_envs=eval_envs, envs_per_collector=num_envs,
        )
    else:
        trainer_cls = RecurrentTrainer if recurrent else OffPolicyTrainer
        trainer = trainer_cls(algorithm, buffer, envs, config=trainer_config, eval_envs=eval_envs)
    details = {
        "algo_config": dataclasses.asdict(algo_config),
        "num_envs": num_envs,
        "capacity": capacity,
        "device": str(device),
    }
    return Built(trainer, details, total=steps, every_iterations=max(1, 1000 // schedule.collect_env_steps))


def _algo_config(preset: Any, args: argparse.Namespace, cfg_cls: Any, *, steps: int, is_goal: bool) -> Any:
    """The preset's config of ``--algo`` (its class's defaults when the preset has none) with the
    run's seed, the schedules tied to ``--steps`` and the flags that change it."""
    config = preset.configs.get(args.algo) or cfg_cls()
    changes: dict[str, Any] = {"seed": args.seed}
    if preset.anneal_lr_over_run and args.algo in ("dqn", "r2d2"):
        changes["lr_anneal_env_steps"] = steps
    if args.algo == "dqn" and preset.dqn_eps_decay_fraction is not None:
        changes["eps_decay_env_steps"] = int(preset.dqn_eps_decay_fraction * steps)
    if args.algo == "r2d2" and args.value_rescaling is not None:
        changes["value_rescaling"] = args.value_rescaling
    if is_goal and hasattr(config, "normalize_obs"):
        changes["normalize_obs"] = True  # goal envs: positions and goals on different scales
    return dataclasses.replace(config, **changes)
