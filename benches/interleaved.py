"""Interleaved timing of the operations that the speed targets compare (``make bench`` runs it after
the pytest-benchmark suite; ``benches/report.py`` reads its JSON).

Why: pytest-benchmark times one test after another, so the two sides of a comparison (rlcore and
rlox at 10k, sample at 1M and at 10k) are timed seconds apart. On a shared machine whose speed
changes in phases of seconds, the two can fall in different phases: on the 2-core KVM guest of
2026-12-03, rlox / rlcore for HER sample(256) at 100k came out 1.92x to 3.83x over six runs of the
suite, and add one transition 0.71x to 2.33x.

How: the operations of one *set* (the rows a group of targets compares) are built once in this
process and timed in rounds. Each round times every operation for one block (calls calibrated to
about ``BLOCK_S`` seconds, after as many untimed calls, which bring its data back into the caches
that the other operations' blocks used), in an order rotated by one every round; a block's time is
CPU time of this process per call. The
ratio of two operations is the median over rounds of the ratio of their blocks in that round, so
both sides of every ratio are timed within a fraction of a second of each other. The operations are
the suite's own (``benches/suite``'s builders), on the same data.

Usage::

    python benches/interleaved.py --out FILE.json [--rounds N] [--sets NAME ...] [--label NAME]
    python benches/interleaved.py --table OLD.json NEW.json    # two builds (or runs) side by side

To time two builds against each other, run it once per build (e.g. ``PYTHONPATH=/tmp/old/python``
for an old one, labelled) and print the table of both files; a build that lacks an operation (an
old one without the floor) leaves it out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parent / "suite"
BLOCK_S = 0.005
ROUNDS = 31

Op = Callable[[], Any]
Clock = Callable[[], float]


def calibrate(op: Op, block_s: float = BLOCK_S, clock: Clock = time.process_time) -> int:
    """Calls of ``op`` per block: about ``block_s`` seconds of it, at least 1 (after 3 calls that
    take a freshly built buffer's first-touch costs out of the estimate)."""
    for _ in range(3):
        op()
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            op()
        dt = clock() - t0
        if dt >= block_s / 4 or n >= 1 << 20:
            return max(1, round(n * block_s / max(dt, 1e-9)))
        n *= 4


def interleave(
    ops: Sequence[tuple[Op, int]], rounds: int, clock: Clock = time.process_time
) -> list[list[float]]:
    """Per operation, its time per call (seconds) in each round: ``ops[i] = (op, calls per block)``,
    each block after as many untimed calls; round r times the operations from index r mod n on, so
    no operation always follows the same one."""
    n = len(ops)
    times: list[list[float]] = [[0.0] * rounds for _ in range(n)]
    for r in range(rounds):
        for k in range(n):
            i = (r + k) % n
            op, calls = ops[i]
            for _ in range(calls):
                op()
            t0 = clock()
            for _ in range(calls):
                op()
            times[i][r] = (clock() - t0) / calls
    return times


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """The median over rounds of ``b[r] / a[r]``: how many times ``a``'s time ``b`` takes, from
    blocks timed in the same round."""
    return statistics.median(y / x for x, y in zip(a, b, strict=True) if x > 0)


def _sets() -> dict[str, list[tuple[str, str, Callable[[], tuple[Op, str]]]]]:
    """Each set's operations as ``(group, lib, builder)``; group and lib are the report's names."""
    sys.path.insert(0, str(SUITE))
    import test_bench_add as add
    import test_bench_frames as frames
    import test_bench_her as her
    import test_bench_per as per
    import test_bench_sample as sample
    from conftest import fmt_cap

    def at(op: str, cap: int) -> str:
        return f"{op} @ {fmt_cap(cap)}"

    sets: dict[str, list[tuple[str, str, Callable[[], tuple[Op, str]]]]] = {
        "sample": [],
        "add": [],
        "her": [],
        "per": [],
        "frames": [],
        "envs": [],
    }
    for cap in sample.CAPACITIES:
        for lib in ("rlcore", "rlox", "floor"):
            sets["sample"].append(
                (at("sample(256)", cap), lib, lambda lib=lib, cap=cap: sample._sample_op(lib, cap))
            )
        for lib in ("rlcore", "floor"):
            sets["sample"].append(
                (
                    at("sample(256, n_step=3)", cap),
                    lib,
                    lambda lib=lib, cap=cap: sample._nstep_op(lib, cap),
                )
            )
    for n_envs in (1, sample.MANY_ENVS):

        def over_envs(n: int = n_envs) -> tuple[Op, str]:
            buf = sample.build_rlcore_many_envs(sample.CAPACITY, n)
            return (lambda: buf.sample(sample.BATCH)), ""

        sets["envs"].append(
            (
                at(f"sample({sample.BATCH}) over envs", sample.CAPACITY),
                f"rlcore ({sample._envs(n_envs)})",
                over_envs,
            )
        )
    for lib in ("rlcore", "rlox"):
        sets["add"].append(("add one transition", lib, lambda lib=lib: add._add_op(lib, 1)))
        sets["add"].append(("add one 8-env step", lib, lambda lib=lib: add._add_op(lib, 8)))
        sets["add"].append(("add a 1,000-row chunk", lib, lambda lib=lib: add._chunk_op(lib)))
    for cap in her.CAPACITIES:
        for lib in ("rlcore", "rlox", "sb3", "floor"):
            sets["her"].append(
                (
                    at("HER sample(256), native reward", cap),
                    lib,
                    lambda lib=lib, cap=cap: her._her_op(lib, cap, "native"),
                )
            )
    for cap in per.CAPACITIES:
        for lib in ("rlcore", "rlox", "cpprb"):
            sets["per"].append(
                (
                    at("PER sample(256) + update_priorities(256)", cap),
                    lib,
                    lambda lib=lib, cap=cap: per._per_op(lib, cap),
                )
            )
    for lib in ("rlcore", "sb3", "floor"):
        sets["frames"].append(
            (at(f"Atari frames sample({frames.B})", frames.CAP), lib, lambda lib=lib: frames._op(lib))
        )
    return sets


def run_set(
    name: str, entries: list[tuple[str, str, Callable[[], tuple[Op, str]]]], rounds: int
) -> list[dict[str, Any]]:
    """Build the set's operations (a peer that fails to build is left out, with its reason) and
    time them interleaved; one record per operation."""
    import pytest

    built: list[tuple[str, str, Op]] = []
    skipped: list[dict[str, Any]] = []
    for group, lib, build in entries:
        try:
            op, _ = build()
            op()
        except (Exception, pytest.skip.Exception) as e:  # noqa: BLE001 - a peer's failure is its skip
            if lib.startswith("rlcore"):
                raise
            skipped.append(
                {"set": name, "group": group, "lib": lib, "skipped": f"{type(e).__name__}: {str(e)[:160]}"}
            )
            continue
        built.append((group, lib, op))
    ops = [(op, calibrate(op)) for _, _, op in built]
    times = interleave(ops, rounds)
    return [
        {"set": name, "group": g, "lib": lib, "calls": c, "rounds_s": t}
        for (g, lib, _), (_, c), t in zip(built, ops, times, strict=True)
    ] + skipped


def table(paths: Sequence[Path]) -> str:
    """Markdown: per (group, library), the median µs per call of each file's records (each file a
    build or a run, headed by its label) and, from the last file, the time over rlcore's of the same
    group (median of per-round ratios)."""
    runs = [json.loads(p.read_text()) for p in paths]
    timed = [{(r["group"], r["lib"]): r for r in run["records"] if "rounds_s" in r} for run in runs]
    keys = list(dict.fromkeys(k for t in timed for k in t))
    last = timed[-1]
    lines = [
        "| group | library | " + " | ".join(f"{run['label']} µs" for run in runs) + " | / rlcore |",
        "|---|---|" + "---:|" * (len(runs) + 1),
    ]
    for g, lib in keys:
        cells = [
            f"{statistics.median(t[(g, lib)]['rounds_s']) * 1e6:.2f}" if (g, lib) in t else "–" for t in timed
        ]
        base, this = last.get((g, "rlcore")), last.get((g, lib))
        ratio = f"{paired_ratio(base['rounds_s'], this['rounds_s']):.2f}" if base and this else "–"
        lines.append(f"| {g} | {lib} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benches/interleaved.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="JSON file of the per-round times")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--sets", nargs="*", help="only these sets (default: all)")
    ap.add_argument(
        "--label", default="", help="this build's name in --table (default: the rlcore module's path)"
    )
    ap.add_argument("--table", type=Path, nargs="+", help="print the Markdown table of these result files")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.out is None:
        ap.error("--out is required (or --table)")
    import rlcore

    sets = _sets()
    records: list[dict[str, Any]] = []
    for name, entries in sets.items():
        if args.sets and name not in args.sets:
            continue
        t0 = time.perf_counter()
        records += run_set(name, entries, args.rounds)
        print(
            f"interleaved set {name}: {len(entries)} operations in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    args.out.write_text(json.dumps({"label": args.label or rlcore.__file__, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
