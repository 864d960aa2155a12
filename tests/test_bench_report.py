"""The benchmark report generator (``benches/report.py``) on saved results, and the parts of the suite
that can be checked without timing anything: the GPU code path run on CPU, the memory probe."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_REPORT = Path(__file__).resolve().parents[1] / "benches" / "report.py"
_spec = importlib.util.spec_from_file_location("bench_report", _REPORT)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_report"] = bench
_spec.loader.exec_module(bench)

FIXTURE = Path(__file__).parent / "data" / "bench_report"

# two end-to-end records per task, in the format of benches/e2e_speed.py --json
E2E = [
    {
        "task": "sac-pendulum",
        "library": lib,
        "env_steps_per_s_wall": wall,
        "env_steps_per_s_cpu": cpu,
        "rounds": 2,
        "steps_per_round": 500,
        "settings": {},
        "per_round_wall": [wall * 0.9, wall * 1.1],
        "per_round_cpu": [cpu, cpu],
    }
    for lib, wall, cpu in (("rlcore", 150.0, 160.0), ("sb3", 100.0, 80.0))
]


def _tables(text: str) -> list[list[str]]:
    """Every Markdown table in ``text`` as its list of lines."""
    tables, cur = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            tables.append(cur)
            cur = []
    if cur:
        tables.append(cur)
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.fixture
def report(tmp_path: Path) -> tuple[str, Path]:
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE, raw)
    (raw / "e2e-e2e_speed.json").write_text(json.dumps(E2E))
    out = tmp_path / "docs" / "benchmarks.md"
    assert bench.main(["--from", str(raw), "--out", str(out)]) == 0
    return out.read_text(), out.parent


def test_report_is_well_formed_markdown(report: tuple[str, Path]) -> None:
    text, docs = report
    for heading in (
        "## Machine, versions, date",
        "## Headline: peer time / rlcore time",
        "## End to end: env steps per second against SB3",
        "## Memory: resident bytes per stored transition",
        "## Scale: observation size",
        "## GPU",
        "## Groups",
        "## Skipped",
    ):
        assert heading in text, heading
    tables = _tables(text)
    assert len(tables) >= 10
    for t in tables:
        n = len(_cells(t[0]))
        assert re.fullmatch(r"\|(-+:?\|)+", t[1].replace("---:", "---")), t[1]
        for line in t:
            assert len(_cells(line)) == n, f"{line!r} has not {n} cells"
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (docs / img).is_file(), img


def test_report_numbers_come_from_the_results(report: tuple[str, Path]) -> None:
    text, _ = report
    runs = json.loads((FIXTURE / "run-0.json").read_text())["benchmarks"]
    med = {(b["extra_info"]["group"], b["extra_info"]["lib"]): b["stats"]["median"] for b in runs}
    group = "add a 1,000-row chunk"
    ratio = med[(group, "torchrl")] / med[(group, "rlcore")]
    row = next(line for line in text.splitlines() if line.startswith(f"| {group} |"))
    assert bench.fmt_ratio(ratio) in _cells(row)
    # save/load groups are written in seconds with the bytes on disk
    assert "| library | median s | IQR s |" in text
    assert "MiB |" in text
    # memory ratios against rlcore
    mem = {(r["lib"], r["case"]): r for r in json.loads((FIXTURE / "memory.json").read_text())}
    r = mem[("sb3", "obs17")]["bytes_per_transition"] / mem[("rlcore", "obs17")]["bytes_per_transition"]
    row = next(
        line for line in text.splitlines() if line.startswith("| sb3 | ") and "," in line and "×" in line
    )
    assert bench.fmt_ratio(r) in _cells(row)
    # end to end: median of the per-round ratios (1.5 * 0.9 / 1 and 1.5 * 1.1 / 1 -> 1.5), CPU 2.0
    row = next(line for line in text.splitlines() if line.startswith("| SAC, Pendulum-v1 | sb3 |"))
    assert _cells(row)[4:6] == ["1.50", "2.00"]


def test_report_without_cuda_says_not_measured(report: tuple[str, Path]) -> None:
    text, _ = report
    gpu = text.split("## GPU\n", 1)[1].split("\n## ", 1)[0]
    assert gpu.strip().startswith(bench.NO_CUDA)
    assert "### GPU" not in text  # no GPU group tables without measurements
    # the skipped peers are listed with their reason in their group
    assert "| rlox | skipped |" in text and "has no save/load" in text


def test_gpu_code_path_runs_on_cpu() -> None:
    """The GPU module's sample-into-pinned-views and SAC update code, with device="cpu" (no pinning),
    in a subprocess (the bench conftest sets torch to one thread on import)."""
    code = f"""
import sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {str(bench.BENCH_DIR)!r})
import math
import numpy as np
import rlcore
import test_bench_gpu as g

buf = rlcore.ReplayBuffer.from_arrays(**{{k: v for k, v in g.pendulum_data(5000).items()}}, seed=0)
sample = g.pinned_sampler(buf, 64, "cpu", pin=False)
b1 = sample()
first = b1.obs.clone()
b2 = sample()
assert b2.obs.shape == (64, 3) and str(b2.obs.device) == "cpu"
obs = buf.column("obs")
assert np.array_equal(b2.obs.numpy(), obs[b2.indices.numpy()])  # the views were filled in place
assert not np.array_equal(first.numpy(), b2.obs.numpy())
op, _ = g.make_sac_update("rlcore", "cpu")
stats = [op() for _ in range(3)]
assert all(math.isfinite(s.critic_loss) for s in stats)
op, _ = g.make_sample_to_device("rlcore (pinned out=)", "cpu")
assert op().obs.shape == (256, 17)
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().endswith("ok")


def test_memory_probe_counts_rlcore_bytes() -> None:
    """rlcore at 1M transitions of obs 17: at least the bytes it must store (obs once, act, rew,
    two flags: 98 B) and well below obs + obs_next storage (166 B)."""
    p = subprocess.run(
        [sys.executable, str(bench.BENCH_DIR / "memory.py"), "--lib", "rlcore", "--case", "obs17"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    assert rec["n"] == 1_000_000
    assert 98 <= rec["bytes_per_transition"] < 150, rec


def test_missing_peer_is_reported_as_skipped_in_its_group(tmp_path: Path) -> None:
    """A peer that cannot be imported (here rlox, shadowed by a package that raises ImportError)
    is skipped with the reason, filed under the group it would have been in; the others run."""
    shadow = tmp_path / "shadow" / "rlox"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('rlox is not installed here')\n")
    skips = tmp_path / "skips.json"
    env = {**__import__("os").environ, "PYTHONPATH": str(shadow.parent), "RLCORE_BENCH_SKIPS": str(skips)}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(bench.BENCH_DIR),
            f"--rootdir={bench.BENCH_DIR}",
            "-p",
            "no:cacheprovider",
            "--benchmark-disable",
            "-q",
            "-k",
            "test_gae and (rlox or rlcore)",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=bench.BENCH_DIR,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    recs = json.loads(skips.read_text())
    assert {r["lib"] for r in recs} == {"rlox", "rlox (compute_gae per env)"}
    for r in recs:
        assert r["group"] == "GAE 2048x8"
        assert "rlox unavailable: ImportError: rlox is not installed here" in r["reason"]
    assert "2 skipped" in p.stdout and " passed" in p.stdout
