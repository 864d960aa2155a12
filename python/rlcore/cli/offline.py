"""The trainer of ``rlcore train --algo {td3bc,iql,cql} --dataset DATASET --env ID``: offline RL on a
dataset that :func:`rlcore.datasets.load_dataset` reads (a D4RL-format HDF5 file, a local Minari
dataset id or an rlcore buffer save), run by :class:`~rlcore.trainers.offline.OfflineTrainer` with
evaluation on ``--env``. ``--steps`` counts gradient steps (batch 256, an evaluation of 10 episodes
every 5,000 steps, as the papers report).

The normalised score (D4RL: ``100 * (R - R_random) / (R_expert - R_random)``) of each evaluation is
:func:`normalized_scores` of the run directory; the reference returns are ``--ref-returns RANDOM
EXPERT``, else the Minari dataset's ``ref_min_score``/``ref_max_score``, else D4RL's for the env's
task (:data:`rlcore.datasets.D4RL_REFERENCE_RETURNS`, by the env id's name: ``Hopper-v5`` ->
``hopper``), else none. They are recorded in ``config.json``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from rlcore.cli.algorithms import ALGORITHMS
from rlcore.cli.common import Built, UsageError, _make_envs, torch_device

__all__ = ["OFFLINE_STEPS", "build_offline", "normalized_scores", "reference_returns"]

OFFLINE_STEPS = 1_000_000
"""Default ``--steps`` (gradient steps): the papers' 1M."""

EVAL_EVERY_GRAD_STEPS = 5_000
"""Gradient steps between evaluations."""


def reference_returns(args: argparse.Namespace) -> tuple[tuple[float, float] | None, str]:
    """``((random, expert), where from)`` for the normalised score, or ``(None, "none")``
    (module docstring)."""
    from rlcore.datasets import D4RL_REFERENCE_RETURNS, minari_reference_returns

    if args.ref_returns is not None:
        return (float(args.ref_returns[0]), float(args.ref_returns[1])), "--ref-returns"
    source = Path(args.dataset)
    if not source.exists():
        try:
            ref = minari_reference_returns(str(args.dataset))
        except (ImportError, OSError, ValueError, KeyError, TypeError):  # no metadata: no reference
            ref = None
        if ref is not None:
            return ref, "the Minari dataset's metadata"
    task = args.env.split("/")[-1].split("-")[0].lower()
    if task in D4RL_REFERENCE_RETURNS:
        return D4RL_REFERENCE_RETURNS[task], f"D4RL's reference returns for {task}"
    return None, "none"


def _episode_returns(buffer: Any) -> Any:
    """Undiscounted returns of the episodes of a single-env dataset buffer (one per start row)."""
    import numpy as np

    rows = np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity))))
    starts, _, _ = buffer.episode_bounds(rows)
    _, episode = np.unique(np.asarray(starts), return_inverse=True)
    return np.bincount(episode, weights=np.asarray(buffer.rew, dtype=np.float64)[rows])


def build_offline(args: argparse.Namespace) -> Built:
    """The trainer of ``rlcore train --algo {td3bc,iql,cql} --dataset DATASET``.

    TD3+BC's observation normaliser is fitted to the dataset's observations; IQL's rewards are
    scaled by ``1000 / (max - min)`` of the dataset's episode returns and its actor's learning rate
    decays over ``--steps`` (the papers' settings).

    Raises:
        UsageError: no ``--dataset``, a dataset that cannot be read, a non-Box action space, or an
            unusable device.
    """
    import gymnasium as gym
    import numpy as np
    import torch

    from rlcore.datasets import load_dataset
    from rlcore.errors import RlcoreError
    from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig

    if args.dataset is None:
        raise UsageError(
            f"--algo {args.algo} needs --dataset PATH (a D4RL-format file, a Minari id or an rlcore save)"
        )
    device = torch_device(args.device)
    try:
        dataset = load_dataset(args.dataset, progress=None if not args.no_progress else False)
    except (RlcoreError, FileNotFoundError, ImportError) as e:
        raise UsageError(f"--dataset {args.dataset}: {e}") from e
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space
    if not isinstance(act_space, gym.spaces.Box):
        raise UsageError(
            f"--algo {args.algo} needs a continuous (Box) action space; {args.env} has {act_space}"
        )
    steps = args.steps or OFFLINE_STEPS
    algo_cls, cfg_cls = ALGORITHMS[args.algo].load()
    fields = {f.name for f in dataclasses.fields(cfg_cls)}
    overrides: dict[str, Any] = {"seed": args.seed}
    if args.algo == "iql":
        from rlcore.algos.iql import iql_reward_scale

        overrides["actor_lr_decay_grad_steps"] = steps
        returns = _episode_returns(dataset)
        if returns.size >= 2 and returns.max() > returns.min():
            overrides["reward_scale"] = iql_reward_scale(returns)
    algo_config = cfg_cls(**{k: v for k, v in overrides.items() if k in fields})
    algo = algo_cls.from_spaces(obs_space, act_space, algo_config, device=device)
    if hasattr(algo, "fit_obs"):
        rows = np.flatnonzero(np.asarray(dataset.is_transition(np.arange(dataset.capacity))))
        obs = dataset.column("obs")
        algo.fit_obs({k: v[rows] for k, v in obs.items()} if isinstance(obs, dict) else obs[rows])
    config = OfflineTrainerConfig(
        max_grad_steps=steps,
        grad_steps_per_iteration=min(EVAL_EVERY_GRAD_STEPS, steps),
        batch_size=256,
        eval_every=1,
        eval_episodes=10,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every or None,
    )
    reference, source = reference_returns(args)
    details: dict[str, Any] = {
        "dataset": str(args.dataset),
        "dataset_transitions": len(dataset),
        "algo_config": dataclasses.asdict(algo_config),
        "reference_returns": None if reference is None else list(reference),
        "reference_returns_source": source,
        "device": str(device),
    }
    return Built(OfflineTrainer(algo, dataset, config=config, eval_envs=eval_envs), details, total=None)


def normalized_scores(run_dir: str | Path) -> list[tuple[int, float, float]]:
    """``(grad_steps, eval return, normalised score)`` of each evaluation of an offline run
    (``run_dir/metrics.jsonl`` and the reference returns of ``run_dir/config.json``).

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: the run has no reference returns (pass ``--ref-returns`` when training).
    """
    from rlcore.datasets import normalized_score

    run_dir = Path(run_dir)
    reference = json.loads((run_dir / "config.json").read_text()).get("reference_returns")
    if reference is None:
        raise ValueError(
            f"{run_dir}: the run has no reference returns (train with --ref-returns RANDOM EXPERT)"
        )
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        ret = record.get("eval/return_mean")
        if ret is not None:
            step = int(record.get("time/grad_steps", record.get("grad_steps", 0)))
            out.append((step, float(ret), normalized_score(ret, (reference[0], reference[1]))))
    return out
