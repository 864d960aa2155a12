"""Loading speed of offline datasets into a buffer: a generated D4RL-format HDF5 file of
``--steps`` transitions (Hopper-sized: obs 11, act 3 float32; 1000-step episodes, a terminal every
~400 steps, the rest timed out) is read with :func:`rlcore.datasets.load_d4rl` (HDF5 read, episode
ends, next observations, buffer fill), with and without ``next_observations`` in the file, and the
time per call is reported as transitions per second (best and median of ``--repeats``)::

    python benches/offline_load.py                  # 2M transitions
    python benches/offline_load.py --steps 1000000 --repeats 7

The file is written to a temporary directory and removed. Not part of the test suite (target:
>= 1M transitions/s on the development machine, issue 42)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import rlcore
from rlcore.datasets import load_d4rl, read_d4rl, write_d4rl


def make_file(path: Path, steps: int, *, next_obs: bool, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((steps + 1, 11)).astype(np.float32)
    term = rng.random(steps) < 1 / 400
    pos = np.arange(steps) % 1000
    trunc = (pos == 999) & ~term
    # observations continue inside an episode; a new episode starts after every end
    return write_d4rl(
        path,
        obs=obs[:-1],
        act=rng.uniform(-1, 1, (steps, 3)).astype(np.float32),
        rew=rng.standard_normal(steps).astype(np.float32),
        terminated=term,
        truncated=trunc,
        obs_next=obs[1:] if next_obs else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for next_obs in (False, True):
            path = make_file(Path(d) / f"data-{next_obs}.hdf5", args.steps, next_obs=next_obs)
            read_s, load_s = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                read_d4rl(path, progress=False)
                t1 = time.perf_counter()
                buffer = load_d4rl(
                    path, make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=0), progress=False
                )
                t2 = time.perf_counter()
                read_s.append(t1 - t0)
                load_s.append(t2 - t1)
            n = len(buffer)
            key = "with next_observations" if next_obs else "without next_observations"
            results[key] = {
                "file_steps": args.steps,
                "transitions_loaded": n,
                "file_mb": round(path.stat().st_size / 2**20, 1),
                "load_best_s": round(min(load_s), 3),
                "load_median_s": round(statistics.median(load_s), 3),
                "load_transitions_per_s_best": round(args.steps / min(load_s)),
                "load_transitions_per_s_median": round(args.steps / statistics.median(load_s)),
                "read_only_median_s": round(statistics.median(read_s), 3),
            }
            del buffer
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
