"""Loggers for trainer statistics and ``plot_run`` for learning curves.

Every logger takes the trainer's :class:`~rlcore.stats.EpochStats` and writes the namespaced metrics
of :func:`~rlcore.stats.flatten_stats` (``rollout/``, ``train/``, ``eval/``, ``time/``):

* :class:`ConsoleLogger`: a tqdm progress bar over env steps (with ETA) showing the key metrics, and
  one printed line per evaluation;
* :class:`JsonlLogger`: one JSON object per line in ``metrics.jsonl``;
* :class:`TensorBoardLogger`: ``torch.utils.tensorboard`` scalars with the env steps as x-axis;
* :class:`MultiLogger`: fans out to several of them.

``plot_run(run_dir)`` reads ``metrics.jsonl`` and writes one PNG per namespace with matplotlib.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Protocol

from rlcore.stats import EpochStats, flatten_stats

__all__ = [
    "ConsoleLogger",
    "JsonlLogger",
    "Logger",
    "MultiLogger",
    "TensorBoardLogger",
    "plot_run",
    "write_iterations",
]


class Logger(Protocol):
    """A sink for iteration statistics."""

    def write(self, stats: EpochStats) -> None: ...

    def close(self) -> None: ...


def write_iterations(
    iterations: Iterable[EpochStats], max_env_steps: int | None, logger: Logger | None
) -> EpochStats | None:
    """The trainers' ``run()``: advance ``iterations`` to its end, writing each stats to ``logger``;
    return the last stats.

    Raises:
        ValueError: ``max_env_steps`` is ``None`` (the loop would never end).
    """
    if max_env_steps is None:
        raise ValueError("run() needs config.max_env_steps; iterate the trainer yourself for an endless run")
    last = None
    for stats in iterations:
        if logger is not None:
            logger.write(stats)
        last = stats
    return last


METRICS_FILE = "metrics.jsonl"


class JsonlLogger:
    """Append one JSON line of flattened metrics per iteration to ``path``.

    Iterations with neither a finished episode nor an evaluation are written only every
    ``every_iterations`` iterations, so per-step iterations do not flood the file.

    Args:
        path: the ``.jsonl`` file (parent directories are created).
        every_iterations: write at least every this many iterations.
    """

    def __init__(self, path: str | Path, *, every_iterations: int = 1) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.every = max(1, every_iterations)
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, stats: EpochStats) -> None:
        """Write the iteration's metrics (see the class docstring for thinning)."""
        if stats.rollout.episodes == 0 and stats.eval is None and stats.iteration % self.every:
            return
        self._file.write(json.dumps(flatten_stats(stats)) + "\n")
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


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw learning curves from ``run_dir/metrics.jsonl``: one PNG per namespace, x = env steps.

    Writes ``rollout.png``, ``train.png``, ``eval.png`` (those that have data) into ``out_dir``
    (default: ``run_dir``) and returns their paths.

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
        ValueError: the file holds no metrics.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no {METRICS_FILE} in {run_dir} (is it a run directory written by `rlcore train`?)"
        )
    series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            x = row.get("time/env_steps")
            if x is None:
                continue
            for key, value in row.items():
                namespace, _, name = key.partition("/")
                if namespace in ("rollout", "train", "eval"):
                    series[namespace][name].append((x, value))
    if not series:
        raise ValueError(f"{path} holds no rollout/train/eval metrics")
    out = Path(out_dir) if out_dir is not None else run_dir
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for namespace, metrics in sorted(series.items()):
        names = sorted(metrics)
        cols = min(3, len(names))
        rows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            xs, ys = zip(*metrics[name], strict=True)
            ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
            ax.set_title(f"{namespace}/{name}")
            ax.set_xlabel("env steps")
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        fig.suptitle(run_dir.name)
        fig.tight_layout()
        target = out / f"{namespace}.png"
        fig.savefig(target, dpi=100)
        plt.close(fig)
        written.append(target)
    return written
