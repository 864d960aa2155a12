"""GAIL on CartPole-v1, Pendulum-v1 or Hopper-v5 from an expert's episodes, with behaviour cloning on the same data.

1. Expert data: an expert is trained once with ``rlcore train`` (``--checkpoint``; PPO on CartPole,
   30k env steps; SAC on Pendulum, 15k; SAC on Hopper, ``--expert-steps``, 100k by default: ~25-40
   min on one core) and its deterministic policy recorded for ``--episodes`` episodes with
   ``ReplayBuffer.save`` (what ``rlcore collect-expert`` does; recorded once, then reused).
2. BC: cross-entropy (discrete actions) or mean squared action error on the expert's (obs, act)
   pairs: CartPole and Pendulum 64x64 for 5k gradient steps, Hopper 256x256 for 10k.
3. GAIL (Ho & Ermon 2016) with the settings of ``rlcore train --algo gail --env ENV``
   (:func:`rlcore.imitation.gail_settings`): a discriminator on (obs, act) pairs whose reward
   ``-log(1 - D)`` replaces the env reward in the rollouts (the sampler's ``reward_fn``), one pass
   of 256-pair minibatches over each rollout, a gradient penalty (10; 1 on Pendulum), absorbing
   states at terminations on Hopper (Kostrikov et al. 2019; without them the always-positive
   reward taught the generator to stand still rather than hop like an expert that falls); and a
   PPO generator (CartPole: 8 envs x 256 steps, 10 epochs of 64, Adam 3e-4; Pendulum: the
   ``rlcore train --algo ppo`` preset with gamma 0.95 and Adam 3e-4; Hopper: the MuJoCo PPO
   preset; each annealed to 0 over the run, no entropy bonus). ``--disc-lr``, ``--disc-updates``,
   ``--grad-penalty``, ``--ppo-lr`` and ``--ent-coef`` override single values. The env reward is
   only used for the episode statistics and the evaluation.

Prints the expert's return, BC's and GAIL's final evaluation and GAIL's best, as fractions of the
expert's. Usage::

    python examples/gail.py --env CartPole-v1 --steps 200000 --seed 0
    python examples/gail.py --env Pendulum-v1 --steps 300000 --seed 0
    python examples/gail.py --env Hopper-v5 --steps 500000 --seed 0 --out runs/imitation/gail-hopper-example
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rlcore
import torch
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL
from rlcore.cli.common import _make_envs
from rlcore.cli.collect_expert import collect_expert
from rlcore.imitation import OfflineTrainer, OfflineTrainerConfig, gail_settings
from rlcore.logging import ConsoleLogger, JsonlLogger, MultiLogger
from rlcore.trainers import OnPolicyTrainer


@dataclass(frozen=True)
class Recipe:
    """One env's expert and BC settings (GAIL's are ``gail_settings(env)``)."""

    steps: int
    """Default GAIL env steps."""
    expert_algo: str
    expert_steps: int
    """Env steps of the expert's training run."""
    episodes: int
    """Expert episodes recorded."""
    bc_hidden: tuple[int, ...]
    bc_grad_steps: int
    bc_eval_episodes: int


