"""End-to-end off-policy training speed, rlcore vs Stable-Baselines3, in one process.

Three tasks, each trained by both libraries with the same hyperparameters, on CPU, one torch thread,
one env, one gradient step per env step:

* ``sac-pendulum``: SAC on Pendulum-v1 with SB3's SAC defaults (Adam 3e-4 for actor, critics and
  the temperature, replay 1e6, batch 256, tau 0.005, gamma 0.99, ``train_freq=1``,
  ``gradient_steps=1``, ``learning_starts=100``, 256x256 ReLU MLPs, twin critics, learned
  temperature starting at 1 with target entropy -dim(A)).
* ``sac-hopper``: the same SAC on Hopper-v5 (the MuJoCo campaign's cost; the algorithm's settings
  do not change its speed).
* ``ddpg-her-fetchreach``: DDPG + HER on FetchReach-v4, the same algorithm on both sides: 3x256
  ReLU MLPs for actor and critic, Adam 1e-3, replay 1e6 (SB3's default), batch 256, tau 0.05,
  gamma 0.98, Gaussian action noise with std 0.2 (the action range is [-1, 1]), HER ``future`` with
  k = 4 (relabel probability 0.8), ``learning_starts=100``. rlcore's HER-paper extras that SB3's
  DDPG does not have are switched off (no observation normalisation, no random actions, no action
  L2 penalty, no target clipping), so both run the same computation. rlcore computes the sparse
  Fetch reward natively (``distance_threshold=0.05``, the env's own threshold); SB3 calls
  ``env.compute_reward``.

rlcore runs through the public ``OffPolicyTrainer`` with ``collect_env_steps=1`` (one ``next()``
per env step, each yielding a full ``EpochStats``), SB3 through ``model.learn(n,
reset_num_timesteps=False)``. Each library first trains ``--warmup`` env steps untimed (past
``learning_starts`` and the first batch), then the timed rounds alternate: rlcore chunk, SB3 chunk,
rlcore chunk, ... so that a drift in machine load hits both alike. Each chunk continues the same
training run for ``--steps`` env steps.

Usage::

    python benches/e2e_speed.py                      # 5 rounds x 2000 env steps per library and task
    python benches/e2e_speed.py --quick              # ~2 minutes: 3 rounds x 300 env steps
    python benches/e2e_speed.py --task sac-pendulum --json out.json
    python benches/e2e_speed.py --profile            # where the time goes (cProfile), both libraries
    python benches/e2e_speed.py --task ddpg-her-fetchreach --ddpg-net 64,64   # smaller networks

Reports env steps per wall-clock second and per CPU second of this process (``time.process_time``;
the steadier figure on a shared machine), medians over rounds, and the median of the per-round
ratios rlcore / SB3 (> 1: rlcore is faster). ``--json OUT`` writes a list of
``{task, library, env_steps_per_s_wall, env_steps_per_s_cpu, rounds, steps_per_round, settings}``
(medians; plus ``per_round_wall`` and ``per_round_cpu``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

TASKS = ("sac-pendulum", "sac-hopper", "ddpg-her-fetchreach")

SAC_SETTINGS: dict[str, Any] = {
    "env": "Pendulum-v1",
    "num_envs": 1,
    "lr": 3e-4,
    "buffer_size": 1_000_000,
    "batch_size": 256,
    "tau": 0.005,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    "learning_starts": 100,
    "net_arch": [256, 256],
    "ent_coef": "auto (init 1.0, target entropy -dim(A))",
    "device": "cpu",
    "torch_threads": 1,
}
SAC_HOPPER_SETTINGS: dict[str, Any] = {**SAC_SETTINGS, "env": "Hopper-v5"}
"""The MuJoCo campaign's cost: the same SAC on Hopper-v5 (11-dim observations, 3-dim actions)."""
DDPG_SETTINGS: dict[str, Any] = {
    "env": "FetchReach-v4",
    "num_envs": 1,
    "lr": 1e-3,
    "buffer_size": 1_000_000,
    "batch_size": 256,
    "tau": 0.05,
    "gamma": 0.98,
    "train_freq": 1,
    "gradient_steps": 1,
    "learning_starts": 100,
    "net_arch": [256, 256, 256],
    "action_noise_std": 0.2,
    "her": "future, n_sampled_goal=4",
    "obs_normalisation": False,
    "device": "cpu",
    "torch_threads": 1,
}


