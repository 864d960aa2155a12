"""``make_vec``: N envs of one id on the gymnasium or the EnvPool backend, lock-step or asynchronous."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import gymnasium as gym

from rlcore.envs.backends import EnvPoolBackend
from rlcore.envs.robotics import register_robotics
from rlcore.errors import ApiUsageError, InvalidValueError

__all__ = ["make_vec"]


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    backend: Literal["gymnasium", "envpool"] = "gymnasium",
    async_batch: int | None = None,
    seed: int | None = None,
    max_episode_steps: int | None = None,
    wrappers: Sequence[Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]] = (),
    make_kwargs: Mapping[str, Any] | None = None,
) -> gym.vector.VectorEnv | EnvPoolBackend:
    """N envs of ``env_id`` for :class:`~rlcore.collect.collector.Collector`,
    :class:`~rlcore.collect.sampler.RolloutSampler` and the trainers.

    Args:
        env_id: a gymnasium id (``"CartPole-v1"``, ``"HalfCheetah-v5"``, ``"FetchReach-v4"``; the
            robotics ids need gymnasium-robotics) or, for EnvPool, one of ``envpool.list_all_envs()``
            (the classic-control, MuJoCo and Fetch ids are the same as gymnasium's).
        num_envs: N >= 1.
        backend: ``"gymnasium"`` (``gymnasium.make_vec``) or ``"envpool"`` (``envpool.make``, the
            optional ``envpool`` extra: ``pip install -e '.[envpool]'``).
        async_batch: ``None``: lock-step (gymnasium ``SyncVectorEnv``; EnvPool ``batch_size=N``).
            gymnasium: ``N`` gives an ``AsyncVectorEnv`` (sub-envs in worker processes, stepped and
            reset in parallel, all N per step; gymnasium cannot return part of them). EnvPool: B
            with ``1 <= B <= N`` and N a multiple of B: each ``recv`` returns the first B envs to
            finish (asynchronous collection when B < N).
        seed: EnvPool seeds env i with ``seed + i`` here, once (default 0); gymnasium envs are
            seeded by their first reset (the collector's ``reset(seed=...)``, which the trainers
            call), so it is unused there.
        max_episode_steps: override the id's time limit.
        wrappers: gymnasium backend only: applied to each sub-env, first one innermost
            (``gymnasium.make_vec``'s ``wrappers``; :func:`rlcore.envs.atari.make_atari_vec`
            passes its Atari preprocessing here).
        make_kwargs: gymnasium: keyword arguments of each sub-env's ``gym.make`` (e.g.
            ``{"frameskip": 1}`` for an ALE game); EnvPool: options of ``envpool.make``, its env
            config (e.g. ``{"stack_num": 4, "episodic_life": True}`` for an Atari game; see
            ``envpool.make_spec(env_id).config``).

    Returns:
        a gymnasium ``VectorEnv`` (gymnasium) or an
        :class:`~rlcore.envs.backends.EnvPoolBackend` (EnvPool).

    Raises:
        InvalidValueError: ``num_envs < 1``, an ``async_batch`` the backend cannot do, an unknown
            backend, ``wrappers`` with EnvPool, a ``make_kwargs`` key EnvPool's config lacks, an
            EnvPool seed outside ``[0, 2**31 - num_envs]``.
        ApiUsageError: envpool is not installed, or the id is unknown to the backend.
    """
    if num_envs < 1:
        raise InvalidValueError(f"num_envs must be >= 1, got {num_envs}")
    if backend == "gymnasium":
        if async_batch not in (None, num_envs):
            raise InvalidValueError(
                f"async_batch={async_batch}: gymnasium vector envs step all {num_envs} envs per call; "
                f"pass async_batch=None (SyncVectorEnv) or {num_envs} (AsyncVectorEnv), or use "
                "backend='envpool' for partial batches"
            )
        if env_id not in gym.registry:
            register_robotics()
        if env_id not in gym.registry:
            raise ApiUsageError(f"unknown gymnasium environment {env_id!r}")
        mode = "sync" if async_batch is None else "async"
        kwargs: dict[str, Any] = dict(make_kwargs or {})
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode=mode, wrappers=list(wrappers) or None, **kwargs
        )
    if backend != "envpool":
        raise InvalidValueError(f"backend must be 'gymnasium' or 'envpool', got {backend!r}")
    if wrappers:
        raise InvalidValueError("wrappers are for backend='gymnasium'; EnvPool builds its envs in C++")
    batch = num_envs if async_batch is None else async_batch
    if not 1 <= batch <= num_envs or num_envs % batch:
        raise InvalidValueError(
            f"async_batch={async_batch}: EnvPool needs 1 <= async_batch <= num_envs={num_envs} and "
            "num_envs a multiple of it"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its spaces warn about float64 bounds cast to float32
            import envpool  # type: ignore[import-untyped]
    except ImportError as e:
        raise ApiUsageError("backend='envpool' needs envpool: pip install -e '.[envpool]'") from e
    if env_id not in envpool.list_all_envs():
        raise ApiUsageError(f"unknown EnvPool environment {env_id!r} (see envpool.list_all_envs())")
    first = 0 if seed is None else int(seed)
    if not 0 <= first or first + num_envs > 2**31:  # EnvPool asserts int32 seeds (env i gets seed + i)
        raise InvalidValueError(
            f"seed={seed}: EnvPool seeds env i with seed + i, which must lie in [0, 2**31) for all "
            f"{num_envs} envs"
        )
    opts: dict[str, Any] = {"num_envs": num_envs, "batch_size": batch, "seed": first}
    if max_episode_steps is not None:
        opts["max_episode_steps"] = max_episode_steps
    if make_kwargs:
        known = set(envpool.make_spec(env_id).config._fields)
        unknown = sorted(set(make_kwargs) - known)
        if unknown:
            raise InvalidValueError(
                f"make_kwargs {unknown} are not options of EnvPool's {env_id} (its options: {sorted(known)})"
            )
        opts.update(make_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = envpool.make(env_id, env_type="gymnasium", **opts)
    return EnvPoolBackend(pool)