RECIPES = {
    "CartPole-v1": Recipe(200_000, "ppo", 30_000, 10, (64, 64), 5_000, 20),
    "Pendulum-v1": Recipe(300_000, "sac", 15_000, 100, (64, 64), 5_000, 20),
    "Hopper-v5": Recipe(500_000, "sac", 100_000, 10, (256, 256), 10_000, 10),
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=list(RECIPES), default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=None, help="GAIL env steps (default: the env's)")
    parser.add_argument("--episodes", type=int, default=None, help="expert episodes to record")
    parser.add_argument("--expert-steps", type=int, default=None, help="expert training env steps")
    parser.add_argument("--expert", type=Path, default=None, help="expert data directory")
    parser.add_argument("--checkpoint", type=Path, default=None, help="expert run directory")
    parser.add_argument("--grad-penalty", type=float, default=None, help="discriminator gradient penalty")
    parser.add_argument("--disc-lr", type=float, default=None, help="discriminator learning rate")
    parser.add_argument("--disc-updates", type=int, default=None, help="discriminator steps per rollout")
    parser.add_argument("--ppo-lr", type=float, default=None, help="generator learning rate")
    parser.add_argument("--ent-coef", type=float, default=None, help="PPO entropy bonus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="run directory (metrics.jsonl)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    recipe = RECIPES[args.env]
    steps = args.steps if args.steps is not None else recipe.steps
    episodes = args.episodes if args.episodes is not None else recipe.episodes
    name = args.env.split("-v")[0].lower()
    expert_dir = args.expert or Path(f"runs/imitation/data/{name}-expert-{episodes}ep")
    checkpoint = args.checkpoint or Path(f"runs/imitation/expert-{args.env}-{recipe.expert_algo}")
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    # 1. Expert data: trained once, recorded once (the same reset seeds record the same episodes).
    if not (expert_dir / "manifest.json").is_file():
        collect_expert(
            algo=recipe.expert_algo,
            env_id=args.env,
            episodes=episodes,
            out=expert_dir,
            checkpoint=checkpoint,
            steps=args.expert_steps or recipe.expert_steps,
        )
    expert = rlcore.ReplayBuffer.load(expert_dir)
    ends = np.flatnonzero(np.asarray(expert.terminated) | np.asarray(expert.truncated))
    rew = np.asarray(expert.rew)
    expert_return = float(np.mean([seg.sum() for seg in np.split(rew, ends + 1) if seg.size]))
    print(f"expert: return {expert_return:.1f} over {ends.size} episodes, {len(expert)} transitions")

    eval_envs = _make_envs(args.env, 5)
    obs_space, act_space = eval_envs.single_observation_space, eval_envs.single_action_space

    # 2. Behaviour cloning on the same data.
    bc = BC.from_spaces(obs_space, act_space, BCConfig(hidden=recipe.bc_hidden))
    bc_config = OfflineTrainerConfig(
        max_grad_steps=recipe.bc_grad_steps,
        grad_steps_per_iteration=1_000,
        eval_every=recipe.bc_grad_steps // 1_000,
        eval_episodes=recipe.bc_eval_episodes,
        seed=args.seed,
    )
    bc_last = OfflineTrainer(bc, expert, config=bc_config, eval_envs=eval_envs).run()
    assert bc_last is not None and bc_last.eval is not None
    print(
        f"BC: eval return {bc_last.eval.return_mean:.1f} +- {bc_last.eval.return_std:.1f} "
        f"({bc_last.eval.episodes} episodes), {bc_last.eval.return_mean / expert_return:.1%} of the expert"
    )

    # 3. GAIL with the CLI's settings, and the overrides given.
    settings = gail_settings(args.env, steps=steps, seed=args.seed)
    disc = {"grad_penalty": args.grad_penalty, "lr": args.disc_lr, "disc_updates": args.disc_updates}
    ppo = {"lr": args.ppo_lr, "ent_coef": args.ent_coef}
    gail_config = dataclasses.replace(settings.gail, **{k: v for k, v in disc.items() if v is not None})
    ppo_config = dataclasses.replace(settings.ppo, **{k: v for k, v in ppo.items() if v is not None})
    envs = _make_envs(args.env, settings.num_envs)
    gail = GAIL.from_spaces(obs_space, act_space, expert, gail_config, ppo_config, num_envs=settings.num_envs)
    # GAIL: the on-policy loop on the discriminator's reward
    trainer = OnPolicyTrainer(gail, envs, config=settings.trainer, eval_envs=eval_envs, reward_fn=gail.reward)
    sinks: list = [ConsoleLogger(steps, disable=args.no_progress)]
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