def _register_robotics() -> None:
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)


@dataclass
class Runner:
    """One training run that can be advanced by ``n`` env steps at a time."""

    library: str
    advance: Callable[[int], None]
    env_steps: Callable[[], int]


# ---------------------------------------------------------------------------------------- rlcore


def _rlcore_runner(algo: Any, buffer: Any, envs: Any, s: dict[str, Any], seed: int) -> Runner:
    """rlcore's public OffPolicyTrainer, one env step (and one gradient step) per ``next()``."""
    from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

    trainer = OffPolicyTrainer(
        algo,
        buffer,
        envs,
        config=OffPolicyTrainerConfig(
            collect_env_steps=1,
            utd_ratio=1.0,
            batch_size=s["batch_size"],
            gamma=s["gamma"],
            warmup_env_steps=s["learning_starts"],
            seed=seed,
        ),
    )

    def advance(n: int) -> None:
        for _ in range(n):
            next(trainer)

    return Runner("rlcore", advance, lambda: trainer.env_steps)


def rlcore_sac(seed: int, s: dict[str, Any] = SAC_SETTINGS) -> Runner:
    import rlcore
    from rlcore.algos import SAC, SACConfig

    envs = gym.make_vec(s["env"], num_envs=1, vectorization_mode="sync")
    torch.manual_seed(seed)
    sac = SAC.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        SACConfig(hidden=(256, 256), actor_lr=s["lr"], critic_lr=s["lr"], alpha_lr=s["lr"], tau=s["tau"]),
        device="cpu",
    )
    buffer = rlcore.ReplayBuffer(s["buffer_size"], num_envs=1, seed=seed)
    return _rlcore_runner(sac, buffer, envs, s, seed)


def rlcore_ddpg_her_fetchreach(seed: int) -> Runner:
    import rlcore
    from rlcore.algos import DDPG, DDPGConfig

    s = DDPG_SETTINGS
    envs = gym.make_vec(s["env"], num_envs=1, vectorization_mode="sync")
    torch.manual_seed(seed)
    ddpg = DDPG.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        DDPGConfig(
            hidden=tuple(s["net_arch"]),
            actor_lr=s["lr"],
            critic_lr=s["lr"],
            tau=s["tau"],
            exploration_noise=s["action_noise_std"],
            random_action_prob=0.0,
            action_l2=0.0,
            normalize_obs=False,
            seed=seed,
        ),
        device="cpu",
    )
    buffer = rlcore.HERReplayBuffer(
        s["buffer_size"], num_envs=1, seed=seed, strategy="future", future_k=4, distance_threshold=0.05
    )
    return _rlcore_runner(ddpg, buffer, envs, s, seed)


# ------------------------------------------------------------------------------------------- SB3


def _sb3_runner(model: Any) -> Runner:
    def advance(n: int) -> None:
        model.learn(total_timesteps=n, reset_num_timesteps=False, progress_bar=False)

    return Runner("sb3", advance, lambda: int(model.num_timesteps))


