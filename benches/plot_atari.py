"""Learning curve and wall-time split of an Atari DQN run (docs/atari.md).

Reads ``RUN_DIR/metrics.jsonl`` of ``rlcore train --algo dqn --env ALE/...`` (or
``examples/atari_dqn.py --out``), prints one line per evaluation (env steps, eval return mean and
std, wall hours) and the wall-time split of the run so far (collecting, i.e. env steps and acting,
vs sampling + gradient updates vs evaluation), and draws the evaluation return (raw game score,
mean +- std over the games of each evaluation) and the training return per life (clipped rewards)
against env steps into one PNG. It can be rerun at any time while the run goes on.

    python benches/plot_atari.py runs/atari/breakout-s0 --out docs/img/atari_breakout_dqn.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="run directory with metrics.jsonl")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    ap.add_argument("--random", type=float, default=1.5, help="random play's score, drawn as a line")
    ap.add_argument("--target", type=float, default=5.0, help="target score, drawn as a line")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    rows = read(a.run)
    if not rows:
        raise SystemExit(f"{a.run}/metrics.jsonl is empty")
    evals = [r for r in rows if "eval/return_mean" in r]
    train = [r for r in rows if "rollout/return_mean" in r]

    print("env_steps  eval_return_mean  eval_return_std  eval_length_mean  wall_h")
    for r in evals:
        print(
            f"{int(r['time/env_steps']):>9}  {r['eval/return_mean']:>16.2f}  {r['eval/return_std']:>15.2f}"
            f"  {r['eval/length_mean']:>16.0f}  {r.get('time/wall_s', float('nan')) / 3600:>6.2f}"
        )
    last = rows[-1]
    wall = last.get("time/wall_s")
    if wall is not None:
        parts = {k: last[f"time/{k}_total_s"] for k in ("collect", "update", "eval")}
        split = ", ".join(f"{k} {v / 3600:.2f} h ({100 * v / wall:.0f} %)" for k, v in parts.items())
        print(
            f"at {int(last['time/env_steps'])} env steps, {int(last['time/grad_steps'])} gradient steps: "
            f"wall {wall / 3600:.2f} h = {split}"
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if train:
        x = np.array([r["time/env_steps"] for r in train])
        y = np.array([r["rollout/return_mean"] for r in train])
        k = max(1, len(y) // 60)
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(x[k - 1 :], smooth, color="0.6", lw=1, label="training return per life (clipped)")
    if evals:
        x = np.array([r["time/env_steps"] for r in evals])
        m = np.array([r["eval/return_mean"] for r in evals])
        s = np.array([r["eval/return_std"] for r in evals])
        ax.plot(x, m, "o-", color="C0", label="eval return (raw score, eps 0.05)")
        ax.fill_between(x, m - s, m + s, color="C0", alpha=0.15)
    ax.axhline(a.random, color="C3", ls=":", lw=1, label=f"random play ({a.random})")
    ax.axhline(a.target, color="C2", ls="--", lw=1, label=f"target ({a.target})")
    ax.set_xlabel("env steps (agent steps, 4 frames each)")
    ax.set_ylabel("return")
    hours = f", {wall / 3600:.1f} h wall" if wall is not None else ""
    ax.set_title(a.title or f"DQN on {a.run.name}: {int(last['time/env_steps'])} env steps{hours}")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
