"""``rlcore collect-expert``: train an expert with ``rlcore train`` (or load a run directory that holds
one, or a policy file of ``rlcore export-policy``) and record a dataset of its deterministic policy."""

from __future__ import annotations

import argparse
from pathlib import Path

import rlcore
from rlcore.imitation.datasets import ExpertData, record_expert
from rlcore.trainers import checkpoint as ckpt_format


def collect_expert(
    *,
    algo: str,
    env_id: str,
    episodes: int,
    out: str | Path,
    checkpoint: str | Path | None = None,
    steps: int | None = None,
    seed: int = 0,
    minari: str | None = None,
) -> ExpertData:
    """Train (or load) an expert, record ``episodes`` deterministic episodes and save them to ``out``.

    Args:
        algo: an ``rlcore train`` algorithm (dqn, ddpg, td3, sac, vpg, a2c, ppo).
        env_id: gymnasium env id.
        episodes: episodes to record.
        out: directory for :meth:`rlcore.ReplayBuffer.save`.
        checkpoint: a run directory of ``rlcore train``. When it already holds a checkpoint the expert
            is loaded from it; otherwise it is trained there (default ``runs/expert-ENV-ALGO-sSEED``).
            Or a policy file of ``rlcore export-policy`` (``.npz``), loaded as it is.
        steps: training env steps (default: the ``rlcore train`` preset of the env).
        seed: seed of the expert's training and of the recorded episodes' resets.
        minari: also write the episodes as the Minari dataset of this id (:func:`export_minari`).

    Raises:
        RuntimeError: training the expert failed.
        FileNotFoundError, CheckpointError, ValueError: as :func:`rlcore.policy.load_policy` and
            :func:`record_episodes`.
        ImportError, ValueError: as :func:`export_minari`.
    """
    from rlcore.cli.parser import build_parser
    from rlcore.cli.train import train_command

    run_dir = Path(checkpoint) if checkpoint is not None else Path("runs") / f"expert-{env_id}-{algo}-s{seed}"
    if run_dir.is_file():  # a policy file of `rlcore export-policy`
        return record_expert(run_dir, env_id, episodes, out, seed=seed, minari=minari, algo=algo)
    if not ckpt_format.is_checkpoint(run_dir / "checkpoint"):
        argv = ["train", "--algo", algo, "--env", env_id, "--seed", str(seed), "--out", str(run_dir)]
        if steps is not None:
            argv += ["--steps", str(steps)]
        argv += ["--no-progress"]
        status = train_command(build_parser().parse_args(argv), argv)
        if status != 0:
            raise RuntimeError(f"training the expert failed (rlcore {' '.join(argv)} exited with {status})")
    return record_expert(run_dir, env_id, episodes, out, seed=seed, minari=minari, algo=algo)


def collect_expert_command(args: argparse.Namespace) -> int:
    """``rlcore collect-expert`` (called by :func:`rlcore.cli.main`)."""
    from rlcore.cli.common import UsageError

    try:
        data = collect_expert(
            algo=args.algo,
            env_id=args.env,
            episodes=args.episodes,
            out=args.out,
            checkpoint=args.checkpoint,
            steps=args.steps,
            seed=args.seed,
            minari=args.minari,
        )
    except (FileNotFoundError, ValueError, ImportError, rlcore.errors.RlcoreError) as e:
        raise UsageError(str(e)) from e
    print(
        f"expert: {args.env} {args.algo} return_mean={data.return_mean:.2f} return_std={data.return_std:.2f} "
        f"episodes={data.episodes} transitions={data.transitions} (saved to {data.path})"
    )
    if args.minari is not None:
        print(f"minari: dataset {args.minari} written (minari.load_dataset({args.minari!r}))")
    return 0