def sb3_sac(seed: int, s: dict[str, Any] = SAC_SETTINGS) -> Runner:
    from stable_baselines3 import SAC

    model = SAC(
        "MlpPolicy",
        gym.make(s["env"]),
        learning_rate=s["lr"],
        buffer_size=s["buffer_size"],
        learning_starts=s["learning_starts"],
        batch_size=s["batch_size"],
        tau=s["tau"],
        gamma=s["gamma"],
        train_freq=s["train_freq"],
        gradient_steps=s["gradient_steps"],
        policy_kwargs={"net_arch": list(s["net_arch"])},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return _sb3_runner(model)


def sb3_ddpg_her_fetchreach(seed: int) -> Runner:
    from stable_baselines3 import DDPG, HerReplayBuffer
    from stable_baselines3.common.noise import NormalActionNoise

    s = DDPG_SETTINGS
    env = gym.make(s["env"])
    act_dim = int(np.prod(env.action_space.shape))
    model = DDPG(
        "MultiInputPolicy",
        env,
        learning_rate=s["lr"],
        buffer_size=s["buffer_size"],
        learning_starts=s["learning_starts"],
        batch_size=s["batch_size"],
        tau=s["tau"],
        gamma=s["gamma"],
        train_freq=s["train_freq"],
        gradient_steps=s["gradient_steps"],
        action_noise=NormalActionNoise(np.zeros(act_dim), s["action_noise_std"] * np.ones(act_dim)),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        policy_kwargs={"net_arch": list(s["net_arch"])},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return _sb3_runner(model)


BUILDERS: dict[str, tuple[Callable[[int], Runner], Callable[[int], Runner], dict[str, Any]]] = {
    "sac-pendulum": (rlcore_sac, sb3_sac, SAC_SETTINGS),
    "sac-hopper": (
        lambda seed: rlcore_sac(seed, SAC_HOPPER_SETTINGS),
        lambda seed: sb3_sac(seed, SAC_HOPPER_SETTINGS),
        SAC_HOPPER_SETTINGS,
    ),
    "ddpg-her-fetchreach": (rlcore_ddpg_her_fetchreach, sb3_ddpg_her_fetchreach, DDPG_SETTINGS),
}


# --------------------------------------------------------------------------------------- timing


def timed(runner: Runner, n: int) -> tuple[float, float]:
    """Advance ``runner`` by ``n`` env steps; return (env steps per wall second, per CPU second)."""
    before = runner.env_steps()
    wall, cpu = time.perf_counter(), time.process_time()
    runner.advance(n)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    steps = runner.env_steps() - before
    return steps / wall, steps / max(cpu, 1e-9)


def bench_task(task: str, rounds: int, steps: int, warmup: int, seed: int) -> list[dict[str, Any]]:
    make_ours, make_theirs, settings = BUILDERS[task]
    runners = [make_ours(seed), make_theirs(seed)]
    for r in runners:
        r.advance(warmup)
    rates: dict[str, list[tuple[float, float]]] = {r.library: [] for r in runners}
    for i in range(rounds):
        for r in runners:
            rates[r.library].append(timed(r, steps))
        ours, theirs = rates["rlcore"][-1], rates["sb3"][-1]
        print(
            f"{task} round {i}: rlcore {ours[0]:.0f} env steps/s ({ours[1]:.0f} per CPU-s), "
            f"SB3 {theirs[0]:.0f} ({theirs[1]:.0f}); ratio {ours[0] / theirs[0]:.2f} wall, "
            f"{ours[1] / theirs[1]:.2f} CPU",
            flush=True,
        )
    for k, what in enumerate(("wall", "CPU")):
        ratios = [a[k] / b[k] for a, b in zip(rates["rlcore"], rates["sb3"], strict=True)]
        print(
            f"{task} {what}: median rlcore {statistics.median(x[k] for x in rates['rlcore']):.0f}, "
            f"SB3 {statistics.median(x[k] for x in rates['sb3']):.0f} env steps/s; median ratio "
            f"{statistics.median(ratios):.2f} (per round {', '.join(f'{x:.2f}' for x in ratios)})",
            flush=True,
        )
    results = []
    for lib, xs in rates.items():
        results.append(
            {
                "task": task,
                "library": lib,
                "env_steps_per_s_wall": statistics.median(x[0] for x in xs),
                "env_steps_per_s_cpu": statistics.median(x[1] for x in xs),
                "rounds": rounds,
                "steps_per_round": steps,
                "settings": settings,
                "per_round_wall": [x[0] for x in xs],
                "per_round_cpu": [x[1] for x in xs],
            }
        )
    return results


# -------------------------------------------------------------------------------------- profile

# (component, substrings of "file:function" in cProfile's keys; builtins by their "<method ...>" name).
# A component's time is the largest cumulative time among its matched functions.
COMPONENTS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "rlcore": [
        ("env step", ("stepping.py:step",)),
        ("act", ("squashed.py:act", "ddpg.py:act")),
        ("buffer add", ("method 'add' of 'rlcore._core.RawBuffer'",)),
        ("sample", ("replay.py:sample", "her.py:sample")),
        ("update: backward", ("method 'run_backward'",)),
        ("update: optimizer", ("adam.py:step", "torch._fused_adam_")),
        ("update (total)", ("sac.py:update", "ddpg.py:update")),
        ("stats/logging", ("off_policy.py:__next__",)),
    ],
    "sb3": [
        ("env step", ("dummy_vec_env.py:step_wait",)),
        ("act", ("off_policy_algorithm.py:_sample_action",)),
        ("buffer add", ("off_policy_algorithm.py:_store_transition",)),
        ("sample", ("buffers.py:sample", "her_replay_buffer.py:sample")),
        ("update: backward", ("method 'run_backward'",)),
        ("update: optimizer", ("adam.py:step", "torch._fused_adam_")),
        ("update (total)", ("sac.py:train", "td3.py:train")),
        ("stats/logging", ("off_policy_algorithm.py:learn",)),
    ],
}


def _cumtime(stats: pstats.Stats, needles: tuple[str, ...]) -> float:
    """The largest cumulative time among the functions matching ``needles`` (matches can nest)."""
    best = 0.0
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{Path(file).name}:{func}" if not file.startswith("~") else func
        if any(n in key for n in needles):
            best = max(best, ct)
    return best


def profile_task(task: str, steps: int, warmup: int, seed: int) -> None:
    """cProfile ``steps`` env steps of each library and print the time per component.

    cProfile adds a per-call cost that inflates Python-heavy parts; the shares, not the absolute
    times, are the figure to read. "stats/logging" is the whole loop minus the other components.
    """
    make_ours, make_theirs, _ = BUILDERS[task]
    for make in (make_ours, make_theirs):
        runner = make(seed)
        runner.advance(warmup)
        prof = cProfile.Profile()
        wall = time.perf_counter()
        prof.enable()
        runner.advance(steps)
        prof.disable()
        wall = time.perf_counter() - wall
        stats = pstats.Stats(prof)
        comps = COMPONENTS[runner.library]
        times = {name: _cumtime(stats, needles) for name, needles in comps}
        loop = times.pop("stats/logging")
        update = times.pop("update (total)")
        parts = {k: v for k, v in times.items() if not k.startswith("update:")}
        update_rest = update - times["update: backward"] - times["update: optimizer"]
        if runner.library == "sb3":  # SB3 samples inside train(); rlcore's trainer samples outside update()
            update_rest -= times["sample"]
        parts["update: forward + losses + targets"] = update_rest
        parts["update: backward"] = times["update: backward"]
        parts["update: optimizer"] = times["update: optimizer"]
        parts["loop overhead (stats, logging, trainer/collector glue)"] = loop - sum(parts.values())
        total = sum(parts.values())
        print(f"\n{task} / {runner.library}: {steps} env steps profiled, {wall:.2f} s wall under cProfile")
        for name, t in parts.items():
            print(f"  {name:<55s} {1e6 * t / steps:8.0f} us/step  {100 * t / total:5.1f} %")
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
        print("\n".join(buf.getvalue().splitlines()[6:26]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=(*TASKS, "all"), default="all")
    parser.add_argument("--rounds", type=int, default=5, help="timed chunks per library")
    parser.add_argument("--steps", type=int, default=2000, help="env steps per timed chunk")
    parser.add_argument("--warmup", type=int, default=500, help="untimed env steps first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="3 rounds x 300 steps (~2 minutes)")
    parser.add_argument("--profile", action="store_true", help="cProfile breakdown instead of timing")
    parser.add_argument("--json", type=Path, default=None, help="write the medians here")
    parser.add_argument(
        "--ddpg-net",
        default="256,256,256",
        help="hidden widths of both libraries' DDPG actor and critic (default 256,256,256)",
    )
    args = parser.parse_args()
    DDPG_SETTINGS["net_arch"] = [int(w) for w in args.ddpg_net.split(",")]
    if args.quick:
        args.rounds, args.steps, args.warmup = 3, 300, 300
    torch.set_num_threads(1)
    _register_robotics()
    tasks = TASKS if args.task == "all" else (args.task,)
    if args.profile:
        for task in tasks:
            profile_task(task, args.steps, args.warmup, args.seed)
        return
    results: list[dict[str, Any]] = []
    for task in tasks:
        results += bench_task(task, args.rounds, args.steps, args.warmup, args.seed)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
