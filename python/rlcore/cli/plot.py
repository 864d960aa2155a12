"""``rlcore plot RUN_DIR [RUN_DIR ...]``: learning-curve PNGs of one run, or one figure, a CSV and
a table of several runs together (:mod:`rlcore.results`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rlcore.cli.common import UsageError


def plot_command(args: argparse.Namespace) -> int:
    if len(args.run_dirs) == 1 and args.reference is not None:
        raise UsageError("--reference draws beside several runs (seeds): give two or more RUN_DIRs")
    if len(args.run_dirs) == 1:
        from rlcore.logging import plot_run

        try:
            paths = plot_run(args.run_dirs[0], args.out)
        except (FileNotFoundError, ValueError) as e:
            raise UsageError(str(e)) from e
        for p in paths:
            print(p)
        return 0
    from rlcore.results import plot_seeds

    out = args.out or Path(os.path.commonpath([d.resolve() for d in args.run_dirs]))
    try:
        title = f"{out.name}: {args.metric} over {len(args.run_dirs)} runs"
        png, csv, table = plot_seeds(
            args.run_dirs,
            out,
            metric=args.metric,
            title=args.title or title,
            reference=args.reference,
            reference_label=args.reference_label,
        )
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from e
    print(table)
    print(png)
    print(csv)
    return 0
