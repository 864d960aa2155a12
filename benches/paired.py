"""Paired comparison of training runs by seed: mean ± standard error per arm, the paired
difference to a baseline arm and its two-sided sign-flip permutation p-value (Good 2005,
*Permutation, Parametric and Bootstrap Tests of Hypotheses*, ch. 3). Used by the compat run
scripts' reports; reads their JSONL rows (one run per line, keyed by arm and seed)."""

from __future__ import annotations

import itertools
import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def sign_flip_p(diffs: Sequence[float], rounds: int = 100_000, seed: int = 0) -> float:
    """Two-sided p-value of the mean paired difference under a sign-flip permutation test: each
    pair's sign flipped with probability 1/2; exact enumeration for <= 16 pairs, else ``rounds``
    random sign vectors."""
    n = len(diffs)
    observed = abs(statistics.fmean(diffs))
    if n <= 16:
        signs_iter: Any = itertools.product((1, -1), repeat=n)
        total = 2**n
    else:
        rng = random.Random(seed)
        signs_iter = ([rng.choice((1, -1)) for _ in range(n)] for _ in range(rounds))
        total = rounds
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True)) / n) >= observed - 1e-12 for signs in signs_iter
    )
    return hits / total


def mean_se(xs: Sequence[float], digits: int = 3) -> str:
    """``mean ± standard error`` of ``xs``."""
    se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    return f"{statistics.fmean(xs):.{digits}f} ± {se:.{digits}f}"


def paired_table(
    rows: Sequence[dict[str, Any]],
    metrics: Sequence[tuple[str, str]],
    baseline: str,
    arm_key: str = "buffer",
    digits: int = 3,
) -> str:
    """A Markdown table of every arm against ``baseline`` on the seeds that **every** arm ran
    (so all rows describe the same seeds): per metric ``(key, label)`` the mean ± standard
    error, then the paired difference arm − baseline with its sign-flip p-value, and how many
    seeds the arm did better / worse on the first metric."""
    by: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        by[r[arm_key]][r["seed"]] = r
    if baseline not in by:
        return f"(no runs of the baseline arm {baseline!r})"
    seeds = sorted(set.intersection(*(set(v) for v in by.values())))
    head = " | ".join(label for _, label in metrics)
    deltas_head = " | ".join(f"paired Δ {label} (p)" for _, label in metrics)
    lines = [
        f"| arm | seeds | {head} | {deltas_head} | better / worse on {metrics[0][1]} |",
        "|---|---|" + "---|" * (2 * len(metrics) + 1),
    ]
    if not seeds:
        return "(no seed was run by every arm)"
    base = by[baseline]
    for arm in sorted(by, key=lambda a: (a != baseline, a)):
        cells = [mean_se([by[arm][k][key] for k in seeds], digits) for key, _ in metrics]
        if arm == baseline or len(seeds) < 2:
            deltas, tally = ["–"] * len(metrics), "–"
        else:
            deltas = []
            for key, _ in metrics:
                d = [by[arm][k][key] - base[k][key] for k in seeds]
                deltas.append(f"{mean_se(d, digits)} (p = {sign_flip_p(d):.2f})")
            first = [by[arm][k][metrics[0][0]] - base[k][metrics[0][0]] for k in seeds]
            tally = f"{sum(x > 0 for x in first)} / {sum(x < 0 for x in first)}"
        lines.append(f"| {arm} | {len(seeds)} | {' | '.join(cells)} | {' | '.join(deltas)} | {tally} |")
    return "\n".join(lines)
