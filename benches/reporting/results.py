"""The raw results read into report rows: pytest-benchmark JSON into one row per (group, library),
rows into ordered groups with their ratios to rlcore, ``benches/interleaved.py``'s records; and
how numbers are written (times, bytes, ratios)."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from interleaved import paired_ratio

PEER_ORDER = ["rlcore", "rlox", "cpprb", "sb3", "tianshou", "torchrl"]
# the bench-only bare gather timed beside rlcore's sample (issue 20): its rows come last in a group and
# the headline shows rlcore's time over its time (how far the sampler is from the hardware)
FLOOR = "floor"
#: the pytest-benchmark options of every micro run (the page names the first four)
PYTEST_TIMING = [
    "--benchmark-min-rounds=10",
    "--benchmark-max-time=0.3",
    "--benchmark-warmup=on",
    "--benchmark-warmup-iterations=20",
    "--benchmark-columns=median,iqr,rounds",
    "--benchmark-sort=name",
]


def load_results(json_paths: list[Path]) -> list[dict[str, Any]]:
    """One row per (group, library): the median over runs of each run's median (and of its IQR),
    the smallest single time, all rounds, and the run-to-run spread of the medians. Times in µs."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for path in json_paths:
        for b in json.loads(path.read_text())["benchmarks"]:
            ex = b.get("extra_info", {})
            st = b["stats"]
            row = {
                "group": ex.get("group", b.get("group") or b["name"]),
                "op": ex.get("op", b.get("group") or b["name"]),
                "lib": ex.get("lib", b["name"]),
                "capacity": ex.get("capacity"),
                "obs": ex.get("obs"),
                "unit": ex.get("unit", "us"),
                "disk_bytes": ex.get("disk_bytes"),
                "note": ex.get("note", ""),
                "median": st["median"] * 1e6,
                "iqr": st["iqr"] * 1e6,
                "min": st["min"] * 1e6,
                "rounds": st["rounds"],
            }
            runs[(row["group"], row["lib"])].append(row)
    rows = []
    for rs in runs.values():
        meds = [r["median"] for r in rs]
        med = statistics.median(meds)
        rows.append(
            {
                **rs[0],
                "median": med,
                "iqr": statistics.median(r["iqr"] for r in rs),
                "min": min(r["min"] for r in rs),
                "rounds": sum(r["rounds"] for r in rs),
                "runs": len(rs),
                "spread": (max(meds) - min(meds)) / med if med else 0.0,
            }
        )
    return rows


def lib_key(lib: str) -> tuple[int, str]:
    base = lib.split(" ")[0]
    return (PEER_ORDER.index(base) if base in PEER_ORDER else len(PEER_ORDER), lib)


def by_group(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped and ordered (operation, capacity; libraries in PEER_ORDER) with their
    ``ratio`` = median / rlcore's median in the group."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["group"]].append(r)
    order = sorted(
        groups,
        key=lambda g: (
            _op_rank(groups[g][0]["op"]),
            obs_rank(groups[g][0]["obs"]),
            groups[g][0]["capacity"] or 0,
        ),
    )
    out = {}
    for g in order:
        rs = sorted(groups[g], key=lambda r: lib_key(r["lib"]))
        base = next((r["median"] for r in rs if r["lib"] == "rlcore"), None)
        if base is None:  # groups with rlcore variants only ("rlcore (pinned out=)", ...): the first
            base = next((r["median"] for r in rs if r["lib"].startswith("rlcore")), None)
        for r in rs:
            r["ratio"] = r["median"] / base if base else None
        out[g] = rs
    return out


# (prefix of the operation, rank); the first matching prefix wins, so specific ones come first
_OP_ORDER: list[tuple[str, float]] = [
    ("add one transition, obs", 20),
    ("sample(256), obs", 21),
    ("add one transition", 0),
    ("add one 8-env", 1),
    ("add a ", 2),
    ("sample(32)", 3),
    ("sample(256, n", 5),
    ("sample(256)", 4),
    ("sample(1024)", 4.5),
    ("GAE", 6),
    ("HER", 7),
    ("PER", 8),
    ("save", 9),
    ("load", 10),
    ("GPU", 30),
]


def _op_rank(op: str) -> float:
    return next((k for prefix, k in _OP_ORDER if op.startswith(prefix)), 99)


def obs_rank(obs: str | None) -> float:
    if obs is None:
        return 0
    m = re.match(r"(\d+)(x(\d+))?", obs)
    return math.prod(int(x) for x in (m.group(1), m.group(3)) if x) if m else 1e12


def is_gpu(group: str) -> bool:
    return group.startswith("GPU")


def headline_groups(groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The groups of the headline table: one per operation, at capacity 200k where measured at several
    (HER at 100k, PER at 1M); not sample(32)/(1024), the observation-size scale, the GPU or groups
    of rlcore variants only (e.g. sample over envs)."""
    wanted = []
    for g, rs in groups.items():
        cap = rs[0]["capacity"]
        op = rs[0]["op"]
        if is_gpu(g) or rs[0]["obs"] is not None or op.startswith(("sample(32)", "sample(1024)")):
            continue
        if not any(r["lib"] == "rlcore" for r in rs):  # rlcore variants against each other only
            continue
        if (
            cap in (None, 200_000)
            or (op.startswith("HER") and cap == 100_000)
            or (op.startswith("PER") and cap == 1_000_000)
        ):
            wanted.append(g)
    return wanted


def load_interleaved(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``interleaved.py``'s records by (group, lib), the timed ones only; empty without the file."""
    if not path.exists():
        return {}
    return {(r["group"], r["lib"]): r for r in json.loads(path.read_text())["records"] if "rounds_s" in r}


def interleaved_ratio(
    inter: dict[tuple[str, str], dict[str, Any]], a: tuple[str, str], b: tuple[str, str]
) -> float | None:
    """``b``'s time over ``a``'s, the median over rounds of the ratio of their blocks in that round,
    when both were timed in the same interleaved set; else None."""
    ra, rb = inter.get(a), inter.get(b)
    if ra is None or rb is None or ra["set"] != rb["set"]:
        return None
    return paired_ratio(ra["rounds_s"], rb["rounds_s"])


def fmt_us(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_time(us: float, unit: str) -> str:
    """A time given in µs, written in the group's unit (µs, or s for ``unit == "s"``)."""
    if unit == "s":
        s = us / 1e6
        return f"{s:.3f}" if s < 1 else f"{s:.2f}"
    return fmt_us(us)


def unit_label(unit: str) -> str:
    return "s" if unit == "s" else "µs"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return ""
    for div, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {suffix}"
    return f"{n:.0f} B"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "–"
    return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×"
