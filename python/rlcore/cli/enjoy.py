"""``rlcore enjoy RUN_DIR``: watch a trained agent. Loads the run's checkpoint
(:func:`rlcore.policy.load_policy`), runs ``--episodes`` episodes with the evaluation protocol of the
trainers (deterministic policy, whole episodes spread over the envs:
:func:`rlcore.collect.evaluate.evaluate`) and prints the return's mean ± std; ``--video DIR``
records every episode as an MP4 with gymnasium's ``RecordVideo`` (needs the ``video`` extra:
moviepy, and pygame to draw the classic-control envs).

Examples::

    rlcore enjoy runs/CartPole-v1-ppo-s0
    rlcore enjoy runs/Pendulum-v1-sac-s0 --episodes 20 --seed 7
    rlcore enjoy runs/Pendulum-v1-sac-s0 --episodes 3 --video videos/pendulum
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "enjoy_command"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``enjoy`` command to ``rlcore``'s sub-parsers (``parser.add_subparsers()``)."""
    enjoy = subparsers.add_parser(
        "enjoy",
        help="evaluate a trained run: N episodes of its deterministic policy, mean ± std, optional videos",
        description="Load RUN_DIR's checkpoint, run --episodes episodes of its deterministic policy (the "
        "evaluation protocol of `rlcore train`) and print the return's mean ± std over them; --video DIR "
        "records them as MP4 files.",
    )
    enjoy.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="run directory written by `rlcore train`, or a policy file of `rlcore export-policy`",
    )
    enjoy.add_argument("--episodes", type=_positive, default=10, help="episodes to run (default 10)")
    enjoy.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the first reset; envs and episodes follow from it (default 0)",
    )
    enjoy.add_argument(
        "--num-envs", type=_positive, default=1, help="envs stepped side by side (default 1; 1 with --video)"
    )
    enjoy.add_argument(
        "--video",
        type=Path,
        default=None,
        metavar="DIR",
        help="record every episode into DIR as MP4 (gymnasium's RecordVideo; needs the video extra: "
        "pip install -e '.[video]', from a clone pip install '.[video]')",
    )
    enjoy.add_argument(
        "--device", default="cpu", help="torch device of the policy: cpu, cuda, auto (default cpu)"
    )
    return enjoy


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def enjoy_command(args: argparse.Namespace) -> int:
    """Run ``rlcore enjoy`` (called by :func:`rlcore.cli.main`); prints one result line, returns 0.

    Raises:
        UsageError: not a run directory, a checkpoint that does not load, ``--video`` without
            moviepy or with more than one env or an Atari game.
    """
    from rlcore.cli.common import UsageError

    if args.video is not None and args.num_envs != 1:
        raise UsageError("--video records one env: leave out --num-envs")
    if args.video is not None and importlib.util.find_spec("moviepy") is None:
        raise UsageError(
            "--video needs moviepy (gymnasium's RecordVideo writes MP4 files with it): "
            "pip install -e '.[video]' (from a clone: pip install '.[video]')"
        )
    import gymnasium as gym
    import torch

    from rlcore.collect.evaluate import evaluate
    from rlcore.errors import RlcoreError
    from rlcore.policy import load_policy, make_eval_envs

    torch.set_num_threads(1)
    try:
        policy = load_policy(args.run_dir, device=args.device)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from e
    except (RlcoreError, ValueError, RuntimeError) as e:
        raise UsageError(f"{args.run_dir}: {e}") from e
    wrappers: tuple[Any, ...] = ()
    render_mode = None
    if args.video is not None:
        from gymnasium.wrappers import RecordVideo

        video_dir, prefix = args.video, f"{policy.env_id.replace('/', '-')}-{policy.algo}"
        render_mode = "rgb_array"
        # pygame draws the classic-control envs off screen (rgb_array): no display is needed, and
        # without one SDL's default video driver prints an error line about XDG_RUNTIME_DIR
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        wrappers = (
            lambda env: RecordVideo(env, str(video_dir), episode_trigger=lambda _: True, name_prefix=prefix),
        )
    try:
        envs = make_eval_envs(policy.env_id, args.num_envs, render_mode=render_mode, wrappers=wrappers)
    except RlcoreError as e:
        raise UsageError(str(e)) from e
    actor: Any = policy
    if policy.recurrent:
        from rlcore.collect.recurrent import RecurrentActor

        actor = RecurrentActor(policy.algorithm, deterministic=True, state_key=None)
    try:
        stats = evaluate(actor, envs, args.episodes, seed=args.seed)
    except gym.error.DependencyNotInstalled as e:  # rendering: pygame for classic control, ...
        raise UsageError(f"--video: {policy.env_id} cannot render here: {e}") from e
    finally:
        envs.close()  # RecordVideo writes the last episode's file on close
    line = (
        f"{policy.env_id} {policy.algo}: return {stats.return_mean:.2f} ± {stats.return_std:.2f} over "
        f"{stats.episodes} episodes (length {stats.length_mean:.1f}"
    )
    if stats.success_rate == stats.success_rate:  # not NaN
        line += f", success rate {stats.success_rate:.2f}"
    line += f"; deterministic policy of {args.run_dir}, seed {args.seed})"
    print(line)
    if args.video is not None:
        print(f"videos: {len(sorted(Path(args.video).glob('*.mp4')))} MP4 files in {args.video}")
    return 0
