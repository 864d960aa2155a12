"""Learning curves of the recurrent DQN (R2D2) and the feed-forward DQN on rlcore/CartPoleNoVel-v1.

Reads the run directories' ``metrics.jsonl`` (``examples/cartpole_r2d2.py --out`` and
``rlcore train --out``), prints the final and best evaluation of each run and draws
``eval/return_mean`` against env steps into one PNG.

    python benches/plot_r2d2.py --out docs/img/r2d2_cartpole_novel.png RUN_DIR [RUN_DIR ...] \
        [--labels LABEL ...]

``--labels`` names the curves (one per run directory, in order; default: the directories' names).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def curve(run: Path) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        y = row.get("eval/return_mean")
        if y is None or y != y:
            continue
        xs.append(float(row.get("env_steps", row.get("time/env_steps", 0))))
        ys.append(float(y))
    return xs, ys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--labels", nargs="+", default=None, help="one legend label per run directory")
    a = ap.parse_args()
    if a.labels is not None and len(a.labels) != len(a.runs):
        ap.error(f"--labels gives {len(a.labels)} labels for {len(a.runs)} run directories")
    labels = a.labels or [run.name for run in a.runs]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run, label in zip(a.runs, labels, strict=True):
        xs, ys = curve(run)
        if not xs:
            continue
        print(f"{label}: final {ys[-1]:.1f} at {xs[-1]:.0f} env steps, best {max(ys):.1f}")
        ax.plot(xs, ys, label=label, lw=1.2)
    ax.axhline(400, color="grey", ls=":", lw=1)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (5 greedy episodes)")
    ax.set_title("rlcore/CartPoleNoVel-v1 (velocities hidden)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
