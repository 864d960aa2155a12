"""The report's PNG figures: one bar chart per group, the headline chart of rlcore's speed-up over
each peer, and the Atari memory chart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .results import PEER_ORDER, fmt_ratio, fmt_time, headline_groups, lib_key, unit_label


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
    recs = sorted(recs, key=lambda r: lib_key(r["lib"]))[::-1]
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


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")
