"""PPO training speed, rlcore vs Stable-Baselines3, on CartPole-v1 with 8 envs and SB3's defaults.

Both run in this process, alternating (rlcore, SB3, rlcore, SB3, ...), one torch thread each, on
CPU, with SB3's default PPO hyperparameters: 8 envs x 2048 steps per rollout, 10 epochs of
minibatches of 64, Adam 3e-4, gamma 0.99, lambda 0.95, clip 0.2, separate 64x64 tanh MLPs,
advantage normalisation, gradient clipping 0.5. Each timed run trains ``--iterations`` full
rollouts + updates from scratch (the first, untimed warm-up run per library pays one-off costs).
rlcore runs once per ``--backends`` entry (``rlcore.envs.make_vec``): gymnasium's SyncVectorEnv
(as SB3's DummyVecEnv) and EnvPool's lock-step pool (``batch_size = 8``, C++ envs stepped by its
thread pool); SB3 always uses DummyVecEnv.

Usage::

    python benches/ppo_speed_sb3.py                    # 2 rounds of 2 iterations (32,768 env steps each)
    python benches/ppo_speed_sb3.py --rounds 3 --iterations 1
    python benches/ppo_speed_sb3.py --json out.json    # also write the medians (for benches/report.py)
    python benches/ppo_speed_sb3.py --backends envpool  # rlcore on EnvPool only (default: both when installed)

Prints env steps per wall-clock second and per CPU second of this process (the machine this was
written on is shared: CPU time is the steadier figure) and the median ratios rlcore / SB3 (> 1:
rlcore is faster). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import torch
from rlcore.algos import PPO, PPOConfig
from rlcore.envs import make_vec
from rlcore.trainers.on_policy import OnPolicyTrainer, OnPolicyTrainerConfig

N_ENVS, N_STEPS = 8, 2048


def run_rlcore(iterations: int, seed: int, backend: str = "gymnasium") -> tuple[float, float]:
    torch.manual_seed(seed)
    envs = make_vec("CartPole-v1", N_ENVS, backend=backend, seed=seed)  # type: ignore[arg-type]
    ppo = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(seed=seed),  # SB3's defaults (n_epochs 10, minibatch 64, lr 3e-4, ...)
        num_envs=N_ENVS,
        device="cpu",
    )
    trainer = OnPolicyTrainer(ppo, envs, config=OnPolicyTrainerConfig(num_steps=N_STEPS, seed=seed))
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(iterations):
        stats = next(trainer)
    return stats.env_steps / (time.perf_counter() - start), stats.env_steps / (time.process_time() - cpu)


def run_sb3(iterations: int, seed: int) -> tuple[float, float]:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=seed)
    model = SB3PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)
    start, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=iterations * N_ENVS * N_STEPS)
    return model.num_timesteps / (time.perf_counter() - start), model.num_timesteps / (
        time.process_time() - cpu
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="timed runs per library")
    parser.add_argument("--iterations", type=int, default=2, help="rollout+update iterations per run")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="write the medians here, as benches/e2e_speed.py does (a list of {task, library, "
        "env_steps_per_s_wall, env_steps_per_s_cpu, rounds, steps_per_round, settings, per_round_*})",
    )
    have_envpool = importlib.util.find_spec("envpool") is not None
    parser.add_argument(
        "--backends",
        default="gymnasium,envpool" if have_envpool else "gymnasium",
        help="rlcore's env backends, comma-separated (default: gymnasium and, when installed, envpool)",
    )
    args = parser.parse_args()
    backends = args.backends.split(",")
    torch.set_num_threads(1)
    for backend in backends:
        run_rlcore(1, 100, backend)  # warm-up (imports, allocator, first-call costs)
    run_sb3(1, 100)
    ours: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    theirs: list[tuple[float, float]] = []
    for r in range(args.rounds):
        for backend in backends:
            ours[backend].append(run_rlcore(args.iterations, r, backend))
        theirs.append(run_sb3(args.iterations, r))
        mine = ", ".join(f"rlcore[{b}] {xs[-1][0]:.0f} ({xs[-1][1]:.0f} per CPU-s)" for b, xs in ours.items())
        print(
            f"round {r}: {mine}, SB3 {theirs[-1][0]:.0f} env steps/s ({theirs[-1][1]:.0f} per CPU-s)",
            flush=True,
        )
    for i, what in enumerate(("wall-clock", "CPU time")):
        b = [x[i] for x in theirs]
        for backend, xs in ours.items():
            a = [x[i] for x in xs]
            ratios = [x / y for x, y in zip(a, b, strict=True)]
            print(
                f"{what}: median rlcore[{backend}] {statistics.median(a):.0f}, SB3 {statistics.median(b):.0f} "
                f"env steps/s; ratio rlcore/SB3 {statistics.median(ratios):.2f} "
                f"(per round: {', '.join(f'{x:.2f}' for x in ratios)})"
            )

    if args.json is not None:
        settings = {
            "env": "CartPole-v1",
            "num_envs": N_ENVS,
            "n_steps": N_STEPS,
            "hyperparameters": "SB3 PPO defaults",
        }
        records = [
            {
                "task": "ppo-cartpole",
                "library": lib,
                "env_steps_per_s_wall": statistics.median(x[0] for x in xs),
                "env_steps_per_s_cpu": statistics.median(x[1] for x in xs),
                "rounds": args.rounds,
                "steps_per_round": args.iterations * N_ENVS * N_STEPS,
                "settings": settings,
                "per_round_wall": [x[0] for x in xs],
                "per_round_cpu": [x[1] for x in xs],
            }
            for lib, xs in [
                *((("rlcore" if b == "gymnasium" else f"rlcore-{b}"), v) for b, v in ours.items()),
                ("sb3", theirs),
            ]
        ]
        args.json.write_text(json.dumps(records, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
