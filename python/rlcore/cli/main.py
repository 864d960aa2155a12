"""``rlcore`` command line: ``rlcore train ...`` and ``rlcore plot RUN_DIR``.

Examples::

    rlcore train --algo ddpg --env FetchReach-v4 --her --steps 5000 --seed 0
    rlcore train --algo sac --env Pendulum-v1 --steps 15000
    rlcore train --algo dqn --env CartPole-v1 --n-step 3 --prioritized
    rlcore plot runs/FetchReach-v4-ddpg-her-s0

Each run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard events under ``tb/``, a
final ``checkpoint/`` and, after ``rlcore plot``, learning-curve PNGs. Bad arguments print one line
``rlcore: error: ...`` and exit with status 2."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rlcore.cli.common import UsageError
from rlcore.cli.parser import build_parser, subparser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlcore`` console script; returns the exit status.

    The arguments are parsed and checked before torch or gymnasium is imported, so a mistake is
    answered at once."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            from rlcore.cli.algorithms import check_flags

            complaint = check_flags(subparser(parser, "train"), args)
            if complaint is not None:
                raise UsageError(complaint)
            if args.seeds is not None:
                from rlcore.cli.seeds import run_seeds

                return run_seeds(parser, args, argv)
            from rlcore.cli.train import train_command

            return train_command(args, argv)
        if args.command == "collect-expert":
            from rlcore.cli.collect_expert import collect_expert_command

            return collect_expert_command(args)
        if args.command == "export-policy":
            from rlcore.cli.export_policy import export_policy_command

            return export_policy_command(args)
        if args.command == "enjoy":
            from rlcore.cli.enjoy import enjoy_command

            return enjoy_command(args)
        from rlcore.cli.plot import plot_command

        return plot_command(args)
    except UsageError as e:
        print(f"rlcore: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlcore: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
