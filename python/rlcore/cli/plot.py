"""``rlcore plot RUN_DIR``: learning-curve PNGs of a run directory."""


from __future__ import annotations

import argparse

from rlcore.cli.common import UsageError


def plot_command(args: argparse.Namespace) -> int:
    from rlcore.logging import plot_run

    try:
        paths = plot_run(args.run_dir, args.out)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from e
    for p in paths:
        print(p)
    return 0
