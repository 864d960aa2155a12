"""``rlcore collect-expert`` and ``rlcore train --algo {bc,gail} --expert PATH``."""


from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

import rlcore
from rlcore.algos.bc import BC
from rlcore.algos.gail import GAIL
from rlcore.imitation.datasets import ExpertData, record_expert
from rlcore.presets import gail_settings
from rlcore.trainers import checkpoint as ckpt_format
from rlcore.trainers.offline import OfflineTrainer, OfflineTrainerConfig
from rlcore.trainers.on_policy import GAILTrainer


def collect_expert(
    *,
    algo: str,
    env_id: str,
    episodes: int,
    out: str | Path,
    checkpoint: str | Path | None = None,
    steps: int | None = None,
    seed: int = 0,
    minari: str | None = None,
) -> ExpertData:
    """Train (or load) an expert, record ``episodes`` deterministic episodes and save them to ``out``.

    Args:
        algo: an ``rlcore train`` algorithm (dqn, ddpg, td3, sac, vpg, a2c, ppo).
        env_id: gymnasium env id.
        episodes: episodes to record.
        out: directory for :meth:`rlcore.ReplayBuffer.save`.
        checkpoint: a run directory of ``rlcore train``. When it already holds a checkpoint the expert
            is loaded from it; otherwise it is trained there (default ``runs/expert-ENV-ALGO-sSEED``).
        steps: training env steps (default: the ``rlcore train`` preset of the env).
        seed: seed of the expert's training and of the recorded episodes' resets.
        minari: also write the episodes as the Minari dataset of this id (:func:`export_minari`).

    Raises:
        RuntimeError: training the expert failed.
        FileNotFoundError, CheckpointError, ValueError: as :func:`load_expert_policy` and
            :func:`record_episodes`.
        ImportError, ValueError: as :func:`export_minari`.
    """
    from rlcore.cli import main as cli_main

    run_dir = Path(checkpoint) if checkpoint is not None else Path("runs") / f"expert-{env_id}-{algo}-s{seed}"
    if not ckpt_format.is_checkpoint(run_dir / "checkpoint"):
        argv = ["train", "--algo", algo, "--env", env_id, "--seed", str(seed), "--out", str(run_dir)]
        if steps is not None:
            argv += ["--steps", str(steps)]
        status = cli_main([*argv, "--no-progress"])
        if status != 0:
            raise RuntimeError(f"training the expert failed (rlcore {' '.join(argv)} exited with {status})")
    return record_expert(run_dir, env_id, episodes, out, seed=seed, minari=minari, algo=algo)


def collect_expert_command(args: argparse.Namespace) -> int:
    """``rlcore collect-expert`` (called by :func:`rlcore.cli.main`)."""
    from rlcore.cli.common import UsageError

    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    try:
        data = collect_expert(
            algo=args.algo,
            env_id=args.env,
            episodes=args.episodes,
            out=args.out,
            checkpoint=args.checkpoint,
            steps=args.steps,
            seed=args.seed,
            minari=args.minari,
        )
    except (FileNotFoundError, ValueError, ImportError, rlcore.errors.RlcoreError) as e:
        raise UsageError(str(e)) from e
    print(
        f"expert: {args.env} {args.algo} return_mean={data.return_mean:.2f} return_std={data.return_std:.2f} "
        f"episodes={data.episodes} transitions={data.transitions} (saved to {data.path})"
    )
    if args.minari is not None:
        print(f"minari: dataset {args.minari} written (minari.load_dataset({args.minari!r}))")
    return 0


def train_imitation(args: argparse.Namespace) -> int:
    """``rlcore train --algo {bc,gail} --expert PATH --env ID`` (called by :func:`rlcore.cli.main`).

    BC: ``--steps`` counts gradient steps (default 20k, batch 256). GAIL: ``--steps`` counts env
    steps; the generator, discriminator and schedule are :func:`gail_settings`.
    """
    from rlcore.algos.bc import BCConfig
    from rlcore.cli.common import UsageError, _make_envs, load_resume
    from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger, TensorBoardLogger

    if args.expert is None:
        raise UsageError(f"--algo {args.algo} needs --expert PATH (a dataset of `rlcore collect-expert`)")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.num_envs is not None and args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    try:
        expert = rlcore.ReplayBuffer.load(args.expert)
    except rlcore.errors.RlcoreError as e:
        raise UsageError(f"--expert {args.expert}: {e}") from e
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space
    out = args.out or Path("runs") / f"{args.env}-{args.algo}-s{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    trainer: Any
    if args.algo == "bc":
        steps = args.steps or 20_000
        algo_config: Any = BCConfig()
        bc = BC.from_spaces(obs_space, act_space, algo_config, device=args.device)
        trainer_config: Any = OfflineTrainerConfig(
            max_grad_steps=steps, grad_steps_per_iteration=500, eval_every=4, seed=args.seed
        )
        trainer = OfflineTrainer(bc, expert, config=trainer_config, eval_envs=eval_envs)
        total = steps
    else:
        settings = gail_settings(args.env, steps=args.steps, num_envs=args.num_envs, seed=args.seed)
        algo_config, trainer_config = settings.gail, settings.trainer
        steps = trainer_config.max_env_steps
        envs = _make_envs(args.env, settings.num_envs)
        gail = GAIL.from_spaces(
            obs_space,
            act_space,
            expert,
            algo_config,
            settings.ppo,
            num_envs=settings.num_envs,
            device=args.device,
        )
        trainer = GAILTrainer(gail, envs, config=trainer_config, eval_envs=eval_envs)
        total = steps
    load_resume(trainer, args)
    (out / "config.json").write_text(
        json.dumps(
            {
                "command": "rlcore " + " ".join(sys.argv[1:]),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "algo_config": dataclasses.asdict(algo_config),
                "trainer_config": dataclasses.asdict(trainer_config),
                "ppo_config": dataclasses.asdict(trainer.algorithm.generator.config)
                if args.algo == "gail"
                else None,
                "expert_transitions": len(expert),
            },
            indent=2,
            default=str,
        )
    )
    logger = MultiLogger(
        ConsoleLogger(total if args.algo == "gail" else None, disable=args.no_progress),
        JsonlLogger(out / "metrics.jsonl"),
        TensorBoardLogger(out / "tb"),
    )
    try:
        last = trainer.run(logger)
    finally:
        logger.close()
    trainer.save_checkpoint(out / "checkpoint")
    assert last is not None and last.eval is not None
    print(
        f"done: {args.env} {args.algo} grad_steps={last.grad_steps} env_steps={last.env_steps} "
        f"eval/return_mean={last.eval.return_mean:.2f} (run dir: {out})"
    )
    return 0
