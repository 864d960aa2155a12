"""The trainer of ``rlcore train --algo {bc,gail,dac} --expert DATASET``: behaviour cloning on an
:class:`~rlcore.trainers.offline.OfflineTrainer`, GAIL on an
:class:`~rlcore.trainers.on_policy.OnPolicyTrainer` with its learned reward
(:func:`rlcore.presets.gail_settings`), DAC on an
:class:`~rlcore.trainers.off_policy.OffPolicyTrainer` with a replay buffer whose rewards it
relabels (:func:`rlcore.presets.dac_settings`). The dataset is anything :func:`rlcore.datasets.load_dataset`
reads: a save of ``rlcore collect-expert`` (``ReplayBuffer.save``), a D4RL-format HDF5 file or a
local Minari dataset id."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rlcore.cli.algorithms import ALGORITHMS
from rlcore.cli.common import Built, UsageError, _make_envs, _resumed_capacity, torch_device

__all__ = ["BC_STEPS", "build_imitation"]

BC_STEPS = 20_000
"""Default ``--steps`` of BC, in gradient steps (batch 256)."""


def build_imitation(args: argparse.Namespace) -> Built:
    """The trainer of ``rlcore train --algo {bc,gail,dac} --expert DATASET``. BC: ``--steps`` counts
    gradient steps (default :data:`BC_STEPS`); GAIL and DAC: env steps.

    Raises:
        UsageError: the dataset cannot be read, the env does not fit DAC (a ``Box`` action space),
            or the device is not usable.
    """
    import torch

    import rlcore
    from rlcore.datasets import load_dataset
    from rlcore.presets import gail_settings
    from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
    from rlcore.trainers.on_policy import OnPolicyTrainer

    device = torch_device(args.device)
    try:
        expert = load_dataset(args.expert)
    except (rlcore.errors.RlcoreError, FileNotFoundError, ImportError) as e:
        raise UsageError(f"--expert {args.expert}: {e}") from e
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space
    algo_cls, cfg_cls = ALGORITHMS[args.algo].load()
    details: dict[str, Any] = {"expert_transitions": len(expert), "device": str(device)}
    if args.algo == "bc":
        steps = args.steps or BC_STEPS
        algo_config = cfg_cls()
        bc = algo_cls.from_spaces(obs_space, act_space, algo_config, device=device)
        config = OfflineTrainerConfig(
            max_grad_steps=steps,
            grad_steps_per_iteration=500,
            eval_every=4,
            seed=args.seed,
            checkpoint_every=args.checkpoint_every or None,
        )
        details["algo_config"] = dataclasses.asdict(algo_config)
        return Built(OfflineTrainer(bc, expert, config=config, eval_envs=eval_envs), details, total=None)
    if args.algo == "dac":
        return _build_dac(args, expert, eval_envs, device, details)
    settings = gail_settings(args.env, steps=args.steps, num_envs=args.num_envs, seed=args.seed)
    trainer_config = dataclasses.replace(settings.trainer, checkpoint_every=args.checkpoint_every or None)
    envs = _make_envs(args.env, settings.num_envs)
    gail = algo_cls.from_spaces(
        obs_space, act_space, expert, settings.gail, settings.ppo, num_envs=settings.num_envs, device=device
    )
    trainer = OnPolicyTrainer(gail, envs, config=trainer_config, eval_envs=eval_envs, reward_fn=gail.reward)
    details |= {"algo_config": dataclasses.asdict(settings.gail), "ppo_config": dataclasses.asdict(settings.ppo)}
    return Built(trainer, details, total=trainer_config.max_env_steps)


def _build_dac(args: argparse.Namespace, expert: Any, eval_envs: Any, device: Any, details: dict[str, Any]) -> Built:
    """DAC on an :class:`~rlcore.trainers.off_policy.OffPolicyTrainer` with a
    :class:`~rlcore.buffers.replay.ReplayBuffer` (:func:`rlcore.presets.dac_settings`)."""
    import gymnasium as gym

    import rlcore
    from rlcore.algos.dac import DAC
    from rlcore.presets import dac_settings
    from rlcore.trainers.off_policy import OffPolicyTrainer

    settings = dac_settings(args.env, steps=args.steps, num_envs=args.num_envs, seed=args.seed)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space
    if not isinstance(act_space, gym.spaces.Box):
        raise UsageError(f"dac needs a Box action space (its generator is SAC); {args.env} has {act_space} (use gail)")
    trainer_config = dataclasses.replace(settings.trainer, checkpoint_every=args.checkpoint_every or None)
    capacity = settings.capacity
    if args.resume is not None:
        capacity = _resumed_capacity(args.resume, capacity)
    envs = _make_envs(args.env, settings.num_envs, seed=args.seed)
    buffer = rlcore.ReplayBuffer(capacity, num_envs=settings.num_envs, seed=args.seed)
    dac = DAC.from_spaces(
        obs_space, act_space, expert, settings.dac, settings.sac, gamma=trainer_config.gamma, device=device
    )
    trainer = OffPolicyTrainer(dac, buffer, envs, config=trainer_config, eval_envs=eval_envs)
    details |= {
        "algo_config": dataclasses.asdict(settings.dac),
        "sac_config": dataclasses.asdict(settings.sac),
        "num_envs": settings.num_envs,
        "capacity": capacity,
    }
    return Built(trainer, details, total=trainer_config.max_env_steps, every_iterations=max(1, 1000 // trainer_config.collect_env_steps))
