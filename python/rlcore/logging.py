"""Loggers for trainer statistics and ``plot_run`` for learning curves.

Every logger takes the trainer's :class:`~rlcore.stats.EpochStats` and writes the namespaced metrics
of :func:`~rlcore.stats.flatten_stats` (``rollout/``, ``train/``, ``eval/``, ``time/``):

* :class:`ConsoleLogger`: a tqdm progress bar over env steps (with ETA) showing the key metrics, and
  one printed line per evaluation;
* :class:`JsonlLogger`: one JSON object per line in ``metrics.jsonl``;
* :class:`TensorBoardLogger`: ``torch.utils.tensorboard`` scalars with the env steps as x-axis;
* :class:`MultiLogger`: fans out to several of them.

``plot_run(run_dir)`` reads ``metrics.jsonl`` (:func:`learning_curves`) and writes one PNG per
namespace with matplotlib, leaving out the metrics that never change.
"""

from __future__ import annotations

import json
import math
import textwrap
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from rlcore.stats import EpochStats, flatten_stats

__all__ = [
    "ConsoleLogger",
    "Curves",
    "JsonlLogger",
    "Logger",
    "MultiLogger",
    "TensorBoardLogger",
    "learning_curves",
    "plot_run",
    "read_metrics",
    "remove_tensorboard_files",
]


class Logger(Protocol):
    """A sink for iteration statistics."""

    def write(self, stats: EpochStats) -> None: ...

    def close(self) -> None: ...


METRICS_FILE = "metrics.jsonl"


class JsonlLogger:
    """Append one JSON line of flattened metrics per iteration to ``path``.

    Iterations with neither a finished episode nor an evaluation are written only every
    ``every_iterations`` iterations, so per-step iterations do not flood the file. Every line also
    carries the wall time since the logger was made and its split, summed over *all* iterations
    written to the logger (thinned ones included), in seconds: ``time/wall_s``,
    ``time/collect_total_s``, ``time/update_total_s``, ``time/eval_total_s`` (a resumed run's
    logger starts them at 0 again).

    Args:
        path: the ``.jsonl`` file (parent directories are created).
        every_iterations: write at least every this many iterations.
    """

    def __init__(self, path: str | Path, *, every_iterations: int = 1) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.every = max(1, every_iterations)
        self._start = time.perf_counter()
        self._totals = {"collect": 0.0, "update": 0.0, "eval": 0.0}
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, stats: EpochStats) -> None:
        """Write the iteration's metrics (see the class docstring for thinning)."""
        t = stats.time
        self._totals["collect"] += t.collect_s
        self._totals["update"] += t.update_s
        self._totals["eval"] += t.eval_s
        if stats.rollout.episodes == 0 and stats.eval is None and stats.iteration % self.every:
            return
        row = flatten_stats(stats)
        row["time/wall_s"] = time.perf_counter() - self._start
        row.update({f"time/{k}_total_s": v for k, v in self._totals.items()})
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class TensorBoardLogger:
    """Write the metrics as TensorBoard scalars (x-axis: env steps) into ``log_dir``.

    Thinned like :class:`JsonlLogger`.

    Raises:
        ModuleNotFoundError: tensorboard is not installed (``pip install tensorboard``).
    """

    def __init__(self, log_dir: str | Path, *, every_iterations: int = 1) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))
        self.every = max(1, every_iterations)

    def write(self, stats: EpochStats) -> None:
        """Add one scalar per metric at ``global_step = stats.env_steps``."""
        if stats.rollout.episodes == 0 and stats.eval is None and stats.iteration % self.every:
            return
        for key, value in flatten_stats(stats).items():
            self.writer.add_scalar(key, value, global_step=stats.env_steps)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


def remove_tensorboard_files(log_dir: str | Path) -> list[Path]:
    """Remove the TensorBoard event files (``events.out.tfevents.*``) under ``log_dir`` — what
    :class:`TensorBoardLogger` writes — and the folders this empties (``log_dir`` included);
    any other file stays. Returns the files removed."""
    root = Path(log_dir)
    if not root.is_dir() or root.is_symlink():
        return []
    removed = [p for p in root.rglob("events.out.tfevents.*") if p.is_file() and not p.is_symlink()]
    for p in removed:
        p.unlink()
    for d in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    if not any(root.iterdir()):
        root.rmdir()
    return removed


