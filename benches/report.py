"""rlcore's benchmark suite: rlcore side by side with Tianshou, SB3, cpprb, TorchRL and rlox, and a
Markdown report with PNG bar charts.

Usage (a source checkout with rlcore installed with the peers: ``make bench``, or
``pip install -e '.[torch,robotics,bench]'`` and)::

    python benches/report.py                       # everything, one run (~15 min on 2 cores)
    python benches/report.py --runs 3              # micro benchmarks 3 times, medians over runs
    python benches/report.py --save DIR            # also keep the raw JSON in DIR
    python benches/report.py --from DIR            # only rebuild the report from a --save directory
    python benches/report.py -k "sample" --no-memory --e2e none --out /tmp/b.md   # a subset

What runs (each part in its own processes, rlcore and each peer on identical data):

- micro and scale: the pytest-benchmark modules in ``benches/suite/`` (``test_bench_*.py``). Every
  group runs rlcore and each peer in one process;
- interleaved: ``benches/interleaved.py`` (after the micro runs, unless ``--no-interleaved`` or
  ``-k``), the operations the speed targets compare, built in one process and timed in alternating
  blocks so that both sides of a ratio see the same phases of a shared machine; the targets use
  these ratios where both sides were timed there;
- memory: ``benches/suite/memory.py``, one subprocess per library and case (resident bytes per
  stored transition);
- end to end: ``benches/e2e_speed.py`` (SAC Pendulum, DDPG+HER FetchReach) and
  ``benches/ppo_speed_sb3.py`` (PPO CartPole), against SB3, with small budgets (``--e2e quick``,
  the default), their defaults (``--e2e full``), or not at all (``--e2e none``); ``--e2e-json FILE``
  reads a saved result instead;
- GPU: ``test_bench_gpu.py`` when ``torch.cuda.is_available()``; otherwise the report says
  "not measured (no CUDA device)".

The report gives the command that made it, the machine, the versions, the date and the load
average, then per group the median over runs of each run's median time per call, the interquartile
range, the run-to-run spread and the ratio peer median / rlcore median (> 1: rlcore is faster), and
the peers that were skipped and why. It goes to a fresh ``bench-results/<UTC date-time>/benchmarks.md``
under the current directory (charts in ``img/`` beside it) unless ``--out`` says where; it never
replaces a file it was not told to. ``--targets FILE`` (the repository's ``benches/targets.toml``,
read by ``make bench``) also checks speed targets: they are printed and written to ``targets.md``
next to the raw results, never into the report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleaved import paired_ratio  # noqa: E402 - the sibling script, importable from its folder

__all__ = ["main", "write_markdown"]

BENCH_DIR = Path(__file__).resolve().parent / "suite"
_CHECKOUT = Path(__file__).resolve().parents[1]
#: the repository root when rlcore runs from a source checkout (editable install), else None
ROOT: Path | None = (
    _CHECKOUT if (_CHECKOUT / "pyproject.toml").exists() and (_CHECKOUT / "benches").is_dir() else None
)
#: where a report goes without --out: a fresh folder per run under the current directory
DEFAULT_OUT_PATTERN = "bench-results/<UTC date-time>/benchmarks.md"


def default_out(now: dt.datetime | None = None) -> Path:
    """A fresh ``bench-results/<UTC date-time>/benchmarks.md`` that no earlier run wrote (``-2``,
    ``-3``, ... when two runs start within a second); its folder is created."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d-%H%M%S")
    base = Path("bench-results") / stamp
    folder, k = base, 1
    while True:
        try:
            folder.mkdir(parents=True)
            return folder / "benchmarks.md"
        except FileExistsError:
            k += 1
            folder = base.with_name(f"{stamp}-{k}")

PEER_ORDER = ["rlcore", "rlox", "cpprb", "sb3", "tianshou", "torchrl"]
# the bench-only bare gather timed beside rlcore's sample (issue 20): its rows come last in a group and
# the headline shows rlcore's time over its time (how far the sampler is from the hardware)
FLOOR = "floor"
PACKAGES = [
    "rlcore",
    "numpy",
    "torch",
    "gymnasium",
    "gymnasium-robotics",
    "mujoco",
    "stable-baselines3",
    "tianshou",
    "cpprb",
    "torchrl",
    "tensordict",
    "rlox",
    "numba",
    "h5py",
    "pytest-benchmark",
]
PYTEST_TIMING = [
    "--benchmark-min-rounds=10",
    "--benchmark-max-time=0.3",
    "--benchmark-warmup=on",
    "--benchmark-warmup-iterations=20",
    "--benchmark-columns=median,iqr,rounds",
    "--benchmark-sort=name",
]
NO_CUDA = "not measured (no CUDA device)"


# ------------------------------------------------------------------------------------------
# running


def run_benchmarks(json_path: Path, skips_path: Path, extra: list[str]) -> int:
    """One pytest process over ``benches/suite``; returns pytest's exit code."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(BENCH_DIR),
        f"--rootdir={BENCH_DIR}",
        "--benchmark-enable",
        f"--benchmark-json={json_path}",
        *PYTEST_TIMING,
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        *extra,
    ]
    env = {**os.environ, "RLCORE_BENCH_SKIPS": str(skips_path)}
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=BENCH_DIR, env=env)


def run_interleaved(out: Path) -> int:
    """``benches/interleaved.py``: the targets' comparisons timed in alternating blocks in one
    process (robust to the machine's speed phases); returns its exit code."""
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "interleaved.py"), "--out", str(out)]
    print("+ " + shlex.join(cmd), flush=True)
    return subprocess.call(cmd, cwd=BENCH_DIR)


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


def interleaved_section(inter: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The report's table of the interleaved comparisons: per group, each library's median time per
    call over its blocks and its time over rlcore's (median of per-round ratios)."""
    if not inter:
        return []
    rounds = len(next(iter(inter.values()))["rounds_s"])
    L = [
        "## Interleaved: the targets' comparisons timed in alternating blocks\n",
        "pytest-benchmark times one library after another, seconds apart; on a shared machine whose speed "
        "changes in phases, the two sides of a ratio can be timed in different phases. `benches/interleaved.py` "
        "builds the same operations in one process and times them in rounds: each round times every operation "
        f"for one block of about 5 ms (after as many untimed calls), in an order rotated every round; {rounds} "
        "rounds. *ratio* is the median over rounds of the library's block time over rlcore's in the same round "
        "(> 1: rlcore is faster; in a group of rlcore variants, over the first row's); the speed targets use these ratios where both sides were timed here. Absolute "
        "times run higher than the groups' below: each block starts with caches the other operations used.\n",
        "| group | library | median µs | ratio |",
        "|---|---|---:|---:|",
    ]
    for (g, lib), r in inter.items():
        # against rlcore, or in a group of rlcore variants only, against its first row
        base = (g, "rlcore") if (g, "rlcore") in inter else next(k for k in inter if k[0] == g)
        ratio = interleaved_ratio(inter, base, (g, lib))
        L.append(f"| {g} | {lib} | {fmt_us(statistics.median(r['rounds_s']) * 1e6)} | {fmt_ratio(ratio)} |")
    L.append("")
    return L


def run_memory(out: Path) -> int:
    """``benches/suite/memory.py``: one subprocess per library and case."""
    cmd = [sys.executable, str(BENCH_DIR / "memory.py"), "--out", str(out)]
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=BENCH_DIR)


