"""A/B of the native binding: the per-call cost of the buffer's hot calls, to compare two builds of
``rlcore._core`` (e.g. main's and a branch's, both built with the release LTO profile).

One process measures one build; run it once per build with that build's ``python/`` first on
``PYTHONPATH`` (``--label`` names it), then ``--compare A.json B.json`` prints medians and ratios:

    PYTHONPATH=/tmp/mainbuild/python python benches/ab_binding.py --label main --json /tmp/a.json
    wt-py benches/ab_binding.py --label branch --json /tmp/b.json
    python benches/ab_binding.py --compare /tmp/a.json /tmp/b.json

Each operation runs ``--rounds`` blocks of calls after a warm-up; the figure is the fastest
block's mean time per call, in microseconds. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "suite"))

from conftest import (  # noqa: E402
    BATCH,
    CAPACITY,
    GAMMA,
    HER_EPS,
    HER_K,
    N_STEP,
    build_rlcore,
    cycler,
    fetch_reward,
    her_stream,
    steps,
    stream,
)


def _time(op: Callable[[], Any], calls: int, rounds: int) -> float:
    """Fastest of `rounds` blocks of `calls` calls: mean time per call of `op` (µs). The fastest
    block, not the median: on a shared machine the slower blocks measure the other load."""
    for _ in range(max(1, calls // 4)):
        op()
    blocks = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            op()
        blocks.append((time.perf_counter() - t0) / calls)
    return min(blocks) * 1e6


def _ops() -> dict[str, tuple[Callable[[], Any], int]]:
    import rlcore

    ops: dict[str, tuple[Callable[[], Any], int]] = {}

    # add: one vector step of 8 envs into a 200k ring
    add_buf = rlcore.ReplayBuffer(CAPACITY, num_envs=8, seed=0)
    nxt = cycler(steps(8))

    def add() -> None:
        s = nxt()
        add_buf.add(s["obs"], s["act"], s["rew"], s["terminated"], s["truncated"], s["obs_next"])

    ops["add(N=8)"] = (add, 500)

    # extend: 1000 steps at once into a 200k ring
    d = stream(1000)
    ext_buf = rlcore.ReplayBuffer(CAPACITY, seed=0)
    ops["extend(T=1000)"] = (
        lambda: ext_buf.extend(d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"]),
        100,
    )

    full = build_rlcore(CAPACITY)
    ops["sample(256)"] = (lambda: full.sample(BATCH), 500)
    ops["sample(256,n_step=3)"] = (lambda: full.sample(BATCH, n_step=N_STEP, gamma=GAMMA), 500)
    ops["sample(4096)"] = (lambda: full.sample(4096), 50)

    h = her_stream(2000)
    for name, kw in (
        ("native", {"distance_threshold": HER_EPS}),
        ("python", {"compute_reward": fetch_reward}),
    ):
        hb = rlcore.HERReplayBuffer(100_000, seed=0, strategy="future", future_k=HER_K, **kw)
        hb._extend(h["obs"], h["act"], h["rew"], h["terminated"], h["truncated"], h["obs_next"])
        ops[f"her_sample(256,{name})"] = ((lambda hb=hb: hb.sample(BATCH)), 250)

    per = build_rlcore(CAPACITY, kind="per")
    rng = np.random.default_rng(0)
    prios = [rng.uniform(0.01, 2.0, BATCH) for _ in range(64)]
    nextp = cycler(prios)

    def per_step() -> None:
        b = per.sample(BATCH)
        per.update_priorities(b.indices, nextp())

    ops["per_sample+update(256)"] = (per_step, 250)
    return ops


def run(label: str, rounds: int, out: Path | None) -> dict[str, float]:
    import rlcore

    res = {name: _time(op, calls, rounds) for name, (op, calls) in _ops().items()}
    print(f"{label}: rlcore from {Path(rlcore.__file__).parent}")
    for k, v in res.items():
        print(f"  {k:28s} {v:10.2f} us")
    if out is not None:
        out.write_text(json.dumps({"label": label, "us": res}))
    return res


def compare(paths: list[Path]) -> None:
    """Median and minimum per op over the runs of each label (same label: repeats)."""
    by: dict[str, list[dict[str, float]]] = {}
    for p in paths:
        r = json.loads(p.read_text())
        by.setdefault(r["label"], []).append(r["us"])
    labels = list(by)
    a, b = labels[0], labels[1]
    print(f"runs: {a} {len(by[a])}, {b} {len(by[b])}; median and min over runs, us per call")
    print(f"{'op':28s} {a:>10s} {b:>10s} {'ratio':>7s} {a + ' min':>10s} {b + ' min':>10s} {'ratio':>7s}")
    for op in by[a][0]:
        ma = statistics.median(r[op] for r in by[a])
        mb = statistics.median(r[op] for r in by[b])
        na, nb = min(r[op] for r in by[a]), min(r[op] for r in by[b])
        print(f"{op:28s} {ma:10.2f} {mb:10.2f} {mb / ma:7.3f} {na:10.2f} {nb:10.2f} {nb / na:7.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--label", default="build")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--json", type=Path)
    p.add_argument("--compare", nargs="+", type=Path)
    a = p.parse_args()
    if a.compare:
        compare(a.compare)
    else:
        run(a.label, a.rounds, a.json)


if __name__ == "__main__":
    main()
