"""GAIL on Hopper-v5 from the episodes of a SAC expert, with behaviour cloning on the same data.

1. Expert: ``rlcore train --algo sac --env Hopper-v5`` (``--expert-steps`` env steps, 100k by
   default: ~25-40 min on one core) unless ``--checkpoint`` already holds one; its deterministic
   policy is rolled out for ``--episodes`` episodes and saved with ``ReplayBuffer.save`` (what
   ``rlcore collect-expert`` does, see docs/imitation.md).
2. BC: 10k gradient steps of mean squared action error on the expert's (obs, act) pairs.
3. GAIL (Ho & Ermon 2016) with exactly the settings of ``rlcore train --algo gail --env Hopper-v5``
   (:func:`rlcore.imitation.gail_settings`): the MuJoCo PPO preset (1 env x 2048 steps, 10 epochs
   of 64, Adam 3e-4 annealed over the run, normalised observations and returns, value clipping)
   as the generator, and a discriminator with 8 steps of 256 expert + 256 policy pairs per rollout,
   gradient penalty 10, reward ``-log(1 - D)`` and absorbing states at terminations (Kostrikov et
   al. 2019; without them the always-positive reward taught the generator to stand still rather
   than hop like an expert that falls). The env reward is only used for the episode statistics and
   the evaluation.

Prints the expert's return, BC's and GAIL's final evaluation, and GAIL's return as a fraction of
the expert's.

Usage::

    python examples/hopper_gail.py --steps 500000 --seed 0 --out runs/imitation/gail-hopper-example
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import rlcore
import torch
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL
from rlcore.cli.common import _make_envs
from rlcore.cli.imitation import collect_expert
from rlcore.imitation import GAILTrainer, OfflineTrainer, OfflineTrainerConfig, gail_settings
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger

ENV = "Hopper-v5"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500_000, help="GAIL env steps")
    parser.add_argument("--episodes", type=int, default=10, help="expert episodes to record")
    parser.add_argument("--expert-steps", type=int, default=100_000, help="SAC expert training env steps")
    parser.add_argument("--expert", type=Path, default=Path("runs/imitation/data/hopper-expert-10ep"))
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/imitation/expert-Hopper-v5-sac"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    # 1. Expert data: trained once (if --checkpoint holds no expert yet), recorded on every run
    #    (the deterministic policy from the same reset seeds records the same episodes).
    data = collect_expert(
        algo="sac",
        env_id=ENV,
        episodes=args.episodes,
        out=args.expert,
        checkpoint=args.checkpoint,
        steps=args.expert_steps,
    )
    expert = rlcore.ReplayBuffer.load(args.expert)
    expert_return = data.return_mean
    print(
        f"expert: return {data.return_mean:.1f} +- {data.return_std:.1f} over {data.episodes} episodes, "
        f"{data.transitions} transitions"
    )

    eval_envs = _make_envs(ENV, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space

    # 2. Behaviour cloning on the same data.
    bc = BC.from_spaces(obs_space, act_space, BCConfig())
    bc_config = OfflineTrainerConfig(
        max_grad_steps=10_000, grad_steps_per_iteration=1_000, eval_every=10, eval_episodes=10, seed=args.seed
    )
    bc_last = OfflineTrainer(bc, expert, config=bc_config, eval_envs=eval_envs).run()
    assert bc_last is not None and bc_last.eval is not None
    print(
        f"BC: eval return {bc_last.eval.return_mean:.1f} +- {bc_last.eval.return_std:.1f} (10 episodes), "
        f"{bc_last.eval.return_mean / expert_return:.1%} of the expert"
    )

    # 3. GAIL with the CLI's settings.
    settings = gail_settings(ENV, steps=args.steps, seed=args.seed)
    envs = _make_envs(ENV, settings.num_envs)
    gail = GAIL.from_spaces(
        obs_space, act_space, expert, settings.gail, settings.ppo, num_envs=settings.num_envs
    )
    trainer = GAILTrainer(gail, envs, config=settings.trainer, eval_envs=eval_envs)
    sinks: list = [ConsoleLogger(args.steps, disable=args.no_progress)]
    if args.out is not None:
        sinks.append(JsonlLogger(args.out / "metrics.jsonl"))
    logger = MultiLogger(*sinks)
    start = time.perf_counter()
    last, best = None, -np.inf
    for stats in trainer:
        logger.write(stats)
        last = stats
        if stats.eval is not None:
            best = max(best, stats.eval.return_mean)
    logger.close()

    elapsed = time.perf_counter() - start
    assert last is not None and last.eval is not None
    print(f"wall-clock: {elapsed:.0f} s ({last.env_steps / elapsed:.0f} env steps/s)")
    print(
        f"GAIL: final eval return {last.eval.return_mean:.1f} +- {last.eval.return_std:.1f} (10 episodes) "
        f"= {last.eval.return_mean / expert_return:.1%} of the expert; best eval {best:.1f} "
        f"= {best / expert_return:.1%} (after {last.env_steps} env steps)"
    )


if __name__ == "__main__":
    main()
