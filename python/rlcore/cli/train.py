"""``rlcore train`` for the off-policy algorithms (DQN, DDPG, TD3, SAC, with or without HER) and the
recurrent one (R2D2, on sequences: :class:`~rlcore.trainers.recurrent.RecurrentTrainer`)."""


from __future__ import annotations

import argparse
import dataclasses
import functools
from typing import Any

from rlcore.cli.common import (
    IMITATION_ALGOS,
    RECURRENT_ALGOS,
    UsageError,
    _make_envs,
    _resumed_capacity,
    default_run_dir,
    load_resume,
    prepare_run_dir,
    resolve_resume,
    run_to_end,
)
from rlcore.envs.atari import is_atari
from rlcore.presets import atari_replay_buffer, preset_for, recurrent_preset_for


def _make_atari_envs(args: argparse.Namespace, num_envs: int) -> tuple[Any, Any]:
    """Training and evaluation envs of an Atari game (:mod:`rlcore.envs.atari`) on ``--backend``:
    training envs clip rewards to their sign and end an episode at every lost life; the one
    evaluation env plays whole games and reports the raw score."""
    from rlcore.envs.atari import make_atari_vec
    from rlcore.errors import ApiUsageError, InvalidValueError

    backend = args.backend
    try:
        envs = make_atari_vec(
            args.env,
            num_envs,
            backend=backend,
            seed=args.seed,
            async_batch=args.async_batch,
            clip_reward=True,
            terminal_on_life_loss=True,
        )
        eval_envs = make_atari_vec(
            args.env,
            1,
            backend=backend,
            seed=(args.seed + 10_000) % 2**31,  # EnvPool takes int32 seeds only
            clip_reward=False,
            terminal_on_life_loss=False,
        )
    except (ApiUsageError, InvalidValueError) as e:
        raise UsageError(str(e)) from e
    return envs, eval_envs


