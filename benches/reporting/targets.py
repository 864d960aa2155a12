"""The repository's speed targets (``benches/targets.toml``) checked against the groups and the
interleaved ratios; printed and written to ``targets.md`` beside the raw results, never into the
report."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .results import fmt_us, interleaved_ratio


def _med(groups: dict[str, list[dict[str, Any]]], group: str, lib: str) -> float | None:
    return next((r["median"] for r in groups.get(group, []) if r["lib"] == lib), None)


def load_targets(path: Path) -> list[dict[str, Any]]:
    """Read a targets file (see ``benches/targets.toml``): its ``[[target]]`` tables, in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: not TOML, or a target that is neither a ratio (``peer``, ``min``) nor a cost
            (``base``, ``max``) target, or lacks ``name``/``group`` (named in the message).
    """
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from e
    unknown = set(spec) - {"target"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} (expected [[target]] tables)")
    targets = list(spec.get("target", []))
    for k, entry in enumerate(targets):
        kinds = [keys for keys in (("peer", "min"), ("base", "max")) if all(key in entry for key in keys)]
        if "name" not in entry or "group" not in entry or len(kinds) != 1:
            raise ValueError(
                f"{path}: [[target]] number {k + 1} needs name, group and either peer + min or base + max"
            )
    return targets


def check_targets(
    groups: dict[str, list[dict[str, Any]]],
    targets: list[dict[str, Any]],
    inter: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> list[tuple[str, str, str]]:
    """``(target, measured, verdict)`` for each of ``targets`` (:func:`load_targets`), in order. A
    target whose two sides were both timed in one interleaved set (``inter``, see
    :func:`load_interleaved`) is judged by their interleaved ratio; the groups' ratio of medians is
    shown beside it. Otherwise the groups' ratio of medians judges it."""
    out: list[tuple[str, str, str]] = []
    for t in targets:
        lib = t.get("lib", "rlcore")
        if "peer" in t:
            # the peer's time over rlcore's: >= min
            fast, slow = (t["group"], lib), (t["group"], t["peer"])
        else:
            # lib's time in group over its time in base: <= max
            fast, slow = (t["base"], t.get("base_lib", lib)), (t["group"], lib)
        a, b = _med(groups, *fast), _med(groups, *slow)
        paired = interleaved_ratio(inter or {}, fast, slow)
        if paired is None and (a is None or b is None):
            out.append((t["name"], "not measured", "–"))
            continue
        seq = None if a is None or b is None else b / a
        r = paired if paired is not None else seq
        assert r is not None
        unit = "×" if "peer" in t else ""
        shown = f"{r:.2f}{unit}"
        if paired is not None:
            shown += " interleaved" + (f"; groups {seq:.2f}{unit}" if seq is not None else "")
        if a is not None and b is not None:
            shown += f" ({fmt_us(b)} / {fmt_us(a)} µs)"
        if "peer" in t:
            verdict = "met" if r >= t["min"] else f"missed ({r / t['min']:.0%} of target)"
        else:
            verdict = "met" if r <= t["max"] else f"missed (limit {t['max']})"
        out.append((t["name"], shown, verdict))
    return out


def targets_markdown(rows: list[tuple[str, str, str]], source: Path) -> str:
    lines = [f"# Speed targets of `{source}`\n", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {verdict} |" for t, v, verdict in rows]
    return "\n".join(lines) + "\n"
