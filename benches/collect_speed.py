"""Collection alone: random actions on 8 envs written into a replay buffer, per env backend, next to
each backend's raw speed without rlcore (the floor).

Arms (``--env``, default CartPole-v1; 8 envs; one process, one torch-free thread of Python):

* ``gymnasium-sync``: ``SyncVectorEnv``; ``gymnasium-async``: ``AsyncVectorEnv`` (worker processes);
* ``envpool-sync``: EnvPool ``batch_size = 8``; ``envpool-async``: EnvPool ``batch_size = 4`` (each
  step acts on the 4 envs that finished first and writes them with one ``add(env_ids=...)``).

For each, ``rlcore`` is ``Collector(make_vec(...), ReplayBuffer).collect(n)`` with random actions
(the first K rows of the batched action space's sample), and ``floor`` is the same env stepped by a
bare loop with the same random actions and nothing stored (``step`` or ``send``/``recv``). Rounds
alternate over all arms; the figures are medians of env steps (transitions) per wall-clock second.

Usage::

    python benches/collect_speed.py                  # 5 rounds x 20,000 env steps per arm
    python benches/collect_speed.py --rounds 3 --steps 5000 --env Pendulum-v1
    python benches/collect_speed.py --json out.json
    python benches/collect_speed.py --env ALE/Breakout-v5 --rounds 3 --steps 4000

An Atari id (``rlcore.envs.atari.is_atari``) runs every arm through ``make_atari_vec`` with the
training settings (EnvPool: its own C++ preprocessing) into the Atari buffer (``frame_stack=4``).

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import rlcore
from rlcore.collect.collector import Collector
from rlcore.envs import make_vec
from rlcore.envs.atari import is_atari, make_atari_vec

N = 8
ARMS = {
    "gymnasium-sync": ("gymnasium", None),
    "gymnasium-async": ("gymnasium", N),
    "envpool-sync": ("envpool", None),
    "envpool-async": ("envpool", 4),
}


def floor(envs: Any, steps: int) -> float:
    """A bare loop: random actions, nothing stored (EnvPool async: send/recv by env id)."""
    space = envs.action_space
    start = time.perf_counter()
    done = 0
    if getattr(envs, "batch_size", N) < N:
        envs.reset()
        ids = np.arange(N)
        while done < steps:
            envs.send(space.sample()[: len(ids)], ids)
            *_, ids = envs.recv()
            done += len(ids)
    else:
        envs.reset(seed=0)
        while done < steps:
            envs.step(space.sample())
            done += N
    return done / (time.perf_counter() - start)


def make(env_id: str, backend: str, async_batch: int | None) -> Any:
    if is_atari(env_id):
        return make_atari_vec(
            env_id, N, backend=backend, async_batch=async_batch, seed=0, terminal_on_life_loss=True  # type: ignore[arg-type]
        )
    return make_vec(env_id, N, backend=backend, async_batch=async_batch, seed=0)  # type: ignore[arg-type]


def collect(envs: Any, steps: int) -> float:
    frames = len(envs.single_observation_space.shape) == 3  # an Atari stack [4, 84, 84]
    buf = rlcore.ReplayBuffer(steps + 4 * N + 1000, num_envs=N, seed=0, frame_stack=4 if frames else None)
    col = Collector(envs, buf)
    col.reset(seed=0)
    start = time.perf_counter()
    stats = col.collect(steps)
    return stats.env_steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per arm and round")
    parser.add_argument("--json", type=Path, default=None, help="write the medians here")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # EnvPool's spaces warn about float64 bounds
    arms = {k: v for k, v in ARMS.items() if v[0] == "gymnasium" or importlib.util.find_spec("envpool")}
    envs = {k: make(args.env, b, a) for k, (b, a) in arms.items()}
    results: dict[tuple[str, str], list[float]] = {}
    for e in envs.values():  # warm-up
        floor(e, 2000)
        collect(e, 2000)
    for r in range(args.rounds):
        line = []
        for k, e in envs.items():
            for what, fn in (("floor", floor), ("rlcore", collect)):
                v = fn(e, args.steps)
                results.setdefault((k, what), []).append(v)
                line.append(f"{k}/{what} {v:.0f}")
        print(f"round {r}: " + ", ".join(line), flush=True)
    print(f"\n{args.env}, {N} envs, random actions, env steps/s (median of {args.rounds} rounds)")
    print(f"{'backend':<18}{'floor':>10}{'rlcore':>10}{'rlcore/floor':>14}")
    for k in envs:
        f, c = statistics.median(results[(k, "floor")]), statistics.median(results[(k, "rlcore")])
        print(f"{k:<18}{f:>10.0f}{c:>10.0f}{c / f:>14.2f}")
    for e in envs.values():
        e.close()
    if args.json is not None:
        rows = [
            {
                "task": f"collect-{args.env}",
                "arm": k,
                "what": w,
                "env_steps_per_s_wall": statistics.median(v),
                "per_round": v,
            }
            for (k, w), v in results.items()
        ]
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
