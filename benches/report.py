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
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the sibling script and the report's pieces (benches/reporting/), importable from this folder
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reporting.charts import charts, memory_chart  # noqa: E402
from reporting.markdown import write_markdown  # noqa: E402
from reporting.results import PYTEST_TIMING, by_group, is_gpu, load_interleaved, load_results  # noqa: E402
from reporting.targets import check_targets, load_targets, targets_markdown  # noqa: E402

__all__ = ["build_report", "main"]

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


def _module_mtime() -> dt.datetime | None:
    try:
        import rlcore._core as core

        return dt.datetime.fromtimestamp(os.path.getmtime(core.__file__), dt.UTC)
    except (ImportError, OSError):
        return None


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
