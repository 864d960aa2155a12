"""``rlcore train ... --seeds 0-4 [--jobs J]``: one ``rlcore train`` process per seed, ``J`` at a
time, each in its own run directory (``OUT/sSEED`` with ``--out``, else ``runs/ENV-ALGO-sSEED``).

Each seed's run is an ordinary run: checkpointed every ``--checkpoint-every`` and on a signal, so
the same command with ``--resume`` (no value) continues every unfinished seed from its checkpoint,
starts the seeds that have none and skips the finished ones. SIGINT and SIGTERM are passed on to
every running seed, which checkpoints and stops; seeds not started yet are not started. With
``--jobs`` above 1 each seed's output goes to ``RUN_DIR/train.log`` and one line per seed says how
it ended.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rlcore.cli.common import RESUME_OWN, UsageError, default_run_dir
from rlcore.cli.parser import subparser

__all__ = ["run_seeds", "seed_argv"]

LOG_FILE = "train.log"
"""Where a seed's output goes when several run at once."""

_DROPPED = {"seeds", "jobs", "seed", "out", "resume", "overwrite", "command"}


def seed_argv(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The ``rlcore train`` flags of ``args`` that differ from their defaults, as a command line
    (without the ones :func:`run_seeds` sets per seed: ``--seed``, ``--out``, ``--resume``)."""
    train = subparser(parser, "train")
    argv: list[str] = []
    for action in train._actions:
        if not action.option_strings or action.dest in _DROPPED or action.dest == "help":
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = action.option_strings[0]
        if isinstance(action, argparse.BooleanOptionalAction):
            argv.append(flag if value else f"--no-{flag[2:]}")
        elif action.nargs == 0:  # store_true
            argv.append(flag)
        else:
            argv += [flag, str(value)]
    return argv


@dataclass
class _Seed:
    seed: int
    out: Path
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    status: str = "waiting"


def _plan(args: argparse.Namespace, base: list[str]) -> list[_Seed]:
    """One :class:`_Seed` per seed: its run directory and command line; with ``--resume``, a
    seed whose checkpoint exists continues it, one whose run already reached ``--steps`` is
    skipped, one without a checkpoint starts again (replacing what a killed start left)."""
    from rlcore.trainers import checkpoint

    plan = []
    for seed in args.seeds:
        out = args.out / f"s{seed}" if args.out is not None else default_run_dir(argparse.Namespace(**{**vars(args), "seed": seed}))
        argv = [*base, "--seed", str(seed), "--out", str(out)]
        ckpt = out / "checkpoint"
        status = "waiting"
        if args.resume is not None:
            if checkpoint.is_checkpoint(ckpt):
                if _finished(ckpt, args):
                    status = "finished before"
                argv += ["--resume", str(ckpt)]
            elif (out / "config.json").exists():
                argv.append("--overwrite")  # killed before its first checkpoint: start it again
        elif args.overwrite:
            argv.append("--overwrite")
        plan.append(_Seed(seed, out, argv, status=status))
    return plan


def _finished(ckpt: Path, args: argparse.Namespace) -> bool:
    """Whether the checkpoint at ``ckpt`` already reached this command's ``--steps`` (read from
    the JSON manifest and counters only)."""
    import json

    from rlcore.errors import RlcoreError
    from rlcore.trainers import checkpoint

    try:
        info = checkpoint.read_info(ckpt)
        manifest = json.loads((ckpt / checkpoint.MANIFEST).read_text(encoding="utf-8"))
        counters = json.loads((ckpt / manifest["data_dir"] / checkpoint.COUNTERS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError, RlcoreError):
        return False
    config = info.get("config", {})
    for horizon, counter in (("max_env_steps", "env_steps"), ("max_grad_steps", "grad_steps")):
        if config.get(horizon) is not None and counter in counters:
            wanted = args.steps if args.steps is not None else config[horizon]
            return int(counters[counter]) >= int(wanted)
    return False


def run_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    """Run every seed of ``args.seeds`` (module docstring; ``argv``: the command line ``args``
    were parsed from); returns 0 when every seed finished,
    else the first non-zero exit status (130/143 after a signal).

    Raises:
        UsageError: ``--seed`` together with ``--seeds``, or ``--resume CHECKPOINT_DIR`` (with
            ``--seeds`` it takes no value: each seed resumes its own).
    """
    if any(a == "--seed" or a.startswith("--seed=") for a in argv):
        raise UsageError("--seed and --seeds exclude each other")
    if args.resume is not None and args.resume != RESUME_OWN:
        raise UsageError("with --seeds, --resume takes no value: each seed continues its own run directory")
    if args.resume is not None and args.overwrite:
        raise UsageError("--overwrite and --resume exclude each other: --resume continues a run, --overwrite replaces it")
    base = ["train", *seed_argv(parser, args)]
    plan = _plan(args, base)
    jobs = min(args.jobs, len(plan))
    stop: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        del frame
        if stop:  # a second signal: abort the seeds at once
            for s in plan:
                if s.process is not None and s.process.poll() is None:
                    s.process.kill()
            raise KeyboardInterrupt
        stop.append(signum)
        for s in plan:
            if s.process is not None and s.process.poll() is None:
                s.process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _drive(plan, jobs, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for s in plan:
            if s.log is not None:
                s.log.close()
    print(f"rlcore: seeds {', '.join(str(s.seed) for s in plan)}:")
    status = 0
    for s in plan:
        print(f"  seed {s.seed}: {s.status} ({s.out})")
        code = s.process.returncode if s.process is not None else 0
        if code and not status:
            status = code
    if stop and not status:
        status = 128 + stop[0]
    return status


def _drive(plan: list[_Seed], jobs: int, stop: list[int]) -> None:
    """Start the waiting seeds, ``jobs`` at a time, until all ended or a signal came."""
    pending = [s for s in plan if s.status == "waiting"]
    running: list[_Seed] = []
    while pending or running:
        while pending and len(running) < jobs and not stop:
            s = pending.pop(0)
            _start(s, quiet=jobs > 1)
            running.append(s)
        if stop and not running:
            break
        time.sleep(0.2)
        for s in list(running):
            code = s.process.poll() if s.process is not None else 0
            if code is None:
                continue
            running.remove(s)
            s.status = "finished" if code == 0 else f"stopped (exit status {code})"
            if jobs > 1:
                print(f"rlcore: seed {s.seed} {s.status}: {s.out}", flush=True)
        if stop:
            for s in pending:
                s.status = "not started (stopped)"
            pending.clear()


def child_command(argv: list[str], *, quiet: bool) -> list[str]:
    """The child process's command line for one seed's ``rlcore train`` arguments ``argv``; a quiet
    seed (output to its log) also hides the progress bar, once."""
    extra = ["--no-progress"] if quiet and "--no-progress" not in argv else []
    return [sys.executable, "-m", "rlcore.cli", *argv, *extra]


def _start(s: _Seed, *, quiet: bool) -> None:
    """Start ``rlcore train`` for one seed (a child process of this Python)."""
    cmd = child_command(s.argv, quiet=quiet)
    if quiet:
        s.out.mkdir(parents=True, exist_ok=True)
        s.log = open(s.out / LOG_FILE, "ab")  # noqa: SIM115 - closed by run_seeds
        s.log.write(f"$ rlcore {shlex.join(s.argv)}\n".encode())
        s.log.flush()
        print(f"rlcore: seed {s.seed} started, output in {s.out / LOG_FILE}", flush=True)
        s.process = subprocess.Popen(cmd, stdout=s.log, stderr=subprocess.STDOUT, start_new_session=True)
    else:
        print(f"rlcore: seed {s.seed}: rlcore {shlex.join(s.argv)}", flush=True)
        s.process = subprocess.Popen(cmd, start_new_session=True)  # signals reach it through us only
    s.status = "running"
