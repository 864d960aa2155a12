"""What every ``rlcore`` command shares: the one-line :class:`UsageError`, envs, resume, run directories."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESUME_OWN = Path("\0own-checkpoint")
"""``--resume`` without a value: the run directory's own checkpoint (:func:`resolve_resume`)."""


class UsageError(Exception):
    """A user mistake, reported as one line without a traceback."""


def _make_envs(
    env_id: str, num_envs: int, *, backend: str = "gymnasium", async_batch: int | None = None, seed: int = 0
) -> Any:
    """``num_envs`` envs of ``env_id`` (:func:`rlcore.envs.make_vec`; ``--backend``, ``--async-batch``)."""
    import gymnasium as gym

    from rlcore.envs.make import make_vec
    from rlcore.errors import ApiUsageError, InvalidValueError

    if backend == "gymnasium":
        check_env_id(env_id)
    try:
        return make_vec(env_id, num_envs, backend=backend, async_batch=async_batch, seed=seed)  # type: ignore[arg-type]
    except gym.error.DependencyNotInstalled as e:
        raise UsageError(f"{env_id}: {e}") from e
    except (ApiUsageError, InvalidValueError) as e:
        raise UsageError(f"--backend {backend}: {e}") from e


def check_env_id(env_id: str) -> None:
    """Check that gymnasium knows ``env_id`` (after registering gymnasium-robotics', ale-py's and
    rlcore's own envs); imports gymnasium, not torch.

    Raises:
        UsageError: an unknown id, with the closest registered ids.
    """
    import difflib

    import gymnasium as gym

    from rlcore.envs.robotics import register_robotics

    if env_id in gym.registry:
        return
    register_robotics()
    if env_id.startswith("ALE/"):
        try:
            import ale_py

            gym.register_envs(ale_py)
        except ImportError:
            raise UsageError(f"{env_id}: Atari games need ale-py (pip install -e '.[atari]')") from None
    import rlcore.envs  # noqa: F401 - registers rlcore/CartPoleNoVel-v1

    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UsageError(
        f"unknown environment {env_id!r} (not registered in gymnasium; robotics envs need gymnasium-robotics){hint}"
    )


def load_resume(trainer: Any, args: argparse.Namespace) -> None:
    """Load ``--resume DIR`` (with ``--trust-env-state``) into ``trainer``; no-op without ``--resume``.

    Raises:
        UsageError: no checkpoint there, a refused checkpoint (damaged, more than data, another
            trainer, one that does not fit these flags), or one that already reached ``--steps``.
    """
    import sys
    import warnings

    from rlcore.envs.stepping import EnvsResetWarning
    from rlcore.errors import RlcoreError

    if args.resume is None:
        return
    try:
        with warnings.catch_warnings(record=True) as caught:  # the envs' reset: one line of ours below
            warnings.simplefilter("always", EnvsResetWarning)
            trainer.load_checkpoint(args.resume, trust_env_state=args.trust_env_state)
    except (FileNotFoundError, RlcoreError) as e:
        raise UsageError(f"--resume {args.resume}: {e}") from e
    except (KeyError, RuntimeError, ValueError) as e:
        raise UsageError(
            f"--resume {args.resume}: the checkpoint does not fit the trainer these flags build ({e!r})"
        ) from e
    if trainer.done:
        raise UsageError(
            f"--resume {args.resume}: the run already reached its --steps; pass a larger --steps"
        )
    for w in caught:
        if issubclass(w.category, EnvsResetWarning):
            print(
                "rlcore: resuming without the env snapshot (--trust-env-state loads it): every env starts a "
                "fresh episode; the learner, buffer, counters and random generators are restored",
                file=sys.stderr,
            )
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _resumed_capacity(path: Path, default: int) -> int:
    """The replay capacity of the run saved at ``path`` (a larger ``--steps`` on resume must not
    resize the buffer the checkpoint restores into); ``default`` when the checkpoint does not say
    (its errors are reported by :func:`load_resume`)."""
    from rlcore.errors import RlcoreError
    from rlcore.trainers import checkpoint

    try:
        capacity = checkpoint.read_info(path).get("buffer_capacity")
    except (FileNotFoundError, RlcoreError):
        return default
    return int(capacity) if isinstance(capacity, int) else default


