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
# report.py has put benches/ on sys.path; its pieces live in benches/reporting/
from reporting.charts import charts, memory_chart  # noqa: E402
from reporting.markdown import NO_CUDA, portable_command  # noqa: E402
from reporting.results import (  # noqa: E402
    PEER_ORDER,
    by_group,
    fmt_ratio,
    headline_groups,
    interleaved_ratio,
    load_interleaved,
    load_results,
)
from reporting.tables import floor_table, headline_table, interleaved_section  # noqa: E402
from reporting.targets import check_targets, load_targets  # noqa: E402

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
    assert fmt_ratio(ratio) in _cells(row)
    # save/load groups are written in seconds with the bytes on disk
    assert "| library | median s | IQR s |" in text
    assert "MiB |" in text
    # memory ratios against rlcore
    mem = {(r["lib"], r["case"]): r for r in json.loads((FIXTURE / "memory.json").read_text())}
    r = mem[("sb3", "obs17")]["bytes_per_transition"] / mem[("rlcore", "obs17")]["bytes_per_transition"]
    row = next(
        line for line in text.splitlines() if line.startswith("| sb3 | ") and "," in line and "×" in line
    )
    assert fmt_ratio(r) in _cells(row)
    # end to end: median of the per-round ratios (1.5 * 0.9 / 1 and 1.5 * 1.1 / 1 -> 1.5), CPU 2.0
    row = next(line for line in text.splitlines() if line.startswith("| SAC, Pendulum-v1 | sb3 |"))
    assert _cells(row)[4:6] == ["1.50", "2.00"]


def test_report_without_cuda_says_not_measured(report: tuple[str, Path]) -> None:
    text, _ = report
    gpu = text.split("## GPU\n", 1)[1].split("\n## ", 1)[0]
    assert gpu.strip().startswith(NO_CUDA)
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


def test_report_names_its_command_and_holds_no_internal_targets(report: tuple[str, Path]) -> None:
    text, _ = report
    assert "Generated by `make bench`" not in text
    assert "(this page rebuilt from the saved results by `python " in text and "report.py --from " in text
    assert "Targets" not in text and "#2 " not in text and "issue" not in text.lower()
    assert "## Machine, versions, date" in text and "| numpy |" in text


def test_a_run_names_the_command_line_it_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "b.md"
    argv = ["--no-micro", "--no-memory", "--e2e", "none", "--save", str(tmp_path / "raw"), "--out", str(out)]
    assert bench.main(argv) == 0
    meta = json.loads((tmp_path / "raw" / "meta.json").read_text())
    assert meta["command"].startswith("python ") and meta["command"].endswith(" ".join(argv))
    # the page shows it without the machine's folders: the script relative to the repository,
    # other absolute paths as DIR (the raw meta.json keeps them)
    shown = "python benches/report.py --no-micro --no-memory --e2e none --save DIR --out DIR"
    assert portable_command(meta["command"]) == shown
    assert f"by `{shown}`" in out.read_text()


def test_a_run_of_the_micro_benchmarks_writes_the_report_to_out_and_keeps_the_raw_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The micro-benchmark loop once reused the report's ``out`` name for each run's JSON: the
    Markdown then overwrote ``run-0.json`` and ``--out`` was never written."""

    def fake_run(json_path: Path, skips_path: Path, extra: list[str]) -> int:
        shutil.copy(FIXTURE / "run-0.json", json_path)
        shutil.copy(FIXTURE / "run-0.skips.json", skips_path)
        return 0

    interleaved: list[Path] = []
    monkeypatch.setattr(bench, "run_benchmarks", fake_run)
    monkeypatch.setattr(bench, "run_interleaved", lambda path: interleaved.append(path) or 0)
    out, raw = tmp_path / "docs" / "benchmarks.md", tmp_path / "raw"
    assert bench.main(["--no-memory", "--e2e", "none", "--save", str(raw), "--out", str(out)]) == 0
    assert out.read_text().startswith("# Benchmarks")
    assert json.loads((raw / "run-0.json").read_text())["benchmarks"]  # still pytest-benchmark's JSON
    assert interleaved == [raw / "interleaved.json"]  # after the micro runs, into the raw folder


def test_default_output_is_a_fresh_folder_under_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out the report never lands on the checkout's tracked docs/benchmarks.md: each run
    gets its own bench-results/<date-time>/ folder where it was started."""
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE, raw)
    tracked = bench.ROOT / "docs" / "benchmarks.md" if bench.ROOT else None
    before = tracked.read_bytes() if tracked and tracked.exists() else None
    monkeypatch.chdir(tmp_path)
    assert bench.main(["--from", str(raw)]) == 0
    assert bench.main(["--from", str(raw)]) == 0
    reports = sorted(tmp_path.glob("bench-results/*/benchmarks.md"))
    assert len(reports) == 2 and reports[0].parent != reports[1].parent
    for r in reports:
        assert (r.parent / "img" / "bench_headline.png").is_file()
    if tracked is not None and before is not None:
        assert tracked.read_bytes() == before


