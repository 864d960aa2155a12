"""The ``rlcore`` argument parser: every command and flag, with their help texts and the
``type=`` functions that check their ranges. Imports nothing heavy: a mistake is answered before
torch or gymnasium loads."""

from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path
from typing import NoReturn

from rlcore.cli.algorithms import ALGORITHMS
from rlcore.cli.common import RESUME_OWN

EXAMPLES = """examples:
  rlcore train --algo sac --env Pendulum-v1 --steps 15000
  rlcore train --algo ddpg --env FetchReach-v4 --her --steps 5000
  rlcore train --algo dqn --env CartPole-v1 --n-step 3 --prioritized
  rlcore train --algo sac --env HalfCheetah-v5 --steps 300000 --seeds 0-4 --jobs 2 --out runs/cheetah
  rlcore train --algo sac --env HalfCheetah-v5 --steps 300000 --seeds 0-4 --jobs 2 --out runs/cheetah --resume
  rlcore plot runs/cheetah/s0 runs/cheetah/s1 runs/cheetah/s2 runs/cheetah/s3 runs/cheetah/s4
"""

EXPERT_ALGOS = tuple(a.name for a in ALGORITHMS.values() if a.family in ("off-policy", "on-policy"))
"""The algorithms ``rlcore collect-expert`` can train an expert with."""

DEFAULT_CHECKPOINT_EVERY = 25_000
"""``--checkpoint-every`` when not given: a MuJoCo SAC run on one core loses at most ~5 minutes."""


