"""Results over several runs (seeds) of one setting: the learning curve of each run, their
aggregate per step (mean with a 95 % bootstrap interval, interquartile mean), a table of final and
best values, a CSV and a figure. ``rlcore plot RUN_DIR RUN_DIR ...`` calls :func:`plot_seeds`.

Statistics (scipy): the interval is a percentile bootstrap of the mean over runs
(``scipy.stats.bootstrap``, 10,000 resamples, seeded); the interquartile mean (IQM) is the mean
of the middle 50 % of the runs' values (``scipy.stats.trim_mean(values, 0.25)``; Agarwal et al.
2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice", sec. 4.2). With
fewer than 4 runs nothing is trimmed and the IQM is the mean; with one run there is no interval.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlcore.logging import METRICS_FILE, read_metrics

__all__ = [
    "Aggregate",
    "RunCurve",
    "aggregate",
    "plot_seeds",
    "read_curve",
    "read_reference",
    "summary_table",
]

CONFIDENCE = 0.95
"""Confidence level of the bootstrap interval."""
RESAMPLES = 10_000
"""Bootstrap resamples."""


@dataclass(frozen=True)
class RunCurve:
    """One metric of one run: ``x`` (env steps, or gradient steps for a run without env steps)
    and ``y``, float64 ``[K]``, ``x`` increasing."""

    run_dir: Path
    x_name: str
    x: np.ndarray
    y: np.ndarray

    @property
    def final(self) -> float:
        """The last value (the run's final evaluation for an ``eval/`` metric)."""
        return float(self.y[-1])

    @property
    def best(self) -> float:
        """The largest value."""
        return float(np.max(self.y))


def read_curve(run_dir: str | Path, metric: str = "eval/return_mean") -> RunCurve:
    """``metric`` of the run in ``run_dir`` (its ``metrics.jsonl``) against env steps (gradient
    steps when the run collected none). Where a resumed run wrote a step again (it continued
    from a checkpoint older than its last lines), its later value wins.

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
        ValueError: the file holds no finite value of ``metric``.
    """
    run_dir = Path(run_dir)
    path = run_dir / METRICS_FILE
    rows = read_metrics(run_dir)
    offline = all(not row.get("time/env_steps") for row in rows)
    x_name = "time/grad_steps" if offline else "time/env_steps"
    points: dict[float, float] = {}
    for row in rows:
        value, x = row.get(metric), row.get(x_name)
        if isinstance(value, int | float) and isinstance(x, int | float) and math.isfinite(value):
            points[float(x)] = float(value)
    if not points:
        raise ValueError(f"{path} holds no finite {metric}")
    xs = np.array(sorted(points))
    return RunCurve(
        run_dir, x_name.removeprefix("time/").replace("_", " "), xs, np.array([points[x] for x in xs])
    )


@dataclass(frozen=True)
class Aggregate:
    """The runs' values at the steps all of them reached, float64 ``[K]`` each."""

    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    """Lower end of the 95 % bootstrap interval of the mean (NaN with one run)."""
    high: np.ndarray
    """Upper end of the interval (NaN with one run)."""
    iqm: np.ndarray
    values: np.ndarray
    """float64 ``[R, K]``: each run's value."""


def aggregate(curves: list[RunCurve], *, seed: int = 0) -> Aggregate:
    """Mean, 95 % bootstrap interval of the mean and IQM over ``curves`` at every step that all
    of them have (module docstring).

    Raises:
        ValueError: no curves, or no step that all of them have.
    """
    from scipy import stats

    if not curves:
        raise ValueError("no runs to aggregate")
    common = sorted(set.intersection(*(set(c.x.tolist()) for c in curves)))
    if not common:
        raise ValueError("the runs share no evaluation step (were they run with the same schedule?)")
    values = np.array([[c.y[np.searchsorted(c.x, x)] for x in common] for c in curves])  # [R, K]
    mean = values.mean(axis=0)
    low = np.full(len(common), math.nan)
    high = np.full(len(common), math.nan)
    if len(curves) > 1:
        rng = np.random.default_rng(seed)
        for k in range(len(common)):
            column = values[:, k]
            if np.ptp(column) == 0:  # every run the same: a zero-width interval
                low[k] = high[k] = column[0]
                continue
            res = stats.bootstrap(
                (column,),
                np.mean,
                confidence_level=CONFIDENCE,
                n_resamples=RESAMPLES,
                method="percentile",
                random_state=rng,
            )
            low[k], high[k] = res.confidence_interval.low, res.confidence_interval.high
    iqm = stats.trim_mean(values, 0.25, axis=0)
    return Aggregate(np.array(common, dtype=np.float64), mean, low, high, iqm, values)


def summary_table(curves: list[RunCurve], metric: str) -> str:
    """A Markdown table: each run's final and best ``metric``, then their mean ± standard
    deviation over runs and IQM."""
    from scipy import stats

    lines = [f"| run | steps | final {metric} | best {metric} |", "|---|---|---|---|"]
    for c in curves:
        lines.append(f"| {c.run_dir} | {c.x[-1]:,.0f} | {c.final:.1f} | {c.best:.1f} |")
    finals = np.array([c.final for c in curves])
    bests = np.array([c.best for c in curves])

    def std(v: np.ndarray) -> float:
        return float(v.std(ddof=1)) if v.size > 1 else 0.0

    lines.append(
        f"| mean ± std ({len(curves)} runs) | | {finals.mean():.1f} ± {std(finals):.1f} | {bests.mean():.1f} ± {std(bests):.1f} |"
    )
    lines.append(f"| IQM | | {stats.trim_mean(finals, 0.25):.1f} | {stats.trim_mean(bests, 0.25):.1f} |")
    return "\n".join(lines)


def read_reference(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A published learning curve to draw beside runs: a CSV with the header ``env_step,mean,std``
    (one row per step, ``std`` the spread over the publisher's seeds; e.g. Tianshou's
    ``test_rew_10seeds.csv`` reduced to its ``env_step``, ``rew`` and ``rew:shaded`` columns).

    Returns:
        ``(step, mean, std)``, float64 ``[K]`` each.

    Raises:
        FileNotFoundError: no such file.
        ValueError: another header, a value that is not a number, or no rows.
    """
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or [c.strip() for c in rows[0]] != ["env_step", "mean", "std"]:
        raise ValueError(f"{path}: a reference curve is a CSV with the header env_step,mean,std")
    try:
        data = np.array([[float(v) for v in row] for row in rows[1:] if row], dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
    if data.ndim != 2 or data.shape[0] == 0 or data.shape[1] != 3:
        raise ValueError(f"{path}: no rows of three numbers")
    return data[:, 0], data[:, 1], data[:, 2]


def plot_seeds(
    run_dirs: list[str | Path],
    out_dir: str | Path,
    *,
    metric: str = "eval/return_mean",
    title: str | None = None,
    reference: str | Path | None = None,
    reference_label: str | None = None,
) -> tuple[Path, Path, str]:
    """Draw ``metric`` of several runs in one figure: each run thin, their mean with its 95 %
    bootstrap interval as a band, their IQM dashed; write the aggregate as CSV beside it. With
    ``reference`` (:func:`read_reference`), a published curve is drawn too: its mean and a
    mean ± std band, labelled ``reference_label`` (default: the file's name).

    Returns:
        ``(png, csv, table)``: the figure ``out_dir/<metric>.png``, the CSV ``out_dir/<metric>.csv``
        (columns ``step, mean, ci_low, ci_high, iqm`` and one per run) and :func:`summary_table`.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_curve`, :func:`aggregate` and
            :func:`read_reference`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    curves = [read_curve(d, metric) for d in run_dirs]
    ref = read_reference(reference) if reference is not None else None
    agg = aggregate(curves)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = metric.replace("/", "_")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for c in curves:
        ax.plot(c.x, c.y, lw=0.8, alpha=0.45, label=f"{c.run_dir.name}")
    ax.plot(agg.x, agg.mean, lw=2, color="C0" if len(curves) > 9 else "black", label=f"mean of {len(curves)}")
    if len(curves) > 1:
        ax.fill_between(
            agg.x, agg.low, agg.high, color="0.5", alpha=0.25, label="95 % bootstrap CI of the mean"
        )
        ax.plot(agg.x, agg.iqm, lw=1.5, ls="--", color="0.25", label="IQM")
    if ref is not None:
        step, mean, std = ref
        label = reference_label or Path(reference).stem  # type: ignore[arg-type]
        ax.plot(step, mean, lw=1.8, color="C3", label=f"{label}: mean")
        ax.fill_between(step, mean - std, mean + std, color="C3", alpha=0.15, label=f"{label}: mean ± std")
    ax.set_xlabel(curves[0].x_name)
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} over {len(curves)} runs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    png = out / f"{stem}.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    path = out / f"{stem}.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["step", "mean", "ci_low", "ci_high", "iqm", *(c.run_dir.name for c in curves)])
        for k, x in enumerate(agg.x):
            w.writerow(
                [
                    f"{x:.0f}",
                    *(f"{v:.4f}" for v in (agg.mean[k], agg.low[k], agg.high[k], agg.iqm[k])),
                    *(f"{v:.4f}" for v in agg.values[:, k]),
                ]
            )
    return png, path, summary_table(curves, metric)