E2E_QUICK = {
    "e2e_speed.py": ["--rounds", "2", "--steps", "300", "--warmup", "200"],
    "ppo_speed_sb3.py": ["--rounds", "1", "--iterations", "1"],
}


def run_e2e(mode: str, raw: Path) -> list[str]:
    """Run the end-to-end scripts of a source checkout, each writing ``raw/e2e-<name>.json``.

    Returns notes (scripts missing or failed) for the report."""
    notes = []
    for script, quick in E2E_QUICK.items():
        path = ROOT / "benches" / script if ROOT else None
        if path is None or not path.exists():
            notes.append(f"`benches/{script}` not found (not a source checkout): not measured")
            continue
        out = raw / f"e2e-{script.removesuffix('.py')}.json"
        cmd = [sys.executable, str(path), *(quick if mode == "quick" else []), "--json", str(out)]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
        if rc != 0 or not out.exists():
            notes.append(f"`benches/{script}` failed (exit code {rc}): not measured")
    return notes


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# ------------------------------------------------------------------------------------------
# environment description


def machine() -> dict[str, str]:
    info = {"cpu": platform.processor() or platform.machine(), "cores": str(os.cpu_count())}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(
            (k.strip(), v.strip())
            for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)
        )
        info["cpu"] = fields.get("Model name", info["cpu"])
        info["cores"] = fields.get("CPU(s)", info["cores"])
        if "Hypervisor vendor" in fields:
            info["virtualisation"] = fields["Hypervisor vendor"]
        caches = [f"{k.split()[0]} {fields[k]}" for k in ("L1d cache", "L2 cache", "L3 cache") if k in fields]
        if caches:
            info["caches"] = ", ".join(caches)
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        info["memory"] = f"{kb / 2**20:.0f} GiB"
    except OSError:
        pass
    info["os"] = f"{platform.system()} {platform.release()}"
    info["python"] = platform.python_version()
    return info


def versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = "not installed"
    try:
        import rlcore._core as core

        built = dt.datetime.fromtimestamp(os.path.getmtime(core.__file__), dt.UTC)
        out["rlcore"] += f" (native module built {built:%Y-%m-%d %H:%M} UTC"
        if ROOT is None:  # an installed package: no git checkout to describe
            out["rlcore"] += ", installed package)"
            return out
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "rust", "python", "Cargo.toml", "Cargo.lock"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if rev.returncode == 0:
            out["rlcore"] += f", git {rev.stdout.strip()}" + (
                " + uncommitted changes" if dirty.stdout.strip() else ""
            )
        out["rlcore"] += ")"
    except (ImportError, OSError):
        pass
    return out


# ------------------------------------------------------------------------------------------
# results


def _module_mtime() -> dt.datetime | None:
    try:
        import rlcore._core as core

        return dt.datetime.fromtimestamp(os.path.getmtime(core.__file__), dt.UTC)
    except (ImportError, OSError):
        return None


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


def _lib_key(lib: str) -> tuple[int, str]:
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
            _obs_rank(groups[g][0]["obs"]),
            groups[g][0]["capacity"] or 0,
        ),
    )
    out = {}
    for g in order:
        rs = sorted(groups[g], key=lambda r: _lib_key(r["lib"]))
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


def _obs_rank(obs: str | None) -> float:
    if obs is None:
        return 0
    m = re.match(r"(\d+)(x(\d+))?", obs)
    return math.prod(int(x) for x in (m.group(1), m.group(3)) if x) if m else 1e12


def is_gpu(group: str) -> bool:
    return group.startswith("GPU")


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


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


# ------------------------------------------------------------------------------------------
# charts


