"""The report page: its introduction, the machine and versions, the sections in their order (tables
from :mod:`.tables`, charts from :mod:`.charts`) and how the numbers are made."""

from __future__ import annotations

import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

from .results import PYTEST_TIMING, headline_groups, is_gpu
from .tables import (
    e2e_section,
    floor_table,
    group_table,
    headline_table,
    interleaved_section,
    memory_section,
    scale_sections,
)

NO_CUDA = "not measured (no CUDA device)"


def portable_command(command: str) -> str:
    """``command`` as the page shows it: paths inside the repository relative to it, any other
    absolute path as ``DIR`` (the page names no folder of the machine that made it)."""
    root = Path(__file__).resolve().parents[2]
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
