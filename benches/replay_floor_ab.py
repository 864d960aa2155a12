"""Issue 20's figures: rlcore's replay hot calls next to the floor and the peers, in one process,
interleaved (every round times each case once, in turn), in CPU time of the process (the machine
is shared: wall time counts other processes' turns), medians and spread over rounds.

The cases are the benchmark suite's own (``benches/suite``: same data, same peer adapters):
sample(256) and sample(256, n_step=3) at 10k, 200k and 1M with the floor (``_floor_gather``) and
rlox; PER sample(256) + update_priorities(256) at 10k and 1M with rlox and cpprb; HER
sample(256) with the native reward at 100k with rlox; add of one transition / one 8-env step and
extend of 1,000 rows with rlox.

    wt-py benches/replay_floor_ab.py --json /tmp/new.json
    PYTHONPATH=/tmp/base/python python benches/replay_floor_ab.py --json /tmp/base.json  # a build without _floor_gather
    python benches/replay_floor_ab.py --table /tmp/base.json /tmp/new.json

Not part of the test suite.
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

sys.path.insert(0, str(Path(__file__).resolve().parent / "suite"))

import conftest as C  # noqa: E402
import test_bench_add as A  # noqa: E402
import test_bench_her as H  # noqa: E402
import test_bench_per as P  # noqa: E402
import test_bench_sample as S  # noqa: E402


def cases(only: str) -> dict[tuple[str, str], Callable[[], Any]]:
    """(group, library) -> the operation, built like the suite builds it; peers that are not
    installed are left out."""
    out: dict[tuple[str, str], Callable[[], Any]] = {}

    def add(group: str, lib: str, make: Callable[[], tuple[Any, str]]) -> None:
        if only and only not in group:
            return
        try:
            op, _ = make()
        except BaseException as e:  # noqa: BLE001 - a missing peer (pytest.skip) is left out
            print(f"skip {group} / {lib}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            return
        out[(group, lib)] = op

    for cap in S.CAPACITIES:
        g = f"sample(256) @ {C.fmt_cap(cap)}"
        add(g, "rlcore", lambda cap=cap: S._sample_op("rlcore", cap))
        add(g, "floor", lambda cap=cap: S._sample_op("floor", cap))
        add(g, "rlox", lambda cap=cap: S._sample_op("rlox", cap))
        add(f"sample(256, n_step=3) @ {C.fmt_cap(cap)}", "rlcore", lambda cap=cap: S._nstep_op("rlcore", cap))
    for cap in (10_000, 1_000_000):
        g = f"PER sample(256) + update_priorities(256) @ {C.fmt_cap(cap)}"
        for lib in ("rlcore", "rlox", "cpprb"):
            add(g, lib, lambda lib=lib, cap=cap: P._per_op(lib, cap))
    for lib in ("rlcore", "rlox"):
        add("HER sample(256), native reward @ 100k", lib, lambda lib=lib: H._her_op(lib, 100_000, "native"))
        add("add one transition", lib, lambda lib=lib: A._add_op(lib, 1))
        add("add one 8-env step", lib, lambda lib=lib: A._add_op(lib, 8))
        add("extend 1,000 rows", lib, lambda lib=lib: A._chunk_op(lib))
    return out


def measure(ops: dict[tuple[str, str], Callable[[], Any]], rounds: int, block_s: float) -> dict[str, Any]:
    """µs per call: per round, each op runs one block of calls sized to about ``block_s`` CPU
    seconds; median, min and max over rounds."""
    reps = {}
    for k, op in ops.items():
        op()
        t = time.process_time()
        n = 0
        while time.process_time() - t < block_s / 4:
            op()
            n += 1
        reps[k] = max(1, int(n * 4))
    res: dict[tuple[str, str], list[float]] = {k: [] for k in ops}
    for _ in range(rounds):
        for k, op in ops.items():
            n = reps[k]
            t = time.process_time_ns()
            for _ in range(n):
                op()
            res[k].append((time.process_time_ns() - t) / n / 1000)
    return {
        f"{g}|{lib}": {"median": statistics.median(v), "min": min(v), "max": max(v), "calls": reps[(g, lib)]}
        for (g, lib), v in res.items()
    }


def table(paths: list[Path]) -> str:
    """Markdown: per group, rlcore of each file (median [min, max] µs), then from the last file the
    floor, the peers, rlcore / floor and peer / rlcore."""
    runs = [json.loads(p.read_text()) for p in paths]
    labels = [r["label"] for r in runs]
    last = runs[-1]["results"]
    groups = list(dict.fromkeys(k.split("|")[0] for r in runs for k in r["results"]))

    def fmt(x: dict[str, float] | None) -> str:
        return f"{x['median']:.2f} [{x['min']:.2f}, {x['max']:.2f}]" if x else "–"

    lines = [
        "| group | "
        + " | ".join(f"rlcore {lb}" for lb in labels)
        + " | floor | peers | rlcore / floor | peer / rlcore |",
        "|---|" + "---:|" * (len(labels) + 4),
    ]
    for g in groups:
        new, fl = last.get(f"{g}|rlcore"), last.get(f"{g}|floor")
        peers = {
            k.split("|")[1]: v
            for k, v in last.items()
            if k.startswith(g + "|") and k.split("|")[1] not in ("rlcore", "floor")
        }
        cells = [fmt(r["results"].get(f"{g}|rlcore")) for r in runs]
        cells.append(fmt(fl))
        cells.append(", ".join(f"{p} {v['median']:.2f}" for p, v in peers.items()) or "–")
        cells.append(f"{new['median'] / fl['median']:.2f}" if new and fl else "–")
        cells.append(", ".join(f"{p} {v['median'] / new['median']:.2f}" for p, v in peers.items()) if new else "–")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--label", default="", help="name of this build in the table")
    ap.add_argument("--only", default="", help="only groups whose name contains this")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block-s", type=float, default=0.02, help="CPU seconds per op per round")
    ap.add_argument("--table", type=Path, nargs="+", help="print the table of these result files")
    a = ap.parse_args()
    if a.table:
        print(table(a.table))
        return
    import rlcore

    ops = cases(a.only)
    if not hasattr(rlcore.ReplayBuffer, "_floor_gather"):
        ops = {k: v for k, v in ops.items() if k[1] != "floor"}
    res = measure(ops, a.rounds, a.block_s)
    for k, v in res.items():
        print(f"{k:<70} {v['median']:9.2f} µs  [{v['min']:.2f}, {v['max']:.2f}]", flush=True)
    if a.json:
        a.json.write_text(json.dumps({"label": a.label or rlcore.__file__, "results": res}, indent=1))


if __name__ == "__main__":
    main()
