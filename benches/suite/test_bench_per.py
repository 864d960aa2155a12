"""Prioritized replay: one learner step = sample(256) + update_priorities(256), at capacity
10k and 1M (a full buffer whose priorities were first set to random values in [0.01, 2)).
alpha 0.6, beta 0.4 everywhere."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from conftest import (
    BATCH,
    build_cpprb,
    build_or_skip,
    build_rlcore,
    build_rlox,
    build_tianshou,
    build_torchrl,
    tag,
    update_priorities_batch,
)

CAPACITIES = [10_000, 1_000_000]
PER_LIBS = ["rlcore", "rlox", "cpprb", "tianshou", "torchrl", "sb3"]


def _per_op(lib: str, cap: int) -> tuple[Any, str]:
    prio = update_priorities_batch()
    if lib == "rlcore":
        buf = build_rlcore(cap, kind="per")

        def op() -> Any:
            b = buf.sample(BATCH)
            buf.update_priorities(b.indices, prio())

        return op, "weights from the global min priority"
    if lib == "rlox":
        buf = build_rlox(cap, kind="per")
        seeds = itertools.count(1).__next__

        def op() -> Any:
            b = buf.sample(BATCH, seeds())
            buf.update_priorities(b["indices"], prio())

        return op, "filled with push (no batched push for PER); fresh seed per call"
    if lib == "cpprb":
        buf = build_cpprb(cap, kind="per")
        buf.update_priorities(np.arange(cap), _initial(cap))

        def op() -> Any:
            b = buf.sample(BATCH, beta=0.4)
            buf.update_priorities(b["indexes"], prio())

        return op, ""
    if lib == "tianshou":
        buf = build_tianshou(cap, kind="per")

        def op() -> Any:
            _, idx = buf.sample(BATCH)
            buf.update_weight(idx, prio())

        return op, "sample + update_weight"
    if lib == "torchrl":
        import torch

        buf = build_torchrl(cap, kind="per")
        tprio = [torch.as_tensor(prio(), dtype=torch.float32) for _ in range(64)]
        nxt = itertools.cycle(tprio).__next__

        def op() -> Any:
            _, info = buf.sample(return_info=True)
            buf.update_priority(info["index"], nxt())

        return op, "LazyTensorStorage + PrioritizedSampler"
    if lib == "sb3":
        pytest.skip("stable-baselines3 2.9.2 has no prioritized replay buffer")
    raise AssertionError(lib)


def _initial(cap: int) -> np.ndarray:
    from conftest import initial_priorities

    return initial_priorities(cap)


@pytest.mark.parametrize("cap", CAPACITIES, ids=lambda c: f"cap{c}")
@pytest.mark.parametrize("lib", PER_LIBS)
def test_per_sample_update(benchmark: Any, lib: str, cap: int) -> None:
    tag(benchmark, f"PER sample({BATCH}) + update_priorities({BATCH})", lib, capacity=cap)
    op, note = build_or_skip(lib, lambda: _per_op(lib, cap))
    op()
    tag(benchmark, f"PER sample({BATCH}) + update_priorities({BATCH})", lib, note, capacity=cap)
    benchmark(op)
