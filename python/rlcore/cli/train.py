"""``rlcore train``: the one driver. It checks the flags against the algorithm's family
(:mod:`rlcore.cli.algorithms`) before anything heavy is imported, lets the family's builder make
the trainer (:mod:`~rlcore.cli.off_policy`, :mod:`~rlcore.cli.on_policy`,
:mod:`~rlcore.cli.imitation`), resumes it when asked, prepares the run directory and runs it to
the end with checkpoints (:func:`rlcore.cli.common.run_to_end`)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence

from rlcore.cli.algorithms import ALGORITHMS, Family
from rlcore.cli.common import (
    Built,
    check_env_id,
    default_run_dir,
    load_resume,
    prepare_run_dir,
    resolve_resume,
    run_to_end,
)

__all__ = ["BUILDERS", "train_command"]

BUILDERS: dict[Family, str] = {
    "off-policy": "rlcore.cli.off_policy:build_off_policy",
    "recurrent": "rlcore.cli.off_policy:build_off_policy",
    "on-policy": "rlcore.cli.on_policy:build_on_policy",
    "imitation": "rlcore.cli.imitation:build_imitation",
    "offline": "rlcore.cli.imitation:build_imitation",
    "offline-rl": "rlcore.cli.offline:build_offline",
}
"""The builder of each family (``module:function``), imported when a run of that family starts."""


def _builder(family: Family) -> Callable[[argparse.Namespace], Built]:
    module, _, name = BUILDERS[family].partition(":")
    builder: Callable[[argparse.Namespace], Built] = getattr(importlib.import_module(module), name)
    return builder


def train_command(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run ``rlcore train`` with the parsed (and flag-checked: :func:`rlcore.cli.algorithms.check_flags`)
    ``args``; ``argv`` are the words after ``rlcore`` that gave them (``config.json`` records them as
    the run's command, and the resume hint repeats them). Returns the exit status (0, or 128 + a
    signal that stopped the run after its checkpoint).

    Raises:
        UsageError: anything the builder refuses, a checkpoint that does not fit, a run
            directory that holds another run.
    """
    if args.backend == "gymnasium":
        check_env_id(args.env)
    args.resume = resolve_resume(args)
    built = _builder(ALGORITHMS[args.algo].family)(args)
    load_resume(built.trainer, args)
    out = prepare_run_dir(args, default_run_dir(args))
    return run_to_end(built, args, out, argv)