#: what ``rlcore train`` and ``rlcore plot`` write into a run directory; a directory holding any of
#: these holds a run, and ``--overwrite`` removes these and nothing else
RUN_FILES = ("config.json", "metrics.jsonl", "tb", "checkpoint", "rollout.png", "train.png", "eval.png")


def _holds_run(path: Path) -> bool:
    return any((path / name).exists() for name in RUN_FILES)


def prepare_run_dir(args: argparse.Namespace, default: Path) -> Path:
    """Create and return the run directory of ``rlcore train``; an earlier run is never appended to
    by accident.

    * ``--resume CKPT``: ``--out``, else the run directory that holds ``CKPT`` (its parent when that
      has a ``config.json``), else ``default``. The run there is continued: ``metrics.jsonl`` and
      ``tb/`` are appended to, ``checkpoint/`` and ``config.json`` replaced.
    * ``--overwrite``: ``--out`` or ``default``; the files of an earlier run there (:data:`RUN_FILES`)
      are removed first, nothing else in the directory: inside ``checkpoint/`` only what checkpoint
      saves wrote, inside ``tb/`` only TensorBoard's event files (a user's own files there stay).
    * otherwise, an ``--out`` that holds a run is refused; when ``default`` holds one, the run goes to
      the first free ``default-run2``, ``default-run3``, ...

    Each case prints one line when it is not a fresh directory.

    Raises:
        UsageError: ``--out`` holds a run (without ``--resume``/``--overwrite``), or both flags given.
    """
    overwrite = getattr(args, "overwrite", False)
    if args.resume is not None:
        if overwrite:
            raise UsageError(
                "--overwrite and --resume exclude each other: --resume continues a run, --overwrite replaces it"
            )
        ckpt = Path(args.resume)
        out = args.out or (ckpt.parent if (ckpt.parent / "config.json").is_file() else default)
        if _holds_run(out):
            print(f"rlcore: continuing the run in {out} (appending to metrics.jsonl and tb/)")
        out.mkdir(parents=True, exist_ok=True)
        return out
    out = args.out or default
    if overwrite:
        from rlcore.logging import remove_tensorboard_files
        from rlcore.trainers import checkpoint

        removed = [name for name in RUN_FILES if (out / name).exists()]
        for name in removed:
            target = out / name
            if name == "checkpoint":  # only what checkpoint saves wrote: a user's files stay
                checkpoint.remove(target)
            elif name == "tb":  # only TensorBoard's event files
                remove_tensorboard_files(target)
            elif target.is_file() or target.is_symlink():
                target.unlink()
        if removed:
            print(f"rlcore: --overwrite: removed the earlier run's {', '.join(removed)} from {out}")
        out.mkdir(parents=True, exist_ok=True)
        return out
    if args.out is not None:
        if _holds_run(out):
            raise UsageError(
                f"--out {out} already holds a run: pass --overwrite to replace it, --resume "
                f"{out / 'checkpoint'} to continue it, or another --out"
            )
        out.mkdir(parents=True, exist_ok=True)
        return out
    candidate, k = out, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            break
        except FileExistsError:
            if candidate.is_dir() and not _holds_run(candidate):
                break
        k += 1
        candidate = out.with_name(f"{out.name}-run{k}")
    if candidate != out:
        print(
            f"rlcore: {out} holds an earlier run; this one writes {candidate} "
            f"(--overwrite replaces the earlier one, --resume {out / 'checkpoint'} continues it)"
        )
    return candidate


def default_run_dir(args: argparse.Namespace) -> Path:
    """``runs/ENV-ALGO[-her][-per]-sSEED``: the run directory of ``rlcore train`` without ``--out``."""
    her = "-her" if getattr(args, "her", False) else ""
    per = "-per" if getattr(args, "prioritized", False) else ""
    return Path("runs") / f"{args.env}-{args.algo}{her}{per}-s{args.seed}"


def resolve_resume(args: argparse.Namespace) -> Path | None:
    """The checkpoint directory ``--resume`` names: ``None`` without ``--resume``; with no value,
    the run directory's own (``--out`` or :func:`default_run_dir`, then ``checkpoint/``); a run
    directory stands for its ``checkpoint/``.

    Raises:
        UsageError: ``--resume`` without a value and no checkpoint in the run directory.
    """
    from rlcore.trainers import checkpoint

    if args.resume is None:
        return None
    if args.resume == RESUME_OWN:
        run_dir = args.out or default_run_dir(args)
        ckpt = run_dir / "checkpoint"
        if not checkpoint.is_checkpoint(ckpt):
            raise UsageError(
                f"--resume: no checkpoint in {ckpt}, so nothing to resume (leave out --resume to start)"
            )
        return ckpt
    path = Path(args.resume)
    if not checkpoint.is_checkpoint(path) and checkpoint.is_checkpoint(path / "checkpoint"):
        return path / "checkpoint"
    return path


