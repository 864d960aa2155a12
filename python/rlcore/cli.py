"""``rlcore`` command line: ``rlcore train ...`` and ``rlcore plot RUN_DIR``.

Examples::

    rlcore train --algo ddpg --env FetchReach-v4 --her --steps 5000 --seed 0
    rlcore train --algo sac --env Pendulum-v1 --steps 15000
    rlcore train --algo dqn --env CartPole-v1 --n-step 3 --prioritized
    rlcore plot runs/FetchReach-v4-ddpg-her-s0

Each run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard events under ``tb/``, a
final ``checkpoint/`` and, after ``rlcore plot``, learning-curve PNGs. Bad arguments print one line
``rlcore: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import json
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main"]

ALGOS = ("dqn", "ddpg", "td3", "sac", "vpg", "a2c", "ppo")  # the last three: rlcore.cli_onpolicy
IMITATION_ALGOS = ("bc", "gail")  # rlcore.imitation, with --expert PATH


class UsageError(Exception):
    """A user mistake, reported as one line without a traceback."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"rlcore: error: {message} (see `{self.prog} --help`)\n")


@dataclass(frozen=True)
class Preset:
    """Per-environment defaults of ``rlcore train`` (all overridable by flags)."""

    num_envs: int = 1
    """Training envs (a SyncVectorEnv)."""
    steps: int = 50_000
    """Default ``--steps``."""
    capacity: int = 1_000_000
    """Replay capacity in rows."""
    gamma: float = 0.99
    """Discount."""
    trainer: dict[str, Any] = field(default_factory=dict)
    """Extra ``OffPolicyTrainerConfig`` fields."""
    eval_every_env_steps: int = 5_000
    """Evaluate every this many env steps."""
    algo: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra config fields per algorithm name."""
    dqn_lr_anneal: bool = False
    """Anneal DQN's learning rate linearly to 0 over the run (``--steps``)."""