def positive_int(text: str) -> int:
    """argparse ``type``: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse ``type``: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
    return value


def seed_list(text: str) -> list[int]:
    """argparse ``type`` of ``--seeds``: ``0-4`` (inclusive), ``0,3,7`` or a mix (``0-2,10``);
    distinct seeds >= 0, in the order given."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if dash else first
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seeds like 0-4 or 0,3,7, got {text!r}") from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(f"expected seeds like 0-4 or 0,3,7, got {text!r}")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds names a seed twice: {text!r}")
    return seeds


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:  # argparse lists the choices; say which one was probably meant
            options = re.findall(r"[\w-]+", choice.group(2))
            close = difflib.get_close_matches(choice.group(1), options, n=1, cutoff=0.5)
            if close:
                message += f"; did you mean {close[0]!r}?"
        self.exit(2, f"rlcore: error: {message} (see `{self.prog} --help`)\n")


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the command ``name`` (``"train"``, ...) inside :func:`build_parser`'s parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def build_parser() -> argparse.ArgumentParser:
    import rlcore

    names = ", ".join(a.name.upper() for a in ALGORITHMS.values())
    parser = _Parser(
        prog="rlcore",
        description=f"Train RL agents ({names}) on gymnasium envs with the rlcore replay core.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rlcore {rlcore.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser(
        "train",
        help="train an agent",
        description=f"Train {names} on a gymnasium env. A flag that does not apply to --algo is refused.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--algo", required=True, choices=tuple(ALGORITHMS), help="algorithm")
    train.add_argument(
        "--expert",
        type=Path,
        default=None,
        help="with --algo bc/gail/dac: dataset of `rlcore collect-expert`, a D4RL-format file or a Minari id",
    )
    # offline RL (issue 42, rlcore.cli.offline)
    train.add_argument(
        "--dataset",
        default=None,
        help="with --algo td3bc/iql/cql: a D4RL-format HDF5 file, a local Minari dataset id or an rlcore buffer save",
    )
    train.add_argument(
        "--ref-returns",
        type=float,
        nargs=2,
        default=None,
        metavar=("RANDOM", "EXPERT"),
        help="with --algo td3bc/iql/cql: returns of a random and an expert policy for D4RL's normalised score "
        "(default: the Minari dataset's, else D4RL's for the env's task)",
    )
    train.add_argument(
        "--env", required=True, help="gymnasium env id, e.g. FetchReach-v4, Pendulum-v1, CartPole-v1"
    )
    train.add_argument(
        "--her", action="store_true", help="hindsight experience replay (goal envs with dict observations)"
    )
    train.add_argument(
        "--n-step", type=positive_int, default=None, help="n of the n-step return (default 1; 3 for r2d2)"
    )
    train.add_argument(
        "--prioritized", action="store_true", help="prioritized replay (alpha 0.6, beta 0.4 -> 1.0)"
    )
    train.add_argument(
        "--value-rescaling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --algo r2d2: learn h(Q), R2D2's invertible value rescaling (default: the preset's)",
    )
    train.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="training env steps; gradient steps for bc (default: per env)",
    )
    train.add_argument("--seed", type=int, default=0, help="seed of envs, networks and buffer (default 0)")
    train.add_argument(
        "--seeds",
        type=seed_list,
        default=None,
        metavar="LIST",
        help="run several seeds, e.g. 0-4 or 0,3,7: one run per seed in its own process, each in "
        "OUT/sSEED (with --out) or runs/ENV-ALGO-sSEED, each checkpointed and resumable with --resume",
    )
    train.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="with --seeds: how many seeds run at once, as parallel processes (default 1: one after another)",
    )
    train.add_argument(
        "--checkpoint-every",
        type=non_negative_int,
        default=DEFAULT_CHECKPOINT_EVERY,
        metavar="STEPS",
        help=f"write RUN_DIR/checkpoint every this many env steps (gradient steps for bc), besides the one "
        f"at the end and the one written on SIGINT/SIGTERM (a second signal aborts at once); 0: only those "
        f"(default {DEFAULT_CHECKPOINT_EVERY:,})",
    )
    train.add_argument(
        "--warmup-env-steps",
        type=non_negative_int,
        default=None,
        help="off-policy algorithms: env steps of uniformly random actions before the first update "
        "(learning_starts; default: per env)",
    )
    train.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda, cuda:1 ... (default auto)"
    )
    train.add_argument("--num-envs", type=positive_int, default=None, help="training envs (default: per env)")
    train.add_argument(
        "--backend",
        choices=("gymnasium", "envpool"),
        default="gymnasium",
        help="training envs: gymnasium vector envs or EnvPool (pip install -e '.[envpool]'); default gymnasium",
    )
    train.add_argument(
        "--async-batch",
        type=positive_int,
        default=None,
        help="asynchronous collection: each step acts on the first B envs to finish (EnvPool, off-policy "
        "algorithms; --num-envs a multiple of B); with gymnasium, B = --num-envs gives AsyncVectorEnv",
    )
    train.add_argument(
        "--out",
        type=Path,
        default=None,
        help="run directory (default runs/ENV-ALGO[-her]-sSEED, or -run2, -run3, ... when that holds an "
        "earlier run); an --out that holds a run is refused unless --overwrite or --resume",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in the run directory: first remove its config.json, metrics.jsonl, tb/, "
        "checkpoint/ and plots (nothing else)",
    )
    train.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument(
        "--distributed",
        action="store_true",
        help="collectors and replay shards as Ray actors (off-policy algorithms; pip install -e '.[ray]')",
    )
    train.add_argument(
        "--num-collectors",
        type=positive_int,
        default=2,
        help="with --distributed: collector actors (default 2)",
    )
    train.add_argument(
        "--num-shards", type=positive_int, default=2, help="with --distributed: replay shards (default 2)"
    )
    train.add_argument(
        "--ray-address",
        default=None,
        help="with --distributed: join this Ray cluster (default: a local Ray listening on 127.0.0.1 only; "
        "see docs/distributed.md for token authentication)",
    )
    train.add_argument(
        "--resume",
        type=Path,
        nargs="?",
        const=RESUME_OWN,
        default=None,
        metavar="CHECKPOINT_DIR",
        help="continue the run saved in this checkpoint directory (RUN_DIR/checkpoint, or RUN_DIR), with the "
        "same flags (a larger --steps to go further), appending to RUN_DIR's metrics.jsonl and tb/ (or "
        "--out's); without a value, the run's own checkpoint in --out (or the default run directory), and "
        "with --seeds each seed's, starting the seeds that have none and skipping the finished ones; "
        "nothing in it runs as code",
    )
    train.add_argument(
        "--trust-env-state",
        action="store_true",
        help="with --resume: also unpickle the checkpoint's env snapshot (env_state.pkl) to continue every "
        "env exactly; it can run code, so only for checkpoints you trust (default: envs restart from a "
        "seeded reset)",
    )
    expert = sub.add_parser(
        "collect-expert",
        help="train (or load) an expert and record a dataset of its deterministic policy",
        description="Train an expert with `rlcore train` (or load --checkpoint), roll out its deterministic "
        "policy for --episodes episodes and save them with ReplayBuffer.save (load with ReplayBuffer.load).",
    )
    expert.add_argument("--algo", required=True, choices=EXPERT_ALGOS, help="algorithm of the expert")
    expert.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1, Pendulum-v1")
    expert.add_argument("--episodes", type=positive_int, required=True, help="episodes to record")
    expert.add_argument("--out", type=Path, required=True, help="directory of the saved dataset")
    expert.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="run directory of `rlcore train`: loaded if it holds a checkpoint, else the expert is trained "
        "there (default runs/expert-ENV-ALGO-sSEED); or a policy file of `rlcore export-policy` (.npz)",
    )
    expert.add_argument(
        "--steps", type=positive_int, default=None, help="training env steps (default: per env)"
    )
    expert.add_argument("--seed", type=int, default=0, help="seed of training and recording (default 0)")
    expert.add_argument(
        "--minari",
        default=None,
        metavar="NAME",
        help="also write a Minari dataset of this id, e.g. rlcore/hopper-expert-v0 (pip install -e '.[minari]')",
    )
    plot = sub.add_parser(
        "plot",
        help="draw learning curves of a run, or of several runs (seeds) together",
        description="One RUN_DIR: PNG learning curves of every metric in RUN_DIR/metrics.jsonl. Several: one "
        "figure of --metric over all of them (each run, their mean with a 95 % bootstrap interval, their "
        "interquartile mean), the same as CSV, and a table of final and best values.",
    )
    plot.add_argument(
        "run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="run directories written by `rlcore train`"
    )
    plot.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the PNGs (default: RUN_DIR; for several runs their common parent directory)",
    )
    plot.add_argument(
        "--metric",
        default="eval/return_mean",
        help="with several runs: the metric to aggregate (default eval/return_mean)",
    )
    plot.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="CSV",
        help="with several runs: a published curve to draw beside them, a CSV with the header env_step,mean,std "
        "(drawn as its mean and a mean ± std band)",
    )
    plot.add_argument(
        "--reference-label", default=None, help="legend label of --reference (default: its file name)"
    )
    plot.add_argument("--title", default=None, help="with several runs: the figure's title")
    from rlcore.cli.enjoy import add_parser as add_enjoy_parser  # rlcore enjoy RUN_DIR

    add_enjoy_parser(sub)
    from rlcore.cli.export_policy import add_parser as add_export_parser  # rlcore export-policy RUN_DIR FILE

    add_export_parser(sub)
    return parser
