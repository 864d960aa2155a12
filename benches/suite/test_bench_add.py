"""Add one transition, one 8-env vector step, and a chunk of 1,000 rows (one 1,000-step episode of
one env) into a full buffer (capacity 200k, ring overwriting): the collector's per-step cost and
the bulk-loading cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import (
    CAPACITY,
    EP_LEN,
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
    stream,
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
    tag(benchmark, "add one transition", lib)
    op, note = build_or_skip(lib, lambda: _add_op(lib, 1))
    op()
    tag(benchmark, "add one transition", lib, note)
    benchmark(op)


@pytest.mark.parametrize("lib", LIBS)
def test_add_vector_step(benchmark: Any, lib: str) -> None:
    tag(benchmark, "add one 8-env step", lib)
    if lib == "rlox":
        require("rlox")
    op, note = build_or_skip(lib, lambda: _add_op(lib, 8))
    op()
    tag(benchmark, "add one 8-env step", lib, note)
    benchmark(op)


CHUNK = EP_LEN  # 1,000 rows: one whole episode ending in truncation


def _chunks() -> list[dict[str, np.ndarray]]:
    """8 chunks of 1,000 consecutive steps of one env, each one episode (the last step truncated)."""
    d = stream(CAPACITY)
    return [{k: v[i * CHUNK : (i + 1) * CHUNK] for k, v in d.items()} for i in range(8)]


def _chunk_op(lib: str) -> tuple[Any, str]:
    """A zero-argument callable adding the next 1,000-row chunk, and a note."""
    chunks = _chunks()
    if lib == "rlcore":
        buf = build_rlcore(CAPACITY)
        nxt = cycler(
            [(c["obs"], c["act"], c["rew"], c["terminated"], c["truncated"], c["obs_next"]) for c in chunks]
        )
        extend = buf.extend
        return (lambda: extend(*nxt())), "`extend`: T steps in one call"
    if lib == "rlox":
        buf = build_rlox(CAPACITY)
        nxt = cycler(
            [
                (
                    c["obs"].ravel(),
                    c["obs_next"].ravel(),
                    c["act"].ravel(),
                    c["rew"],
                    c["terminated"].view(np.uint8),
                    c["truncated"].view(np.uint8),
                )
                for c in chunks
            ]
        )
        push_batch = buf.push_batch
        return (lambda: push_batch(*nxt())), "push_batch, flat arrays, uint8 flags"
    if lib == "cpprb":
        buf = build_cpprb(CAPACITY)
        nxt = cycler(
            [
                dict(
                    obs=c["obs"],
                    act=c["act"],
                    rew=c["rew"],
                    next_obs=c["obs_next"],
                    done=c["terminated"].astype(np.float32),
                )
                for c in chunks
            ]
        )
        add = buf.add
        return (lambda: add(**nxt())), "add of 1,000 rows; no truncation flag"
    if lib == "sb3":
        buf = build_sb3(CAPACITY)
        rows = []
        for c in chunks:
            for t in range(CHUNK):
                rows.append(
                    (
                        c["obs"][t : t + 1],
                        c["obs_next"][t : t + 1],
                        c["act"][t : t + 1],
                        c["rew"][t : t + 1],
                        (c["terminated"] | c["truncated"])[t : t + 1],
                        [{"TimeLimit.truncated": bool(c["truncated"][t])}],
                    )
                )
        it = cycler([rows[i * CHUNK : (i + 1) * CHUNK] for i in range(len(chunks))])
        add = buf.add

        def sb3_chunk() -> None:
            for r in it():
                add(*r)

        return sb3_chunk, "no batch add for one env: 1,000 `add` calls"
    if lib == "tianshou":
        require("tianshou")
        from tianshou.data import Batch

        buf = build_tianshou(CAPACITY)
        batches = [
            [
                Batch(
                    obs=c["obs"][t],
                    act=c["act"][t],
                    rew=float(c["rew"][t]),
                    terminated=bool(c["terminated"][t]),
                    truncated=bool(c["truncated"][t]),
                    obs_next=c["obs_next"][t],
                    info={},
                )
                for t in range(CHUNK)
            ]
            for c in chunks
        ]
        it = cycler(batches)
        add = buf.add

        def tianshou_chunk() -> None:
            for b in it():
                add(b)

        return (
            tianshou_chunk,
            "no batch add for one stream: 1,000 `add` calls, Batches built outside the timer",
        )
    if lib == "torchrl":
        buf = build_torchrl(CAPACITY)
        tds = [torchrl_td(c, [CHUNK]) for c in chunks]
        nxt = cycler(tds)
        extend = buf.extend
        return (lambda: extend(nxt())), "LazyTensorStorage.extend, TensorDict built outside the timer"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", LIBS)
def test_add_chunk(benchmark: Any, lib: str) -> None:
    tag(benchmark, f"add a {CHUNK:,}-row chunk", lib)
    op, note = build_or_skip(lib, lambda: _chunk_op(lib))
    op()
    tag(benchmark, f"add a {CHUNK:,}-row chunk", lib, note)
    benchmark(op)