def preset_for(env_id: str, *, her: bool) -> Preset:
    """The defaults for ``env_id`` (goal envs with HER, Pendulum, CartPole, MuJoCo, anything else)."""
    if her:
        gamma = 0.98
        clip = (-1.0 / (1.0 - gamma), 0.0)
        return Preset(
            num_envs=2,
            steps=5_000,
            capacity=1_000_000,
            gamma=gamma,
            trainer={
                "collect_env_steps": 50,
                "utd_ratio": 0.5,
                "batch_size": 256,
                "warmup_env_steps": 0,
                "eval_episodes": 10,
            },
            eval_every_env_steps=500,
            algo={
                "ddpg": {"q_target_clip": clip},
                "td3": {
                    "q_target_clip": clip,
                    "normalize_obs": True,
                    "exploration_noise": 0.2,
                    "hidden": (256, 256, 256),
                    "actor_lr": 1e-3,
                    "critic_lr": 1e-3,
                    "tau": 0.05,
                },
                "sac": {
                    "q_target_clip": clip,
                    "normalize_obs": True,
                    "hidden": (256, 256, 256),
                    "actor_lr": 1e-3,
                    "critic_lr": 1e-3,
                    "alpha_lr": 1e-3,
                    "tau": 0.05,
                },
                "dqn": {},
            },
        )
    if env_id.startswith("CartPole"):
        return Preset(
            steps=50_000,
            capacity=100_000,
            trainer={"collect_env_steps": 256, "utd_ratio": 0.5, "batch_size": 64, "warmup_env_steps": 1_000},
            eval_every_env_steps=5_000,
            algo={
                "dqn": {
                    "hidden": (256, 256),
                    "lr": 2.3e-3,
                    "target_update_interval": 128,
                    "eps_decay_env_steps": 8_000,
                    "eps_end": 0.04,
                }
            },
            # Without annealing, DQN with these zoo settings reaches 500 but keeps oscillating
            # (final evaluations 500 and 194 on two seeds); annealed, 5/5 seeds end at 500.
            dqn_lr_anneal=True,
        )
    if env_id.startswith("Pendulum"):
        return Preset(
            steps=20_000,
            capacity=200_000,
            trainer={"collect_env_steps": 1, "utd_ratio": 1.0, "batch_size": 256, "warmup_env_steps": 1_000},
            eval_every_env_steps=1_000,
            algo={
                "ddpg": {"random_action_prob": 0.0, "action_l2": 0.0, "exploration_noise": 0.1, "tau": 0.005}
            },
        )
    mujoco = (
        "HalfCheetah",
        "Hopper",
        "Walker2d",
        "Ant",
        "Humanoid",
        "Swimmer",
        "InvertedPendulum",
        "Reacher",
    )
    if env_id.startswith(mujoco):
        return Preset(
            steps=100_000,
            trainer={
                "collect_env_steps": 1,
                "utd_ratio": 1.0,
                "batch_size": 256,
                "warmup_env_steps": 10_000,
                "eval_episodes": 5,
            },
            eval_every_env_steps=5_000,
            algo={
                "ddpg": {
                    "random_action_prob": 0.0,
                    "action_l2": 0.0,
                    "exploration_noise": 0.1,
                    "tau": 0.005,
                    "hidden": (256, 256),
                }
            },
        )
    return Preset(
        trainer={"collect_env_steps": 1, "utd_ratio": 1.0, "batch_size": 256, "warmup_env_steps": 1_000},
        algo={"ddpg": {"random_action_prob": 0.0, "action_l2": 0.0, "exploration_noise": 0.1, "tau": 0.005}},
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rlcore",
        description="Train RL agents (DQN, DDPG, TD3, SAC, VPG, A2C, PPO, BC, GAIL) on gymnasium envs with the rlcore replay core.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser(
        "train",
        help="train an agent",
        description="Train DQN, DDPG, TD3, SAC, VPG, A2C or PPO on a gymnasium env.",
    )
    train.add_argument("--algo", required=True, choices=ALGOS + IMITATION_ALGOS, help="algorithm")
    train.add_argument(
        "--expert", type=Path, default=None, help="with --algo bc/gail: dataset of `rlcore collect-expert`"
    )
    train.add_argument(
        "--env", required=True, help="gymnasium env id, e.g. FetchReach-v4, Pendulum-v1, CartPole-v1"
    )
    train.add_argument(
        "--her", action="store_true", help="hindsight experience replay (goal envs with dict observations)"
    )
    train.add_argument("--n-step", type=int, default=1, help="n of the n-step return (default 1)")
    train.add_argument(
        "--prioritized", action="store_true", help="prioritized replay (alpha 0.6, beta 0.4 -> 1.0)"
    )
    train.add_argument("--steps", type=int, default=None, help="training env steps (default: per env)")
    train.add_argument("--seed", type=int, default=0, help="seed of envs, networks and buffer (default 0)")
    train.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda, cuda:1 ... (default auto)"
    )
    train.add_argument("--num-envs", type=int, default=None, help="training envs (default: per env)")
    train.add_argument(
        "--out", type=Path, default=None, help="run directory (default runs/ENV-ALGO[-her]-sSEED)"
    )
    train.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument(
        "--distributed",
        action="store_true",
        help="collectors and replay shards as Ray actors (off-policy algorithms; pip install rlcore[ray])",
    )
    train.add_argument(
        "--num-collectors", type=int, default=2, help="with --distributed: collector actors (default 2)"
    )
    train.add_argument(
        "--num-shards", type=int, default=2, help="with --distributed: replay shards (default 2)"
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
        default=None,
        metavar="CHECKPOINT_DIR",
        help="continue the run saved in this checkpoint directory (e.g. RUN_DIR/checkpoint), with the same "
        "flags and a larger --steps; nothing in it runs as code",
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
    expert.add_argument("--algo", required=True, choices=ALGOS, help="algorithm of the expert")
    expert.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1, Pendulum-v1")
    expert.add_argument("--episodes", type=int, required=True, help="episodes to record")
    expert.add_argument("--out", type=Path, required=True, help="directory of the saved dataset")
    expert.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="run directory of `rlcore train`: loaded if it holds a checkpoint, else the expert is trained "
        "there (default runs/expert-ENV-ALGO-sSEED)",
    )
    expert.add_argument("--steps", type=int, default=None, help="training env steps (default: per env)")
    expert.add_argument("--seed", type=int, default=0, help="seed of training and recording (default 0)")
    expert.add_argument(
        "--minari",
        default=None,
        metavar="NAME",
        help="also write a Minari dataset of this id, e.g. rlcore/hopper-expert-v0 (pip install rlcore[minari])",
    )
    plot = sub.add_parser(
        "plot",
        help="draw learning curves of a run",
        description="Write PNG learning curves from RUN_DIR/metrics.jsonl.",
    )
    plot.add_argument("run_dir", type=Path, help="a run directory written by `rlcore train`")
    plot.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default RUN_DIR)")
    return parser


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
    from rlcore import checkpoint
    from rlcore.errors import RlcoreError

    try:
        capacity = checkpoint.read_info(path).get("buffer_capacity")
    except (FileNotFoundError, RlcoreError):
        return default
    return int(capacity) if isinstance(capacity, int) else default


