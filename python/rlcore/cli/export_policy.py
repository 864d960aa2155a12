"""``rlcore export-policy RUN_DIR FILE.npz``: the acting networks of a trained run as one small
data-only file (:meth:`rlcore.policy.TrainedPolicy.save`), with what the run measured.

Examples::

    rlcore export-policy runs/Hopper-v5-sac-s0 experts/Hopper-v5-sac.npz
    rlcore enjoy experts/Hopper-v5-sac.npz           # load_policy reads it like a run directory
    rlcore collect-expert --algo sac --env Hopper-v5 --checkpoint experts/Hopper-v5-sac.npz \\
        --episodes 100 --out data/hopper-expert
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "export_policy_command", "run_summary"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export-policy`` command to ``rlcore``'s sub-parsers."""
    export = subparsers.add_parser(
        "export-policy",
        help="write a trained run's acting networks to one small .npz file (load_policy reads it)",
        description="Write RUN_DIR's acting networks (actor or Q-network and observation normaliser; no "
        "critic, optimizer or buffer) and its configuration to FILE.npz, with the run's command, env steps "
        "and last evaluation. rlcore.load_policy, `rlcore enjoy` and `rlcore collect-expert --checkpoint` "
        "read the file.",
    )
    export.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="run directory written by `rlcore train`"
    )
    export.add_argument("file", type=Path, metavar="FILE.npz", help="the policy file to write")
    export.add_argument("--overwrite", action="store_true", help="replace FILE.npz if it exists")
    return export


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What a run measured, for a policy file's metadata: its command, env steps, and its last
    evaluation (return mean and std over how many episodes), read from ``config.json`` and
    ``metrics.jsonl``."""
    info = json.loads((run_dir / "config.json").read_text())
    summary: dict[str, Any] = {"command": info.get("command"), "seed": info["args"].get("seed")}
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        evals = [
            row for row in map(json.loads, metrics.read_text().splitlines()) if "eval/return_mean" in row
        ]
        if evals:
            last = evals[-1]
            summary.update(
                env_steps=int(last["time/env_steps"]),
                eval_return_mean=round(float(last["eval/return_mean"]), 2),
                eval_return_std=round(float(last["eval/return_std"]), 2),
                eval_episodes=int(last["eval/episodes"]),
            )
    return summary


def export_policy_command(args: argparse.Namespace) -> int:
    """``rlcore export-policy`` (called by :func:`rlcore.cli.main`)."""
    from rlcore.cli.common import UsageError
    from rlcore.errors import RlcoreError
    from rlcore.policy import load_policy

    try:
        policy = load_policy(args.run_dir)
        path = policy.save(args.file, overwrite=args.overwrite, meta=run_summary(args.run_dir))
    except (FileNotFoundError, FileExistsError, ValueError, RlcoreError) as e:
        raise UsageError(str(e)) from e
    print(
        f"{policy.env_id} {policy.algo}: acting networks written to {path} ({path.stat().st_size / 1e3:.0f} kB)"
    )
    return 0