class ConsoleLogger:
    """A tqdm progress bar over env steps with ETA and the latest return, success and loss.

    Each evaluation is also printed as one line above the bar.

    Args:
        total_env_steps: the bar's length (the trainer's ``max_env_steps``).
        disable: hide the bar (e.g. in batch jobs); evaluation lines are still printed.
    """

    def __init__(self, total_env_steps: int | None, *, disable: bool = False) -> None:
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self.bar = tqdm(total=total_env_steps, unit="step", dynamic_ncols=True, disable=disable)
        self._last_env_steps = 0
        self._postfix: dict[str, str] = {}

    def write(self, stats: EpochStats) -> None:
        """Advance the bar, refresh the metrics shown, print evaluations."""
        self.bar.update(stats.env_steps - self._last_env_steps)
        self._last_env_steps = stats.env_steps
        if stats.rollout.episodes:
            self._postfix["return"] = f"{stats.rollout.return_mean:.1f}"
            if not math.isnan(stats.rollout.success_rate):
                self._postfix["success"] = f"{stats.rollout.success_rate:.2f}"
        if stats.eval is not None:
            self._postfix["eval"] = f"{stats.eval.return_mean:.1f}"
            line = f"env_steps={stats.env_steps} eval/return_mean={stats.eval.return_mean:.2f}"
            if not math.isnan(stats.eval.success_rate):
                self._postfix["eval_success"] = f"{stats.eval.success_rate:.2f}"
                line += f" eval/success_rate={stats.eval.success_rate:.2f}"
            self._tqdm.write(line)
        self.bar.set_postfix(self._postfix, refresh=False)

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


class MultiLogger:
    """Write to several loggers."""

    def __init__(self, *loggers: ConsoleLogger | JsonlLogger | TensorBoardLogger) -> None:
        self.loggers = loggers

    def write(self, stats: EpochStats) -> None:
        """Write to each logger in order."""
        for logger in self.loggers:
            logger.write(stats)

    def close(self) -> None:
        """Close each logger."""
        for logger in self.loggers:
            logger.close()


#: y-axis labels of metrics whose unit is not in their name
_UNITS = {"return_mean": "return", "return_std": "return", "length_mean": "env steps", "success_rate": "fraction"}