def resume_hint(out: Path, command: Sequence[str]) -> str:
    """The command that continues the run in ``out``: ``command`` (the words after ``rlcore``, as the
    user typed them) with ``--resume`` (and without an earlier ``--resume``/``--overwrite``/``--out``)."""
    import shlex

    argv: list[str] = []
    rest = list(command)
    while rest:
        arg = rest.pop(0)
        name = arg.split("=", 1)[0]
        if name in ("--overwrite", "--trust-env-state"):
            continue
        if name in ("--out", "--resume"):
            takes_next = "=" not in arg and rest and (name == "--out" or not rest[0].startswith("-"))
            if takes_next:
                rest.pop(0)
            continue
        argv.append(arg)
    return "rlcore " + " ".join(shlex.quote(a) for a in [*argv, "--out", str(out), "--resume"])


@dataclass(frozen=True)
class Built:
    """What a family's builder (:mod:`rlcore.cli.off_policy`, :mod:`~rlcore.cli.on_policy`,
    :mod:`~rlcore.cli.imitation`) hands to the driver, :func:`rlcore.cli.train.train_command`."""

    trainer: Any
    """The trainer, built from the flags and the preset (not resumed yet)."""
    details: dict[str, Any]
    """What ``config.json`` records beside the command, the flags and the trainer's config."""
    total: int | None
    """The progress bar's length in env steps (``None``: no env steps, e.g. BC)."""
    every_iterations: int = 1
    """Write iterations without an episode or evaluation to the logs only every this many."""


def torch_device(name: str) -> Any:
    """The ``torch.device`` of ``--device`` (``auto``: cuda when available), checked by allocating
    on it.

    Raises:
        UsageError: the device is not usable here.
    """
    import torch

    from rlcore.algos.common import resolve_device

    try:
        device = resolve_device(name)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as e:
        raise UsageError(f"--device {name!r} is not usable: {str(e).splitlines()[0]}") from e
    return device


def run_to_end(built: Built, args: argparse.Namespace, out: Path, argv: Sequence[str]) -> int:
    """The tail of every ``rlcore train``: write ``config.json`` (the command ``argv``, the flags and
    ``built.details``), run the trainer to its horizon with the console, JSONL and TensorBoard loggers,
    checkpointing into ``out/checkpoint`` (every ``--checkpoint-every``, at the end, on
    SIGINT/SIGTERM), and print one summary line. Returns the exit status: 0, or 128 + the signal's
    number when a signal stopped the run (after its checkpoint, with the command that resumes it)."""
    import dataclasses
    import json
    import shlex
    import sys

    from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger, TensorBoardLogger
    from rlcore.trainers.signals import RunInterrupted

    trainer = built.trainer
    config = {
        "command": "rlcore " + shlex.join(argv),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "trainer_config": dataclasses.asdict(trainer.config),
        **built.details,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str))
    every = built.every_iterations
    logger = MultiLogger(
        ConsoleLogger(built.total, disable=args.no_progress),
        JsonlLogger(out / "metrics.jsonl", every_iterations=every),
        TensorBoardLogger(out / "tb", every_iterations=every),
    )
    interrupted: RunInterrupted | None = None
    try:
        last = trainer.run(logger, checkpoint_dir=out / "checkpoint")
    except RunInterrupted as e:
        interrupted = e
    finally:
        logger.close()
    if interrupted is not None:
        print(f"rlcore: {interrupted}; to continue: {resume_hint(out, argv)}", file=sys.stderr)
        return 128 + interrupted.signum
    assert last is not None and last.eval is not None
    summary = f"done: {args.env} {args.algo} env_steps={last.env_steps}"
    if trainer.progress == "grad_steps":
        summary += f" grad_steps={last.grad_steps}"
    summary += f" eval/return_mean={last.eval.return_mean:.2f}"
    if last.eval.success_rate == last.eval.success_rate:  # not NaN
        summary += f" eval/success_rate={last.eval.success_rate:.2f}"
    print(summary + f" (run dir: {out})")
    return 0