def charts(groups: dict[str, list[dict[str, Any]]], img: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    for old in img.glob("bench_*.png"):
        old.unlink()
    paths = {}
    for g, rs in groups.items():
        unit = rs[0]["unit"]
        scale = 1e-6 if unit == "s" else 1.0
        fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rs) + 1.1))
        libs = [r["lib"] for r in rs][::-1]
        med = [r["median"] * scale for r in rs][::-1]
        iqr = [r["iqr"] * scale for r in rs][::-1]
        colors = ["#d1495b" if lib.startswith("rlcore") else "#5b7c99" for lib in libs]
        ax.barh(libs, med, xerr=iqr, color=colors, error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.set_xscale("log")
        ax.set_xlabel(f"{unit_label(unit)} per call (median, log scale; whiskers: IQR)")
        ax.set_title(g, fontsize=10)
        for y, (m, q, r) in enumerate(zip(med, iqr, [x.get("ratio") for x in rs][::-1], strict=True)):
            ax.text(
                m + q,  # right of the whisker
                y,
                f"  {fmt_time(m / scale, unit)} {unit_label(unit)}"
                + (f"  ({fmt_ratio(r)})" if r and r != 1 else ""),
                va="center",
                fontsize=7,
            )
        ax.set_xlim(min(med) / 2, max(m + q for m, q in zip(med, iqr, strict=True)) * 8)
        fig.tight_layout()
        name = f"bench_{slug(g)}.png"
        fig.savefig(img / name, dpi=90)
        plt.close(fig)
        paths[g] = f"img/{name}"

    # headline: speed-up of rlcore over each peer per group
    heads = headline_groups(groups)
    peers = [p for p in PEER_ORDER[1:] if any(r["lib"] == p for g in heads for r in groups[g])]
    if heads and peers:
        import numpy as np

        fig, ax = plt.subplots(figsize=(9, 4.2))
        width = 0.8 / len(peers)
        x = np.arange(len(heads))
        for k, p in enumerate(peers):
            vals = [next((r["ratio"] for r in groups[g] if r["lib"] == p), None) for g in heads]
            vals = [np.nan if v is None else v for v in vals]  # no such op, or no rlcore row to compare with
            bars = ax.bar(x + k * width - 0.4 + width / 2, vals, width, label=p)
            ax.bar_label(
                bars,
                labels=["" if np.isnan(v) else fmt_ratio(v) for v in vals],
                rotation=90,
                padding=2,
                fontsize=7,
            )
        ax.axhline(1, color="black", lw=0.8)
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 6)  # room for the value labels above the tallest bars
        ax.set_ylabel("peer time / rlcore time (log; > 1: rlcore faster)")
        ax.set_xticks(x, [short_label(g) for g in heads], fontsize=8)
        ax.legend(fontsize=8, ncol=len(peers), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
        ax.set_title("rlcore speed-up over each peer (same process, same data)", fontsize=10, pad=28)
        fig.tight_layout()
        fig.savefig(img / "bench_headline.png", dpi=90)
        plt.close(fig)
        paths["headline"] = "img/bench_headline.png"
    return paths


def short_label(group: str) -> str:
    """A two-line x tick label for the headline chart."""
    op, _, cap = group.partition(" @ ")
    op = (
        op.replace("sample(256) + update_priorities(256)", "")
        .replace("HER sample(256), native reward", "HER native")
        .replace("HER sample(256), python reward", "HER Python")
        .replace("sample(256, n_step=3)", "n-step 3")
        .replace("add one 8-env step", "add\n8-env step")
        .replace("add one transition", "add\n1 transition")
        .replace("add a 1,000-row chunk", "add\n1,000 rows")
        .replace(" a buffer of 1M transitions", "\n1M rows")
        .strip()
    )
    return f"{op}\n@ {cap}" if cap else op


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


# ------------------------------------------------------------------------------------------
# speed targets (the repository's own, from benches/targets.toml; never in the report)


def _med(groups: dict[str, list[dict[str, Any]]], group: str, lib: str) -> float | None:
    return next((r["median"] for r in groups.get(group, []) if r["lib"] == lib), None)


def load_targets(path: Path) -> list[dict[str, Any]]:
    """Read a targets file (see ``benches/targets.toml``): its ``[[target]]`` tables, in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: not TOML, or a target that is neither a ratio (``peer``, ``min``) nor a cost
            (``base``, ``max``) target, or lacks ``name``/``group`` (named in the message).
    """
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from e
    unknown = set(spec) - {"target"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} (expected [[target]] tables)")
    targets = list(spec.get("target", []))
    for k, entry in enumerate(targets):
        kinds = [keys for keys in (("peer", "min"), ("base", "max")) if all(key in entry for key in keys)]
        if "name" not in entry or "group" not in entry or len(kinds) != 1:
            raise ValueError(
                f"{path}: [[target]] number {k + 1} needs name, group and either peer + min or base + max"
            )
    return targets


def check_targets(
    groups: dict[str, list[dict[str, Any]]],
    targets: list[dict[str, Any]],
    inter: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> list[tuple[str, str, str]]:
    """``(target, measured, verdict)`` for each of ``targets`` (:func:`load_targets`), in order. A
    target whose two sides were both timed in one interleaved set (``inter``, see
    :func:`load_interleaved`) is judged by their interleaved ratio; the groups' ratio of medians is
    shown beside it. Otherwise the groups' ratio of medians judges it."""
    out: list[tuple[str, str, str]] = []
    for t in targets:
        lib = t.get("lib", "rlcore")
        if "peer" in t:
            # the peer's time over rlcore's: >= min
            fast, slow = (t["group"], lib), (t["group"], t["peer"])
        else:
            # lib's time in group over its time in base: <= max
            fast, slow = (t["base"], t.get("base_lib", lib)), (t["group"], lib)
        a, b = _med(groups, *fast), _med(groups, *slow)
        paired = interleaved_ratio(inter or {}, fast, slow)
        if paired is None and (a is None or b is None):
            out.append((t["name"], "not measured", "–"))
            continue
        seq = None if a is None or b is None else b / a
        r = paired if paired is not None else seq
        assert r is not None
        unit = "×" if "peer" in t else ""
        shown = f"{r:.2f}{unit}"
        if paired is not None:
            shown += " interleaved" + (f"; groups {seq:.2f}{unit}" if seq is not None else "")
        if a is not None and b is not None:
            shown += f" ({fmt_us(b)} / {fmt_us(a)} µs)"
        if "peer" in t:
            verdict = "met" if r >= t["min"] else f"missed ({r / t['min']:.0%} of target)"
        else:
            verdict = "met" if r <= t["max"] else f"missed (limit {t['max']})"
        out.append((t["name"], shown, verdict))
    return out


def targets_markdown(rows: list[tuple[str, str, str]], source: Path) -> str:
    lines = [f"# Speed targets of `{source}`\n", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {verdict} |" for t, v, verdict in rows]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------
# markdown


def portable_command(command: str) -> str:
    """``command`` as the page shows it: paths inside the repository relative to it, any other
    absolute path as ``DIR`` (the page names no folder of the machine that made it)."""
    root = Path(__file__).resolve().parents[1]
    words = []
    for word in shlex.split(command):
        path = Path(word)
        if path.is_absolute():
            word = str(path.relative_to(root)) if path.is_relative_to(root) else "DIR"
        words.append(word)
    return shlex.join(words)


def write_markdown(
    groups: dict[str, list[dict[str, Any]]],
    skips: list[dict[str, str]],
    pics: dict[str, str],
    meta: dict[str, Any],
    memory: list[dict[str, Any]] | None = None,
    e2e: list[dict[str, Any]] | None = None,
    inter: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> str:
    """The report as Markdown. ``groups`` from :func:`by_group`, ``skips`` the records the suite's
    conftest wrote, ``pics`` chart paths by group, ``meta`` the run description (see :func:`main`),
    ``memory`` the records of ``benches/suite/memory.py``, ``e2e`` those of the end-to-end scripts,
    ``inter`` those of ``benches/interleaved.py`` (:func:`load_interleaved`)."""
    L: list[str] = []
    L.append("# Benchmarks: rlcore side by side with Tianshou, SB3, cpprb, TorchRL and rlox\n")
    command = portable_command(meta.get("command", "python benches/report.py"))
    made = f"Measured on {meta['date']} by `{command}` on the machine below"
    if meta.get("rebuilt_by"):
        made += f" (this page rebuilt from the saved results by `{portable_command(meta['rebuilt_by'])}`)"
    L.append(
        f"{made}. The benchmark modules are "
        "`benches/suite/test_bench_*.py` of rlcore's source repository. Every group runs rlcore and each peer on "
        f"identical data in the same process; times are µs per call unless the group says otherwise. The micro benchmarks ran {meta.get('runs', 1)} "
        "time(s): *median* is the median over runs of each run's median over its pytest-benchmark rounds, *IQR* "
        "the median of the runs' interquartile ranges, *run spread* ± half the range of the runs' medians "
        "relative to the median (0 with one run). *ratio* = peer median / rlcore median, so > 1 means rlcore is "
        "faster. obs 17 float32, act 6 float32, batch 256, capacity 200k unless the group says otherwise; "
        "buffers are full (filled through the ring) before timing.\n"
    )
    m = meta["machine"]
    L.append("## Machine, versions, date\n")
    L.append(f"- date: {meta['date']} ({meta.get('runs', 1)} run(s), {meta['duration']} in all)")
    L.append(
        f"- CPU: {m.get('cpu')} — {m.get('cores')} cores"
        + (f" ({m['virtualisation']} VM)" if m.get("virtualisation") else "")
    )
    if m.get("caches"):
        L.append(f"- caches: {m['caches']}")
    L.append(f"- memory: {m.get('memory', 'n/a')}; {m.get('os')}; Python {m.get('python')}")
    loads = meta.get("loads") or [
        ("before the run", meta.get("load_before", "n/a")),
        ("after", meta.get("load_after", "n/a")),
    ]
    L.append("- load average (1/5/15 min): " + "; ".join(f"{what}: {v}" for what, v in loads))
    L.append(
        "- **noise**: other programs running during the benchmark (a load average above the core count says "
        "so) slow some groups more than others. Read the ratios within one group (measured back to back in one "
        "process), not absolute numbers across groups.\n"
    )
    L.append("| package | version |\n|---|---|")
    for k, v in meta["versions"].items():
        L.append(f"| {k} | {v} |")
    L.append("")

    skipped_in = defaultdict(dict)  # group -> lib -> reason
    for sk in skips:
        if "group" in sk:
            skipped_in[sk["group"]].setdefault(sk["lib"], sk["reason"])
    cpu_groups = {g: rs for g, rs in groups.items() if not is_gpu(g)}

    heads = headline_groups(cpu_groups)
    if heads:
        L.append("## Headline: peer time / rlcore time\n")
        L.extend(headline_table(cpu_groups, skips, heads))
        L.append("\n–: the library has no such operation; skipped: see the group's table for the reason.\n")
        if "headline" in pics:
            L.append(f"![rlcore speed-up over each peer]({pics['headline']})\n")

    L.extend(floor_table(cpu_groups))
    L.extend(interleaved_section(inter or {}))

    if e2e is not None or meta.get("e2e_notes"):
        L.extend(e2e_section(e2e or [], meta))

    if memory:
        L.extend(memory_section(memory, pics.get("memory_atari")))

    L.extend(scale_sections(cpu_groups, skipped_in))

    L.append("## GPU\n")
    gpu = {g: rs for g, rs in groups.items() if is_gpu(g)}
    if not gpu:
        reasons = {sk["reason"] for sk in skips if is_gpu(sk.get("group", ""))}
        L.append(
            (
                NO_CUDA
                if not reasons or reasons == {NO_CUDA}
                else "not measured: " + "; ".join(sorted(reasons))
            )
            + ". When `torch.cuda.is_available()`, `benches/suite/test_bench_gpu.py` times sample(256) onto the "
            "device (rlcore sampling into pinned host tensors through `sample(out=...)`, then "
            "`.to(device, non_blocking=True)`; against pageable copies, SB3, Tianshou and TorchRL) and SAC updates "
            "per second against SB3.\n"
        )
    else:
        L.append(
            "sample(256) onto the CUDA device (every call ends with `torch.cuda.synchronize()`), and one SAC "
            "gradient step (sampling included; 256×256 MLPs, Pendulum-v1 spaces). Updates/s = 1 / median.\n"
        )
        for g, rs in gpu.items():
            L.extend(group_table(g, rs, skipped_in.get(g, {}), pics, per_second="SAC" in g))

    L.append("## Groups\n")
    for g, rs in cpu_groups.items():
        L.extend(group_table(g, rs, skipped_in.get(g, {}), pics))

    if skips:
        L.append("## Skipped\n")
        L.append("| benchmark | reason |\n|---|---|")
        for sk in skips:
            L.append(f"| `{sk['test'].split('::')[-1]}` | {sk['reason']} |")
        L.append("")

    L.append("## How the numbers are made\n")
    L.append(
        "- `pytest benches/suite --benchmark-enable` with "
        + " ".join(f"`{o}`" for o in PYTEST_TIMING[:4])
        + "; pytest-benchmark calibrates the iterations per round, so µs-scale calls are timed in loops.\n"
        "- Data arrives in each library's native container, built outside the timer: numpy arrays for rlcore, "
        "rlox, cpprb and SB3 (rlox: flat arrays and uint8 flags, as `push_batch` requires), a `Batch` for "
        "Tianshou, a `TensorDict` for TorchRL. A single env's step gives Python `float`/`bool` for reward and "
        "flags, as gymnasium does.\n"
        "- torch runs with one intra-op thread (`torch.set_num_threads(1)`): with more threads than free cores a "
        "256-row tensor index can wait milliseconds for a core, which would measure the machine, not TorchRL.\n"
        "- What each call returns differs: rlcore a `TransitionBatch` of numpy arrays (obs_next and discount "
        "included), rlox/cpprb dicts of numpy arrays, SB3 torch tensors, Tianshou a `Batch`, TorchRL a "
        "`TensorDict`.\n"
        "- n-step: cpprb accumulates n-step returns at add time (`Nstep`), so its sample is a plain gather; "
        "Tianshou's is `sample` + `Algorithm.compute_nstep_return` with a zero target Q (its obs_next gather "
        "kept); SB3's is `NStepReplayBuffer.sample`.\n"
        "- HER: FetchReach-sized data (observation 10 / goals 3 float64, act 4, 50-step truncated episodes), "
        "`future`, k = 4; 100k transitions stored at both capacities. SB3 always calls the env's Python "
        "`compute_reward` (a DummyVecEnv of a real FetchReach-v4), Tianshou a numpy function; rlox only has its "
        "native threshold reward and stores float32 flat observations.\n"
        "- PER: alpha 0.6, beta 0.4; priorities first set to random values in [0.01, 2); one call = "
        "sample(256) + update_priorities(256) with fresh random priorities.\n"
    )
    L.append(
        "- Scale in observation size: capacity 50k, full, one buffer per (size, library) used first for "
        "sample(256), then for single adds; 84×84 frames are uint8 everywhere but in rlox, which stores float32 "
        "flat observations only.\n"
        "- Save/load: 1M transitions (obs 17), 3 rounds each, each library's own format into a fresh temporary "
        "directory; loads read what the save just wrote (from the page cache); only rlcore's `save` fsyncs.\n"
        "- Memory: resident set size (`/proc/self/statm`) before and after building and filling one buffer in a "
        "fresh subprocess per library (`benches/suite/memory.py`).\n"
    )
    return "\n".join(L) + "\n"


def headline_table(
    groups: dict[str, list[dict[str, Any]]], skips: list[dict[str, str]], heads: list[str]
) -> list[str]:
    """The headline table's lines (Markdown), also embedded in the README."""
    peers = [p for p in PEER_ORDER[1:] if any(r["lib"] == p for g in heads for r in groups[g])]
    floor = any(r["lib"] == FLOOR for g in heads for r in groups[g])
    L = [
        "| operation | rlcore | " + " | ".join(peers) + (" | rlcore / floor |" if floor else " |"),
        "|---|---:|" + "---:|" * (len(peers) + floor),
    ]
    for g in heads:
        rs = {r["lib"]: r for r in groups[g]}
        base = rs.get("rlcore")
        skipped = {sk["lib"] for sk in skips if sk.get("group") == g}
        cells = [fmt_ratio(rs[p]["ratio"]) if p in rs else "skipped" if p in skipped else "–" for p in peers]
        if floor:
            f = rs.get(FLOOR)
            cells.append(fmt_ratio(base["median"] / f["median"]) if base and f and f["median"] else "–")
        unit = groups[g][0]["unit"]
        first = f"{fmt_time(base['median'], unit)} {unit_label(unit)}" if base else "–"
        L.append(f"| {g} | {first} | " + " | ".join(cells) + " |")
    return L


def floor_table(groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every group with a floor row (sample(256) and sample(256, n_step=3) at each capacity, HER
    sample(256) with the native reward, Atari frames): rlcore's and each peer's time over the
    floor's, i.e. how many times a bare gather of the same bytes each one costs."""
    gs = [g for g, rs in groups.items() if any(r["lib"] == FLOOR for r in rs)]
    if not gs:
        return []
    libs = [p for p in PEER_ORDER if any(r["lib"] == p for g in gs for r in groups[g])]
    L = [
        "## Distance to the floor: time / floor time\n",
        "The floor is the plainest code doing the same memory work: for sample(256), a bench-only bare Rust "
        "gather of the same bytes into the same arrays, `sample`'s own draw and prefetch pipeline without its "
        "validity, n-step or discount work (`benches/suite/test_bench_sample.py`); for sample(256, n_step=3), "
        "the same gather reading rows t .. t + 3 of each window as they come, without the window's cut at an "
        "episode end or its discount; for HER sample(256), the "
        "same gather of rows t and t + 1 of the HER buffer, without episode bounds, goal draw, goal read or "
        "reward (`benches/suite/test_bench_her.py`); for Atari "
        "frames, one `numpy.take` of each sample's 8 frame rows from a plain frame array "
        "(`benches/suite/test_bench_frames.py`). 1.0 would be a sampler with no per-row work of its own.\n",
        "| group | floor | " + " | ".join(libs) + " |",
        "|---|---:|" + "---:|" * len(libs),
    ]
    for g in gs:
        rs = {r["lib"]: r for r in groups[g]}
        f = rs[FLOOR]
        unit = f["unit"]
        cells = [fmt_ratio(rs[p]["median"] / f["median"]) if p in rs and f["median"] else "–" for p in libs]
        L.append(f"| {g} | {fmt_time(f['median'], unit)} {unit_label(unit)} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def group_table(
    g: str, rs: list[dict[str, Any]], skipped: dict[str, str], pics: dict[str, str], per_second: bool = False
) -> list[str]:
    unit = rs[0]["unit"]
    u = unit_label(unit)
    disk = any(r["disk_bytes"] is not None for r in rs)
    L = [f"### {g}\n"]
    head = f"| library | median {u} | IQR {u} | run spread | min {u} | rounds | ratio |"
    head += " per second |" if per_second else ""
    head += " bytes on disk |" if disk else ""
    head += " notes |"
    L.append(head)
    L.append("|---|" + "---:|" * (6 + per_second + disk) + "---|")
    for r in rs:
        line = (
            f"| {r['lib']} | {fmt_time(r['median'], unit)} | {fmt_time(r['iqr'], unit)} | ±{r['spread'] / 2:.0%} | "
            f"{fmt_time(r['min'], unit)} | {r['rounds']} | {fmt_ratio(r['ratio'])} |"
        )
        if per_second:
            line += f" {1e6 / r['median']:,.0f} |"
        if disk:
            line += f" {fmt_bytes(r['disk_bytes'])} |"
        L.append(line + f" {r['note']} |")
    blanks = 5 + per_second + disk
    for lib, reason in skipped.items():
        if not any(r["lib"] == lib for r in rs):
            L.append(f"| {lib} | skipped |" + " |" * blanks + f" {reason} |")
    L.append("")
    if g in pics:
        L.append(f"![{g}]({pics[g]})\n")
    return L


def scale_sections(
    groups: dict[str, list[dict[str, Any]]], skipped_in: dict[str, dict[str, str]]
) -> list[str]:
    """rlcore's cost against capacity, and every library's cost against observation size."""
    L: list[str] = []
    scale: dict[str, dict[int, float]] = defaultdict(dict)
    for rs in groups.values():
        for r in rs:
            if r["capacity"] is not None and r["lib"] == "rlcore" and r["obs"] is None and r["unit"] == "us":
                scale[r["op"]][r["capacity"]] = r["median"]
    scale = {op: v for op, v in scale.items() if len(v) > 1}
    if scale:
        caps = sorted({c for v in scale.values() for c in v})
        L.append("## Scale: rlcore cost against capacity (µs, median)\n")
        L.append("| operation | " + " | ".join(_cap(c) for c in caps) + " | largest / smallest |")
        L.append("|---|" + "---:|" * (len(caps) + 1))
        for op, v in scale.items():
            ks = sorted(v)
            L.append(
                f"| {op} | "
                + " | ".join(fmt_us(v[c]) if c in v else "" for c in caps)
                + f" | {v[ks[-1]] / v[ks[0]]:.2f} |"
            )
        L.append(
            "\nHER rows hold the same 100k transitions at both capacities; the other "
            "operations run on full buffers, so the 1M case also pays for a working set that no longer fits in "
            "cache.\n"
        )
    by_op: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    obs_order: list[str] = []
    for g, rs in groups.items():
        for r in rs:
            if r["obs"] is None:
                continue
            base_op = r["op"].split(", obs")[0]
            by_op[base_op][r["lib"]][r["obs"]] = r
            if r["obs"] not in obs_order:
                obs_order.append(r["obs"])
        if rs[0]["obs"] is not None:
            for lib, reason in skipped_in.get(g, {}).items():
                by_op[rs[0]["op"].split(", obs")[0]][lib].setdefault(rs[0]["obs"], {"skipped": reason})
    if by_op:
        obs_order.sort(key=_obs_rank)
        cap = next(r["capacity"] for rs in groups.values() for r in rs if r["obs"] is not None)
        L.append(f"## Scale: observation size (capacity {_cap(cap)}; µs, median, and peer / rlcore)\n")
        for op, libs in by_op.items():
            L.append(f"### {op}, by observation size\n")
            L.append("| library | " + " | ".join(f"obs {o}" for o in obs_order) + " |")
            L.append("|---|" + "---:|" * len(obs_order))
            for lib in sorted(libs, key=_lib_key):
                cells = []
                for o in obs_order:
                    r = libs[lib].get(o)
                    if r is None:
                        cells.append("–")
                    elif "skipped" in r:
                        cells.append("skipped")
                    else:
                        ratio = (
                            "" if lib == "rlcore" or r.get("ratio") is None else f" ({fmt_ratio(r['ratio'])})"
                        )
                        cells.append(f"{fmt_us(r['median'])}{ratio}")
                L.append(f"| {lib} | " + " | ".join(cells) + " |")
            L.append("")
        L.append(
            'The per-group tables below ("... obs ... @ 50k") have the spread, the notes and the charts. rlcore '
            "stores each observation once (obs_next is the next row; one extra row per episode holds the final "
            "observation), the peers store obs and obs_next; rlox stores float32 only, so its frames are 4× the "
            "bytes.\n"
        )
    return L


def memory_chart(memory: list[dict[str, Any]] | None, img: Path) -> str | None:
    """A bar chart of bytes per transition of the Atari case (``img/bench_memory_atari.png``):
    every library's bar, rlcore's highlighted, the floor as a line; ``None`` without such records."""
    recs = [r for r in memory or [] if r["case"] == "atari" and "bytes_per_transition" in r]
    if not recs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    recs = sorted(recs, key=lambda r: _lib_key(r["lib"]))[::-1]
    libs = [r["lib"] + (" (scaled)" if "scaled_to" in r else "") for r in recs]
    vals = [r["bytes_per_transition"] for r in recs]
    floor = next((r["floor_bytes_per_transition"] for r in recs if "floor_bytes_per_transition" in r), 7056)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(recs) + 1.3))
    colors = ["#d1495b" if r["lib"].startswith("rlcore") else "#5b7c99" for r in recs]
    ax.barh(libs, vals, color=colors)
    ax.axvline(floor, color="black", lw=0.8, ls="--", label=f"floor: one frame, {floor:,} B")
    ax.set_xscale("log")
    ax.set_xlim(floor / 2, max(vals) * 6)
    for y, v in enumerate(vals):
        ax.text(v, y, f"  {v:,.0f} B = {v * 1e6 / 1e9:.1f} GB at 1M", va="center", fontsize=7)
    ax.set_xlabel("bytes per transition (log scale)")
    ax.set_title("Atari replay: 84×84 uint8 frames, stack of 4", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(img / "bench_memory_atari.png", dpi=90)
    plt.close(fig)
    return "img/bench_memory_atari.png"


def atari_memory_section(memory: list[dict[str, Any]], chart: str | None = None) -> list[str]:
    """The Atari case of ``benches/suite/memory.py`` (issue 19): rlcore with ``frame_stack=4``
    measured full at 1M transitions, the peers measured at a smaller count and scaled."""
    recs = [r for r in memory if r["case"] == "atari"]
    if not recs:
        return []
    base = next((r for r in recs if r["lib"] == "rlcore" and "bytes_per_transition" in r), None)
    floor = next((r["floor_bytes_per_transition"] for r in recs if "floor_bytes_per_transition" in r), 7056)
    L = ["### Atari replay: 1M transitions of 84×84 uint8 frames, stack of 4\n"]
    L.append(
        "rlcore is built with `frame_stack=4` (one frame per row; stacks rebuilt at sample time) and measured "
        "full at 1,000,000 transitions; each peer stores every stack as given and is measured at the count shown, "
        f"then scaled to 1M (bytes per transition do not depend on the count). The floor without compression is "
        f"one frame per transition, {floor:,} bytes (7.06 GB at 1M). ratio = peer / rlcore.\n"
    )
    L.append("| library | measured at | bytes / transition | at 1M | ratio |")
    L.append("|---|---:|---:|---:|---:|")
    for r in sorted(recs, key=lambda r: _lib_key(r["lib"])):
        if "skipped" in r:
            L.append(f"| {r['lib']} | skipped | | | |")
            continue
        bpt = r["bytes_per_transition"]
        scaled = " (scaled)" if "scaled_to" in r else " (measured)"
        ratio = fmt_ratio(bpt / base["bytes_per_transition"]) if base else ""
        L.append(f"| {r['lib']} | {_count(r['n'])} | {bpt:,.0f} | {bpt * 1e6 / 1e9:.2f} GB{scaled} | {ratio} |")
    L.append(f"| floor (one frame) | | {floor:,} | {floor * 1e6 / 1e9:.2f} GB | |")
    if chart:
        L.append(f"\n![bytes per transition, Atari frames]({chart})")
    if base and "rss_total" in base:
        L.append(
            f"\n- rlcore's whole process (interpreter, numpy, rlcore, the full buffer) is resident at "
            f"{base['rss_total'] / 1e9:.3f} GB after the fill (target ≤ 7.2 GB); `buf.nbytes` reports "
            f"{base.get('nbytes', 0) / 1e9:.3f} GB; filled by `extend` in {base['fill_s']:.0f} s."
        )
    L.append("")
    return L


def memory_section(memory: list[dict[str, Any]], chart: str | None = None) -> list[str]:
    """Resident bytes per stored transition, from ``benches/suite/memory.py`` records (``chart``:
    the Atari case's :func:`memory_chart`)."""
    atari = atari_memory_section(memory, chart)
    memory = [r for r in memory if r["case"] != "atari"]
    cases: list[str] = []
    for r in memory:
        if r["case"] not in cases:
            cases.append(r["case"])
    label = {r["case"]: r.get("label", r["case"]) for r in memory}
    count = {r["case"]: r["n"] for r in memory if "n" in r}
    naive = {r["case"]: r["naive_bytes_per_transition"] for r in memory if "naive_bytes_per_transition" in r}
    rec = {(r["lib"], r["case"]): r for r in memory}
    libs = sorted({r["lib"] for r in memory}, key=_lib_key)
    L = ["## Memory: resident bytes per stored transition\n"]
    L.append(
        "RSS growth of a fresh process (one per library and case) while one buffer is built and filled completely, "
        "divided by the transitions it holds; act 6 float32, 1,000-step episodes. *naive* = obs + obs_next + act + "
        "rew (float32) + two 1-byte flags. ratio = peer / rlcore (> 1: rlcore needs less).\n"
    )
    L.append(
        "| library | "
        + " | ".join(f"{label[c]} ({_count(count.get(c))}): bytes | ratio" for c in cases)
        + " |"
    )
    L.append("|---|" + "---:|---:|" * len(cases))
    for lib in libs:
        cells = []
        for c in cases:
            r = rec.get((lib, c))
            base = rec.get(("rlcore", c))
            if r is None:
                cells += ["–", ""]
            elif "skipped" in r:
                cells += ["skipped", ""]
            else:
                cells.append(f"{r['bytes_per_transition']:,.0f}")
                ok = base is not None and "bytes_per_transition" in base
                cells.append(
                    fmt_ratio(r["bytes_per_transition"] / base["bytes_per_transition"]) if ok else ""
                )
        L.append(f"| {lib} | " + " | ".join(cells) + " |")
    L.append("| naive | " + " | ".join(f"{naive[c]:,} | " if c in naive else "– | " for c in cases) + " |")
    L.append("")
    sk = [r for r in memory if "skipped" in r]
    for r in sk:
        L.append(f"- {r['lib']} ({label[r['case']]}) skipped: {r['skipped']}")
    if "frames" in count:
        L.append(
            f"- The 84×84×4 frame stacks are measured at {count['frames']:,} transitions: 1M of them would need "
            "28 GB of observations (56 GB with obs_next), more than the machine's memory. The figure is per "
            "transition and does not depend on the count (each buffer is allocated once)."
        )
    L.append(
        "- rlcore stores each observation once plus one final-observation row per episode and does not "
        "deduplicate the frames inside a stack; SB3's `optimize_memory_usage=True` also stores observations "
        "once (and then cannot keep the timeout flag apart from termination).\n"
    )
    return L + atari


def _count(n: int | None) -> str:
    if n is None:
        return "?"
    return (
        f"{n // 1_000_000}M"
        if n >= 1_000_000 and n % 1_000_000 == 0
        else f"{n // 1000}k"
        if n % 1000 == 0
        else str(n)
    )


E2E_TASKS = {
    "sac-pendulum": "SAC, Pendulum-v1",
    "ddpg-her-fetchreach": "DDPG + HER, FetchReach-v4",
    "ppo-cartpole": "PPO, CartPole-v1 (8 envs)",
}


def e2e_section(e2e: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """Env steps per second against SB3, from the end-to-end scripts' JSON records."""
    L = ["## End to end: env steps per second against SB3\n"]
    src = meta.get("e2e_source", "")
    if src:
        L.append(src + "\n")
    if e2e:
        L.append(
            "| task | library | env steps/s (wall) | env steps/s (CPU) | rlcore / SB3 (wall) | rlcore / SB3 (CPU) | "
            "rounds × env steps |"
        )
        L.append("|---|---|---:|---:|---:|---:|---|")
        tasks: list[str] = []
        for r in e2e:
            if r["task"] not in tasks:
                tasks.append(r["task"])
        for t in tasks:
            rs = {r["library"]: r for r in e2e if r["task"] == t}
            ours = rs.get("rlcore")
            for lib in sorted(rs, key=_lib_key):
                r = rs[lib]
                rw = rc = ""
                if ours is not None and lib != "rlcore":
                    rw = _e2e_ratio(ours, r, "wall")
                    rc = _e2e_ratio(ours, r, "cpu")
                L.append(
                    f"| {E2E_TASKS.get(t, t)} | {lib} | {r['env_steps_per_s_wall']:,.0f} | {r['env_steps_per_s_cpu']:,.0f} "
                    f"| {rw} | {rc} | {r.get('rounds', '?')} × {r.get('steps_per_round', '?'):,} |"
                )
        L.append(
            "\nBoth libraries train in one process, alternating chunks (rlcore, SB3, rlcore, ...), one torch thread, "
            "CPU, the same hyperparameters (SB3's defaults; see `benches/e2e_speed.py` and "
            "`benches/ppo_speed_sb3.py`). The ratios are medians of the per-round ratios when the rounds are "
            "paired, > 1: rlcore is faster. CPU = env steps per CPU second of the process (steadier on a shared "
            "machine). Tianshou is not run end to end.\n"
        )
    for note in meta.get("e2e_notes", []):
        L.append(f"- {note}")
    if meta.get("e2e_notes"):
        L.append("")
    return L


def _e2e_ratio(ours: dict[str, Any], theirs: dict[str, Any], what: str) -> str:
    a, b = ours.get(f"per_round_{what}"), theirs.get(f"per_round_{what}")
    if a and b and len(a) == len(b):
        return f"{statistics.median(x / y for x, y in zip(a, b, strict=True)):.2f}"
    return f"{ours[f'env_steps_per_s_{what}'] / theirs[f'env_steps_per_s_{what}']:.2f}"


def _cap(c: int) -> str:
    return f"{c // 1_000_000}M" if c >= 1_000_000 else f"{c // 1000}k"


# ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benches/report.py", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    ap.add_argument(
        "--runs", type=int, default=1, help="independent pytest runs; the report takes medians over them"
    )
    ap.add_argument("--save", type=Path, help="keep the raw JSON of every part in this directory")
    ap.add_argument("--from", dest="from_dir", type=Path, help="rebuild the report from a --save directory")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"the Markdown report, charts in img/ beside it (default: a fresh {DEFAULT_OUT_PATTERN})",
    )
    ap.add_argument(
        "--targets",
        type=Path,
        default=None,
        metavar="TOML",
        help="also check these speed targets (benches/targets.toml): printed and written to targets.md "
        "next to the raw results, never into the report",
    )
    ap.add_argument("-k", dest="keyword", help="pytest -k expression (a subset of the micro benchmarks)")
    ap.add_argument("--no-micro", action="store_true", help="skip the pytest-benchmark suite")
    ap.add_argument(
        "--no-interleaved",
        action="store_true",
        help="skip benches/interleaved.py (the targets' comparisons timed in alternating blocks)",
    )
    ap.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    ap.add_argument(
        "--e2e",
        choices=("quick", "full", "none"),
        default="quick",
        help="end-to-end scripts with small budgets (default), their own defaults, or not at all",
    )
    ap.add_argument(
        "--e2e-json", type=Path, action="append", help="read end-to-end results from this JSON instead"
    )
    args = ap.parse_args(argv)
    here = Path(__file__).resolve()
    try:
        prog = str(here.relative_to(Path.cwd().resolve()))
    except ValueError:
        prog = str(here)
    command = shlex.join(["python", prog, *(sys.argv[1:] if argv is None else argv)])
    spec = None
    if args.targets is not None:
        try:
            spec = load_targets(args.targets)
        except (OSError, ValueError) as e:
            print(f"report.py: --targets {args.targets}: {e}", file=sys.stderr)
            return 2
    out = args.out if args.out is not None else default_out()

    if args.from_dir:
        raw = args.from_dir
        meta = json.loads((raw / "meta.json").read_text())
        meta["rebuilt_by"] = command
    else:
        raw = args.save or Path(tempfile.mkdtemp(prefix="rlcore-bench-"))
        raw.mkdir(parents=True, exist_ok=True)
        stale = [*raw.glob("run-*.json"), *raw.glob("e2e-*.json"), raw / "memory.json", raw / "interleaved.json"]
        for old in stale:
            old.unlink(missing_ok=True)
        start = dt.datetime.now(dt.UTC)
        t0 = time.perf_counter()
        loads: list[tuple[str, str]] = [("at the start", load_average())]
        vers = versions()  # before the runs: the build that the runs load
        built = _module_mtime()
        e2e_notes: list[str] = []
        if not args.no_micro:
            for k in range(args.runs):
                print(f"== micro and scale benchmarks, run {k + 1} of {args.runs}", flush=True)
                run_json = raw / f"run-{k}.json"
                rc = run_benchmarks(
                    run_json, raw / f"run-{k}.skips.json", ["-k", args.keyword] if args.keyword else []
                )
                if rc != 0:
                    print(f"benchmarks failed (pytest exit code {rc})", file=sys.stderr)
                    if not run_json.exists():
                        return rc or 1
            if not args.no_interleaved and not args.keyword:
                print("== interleaved comparisons", flush=True)
                if run_interleaved(raw / "interleaved.json") != 0:
                    print("interleaved comparisons failed; the targets use the groups' medians", file=sys.stderr)
            loads.append(("after the micro benchmarks", load_average()))
        if not args.no_memory:
            print("== memory", flush=True)
            run_memory(raw / "memory.json")
            loads.append(("after the memory runs", load_average()))
        if args.e2e_json:
            for k, p in enumerate(args.e2e_json):
                (raw / f"e2e-saved-{k}.json").write_text(p.read_text())
            e2e_source = (
                "From saved results: " + ", ".join(f"`{p}`" for p in args.e2e_json) + " (not re-run)."
            )
        elif args.e2e != "none":
            print(f"== end to end ({args.e2e})", flush=True)
            e2e_notes = run_e2e(args.e2e, raw)
            loads.append(("after the end-to-end runs", load_average()))
            e2e_source = (
                "Measured in this run with small budgets (`--e2e quick`: e2e_speed.py 2 rounds × 300 env steps after "
                "200 untimed, ppo_speed_sb3.py 1 round × 16,384 env steps): indicative only. Longer runs: `--e2e full` "
                "(the scripts' defaults) and docs/training.md."
                if args.e2e == "quick"
                else "Measured in this run with the scripts' default budgets."
            )
            if not list(raw.glob("e2e-*.json")):
                e2e_source = ""  # nothing ran: the notes say why
        else:
            e2e_source = ""
            e2e_notes = ["not measured in this run (`--e2e none`)"]
        rebuilt = _module_mtime()
        if rebuilt != built and rebuilt is not None:
            vers["rlcore"] += (
                f" — the native module was rebuilt at {rebuilt:%H:%M} UTC while the runs went on; each run"
                " loads it once, at its start"
            )
        meta = {
            "command": command,
            "date": start.strftime("%Y-%m-%d %H:%M UTC"),
            "duration": f"{(time.perf_counter() - t0) / 60:.1f} min",
            "runs": args.runs,
            "machine": machine(),
            "versions": vers,
            "loads": loads,
            "e2e_source": e2e_source,
            "e2e_notes": e2e_notes,
        }
        (raw / "meta.json").write_text(json.dumps(meta, indent=1))
    text, pics, groups = build_report(raw, meta, out)
    print(f"wrote {out} and {len(pics)} charts in {out.parent / 'img'} (raw results in {raw})")
    if spec is not None:
        rows = check_targets(
            {g: rs for g, rs in groups.items() if not is_gpu(g)}, spec, load_interleaved(raw / "interleaved.json")
        )
        table = targets_markdown(rows, args.targets)
        (raw / "targets.md").write_text(table, encoding="utf-8")
        met = sum(v == "met" for _, _, v in rows)
        print(f"\n{table}\n{met} of {len(rows)} targets met (also in {raw / 'targets.md'})")
    return 0


def build_report(
    raw: Path, meta: dict[str, Any], out: Path
) -> tuple[str, dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Read a results directory (``run-*.json``, ``run-*.skips.json``, ``interleaved.json``,
    ``memory.json``, ``e2e-*.json``), write the charts next to ``out`` (``img/``) and the Markdown to ``out``; return
    the Markdown, the chart paths and the groups (:func:`by_group`)."""
    json_paths = sorted(p for p in raw.glob("run-*.json") if not p.name.endswith(".skips.json"))
    rows = load_results(json_paths)
    skips: list[dict[str, str]] = []
    for p in sorted(raw.glob("run-*.skips.json")):
        for sk in json.loads(p.read_text()):
            if sk not in skips:
                skips.append(sk)
    memory = json.loads((raw / "memory.json").read_text()) if (raw / "memory.json").exists() else None
    e2e_files = sorted(raw.glob("e2e-*.json"))
    e2e = [r for p in e2e_files for r in json.loads(p.read_text())] if e2e_files else None
    groups = by_group(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    pics = charts(groups, out.parent / "img")
    if (mem_chart := memory_chart(memory, out.parent / "img")) is not None:
        pics["memory_atari"] = mem_chart
    inter = load_interleaved(raw / "interleaved.json")
    text = write_markdown(groups, skips, pics, meta, memory=memory, e2e=e2e, inter=inter)
    out.write_text(text)
    return text, pics, groups


if __name__ == "__main__":
    raise SystemExit(main())
