"""Long proofs for ``rlcore.compat.sb3``: SB3's own SAC trained with SB3's buffer and with rlcore's.

Each run trains one SB3 algorithm with one buffer class and one seed, times every ``sample``
(one per gradient step) and every ``add`` (one per vector-env step) of the buffer inside the
run, evaluates the final policy, and appends one JSON line to ``--out``::

    nice -n 10 python benches/compat_sb3_runs.py pendulum --buffer sb3 --seed 0 --steps 10000
    nice -n 10 python benches/compat_sb3_runs.py pendulum --buffer rlcore --seed 0 --steps 10000
    nice -n 10 python benches/compat_sb3_runs.py fetch --buffer rlcore --seed 0 --steps 6000
    python benches/compat_sb3_runs.py --report runs.jsonl   # the table of docs/compat.md

Settings: Pendulum-v1 SAC as the rl-baselines3-zoo (learning rate 1e-3, otherwise SB3's
defaults: buffer 1e6, batch 256, learning starts 100); FetchReach-v4 SAC+HER as the zoo's
her.yml (future strategy, 4 sampled goals, gamma 0.95, lr 1e-3, batch 256, net [64, 64],
learning starts 1000) without VecNormalize. One torch thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def _timed(buf: Any, name: str, acc: list[float]) -> None:
    """Replace ``buf.<name>`` by a wrapper that appends each call's seconds to ``acc``."""
    inner = getattr(buf, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = inner(*args, **kwargs)
        acc.append(time.perf_counter() - t0)
        return out

    setattr(buf, name, wrapper)


def _score(model: Any, env: Any, task: str, n_eval: int) -> tuple[float, float | None]:
    """Deterministic policy's (success rate, mean final distance to the goal) (fetch) or (mean
    return, None) (pendulum) over ``n_eval`` episodes. The final distance is
    ``||achieved_goal - desired_goal||_2`` of the last observation of each episode, in metres."""
    from stable_baselines3.common.evaluation import evaluate_policy

    if task != "fetch":
        score, _ = evaluate_policy(model, env, n_eval_episodes=n_eval, deterministic=True)
        return float(score), None
    import numpy as np

    successes, distances = [], []
    for _ in range(n_eval):
        obs, _ = env.reset()
        done = False
        info: dict[str, Any] = {}
        while not done:
            act, _ = model.predict(obs, deterministic=True)
            obs, _, term, trunc, info = env.step(act)
            done = term or trunc
        successes.append(float(info["is_success"]))
        distances.append(float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"])))
    return statistics.fmean(successes), statistics.fmean(distances)


def run(
    task: str, buffer: str, seed: int, steps: int, eval_every: int = 0, buffer_seed: int | None = None
) -> dict[str, Any]:
    """One training run; ``buffer`` is an arm: ``sb3`` (SB3's own buffer), ``rlcore`` (rlcore's
    compat buffer as shipped), ``rlcore-parity`` / ``rlcore-default`` (the compat HER buffer with
    ``exact_parity=True`` / ``False``: SB3's sampling rules, or rlcore's own HER defaults)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    if task == "pendulum":
        from rlcore.compat.sb3 import ReplayBuffer as RlBuffer
        from stable_baselines3.common.buffers import ReplayBuffer as Sb3Buffer

        env_id, kwargs = "Pendulum-v1", dict(learning_rate=1e-3)
        klass = Sb3Buffer if buffer == "sb3" else RlBuffer
        model = SAC("MlpPolicy", env_id, seed=seed, replay_buffer_class=klass, **kwargs)
    else:
        import gymnasium_robotics
        from rlcore.compat.sb3 import HerReplayBuffer as RlHer
        from stable_baselines3.her import HerReplayBuffer as Sb3Her

        gym.register_envs(gymnasium_robotics)
        env_id = "FetchReach-v4"
        model = SAC(
            "MultiInputPolicy",
            env_id,
            seed=seed,
            replay_buffer_class=Sb3Her if buffer == "sb3" else RlHer,
            replay_buffer_kwargs=dict(
                n_sampled_goal=4,
                goal_selection_strategy="future",
                **({"seed": buffer_seed} if buffer != "sb3" and buffer_seed is not None else {}),
                **_arm_kwargs(buffer),
            ),
            gamma=0.95,
            learning_rate=1e-3,
            batch_size=256,
            learning_starts=1000,
            policy_kwargs=dict(net_arch=[64, 64], n_critics=1),
        )
    if buffer == "sb3" and buffer_seed is not None:
        # SB3's buffers sample from the global numpy generator (nothing else in SAC draws from it)
        import numpy as np

        np.random.seed(buffer_seed)  # noqa: NPY002
    rb = model.replay_buffer
    sample_s: list[float] = []
    add_s: list[float] = []
    _timed(rb, "sample", sample_s)
    _timed(rb, "add", add_s)
    # a separate env for evaluation, so the training env's episodes are not disturbed
    curve_env = gym.make(env_id)
    curve_env.reset(seed=20_000 + seed)
    curve: list[tuple[int, float]] = []
    eval_s = [0.0]

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            if eval_every and self.num_timesteps % eval_every == 0:
                t = time.perf_counter()
                curve.append(
                    (
                        self.num_timesteps,
                        _score(self.model, curve_env, task, 10 if task == "pendulum" else 20)[0],
                    )
                )
                eval_s[0] += time.perf_counter() - t
            return True

    t0 = time.perf_counter()
    model.learn(steps, callback=Curve())
    wall = time.perf_counter() - t0 - eval_s[0]
    eval_env = gym.make(env_id)
    eval_env.reset(seed=10_000 + seed)
    n_eval = 10 if task == "pendulum" else 50
    score, final_distance = _score(model, eval_env, task, n_eval)
    return {
        "task": task,
        "buffer": buffer,
        "seed": seed,
        "steps": steps,
        "score": float(score),
        "score_kind": "success rate (50 episodes)" if task == "fetch" else "mean return (10 episodes)",
        "grad_steps": len(sample_s),
        "sample_us_median": 1e6 * statistics.median(sample_s),
        "sample_us_mean": 1e6 * statistics.fmean(sample_s),
        "add_us_median": 1e6 * statistics.median(add_s),
        "buffer_s_total": sum(sample_s) + sum(add_s),
        "wall_s": wall,
        "curve": curve,
        # area under the eval curve: the mean of its points (each eval_every env steps)
        "auc": statistics.fmean(v for _, v in curve) if curve else None,
        "final_distance": final_distance,
        "buffer_seed": buffer_seed,
        "commit": _commit(),
    }


def _arm_kwargs(buffer: str) -> dict[str, Any]:
    if buffer == "rlcore-parity":
        return {"exact_parity": True}
    if buffer == "rlcore-default":
        import inspect

        from rlcore.compat.sb3 import HerReplayBuffer

        # before the exact-parity mode existed, the compat buffer had rlcore's defaults
        if "exact_parity" in inspect.signature(HerReplayBuffer).parameters:
            return {"exact_parity": False}
    return {}


def _commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def report(path: Path) -> str:
    every = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in every if r.get("buffer_seed") is None]
    reseeded = [r for r in every if r.get("buffer_seed") is not None]
    by: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["task"], r["steps"], r["buffer"])].append(r)
    lines = [
        "| task | buffer | seeds | env steps | final score per seed | sample µs/grad step (median) | add µs/env step (median) | buffer share of wall time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (task, _, buffer), rs in sorted(by.items()):
        rs.sort(key=lambda r: r["seed"])
        lines.append(
            f"| {task} | {buffer} | {', '.join(str(r['seed']) for r in rs)} | {rs[0]['steps']} | "
            f"{', '.join(format(r['score'], '.3g') for r in rs)} | "
            f"{statistics.median(r['sample_us_median'] for r in rs):.1f} | "
            f"{statistics.median(r['add_us_median'] for r in rs):.1f} | "
            f"{100 * statistics.fmean(r['buffer_s_total'] / r['wall_s'] for r in rs):.1f} % |"
        )
    lines += ["", _paired(rows)]
    if reseeded:
        lines.append("- the same runs with only the buffer's sampling reseeded (final score):")
        for r in sorted(reseeded, key=lambda r: (r["task"], r["seed"], r["buffer"], r["buffer_seed"])):
            lines.append(
                f"  - {r['task']} seed {r['seed']}, {r['buffer']} buffer seed {r['buffer_seed']}: {r['score']:.3g}"
            )
    return "\n".join(lines)


def _paired(rows: list[dict[str, Any]]) -> str:
    """Per (task, steps): the seeds run with both buffers, their mean final scores ± standard
    error, and the mean paired difference rlcore − sb3 ± its standard error."""
    out = []
    score: dict[tuple[str, int], dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        score[(r["task"], r["steps"])][r["buffer"]][r["seed"]] = r["score"]
    for (task, steps), by in sorted(score.items()):
        seeds = sorted(set(by.get("sb3", {})) & set(by.get("rlcore", {})))
        if len(seeds) < 2:
            continue

        def mean_se(xs: list[float]) -> str:
            return f"{statistics.fmean(xs):.3g} ± {statistics.stdev(xs) / len(xs) ** 0.5:.2g}"

        sb3 = [by["sb3"][k] for k in seeds]
        rl = [by["rlcore"][k] for k in seeds]
        diff = [a - b for a, b in zip(rl, sb3, strict=True)]
        out.append(
            f"- {task}, {steps} steps, seeds {', '.join(map(str, seeds))}: sb3 {mean_se(sb3)}, "
            f"rlcore {mean_se(rl)}; paired difference rlcore − sb3 {mean_se(diff)} "
            f"(rlcore better on {sum(d > 0 for d in diff)}, worse on {sum(d < 0 for d in diff)})"
        )
    return "\n".join(out)


def arms_report(path: Path, baseline: str = "sb3") -> str:
    """Paired table of every arm against ``baseline`` on the seeds every arm ran: final success,
    mean final distance to the goal, area under the eval curve (mean ± standard error), the
    paired difference and its sign-flip p-value (``benches/paired.py``)."""
    from paired import paired_table

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("buffer_seed") is None and r.get("auc") is not None]
    metrics = [("score", "final success"), ("final_distance", "final distance (m)"), ("auc", "eval-curve AUC")]
    return paired_table(rows, metrics, baseline)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", choices=["pendulum", "fetch"])
    p.add_argument("--buffer", choices=["sb3", "rlcore", "rlcore-parity", "rlcore-default"], default="rlcore")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument(
        "--buffer-seed",
        type=int,
        default=None,
        help="reseed only the buffer's sampling (same env, nets, warm-up)",
    )
    p.add_argument("--eval-every", type=int, default=0, help="also record the eval score every N env steps")
    p.add_argument("--out", type=Path, default=Path("runs/compat_sb3.jsonl"))
    p.add_argument("--report", type=Path, default=None, help="print the markdown table of a JSONL file")
    p.add_argument(
        "--arms-report", type=Path, default=None, help="print the paired three-arm table of a JSONL file"
    )
    a = p.parse_args(argv)
    if a.report is not None:
        print(report(a.report))
        return
    if a.arms_report is not None:
        print(arms_report(a.arms_report))
        return
    if a.task is None:
        p.error("give a task (pendulum or fetch) or --report FILE")
    res = run(a.task, a.buffer, a.seed, a.steps, a.eval_every, a.buffer_seed)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res), file=sys.stdout)


if __name__ == "__main__":
    main()
