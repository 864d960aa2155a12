"""PER sample(256) + update_priorities(256) of two builds of the native module, timed interleaved
in one process (issue 38: the cost of the generation check on priority updates).

Each build is a directory holding a ``_core`` extension (``_core*.so``); both are imported under
their own package name. Buffers as the suite's PER case: 17-dim float32 observations, 6-dim
actions, 1000-step episodes, filled to capacity, priorities first set to random values in
[0.01, 2); alpha 0.6, beta 0.4. Rounds alternate the builds (order rotated), each block ~5 ms of
CPU time after as many untimed calls; the ratio is the median of per-round ratios.

Usage::

    python benches/stale_check_ab.py OLD_DIR NEW_DIR [--capacities 10000 1000000] [--rounds 31]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

OBS_DIM, ACT_DIM, EP_LEN, BATCH = 17, 6, 1000, 256


def load(directory: str, name: str) -> ModuleType:
    """The ``_core`` extension in ``directory``, imported as ``name``."""
    (path,) = Path(directory).glob("_core*.so")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def build(core: ModuleType, cap: int) -> tuple[Any, Any]:
    """A full PER buffer of ``cap`` rows and its learner step."""
    rng = np.random.default_rng(0)
    buf = core.RawBuffer(cap, prioritized=True, alpha=0.6, beta=0.4, eps=1e-6, seed=0)
    n = cap - cap // (EP_LEN + 1) - 1
    obs = rng.standard_normal((n + 1, OBS_DIM), dtype=np.float32)
    act = rng.standard_normal((n, ACT_DIM), dtype=np.float32)
    rew = rng.standard_normal(n).astype(np.float32)
    trunc = np.zeros(n, bool)
    trunc[EP_LEN - 1 :: EP_LEN] = True
    buf._extend(obs[:-1], act, rew, np.zeros(n, bool), trunc, obs[1:])
    rows = np.arange(cap)
    buf.update_priorities(rows, rng.uniform(0.01, 2.0, cap))
    prio = rng.uniform(0.01, 2.0, (64, BATCH))
    k = iter(range(1 << 62))

    def op() -> None:
        t = buf._sample(BATCH, 1, 0.99, None, None)
        buf.update_priorities(t[7], prio[next(k) % 64])

    return buf, op


def block(op: Any, calls: int) -> float:
    for _ in range(calls):
        op()
    t0 = time.process_time()
    for _ in range(calls):
        op()
    return (time.process_time() - t0) / calls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--capacities", type=int, nargs="+", default=[10_000, 1_000_000])
    p.add_argument("--rounds", type=int, default=31)
    a = p.parse_args()
    cores = {"old": load(a.old, "old_core._core"), "new": load(a.new, "new_core._core")}
    for cap in a.capacities:
        ops = {k: build(c, cap)[1] for k, c in cores.items()}
        calls = {}
        for k, op in ops.items():
            t = block(op, 10)
            calls[k] = max(1, round(0.005 / t))
        times: dict[str, list[float]] = {k: [] for k in ops}
        order = list(ops)
        for r in range(a.rounds):
            for k in order[r % 2 :] + order[: r % 2]:
                times[k].append(block(ops[k], calls[k]))
        ratio = statistics.median(n / o for n, o in zip(times["new"], times["old"], strict=True))
        old_us, new_us = (statistics.median(times[k]) * 1e6 for k in ("old", "new"))
        print(f"PER sample({BATCH}) + update_priorities({BATCH}) @ {cap:>9,}: old {old_us:7.1f} us, "
              f"new {new_us:7.1f} us, new/old {ratio:.3f} (median of {a.rounds} paired rounds)")


if __name__ == "__main__":
    main()