def _train(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import torch

    import rlcore
    from rlcore.algos import DDPG, DQN, SAC, TD3, DDPGConfig, DQNConfig, SACConfig, TD3Config
    from rlcore.algos.common import resolve_device
    from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger, TensorBoardLogger
    from rlcore.trainer import OffPolicyTrainer, OffPolicyTrainerConfig

    if args.distributed and args.algo not in ("dqn", "ddpg", "td3", "sac"):
        raise UsageError(f"--distributed supports dqn, ddpg, td3 and sac, not {args.algo}")
    if args.trust_env_state and args.resume is None:
        raise UsageError("--trust-env-state needs --resume CHECKPOINT_DIR")
    if args.algo in IMITATION_ALGOS:
        from rlcore.imitation import train_imitation

        return train_imitation(args)
    if args.expert is not None:
        raise UsageError(f"--expert is for --algo bc or gail, not {args.algo}")
    if args.algo in ("vpg", "a2c", "ppo"):
        from rlcore.cli_onpolicy import train_on_policy

        return train_on_policy(args)
    if args.n_step < 1:
        raise UsageError(f"--n-step must be >= 1, got {args.n_step}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.num_envs is not None and args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    try:
        device = resolve_device(args.device)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as e:
        raise UsageError(f"--device {args.device!r} is not usable: {str(e).splitlines()[0]}") from e

    preset = preset_for(args.env, her=args.her)
    num_envs = args.num_envs or preset.num_envs
    steps = args.steps or preset.steps
    envs = _make_envs(args.env, num_envs)
    eval_envs = _make_envs(args.env, 1 if not args.her else 5)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space

    is_goal = isinstance(obs_space, gym.spaces.Dict) and {"achieved_goal", "desired_goal"} <= set(
        obs_space.spaces
    )
    if args.her and not is_goal:
        raise UsageError(
            f"--her needs a goal env with dict observations (achieved_goal, desired_goal); {args.env} has {obs_space}"
        )
    if args.algo == "dqn" and not isinstance(act_space, gym.spaces.Discrete):
        raise UsageError(
            f"dqn needs a Discrete action space; {args.env} has {act_space} (use ddpg, td3 or sac)"
        )
    if args.algo != "dqn" and not isinstance(act_space, gym.spaces.Box):
        raise UsageError(f"{args.algo} needs a Box action space; {args.env} has {act_space} (use dqn)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    overrides = dict(preset.algo.get(args.algo, {}))
    if args.algo in ("dqn", "ddpg", "td3"):
        overrides["seed"] = args.seed
    if args.algo == "dqn" and preset.dqn_lr_anneal:
        overrides["lr_anneal_env_steps"] = steps
    if is_goal and args.algo != "ddpg":
        overrides.setdefault("normalize_obs", True)
    algo_cls: Any
    cfg_cls: Any
    algo_cls, cfg_cls = {
        "dqn": (DQN, DQNConfig),
        "ddpg": (DDPG, DDPGConfig),
        "td3": (TD3, TD3Config),
        "sac": (SAC, SACConfig),
    }[args.algo]
    algo_config = cfg_cls(**overrides)
    algorithm = algo_cls.from_spaces(obs_space, act_space, algo_config, device=device)

    capacity = min(preset.capacity, max(steps + 1000 * num_envs, 1000))
    if args.resume is not None and not args.distributed:
        capacity = _resumed_capacity(args.resume, capacity)
    buffer: Any
    if args.her:
        reward_env = gym.make(args.env).unwrapped
        buffer = rlcore.HERReplayBuffer(
            capacity,
            num_envs=num_envs,
            seed=args.seed,
            compute_reward=getattr(reward_env, "compute_reward", None),
            prioritized=args.prioritized,
            alpha=0.6,
            beta=0.4,
        )
    elif args.prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(
            capacity, num_envs=num_envs, seed=args.seed, alpha=0.6, beta=0.4
        )
    else:
        buffer = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=args.seed)

    trainer_kw = dict(preset.trainer)
    collect = trainer_kw.get("collect_env_steps", 1)
    trainer_config = OffPolicyTrainerConfig(
        max_env_steps=steps,
        n_step=args.n_step,
        gamma=preset.gamma,
        eval_every=max(1, preset.eval_every_env_steps // collect),
        per_beta_end=1.0 if args.prioritized else None,
        seed=args.seed,
        **trainer_kw,
    )
    trainer: Any
    if args.distributed:
        from rlcore.distributed import trainer_from_cli

        make_policy = functools.partial(algo_cls.from_spaces, obs_space, act_space, algo_config, device="cpu")
        trainer = trainer_from_cli(
            args,
            algorithm,
            buffer,
            functools.partial(_make_envs, args.env, num_envs),
            make_policy,
            config=trainer_config,
            eval_envs=eval_envs,
            envs_per_collector=num_envs,
        )
    else:
        trainer = OffPolicyTrainer(algorithm, buffer, envs, config=trainer_config, eval_envs=eval_envs)
    load_resume(trainer, args)

    tag = (
        f"{args.env}-{args.algo}{'-her' if args.her else ''}{'-per' if args.prioritized else ''}-s{args.seed}"
    )
    out = args.out or Path("runs") / tag
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(
        json.dumps(
            {
                "command": "rlcore " + " ".join(sys.argv[1:]),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "algo_config": dataclasses.asdict(algo_config),
                "trainer_config": dataclasses.asdict(trainer_config),
                "num_envs": num_envs,
                "capacity": capacity,
                "device": str(device),
            },
            indent=2,
        )
    )
    every = max(1, 1000 // collect)
    logger = MultiLogger(
        ConsoleLogger(steps, disable=args.no_progress),
        JsonlLogger(out / "metrics.jsonl", every_iterations=every),
        TensorBoardLogger(out / "tb", every_iterations=every),
    )
    try:
        last = trainer.run(logger)
    finally:
        logger.close()
    trainer.save_checkpoint(out / "checkpoint")
    assert last is not None and last.eval is not None
    summary = f"done: {args.env} {args.algo} env_steps={last.env_steps} eval/return_mean={last.eval.return_mean:.2f}"
    if last.eval.success_rate == last.eval.success_rate:  # not NaN
        summary += f" eval/success_rate={last.eval.success_rate:.2f}"
    print(summary + f" (run dir: {out})")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from rlcore.logging import plot_run

    try:
        paths = plot_run(args.run_dir, args.out)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from e
    for p in paths:
        print(p)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlcore`` console script; returns the exit status."""
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "collect-expert":
            from rlcore.imitation import collect_expert_command

            return collect_expert_command(args)
        return _train(args) if args.command == "train" else _plot(args)
    except UsageError as e:
        print(f"rlcore: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlcore: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
