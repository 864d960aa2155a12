"""The Markdown tables of the report's sections, each as a list of lines: the headline, the distance
to the floor, the interleaved comparisons, one table per group, the scale sections, memory and end to
end."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from .results import (
    FLOOR,
    PEER_ORDER,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    fmt_us,
    interleaved_ratio,
    lib_key,
    obs_rank,
    unit_label,
)


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
        obs_order.sort(key=obs_rank)
        cap = next(r["capacity"] for rs in groups.values() for r in rs if r["obs"] is not None)
        L.append(f"## Scale: observation size (capacity {_cap(cap)}; µs, median, and peer / rlcore)\n")
        for op, libs in by_op.items():
            L.append(f"### {op}, by observation size\n")
            L.append("| library | " + " | ".join(f"obs {o}" for o in obs_order) + " |")
            L.append("|---|" + "---:|" * len(obs_order))
            for lib in sorted(libs, key=lib_key):
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
    for r in sorted(recs, key=lambda r: lib_key(r["lib"])):
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
    libs = sorted({r["lib"] for r in memory}, key=lib_key)
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
            for lib in sorted(rs, key=lib_key):
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
