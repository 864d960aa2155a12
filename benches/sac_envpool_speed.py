"""SAC on HalfCheetah-v5 with 4 EnvPool envs: asynchronous (batch 2) vs lock-step collection, and SB3's
SAC with SubprocVecEnv, back to back in one process; where the time goes.

Same computation on every arm: SB3's SAC defaults (256x256 ReLU MLPs, Adam 3e-4, batch 256,
tau 0.005, gamma 0.99, learned temperature), one gradient step per env step (SB3:
``train_freq=1`` vector step, ``gradient_steps=4``; rlcore: ``collect_env_steps=4``,
``utd_ratio=1``), ``learning_starts`` 1000 random env steps (untimed warm-up), CPU, one torch thread.

* ``rlcore-envpool-async``: ``make_vec("HalfCheetah-v5", 4, backend="envpool", async_batch=2)``:
  each collector step acts on the 2 envs that finished first;
* ``rlcore-envpool-sync``: the same pool with ``batch_size = 4`` (lock-step);
* ``sb3-subproc``: SB3 SAC on ``SubprocVecEnv`` of 4 gymnasium HalfCheetah-v5 envs.

Timed rounds alternate over the arms, each continuing its own run for ``--steps`` env steps.
rlcore's trainer reports its collect and update seconds (``stats.time``), which gives the split.

Usage::

    python benches/sac_envpool_speed.py                 # 3 rounds x 2000 env steps per arm
    python benches/sac_envpool_speed.py --rounds 2 --steps 800

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import torch

N, LR, BATCH, WARMUP = 4, 3e-4, 256, 1000


class RlcoreRun:
    def __init__(self, async_batch: int | None, seed: int) -> None:
        import rlcore
        from rlcore.algos import SAC, SACConfig
        from rlcore.envs import make_vec
        from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

        envs = make_vec("HalfCheetah-v5", N, backend="envpool", async_batch=async_batch, seed=seed)
        torch.manual_seed(seed)
        sac = SAC.from_spaces(
            envs.single_observation_space,
            envs.single_action_space,
            SACConfig(hidden=(256, 256), actor_lr=LR, critic_lr=LR, alpha_lr=LR, tau=0.005),
            device="cpu",
        )
        buffer = rlcore.ReplayBuffer(1_000_000, num_envs=N, seed=seed)
        config = OffPolicyTrainerConfig(
            collect_env_steps=N,
            utd_ratio=1.0,
            batch_size=BATCH,
            gamma=0.99,
            warmup_env_steps=WARMUP,
            seed=seed,
        )
        self.trainer = OffPolicyTrainer(sac, buffer, envs, config=config)
        self.collect_s = self.update_s = 0.0
        self.advance(WARMUP + BATCH)

    def advance(self, n: int) -> None:
        target = self.trainer.env_steps + n
        while self.trainer.env_steps < target:
            stats = next(self.trainer)
            self.collect_s += stats.time.collect_s
            self.update_s += stats.time.update_s

    @property
    def env_steps(self) -> int:
        return int(self.trainer.env_steps)


class Sb3Run:
    def __init__(self, seed: int) -> None:
        import gymnasium as gym
        from stable_baselines3 import SAC
        from stable_baselines3.common.vec_env import SubprocVecEnv

        env = SubprocVecEnv([lambda: gym.make("HalfCheetah-v5")] * N)
        self.model = SAC(
            "MlpPolicy",
            env,
            learning_rate=LR,
            batch_size=BATCH,
            learning_starts=WARMUP,
            train_freq=1,
            gradient_steps=N,
            policy_kwargs={"net_arch": [256, 256]},
            seed=seed,
            device="cpu",
            verbose=0,
        )
        self.advance(WARMUP + BATCH)

    def advance(self, n: int) -> None:
        self.model.learn(total_timesteps=n, reset_num_timesteps=False, progress_bar=False)

    @property
    def env_steps(self) -> int:
        return int(self.model.num_timesteps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000, help="env steps per arm and round")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    arms: dict[str, Any] = {
        "rlcore-envpool-async": RlcoreRun(2, 0),
        "rlcore-envpool-sync": RlcoreRun(None, 0),
        "sb3-subproc": Sb3Run(0),
    }
    rates: dict[str, list[float]] = {k: [] for k in arms}
    split: dict[str, tuple[float, float]] = {}
    for r in range(args.rounds):
        for k, run in arms.items():
            c0, u0 = getattr(run, "collect_s", 0.0), getattr(run, "update_s", 0.0)
            before, start = run.env_steps, time.perf_counter()
            run.advance(args.steps)
            dt = time.perf_counter() - start
            rates[k].append((run.env_steps - before) / dt)
            if isinstance(run, RlcoreRun):
                split[k] = (run.collect_s - c0, run.update_s - u0)
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rates.items()), flush=True)
    sb3 = rates["sb3-subproc"]
    print(f"\nSAC HalfCheetah-v5, {N} envs, env steps/s (median of {args.rounds} rounds of {args.steps})")
    for k, v in rates.items():
        ratio = statistics.median(a / b for a, b in zip(v, sb3, strict=True))
        extra = ""
        if k in split:
            c, u = split[k]
            extra = (
                f"   last round: collect {c:.1f} s, update {u:.1f} s ({100 * u / (c + u):.0f} % in updates)"
            )
        print(f"{k:<22}{statistics.median(v):>8.0f}   vs SB3 {ratio:.2f}x{extra}")


if __name__ == "__main__":
    main()