def train_command(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import torch

    import rlcore
    from rlcore.algos.common import resolve_device
    from rlcore.algos.ddpg import DDPG, DDPGConfig
    from rlcore.algos.dqn import DQN, DQNConfig
    from rlcore.algos.r2d2 import R2D2, R2D2Config
    from rlcore.algos.sac import SAC, SACConfig
    from rlcore.algos.td3 import TD3, TD3Config
    from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
    from rlcore.trainers.recurrent import RecurrentTrainer

    if args.distributed and args.algo not in ("dqn", "ddpg", "td3", "sac"):
        raise UsageError(f"--distributed supports dqn, ddpg, td3 and sac, not {args.algo}")
    if (args.backend != "gymnasium" or args.async_batch is not None) and (
        args.distributed or args.algo in IMITATION_ALGOS
    ):
        raise UsageError(
            "--backend envpool and --async-batch are for single-process rlcore train, not --distributed or bc/gail"
        )
    if args.value_rescaling is not None and args.algo not in RECURRENT_ALGOS:
        raise UsageError(f"--value-rescaling is for --algo r2d2, not {args.algo}")
    if args.trust_env_state and args.resume is None:
        raise UsageError("--trust-env-state needs --resume CHECKPOINT_DIR")
    args.resume = resolve_resume(args)
    if args.algo in IMITATION_ALGOS:
        from rlcore.cli.imitation import train_imitation

        return train_imitation(args)
    if args.expert is not None:
        raise UsageError(f"--expert is for --algo bc or gail, not {args.algo}")
    if args.algo in ("vpg", "a2c", "ppo"):
        from rlcore.cli.train_on_policy import train_on_policy

        return train_on_policy(args)
    recurrent = args.algo in RECURRENT_ALGOS
    if recurrent and (args.her or args.distributed):
        raise UsageError(f"{'--her' if args.her else '--distributed'} is not supported with --algo {args.algo}")
    if args.n_step is not None and args.n_step < 1:
        raise UsageError(f"--n-step must be >= 1, got {args.n_step}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.num_envs is not None and args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.warmup_env_steps is not None and args.warmup_env_steps < 0:
        raise UsageError(f"--warmup-env-steps must be >= 0, got {args.warmup_env_steps}")
    atari = is_atari(args.env)
    if atari and (args.algo != "dqn" or args.her or args.distributed):
        raise UsageError(f"{args.env}: Atari games train with --algo dqn (no --her, no --distributed)")
    try:
        device = resolve_device(args.device)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as e:
        raise UsageError(f"--device {args.device!r} is not usable: {str(e).splitlines()[0]}") from e

    preset = recurrent_preset_for(args.env) if recurrent else preset_for(args.env, her=args.her)
    num_envs = args.num_envs or preset.num_envs
    steps = args.steps or preset.steps
    n_step = args.n_step if args.n_step is not None else preset.n_step
    if atari:
        envs, eval_envs = _make_atari_envs(args, num_envs)
    else:
        envs = _make_envs(args.env, num_envs, backend=args.backend, async_batch=args.async_batch, seed=args.seed)
        eval_envs = _make_envs(args.env, 5 if args.her or recurrent else 1)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    is_goal = isinstance(obs_space, gym.spaces.Dict) and {"achieved_goal", "desired_goal"} <= set(
        obs_space.spaces
    )
    if args.her and not is_goal:
        raise UsageError(
            f"--her needs a goal env with dict observations (achieved_goal, desired_goal); {args.env} has {obs_space}"
        )
    if args.algo in ("dqn", "r2d2") and not isinstance(act_space, gym.spaces.Discrete):
        raise UsageError(
            f"{args.algo} needs a Discrete action space; {args.env} has {act_space} (use ddpg, td3 or sac)"
        )
    if recurrent and not isinstance(obs_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box observation space; {args.env} has {obs_space}")
    if args.algo not in ("dqn", "r2d2") and not isinstance(act_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box action space; {args.env} has {act_space} (use dqn)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    overrides = dict(preset.algo.get(args.algo, {}))
    overrides["seed"] = args.seed
    if args.algo == "dqn" and preset.dqn_lr_anneal:
        overrides["lr_anneal_env_steps"] = steps
    if overrides.get("lr_anneal_env_steps") is True:  # a preset's "anneal over --steps"
        overrides["lr_anneal_env_steps"] = steps
    if args.algo == "dqn" and preset.dqn_eps_decay_fraction is not None:
        overrides["eps_decay_env_steps"] = int(preset.dqn_eps_decay_fraction * steps)
    if recurrent and args.value_rescaling is not None:
        overrides["value_rescaling"] = args.value_rescaling
    if is_goal and args.algo != "ddpg":
        overrides.setdefault("normalize_obs", True)
    algo_cls: Any
    cfg_cls: Any
    algo_cls, cfg_cls = {
        "dqn": (DQN, DQNConfig),
        "ddpg": (DDPG, DDPGConfig),
        "td3": (TD3, TD3Config),
        "sac": (SAC, SACConfig),
        "r2d2": (R2D2, R2D2Config),
    }[args.algo]
    algo_config = cfg_cls(**overrides)
    algorithm = algo_cls.from_spaces(obs_space, act_space, algo_config, device=device)

    capacity = min(preset.capacity, max(steps + 1000 * num_envs, 1000))
    if args.resume is not None and not args.distributed:
        capacity = _resumed_capacity(args.resume, capacity)
    buffer: Any
    if args.her:
        reward_env = gym.make(args.env).unwrapped
        buffer = rlcore.HERReplayBuffer(
            capacity,
            num_envs=num_envs,
            seed=args.seed,
            compute_reward=getattr(reward_env, "compute_reward", None),
            prioritized=args.prioritized,
            alpha=0.6,
            beta=0.4,
        )
    elif args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(
            capacity, num_envs=num_envs, seed=args.seed, alpha=0.6, beta=0.4
        )
    elif atari:
        buffer = atari_replay_buffer(capacity, num_envs=num_envs, seed=args.seed)
    else:
        buffer = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=args.seed)

    trainer_kw = dict(preset.trainer)
    if args.warmup_env_steps is not None:
        trainer_kw["warmup_env_steps"] = args.warmup_env_steps
    collect = trainer_kw.get("collect_env_steps", 1)
    trainer_config = OffPolicyTrainerConfig(
        max_env_steps=steps,
        n_step=n_step,
        gamma=preset.gamma,
        eval_every=max(1, preset.eval_every_env_steps // collect),
        per_beta_end=1.0 if args.prioritized else None,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every or None,
        **trainer_kw,
    )
    trainer: Any
    if args.distributed:
        from rlcore.cli.distributed import trainer_from_cli

        make_policy = functools.partial(algo_cls.from_spaces, obs_space, act_space, algo_config, device="cpu")
        trainer = trainer_from_cli(
            args,
            algorithm,
            buffer,
            functools.partial(_make_envs, args.env, num_envs),
            make_policy,
            config=trainer_config,
            eval_envs=eval_envs,
            envs_per_collector=num_envs,
        )
    else:
        trainer_cls = RecurrentTrainer if recurrent else OffPolicyTrainer
        trainer = trainer_cls(algorithm, buffer, envs, config=trainer_config, eval_envs=eval_envs)
    load_resume(trainer, args)

    out = prepare_run_dir(args, default_run_dir(args))
    details = {
        "algo_config": dataclasses.asdict(algo_config),
        "num_envs": num_envs,
        "capacity": capacity,
        "device": str(device),
    }
    every = max(1, 1000 // collect)
    return run_to_end(trainer, args, out, details=details, total=steps, every_iterations=every)