def test_targets_come_from_the_toml_file_and_stay_out_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE, raw)
    toml = tmp_path / "targets.toml"
    toml.write_text(
        '[[target]]\nname = "GAE no slower than rlox"\ngroup = "GAE 2048x8"\npeer = "rlox"\nmin = 1\n\n'
        '[[target]]\nname = "GAE 100x faster than rlox"\ngroup = "GAE 2048x8"\npeer = "rlox"\nmin = 100\n\n'
        '[[target]]\nname = "nothing"\ngroup = "no such group"\nbase = "GAE 2048x8"\nmax = 1\n'
    )
    out = tmp_path / "b.md"
    assert bench.main(["--from", str(raw), "--out", str(out), "--targets", str(toml)]) == 0
    printed = capsys.readouterr().out
    runs = json.loads((FIXTURE / "run-0.json").read_text())["benchmarks"]
    med = {(b["extra_info"]["group"], b["extra_info"]["lib"]): b["stats"]["median"] for b in runs}
    r = med[("GAE 2048x8", "rlox")] / med[("GAE 2048x8", "rlcore")]
    assert f"| GAE no slower than rlox | {r:.2f}× (" in printed and "| met |" in printed
    assert f"| GAE 100x faster than rlox | {r:.2f}× (" in printed and f"missed ({r / 100:.0%} of target)" in printed
    assert "| nothing | not measured | – |" in printed and "1 of 3 targets met" in printed
    assert (raw / "targets.md").read_text().count("\n| ") == 4  # header + 3 targets
    text = out.read_text()
    assert "GAE no slower than rlox" not in text and "verdict" not in text and "| met |" not in text


