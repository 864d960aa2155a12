"""``rlcore train --distributed``: a :class:`~rlcore.distributed.DistributedTrainer` from the command line."""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlcore.distributed.ray_setup import init_ray
from rlcore.distributed.sharded_buffer import ShardedReplayBuffer
from rlcore.distributed.trainer import DistributedConfig, DistributedTrainer, shard_factory_like


def _resumed_shard_capacity(args: Any) -> int | None:
    """The shard capacity of the run ``--resume`` points to (``None``: not resuming, or unknown)."""
    from rlcore.errors import RlcoreError
    from rlcore.trainers import checkpoint

    if getattr(args, "resume", None) is None:
        return None
    try:
        capacity = checkpoint.read_info(args.resume).get("shard_capacity")
    except (FileNotFoundError, RlcoreError):
        return None  # load_resume reports it
    return capacity if isinstance(capacity, int) else None


def trainer_from_cli(
    args: Any,
    algorithm: Any,
    buffer: Any,
    make_envs: Callable[[], Any],
    make_policy: Callable[[], Any],
    *,
    config: Any,
    eval_envs: Any,
    envs_per_collector: int,
) -> DistributedTrainer:
    """The :class:`DistributedTrainer` of ``rlcore train ... --distributed`` (``args``: the parsed
    ``--num-collectors``, ``--num-shards``, ``--ray-address``, ``--env``, ``--seed``), with shards
    like the local ``buffer`` and evaluation about as often in env steps as the local run.

    Raises:
        rlcore.cli.common.UsageError: bad counts, or Ray is not installed.
    """
    from rlcore.cli.common import UsageError

    k, s = args.num_collectors, args.num_shards
    if k < 1 or s < 1:
        raise UsageError(f"--num-collectors and --num-shards must be >= 1, got {k} and {s}")
    try:
        init_ray(args.ray_address)
    except ImportError as e:
        raise UsageError(str(e)) from e
    streams = k * envs_per_collector
    sharded = ShardedReplayBuffer(
        shard_factory_like(
            buffer,
            num_shards=s,
            num_envs=streams,
            env_id=args.env,
            shard_capacity=_resumed_shard_capacity(args),
        ),
        num_shards=s,
        num_envs=streams,
        seed=args.seed,
    )
    every = None if config.eval_every is None else config.eval_every * config.collect_env_steps
    dist = DistributedConfig(num_collectors=k, eval_every_env_steps=every)
    return DistributedTrainer(
        algorithm, sharded, make_envs, make_policy, config=config, dist=dist, eval_envs=eval_envs
    )
