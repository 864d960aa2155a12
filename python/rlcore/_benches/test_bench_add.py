"""Add one transition, and one 8-env vector step, into a full buffer (capacity 200k, ring
overwriting): the collector's per-step cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import (
    CAPACITY,
    LIBS,
    build_cpprb,
    build_or_skip,
    build_rlcore,
    build_rlox,
    build_sb3,
    build_tianshou,
    build_torchrl,
    cycler,
    require,
    steps,
    tag,
    tianshou_batches,
    torchrl_td,
)


def _add_op(lib: str, n_envs: int) -> tuple[Any, str]:
    """A zero-argument callable adding the next step of a cyclic stream, and a note."""
    vec = steps(n_envs)
    note = ""
    if lib == "rlcore (numpy scalars)":
        buf = build_rlcore(CAPACITY, n_envs=n_envs)
        nxt = cycler(
            [
                (
                    s["obs"],
                    s["act"],
                    np.float32(s["rew"]),
                    np.bool_(s["terminated"]),
                    np.bool_(s["truncated"]),
                    s["obs_next"],
                )
                for s in vec
            ]
        )
        add = buf.add
        return (lambda: add(*nxt())), "rew/terminated/truncated as numpy scalars instead of float/bool"
    if lib == "rlcore":
        buf = build_rlcore(CAPACITY, n_envs=n_envs)
        nxt = cycler(
            [(s["obs"], s["act"], s["rew"], s["terminated"], s["truncated"], s["obs_next"]) for s in vec]
        )
        add = buf.add
        return (lambda: add(*nxt())), note
    if lib == "rlox":
        buf = build_rlox(CAPACITY)
        if n_envs == 1:
            nxt = cycler(
                [(s["obs"], s["act"], s["rew"], s["terminated"], s["truncated"], s["obs_next"]) for s in vec]
            )
            push = buf.push
            return (lambda: push(*nxt())), "push"
        nxt = cycler(
            [
                (
                    s["obs"].ravel(),
                    s["obs_next"].ravel(),
                    s["act"].ravel(),
                    s["rew"],
                    s["terminated"].view(np.uint8),
                    s["truncated"].view(np.uint8),
                )
                for s in vec
            ]
        )
        push_batch = buf.push_batch
        return (lambda: push_batch(*nxt())), "push_batch, flat arrays, uint8 flags"
    if lib == "cpprb":
        buf = build_cpprb(CAPACITY)
        nxt = cycler(
            [
                dict(
                    obs=s["obs"],
                    act=s["act"],
                    rew=s["rew"],
                    next_obs=s["obs_next"],
                    done=np.asarray(s["terminated"], np.float32),
                )
                for s in vec
            ]
        )
        add = buf.add
        return (lambda: add(**nxt())), "no truncation flag"
    if lib == "sb3":
        buf = build_sb3(CAPACITY, n_envs=n_envs)
        items = []
        for s in vec:
            lead = (lambda x: x[None]) if n_envs == 1 else (lambda x: x)
            trunc = np.atleast_1d(s["truncated"])
            infos = [{"TimeLimit.truncated": bool(t)} for t in trunc]
            items.append(
                (
                    lead(s["obs"]),
                    lead(s["obs_next"]),
                    lead(s["act"]),
                    np.atleast_1d(s["rew"]),
                    np.atleast_1d(np.logical_or(s["terminated"], s["truncated"])),
                    infos,
                )
            )
        nxt = cycler(items)
        add = buf.add
        return (lambda: add(*nxt())), "numpy in"
    if lib == "tianshou":
        buf = build_tianshou(CAPACITY, n_envs=n_envs)
        nxt = cycler(tianshou_batches(n_envs))
        add = buf.add
        note = "Batch built outside the timer" + ("; VectorReplayBuffer" if n_envs > 1 else "")
        return (lambda: add(nxt())), note
    if lib == "torchrl":
        buf = build_torchrl(CAPACITY)
        tds = [torchrl_td(s, [] if n_envs == 1 else [n_envs]) for s in vec]
        nxt = cycler(tds)
        if n_envs == 1:
            add = buf.add
            return (lambda: add(nxt())), "LazyTensorStorage, TensorDict built outside the timer"
        extend = buf.extend
        return (lambda: extend(nxt())), "LazyTensorStorage.extend, TensorDict built outside the timer"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", [*LIBS, "rlcore (numpy scalars)"])
def test_add_one_transition(benchmark: Any, lib: str) -> None:
    op, note = build_or_skip(lib, lambda: _add_op(lib, 1))
    op()
    tag(benchmark, "add one transition", lib, note)
    benchmark(op)


@pytest.mark.parametrize("lib", LIBS)
def test_add_vector_step(benchmark: Any, lib: str) -> None:
    if lib == "rlox":
        require("rlox")
    op, note = build_or_skip(lib, lambda: _add_op(lib, 8))
    op()
    tag(benchmark, "add one 8-env step", lib, note)
    benchmark(op)
