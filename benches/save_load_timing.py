"""Save, load and restore times of a full buffer (obs 17, act 6 float32, ~90 % full), as JSON
lists of seconds, so that two versions of the code can be compared run by run:

    for i in 1 2 3 4 5 6 7 8; do
      PYTHONPATH=OLD/python nice python benches/save_load_timing.py --rows 1000000 --repeats 5
      PYTHONPATH=NEW/python nice python benches/save_load_timing.py --rows 1000000 --repeats 5
    done

Uses the public API only. Not part of the test suite."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import rlcore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = args.rows
    buf = rlcore.ReplayBuffer(rows, seed=0)
    rng = np.random.default_rng(0)
    t_len = rows * 9 // 10
    obs = rng.standard_normal((t_len + 1, 17)).astype(np.float32)
    ends = np.arange(t_len) % 50 == 49
    act = rng.standard_normal((t_len, 6)).astype(np.float32)
    buf.extend(obs[:-1], act, rng.standard_normal(t_len), np.zeros(t_len, bool), ends, obs[1:])
    target = rlcore.ReplayBuffer(rows, seed=1)
    times: dict[str, list[float]] = {"save": [], "load": [], "restore": []}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "save"
        for _ in range(args.repeats):
            t = time.perf_counter()
            buf.save(root)
            times["save"].append(time.perf_counter() - t)
            t = time.perf_counter()
            loaded = rlcore.ReplayBuffer.load(root)
            times["load"].append(time.perf_counter() - t)
            del loaded
            t = time.perf_counter()
            target.restore(root)
            times["restore"].append(time.perf_counter() - t)
    print(json.dumps({"code": rlcore.__file__, "rows": rows, **times}))


if __name__ == "__main__":
    main()