def _segments(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """Split a series where its env steps go back (a file that several runs appended to, written
    before run directories were kept apart), so no line is drawn from the end of one run back to
    the start of the next."""
    parts: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if parts[-1] and x < parts[-1][-1][0]:
            parts.append([])
        parts[-1].append((x, y))
    return parts


def _fmt(value: float) -> str:
    return f"{value:.4g}"


@dataclass(frozen=True)
class Curves:
    """What :func:`plot_run` draws for one namespace of a run.

    Attributes:
        namespace: ``rollout``, ``train`` or ``eval``.
        drawn: metric name -> its runs, each a list of ``(env_steps, value)`` in file order (one
            run unless the env steps go back, see :func:`learning_curves`).
        constant: metric name -> its one value (``nan`` when it has no finite value): not drawn.
    """

    namespace: str
    drawn: dict[str, list[list[tuple[float, float]]]]
    constant: dict[str, float]


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of ``run_dir/metrics.jsonl`` (what :class:`JsonlLogger` wrote), in file order;
    blank lines are skipped. The one reader of a run's metrics (:func:`learning_curves`,
    :func:`rlcore.results.read_curve`).

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no {METRICS_FILE} in {run_dir} (is it a run directory written by `rlcore train`?)"
        )
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def learning_curves(run_dir: str | Path) -> list[Curves]:
    """Read ``run_dir/metrics.jsonl`` into the curves :func:`plot_run` draws, one per namespace
    (sorted). A metric with fewer than two distinct finite values is ``constant``; a series whose
    env steps go back (several runs appended to one file by rlcore before 0.2) is split into runs.

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
        ValueError: the file holds no rollout/train/eval metrics.
    """
    path = Path(run_dir) / METRICS_FILE
    series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in read_metrics(run_dir):
        x = row.get("time/env_steps")
        if x is None:
            continue
        for key, value in row.items():
            namespace, _, name = key.partition("/")
            if namespace in ("rollout", "train", "eval") and isinstance(value, int | float):
                series[namespace][name].append((float(x), float(value)))
    if not series:
        raise ValueError(f"{path} holds no rollout/train/eval metrics")
    out = []
    for namespace, metrics in sorted(series.items()):
        drawn, constant = {}, {}
        for name in sorted(metrics):
            finite = [(x, y) for x, y in metrics[name] if math.isfinite(y)]
            values = {y for _, y in finite}
            if len(values) > 1:
                drawn[name] = _segments(finite)
            else:
                constant[name] = values.pop() if values else math.nan
        out.append(Curves(namespace, drawn, constant))
    return out


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw learning curves from ``run_dir/metrics.jsonl``: one PNG per namespace, x = env steps.

    Writes ``rollout.png``, ``train.png``, ``eval.png`` into ``out_dir`` (default: ``run_dir``) and
    returns their paths. Each panel is one metric, titled ``namespace/name``, with env steps on the x
    axis (at most 6 ticks, labelled ``2k``, ``1.5M``, ...) and the metric (with its unit where the
    name does not say it) on the y axis. A metric that never changes (an episode count, a fixed
    episode length) or has no finite value is not drawn: the figure's footnote lists it with its
    value, and a namespace with nothing to draw gets no PNG.
    When the env steps go back (several runs appended to one file by an older rlcore), each run is
    its own line, labelled in a legend. See :func:`learning_curves`.

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
        ValueError: the file holds no metrics, or none that changes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    run_dir = Path(run_dir)
    curves = learning_curves(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir
    written = []
    for c in curves:
        if not c.drawn:
            continue
        cols = min(3, len(c.drawn))
        rows = math.ceil(len(c.drawn) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows + 0.4), squeeze=False)
        for ax, (name, parts) in zip(axes.flat, c.drawn.items(), strict=False):
            for k, part in enumerate(parts):
                xs, ys = zip(*part, strict=True)
                label = f"run {k + 1} (env steps {xs[0]:,.0f}-{xs[-1]:,.0f})" if len(parts) > 1 else None
                ax.plot(xs, ys, marker="." if len(xs) < 50 else None, label=label)
            if len(parts) > 1:
                ax.legend(fontsize=7)
            ax.set_title(f"{c.namespace}/{name}")
            ax.set_xlabel("env steps")
            # "10k" rather than "10000", and at most 6 ticks: matplotlib's default labels of a
            # 15k-step run ("10000", "12000", "14000") run together in a 4.5-inch panel.
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
            ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_ylabel(_UNITS.get(name, name))
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(c.drawn) :]:
            ax.axis("off")
        fig.suptitle(f"{run_dir.name}: {c.namespace}")
        not_drawn = [
            f"{name} = {_fmt(v)}" if math.isfinite(v) else f"{name} (no finite value)"
            for name, v in c.constant.items()
        ]
        note = textwrap.fill("constant, not drawn: " + ", ".join(not_drawn), 75 * cols) if not_drawn else ""
        if note:
            fig.text(0.01, 0.01, note, fontsize=8, color="0.35", va="bottom")
        fig.tight_layout(rect=(0, (0.05 + 0.04 * note.count("\n")) / rows if note else 0, 1, 1))
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{c.namespace}.png"
        fig.savefig(target, dpi=100)
        plt.close(fig)
        written.append(target)
    if not written:
        constant = ", ".join(f"{c.namespace}/{n} = {_fmt(v)}" for c in curves for n, v in c.constant.items())
        raise ValueError(
            f"{run_dir / METRICS_FILE}: no metric changes over the run, nothing to draw ({constant})"
        )
    return written
