"""What every ``rlcore`` command shares: the one-line :class:`UsageError`, envs, resume."""


from __future__ import annotations

import argparse
import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

ALGOS = ("dqn", "ddpg", "td3", "sac", "vpg", "a2c", "ppo")  # the last three: rlcore.cli.train_on_policy
IMITATION_ALGOS = ("bc", "gail")  # rlcore.cli.imitation, with --expert PATH



class UsageError(Exception):
    """A user mistake, reported as one line without a traceback."""


def _make_envs(env_id: str, num_envs: int) -> Any:
    import gymnasium as gym

    if env_id not in gym.registry:
        try:
            # gymnasium-robotics prints a notice about Adroit envs on import; keep the console clean.
            with (
                warnings.catch_warnings(),
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                warnings.simplefilter("ignore")
                import gymnasium_robotics

            gym.register_envs(gymnasium_robotics)
        except ImportError:
            pass
    if env_id not in gym.registry:
        raise UsageError(
            f"unknown environment {env_id!r} (not registered in gymnasium; robotics envs need gymnasium-robotics)"
        )
    try:
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    except gym.error.DependencyNotInstalled as e:
        raise UsageError(f"{env_id}: {e}") from e


def load_resume(trainer: Any, args: argparse.Namespace) -> None:
    """Load ``--resume DIR`` (with ``--trust-env-state``) into ``trainer``; no-op without ``--resume``.

    Raises:
        UsageError: no checkpoint there, a refused checkpoint (old format, more than data, another
            trainer, one that does not fit these flags), or one that already reached ``--steps``.
    """
    from rlcore.errors import RlcoreError

    if args.resume is None:
        return
    try:
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