def test_the_repository_targets_file_loads_and_bad_ones_are_refused(tmp_path: Path) -> None:
    targets = load_targets(_REPORT.parent / "targets.toml")
    assert len(targets) == 40 and len({t["name"] for t in targets}) == 40
    bad = tmp_path / "bad.toml"
    bad.write_text('[[target]]\nname = "x"\ngroup = "g"\npeer = "rlox"\n')  # no min
    with pytest.raises(ValueError, match="number 1 needs name, group and either peer"):
        load_targets(bad)
    bad.write_text("[[target]\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        load_targets(bad)
    assert bench.main(["--from", str(tmp_path), "--targets", str(bad)]) == 2


def test_headline_chart_shows_each_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.axes

    labels: list[str] = []
    real = matplotlib.axes.Axes.bar_label

    def spy(self, container, labels_=None, **kw):  # type: ignore[no-untyped-def]
        labels.extend(kw.get("labels") or [])
        return real(self, container, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar_label", spy)
    rows = load_results([FIXTURE / "run-0.json"])
    groups = by_group(rows)
    pics = charts(groups, tmp_path / "img")
    assert "headline" in pics
    heads = headline_groups(groups)
    peers = PEER_ORDER[1:]
    want = [fmt_ratio(r["ratio"]) for g in heads for r in groups[g] if r["lib"] in peers]
    assert want and sorted(x for x in labels if x) == sorted(want)


def test_floor_rows_give_the_distance_to_the_floor_in_the_headline_and_their_own_table() -> None:
    """A floor row (issue 20) is not a peer: the headline shows rlcore / floor, and the floor
    table every library's median over the floor's, at each capacity."""

    def row(group: str, lib: str, median: float) -> dict[str, object]:
        return {"group": group, "op": group.split(" @ ")[0], "lib": lib, "median": median, "iqr": 0.0,
                "min": median, "rounds": 1, "unit": "s", "capacity": 200_000, "obs": None, "note": "",
                "disk_bytes": None, "runs": 1, "spread": 0.0}

    g = "sample(256) @ 200k"
    groups = by_group([row(g, "rlcore", 10e-6), row(g, "rlox", 25e-6), row(g, "floor", 4e-6)])
    head = "\n".join(headline_table(groups, [], [g]))
    assert "rlcore / floor" in head and fmt_ratio(2.5) in head.splitlines()[-1]
    assert "| floor |" not in head.splitlines()[0].replace("rlcore / floor", "")
    table = "\n".join(floor_table(groups))
    line = next(x for x in table.splitlines() if x.startswith(f"| {g}"))
    assert line.split("|")[3].strip() == fmt_ratio(2.5)
    assert line.split("|")[4].strip() == fmt_ratio(6.25)
    assert floor_table(by_group([row(g, "rlcore", 1e-6)])) == []


def test_a_cost_target_can_compare_two_rows_of_one_group() -> None:
    """``base_lib`` names the base row: two rlcore variants timed back to back in one group (issue
    20: sample on 100k envs against one env) make a cost target of their own."""

    def row(lib: str, median: float) -> dict[str, object]:
        return {"group": "g @ 200k", "op": "g", "lib": lib, "median": median, "iqr": 0.0, "min": median,
                "rounds": 1, "unit": "us", "capacity": 200_000, "obs": None, "note": "", "disk_bytes": None,
                "runs": 1, "spread": 0.0}

    groups = by_group([row("rlcore (1 env)", 10.0), row("rlcore (100k envs)", 14.0)])
    t = {"name": "n", "group": "g @ 200k", "lib": "rlcore (100k envs)", "base": "g @ 200k",
         "base_lib": "rlcore (1 env)", "max": 1.5}
    assert check_targets(groups, [t]) == [("n", "1.40 (14.0 / 10.0 µs)", "met")]
    assert check_targets(groups, [{**t, "max": 1.3}])[0][2] == "missed (limit 1.3)"
    # without base_lib the base is the same row: 1.0
    assert check_targets(groups, [{k: v for k, v in t.items() if k != "base_lib"}])[0][1].startswith("1.00 ")


def test_atari_memory_is_drawn_and_the_report_shows_the_chart(tmp_path: Path) -> None:
    """``make bench`` plots bytes per transition of the Atari case: one bar per library, the floor
    as a line, the image linked under the memory table (issue 19)."""
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE, raw)
    atari = [
        {"lib": "rlcore", "case": "atari", "n": 1_000_000, "bytes_per_transition": 7103.0,
         "floor_bytes_per_transition": 7056, "rss_total": 7.144e9, "nbytes": 7.104e9, "fill_s": 21.0},
        {"lib": "sb3", "case": "atari", "n": 20_000, "bytes_per_transition": 56477.0, "scaled_to": 1_000_000},
    ]
    old = json.loads((raw / "memory.json").read_text()) if (raw / "memory.json").exists() else []
    (raw / "memory.json").write_text(json.dumps(old + atari))
    out = tmp_path / "docs" / "benchmarks.md"
    assert bench.main(["--from", str(raw), "--out", str(out)]) == 0
    text = out.read_text()
    png = out.parent / "img" / "bench_memory_atari.png"
    assert png.exists() and png.stat().st_size > 5_000
    section = text[text.index("### Atari replay"):]
    assert "](img/bench_memory_atari.png)" in section.split("\n### ")[0]
    assert "7.10 GB (measured)" in section and "56.48 GB (scaled)" in section
    # no Atari records: no chart
    assert memory_chart([r for r in old if r.get("case") != "atari"], tmp_path / "img2") is None


_INTERLEAVED = Path(__file__).resolve().parents[1] / "benches" / "interleaved.py"
_ispec = importlib.util.spec_from_file_location("bench_interleaved", _INTERLEAVED)
assert _ispec is not None and _ispec.loader is not None
interleaved = importlib.util.module_from_spec(_ispec)
_ispec.loader.exec_module(interleaved)


def test_interleave_times_every_operation_each_round_in_a_rotated_order() -> None:
    """``benches/interleaved.py`` on a fake clock: each operation's block is timed per call, after
    as many untimed calls, and round r starts at operation r mod n."""
    now = [0.0]
    calls: list[str] = []

    def op(name: str, cost: float):  # noqa: ANN202
        def f() -> None:
            calls.append(name)
            now[0] += cost

        return f

    ops = [(op("a", 1.0), 2), (op("b", 3.0), 1), (op("c", 0.5), 4)]
    times = interleaved.interleave(ops, rounds=3, clock=lambda: now[0])
    assert times == [[1.0] * 3, [3.0] * 3, [0.5] * 3]
    firsts = [calls[0], calls[14], calls[28]]  # each round: 2 + 2 a, 1 + 1 b, 4 + 4 c = 14 calls
    assert len(calls) == 3 * 14 and firsts == ["a", "b", "c"]
    assert interleaved.calibrate(op("x", 1e-3), block_s=0.01, clock=lambda: now[0]) == 10
    # a ratio pairs the blocks of one round: a phase that slows both sides of round 2 cancels out
    assert interleaved.paired_ratio([1.0, 1.0, 4.0], [3.0, 3.0, 12.0]) == 3.0


def test_interleaved_results_load_into_the_report_and_two_builds_make_one_table(tmp_path: Path) -> None:
    """The JSON ``interleaved.py --out`` writes is what ``report.py`` reads (timed records only; a
    skipped peer is left out), and ``--table`` puts two labelled files side by side with the last
    file's ratios; an operation one build lacks (an old build without the floor) shows as –."""

    def rec(g: str, lib: str, us: list[float]) -> dict[str, object]:
        return {"set": "s", "group": g, "lib": lib, "calls": 10, "rounds_s": [x * 1e-6 for x in us]}

    old = {"label": "old", "records": [rec("g", "rlcore", [20.0, 22.0]), rec("g", "rlox", [40.0, 44.0])]}
    new = {"label": "new", "records": [rec("g", "rlcore", [10.0, 11.0]), rec("g", "rlox", [40.0, 44.0]),
                                       rec("g", "floor", [9.0, 9.9]),
                                       {"set": "s", "group": "g", "lib": "cpprb", "skipped": "ImportError"}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    loaded = load_interleaved(tmp_path / "new.json")
    assert set(loaded) == {("g", "rlcore"), ("g", "rlox"), ("g", "floor")}
    assert interleaved_ratio(loaded, ("g", "rlcore"), ("g", "rlox")) == pytest.approx(4.0)
    assert load_interleaved(tmp_path / "missing.json") == {}
    lines = interleaved.table([tmp_path / "old.json", tmp_path / "new.json"]).splitlines()
    assert _cells(lines[0]) == ["group", "library", "old µs", "new µs", "/ rlcore"]
    rows = {tuple(_cells(x)[:2]): _cells(x)[2:] for x in lines[2:]}
    assert rows[("g", "rlcore")] == ["21.00", "10.50", "1.00"]
    assert rows[("g", "rlox")] == ["42.00", "42.00", "4.00"]
    assert rows[("g", "floor")] == ["–", "9.45", "0.90"]


def test_interleaved_ratios_judge_the_targets_whose_two_sides_were_timed_together() -> None:
    """The groups' medians can put rlcore and a peer in different phases of a shared machine; a
    target whose two sides ``benches/interleaved.py`` timed in one set is judged by the median of
    the per-round ratios, the groups' ratio shown beside it; other targets keep the groups' ratio."""

    def row(group: str, lib: str, median: float) -> dict[str, object]:
        return {"group": group, "op": group.split(" @ ")[0], "lib": lib, "median": median, "iqr": 0.0,
                "min": median, "rounds": 1, "unit": "us", "capacity": None, "obs": None, "note": "",
                "disk_bytes": None, "runs": 1, "spread": 0.0}

    groups = by_group([row("h", "rlcore", 30.0), row("h", "rlox", 45.0), row("s", "rlcore", 10.0),
                             row("s", "rlox", 15.0), row("s @ 1M", "rlcore", 40.0)])
    inter = {
        ("h", "rlcore"): {"set": "her", "group": "h", "lib": "rlcore", "rounds_s": [1e-5, 3e-5, 1e-5]},
        ("h", "rlox"): {"set": "her", "group": "h", "lib": "rlox", "rounds_s": [3.2e-5, 9.9e-5, 3.1e-5]},
        ("s", "rlox"): {"set": "other", "group": "s", "lib": "rlox", "rounds_s": [1e-5] * 3},
        ("s", "rlcore"): {"set": "sample", "group": "s", "lib": "rlcore", "rounds_s": [1e-5] * 3},
        ("s @ 1M", "rlcore"): {"set": "sample", "group": "s @ 1M", "lib": "rlcore", "rounds_s": [1.9e-5] * 3},
    }
    targets = [
        {"name": "her", "group": "h", "peer": "rlox", "min": 3},
        {"name": "split", "group": "s", "peer": "rlox", "min": 3},
        {"name": "flat", "group": "s @ 1M", "base": "s", "max": 2},
    ]
    rows = check_targets(groups, targets, inter)
    assert rows[0] == ("her", "3.20× interleaved; groups 1.50× (45.0 / 30.0 µs)", "met")
    assert rows[1] == ("split", "1.50× (15.0 / 10.0 µs)", "missed (50% of target)")  # not one set
    assert rows[2] == ("flat", "1.90 interleaved; groups 4.00 (40.0 / 10.0 µs)", "met")
    assert check_targets(groups, targets)[0][2] == "missed (50% of target)"  # without the file
    section = "\n".join(interleaved_section(inter))
    line = next(x for x in section.splitlines() if x.startswith("| h | rlox"))
    assert _cells(line)[3] == fmt_ratio(3.2)
