"""sample(256) and add one transition at observation sizes 4, 17 and 376 float32 and 84x84 uint8
frames (capacity 50k, full buffer, act 6 float32): where the cost per row starts to dominate and
the gather becomes memory-bound (a 50k buffer of 376 floats or of frames is far larger than the
L3 cache).

rlox stores float32 flat observations only, so it gets the frames as float32 (4x the bytes);
the others store uint8. One buffer per (obs size, library) is built and kept for both operations
(sample first, then add into the same full buffer), then dropped before the next.
"""

from __future__ import annotations

import gc
import itertools
from functools import lru_cache
from typing import Any

import numpy as np
import pytest
from _data import shifted_stream
from conftest import ACT_DIM, BATCH, EP_LEN, LIBS, build_or_skip, cycler, require, tag, torchrl_logging_quiet

CAPACITY = 50_000
OBS = {
    "4": ((4,), np.float32),
    "17": ((17,), np.float32),
    "376": ((376,), np.float32),
    "84x84 uint8": ((84, 84), np.uint8),
}
CASES = [(obs, lib, op) for obs in OBS for lib in LIBS for op in ("sample", "add")]


@lru_cache(maxsize=1)
def data(obs: str) -> dict[str, np.ndarray]:
    """CAPACITY steps of one env in 1,000-step episodes ending in truncation; ``obs_next[t] ==
    obs[t + 1]`` (one array of CAPACITY + 1 observations, so the data costs one copy)."""
    shape, dtype = OBS[obs]
    return shifted_stream(CAPACITY, shape, dtype, seed=7, ep_len=EP_LEN, act_dim=ACT_DIM)


def _flat32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32)


def _build(lib: str, obs: str) -> tuple[Any, Any, str]:
    """(sample op, add op, note) for a full buffer of this library."""
    d = data(obs)
    shape, dtype = OBS[obs]
    singles = [{k: v[t] for k, v in d.items()} for t in range(64)]
    for s in singles:
        s["rew"], s["terminated"], s["truncated"] = (
            float(s["rew"]),
            bool(s["terminated"]),
            bool(s["truncated"]),
        )
    if lib == "rlcore":
        import rlcore

        buf = rlcore.ReplayBuffer.from_arrays(
            d["obs"],
            d["act"],
            d["rew"],
            d["terminated"],
            d["truncated"],
            d["obs_next"],
            capacity=CAPACITY,
            seed=0,
        )
        nxt = cycler(
            [(s["obs"], s["act"], s["rew"], s["terminated"], s["truncated"], s["obs_next"]) for s in singles]
        )
        add = buf.add
        return (
            (lambda: buf.sample(BATCH)),
            (lambda: add(*nxt())),
            "stores obs once (obs_next from the next row)",
        )
    if lib == "rlox":
        rlox = require("rlox")
        dim = int(np.prod(shape))
        buf = rlox.ReplayBuffer(CAPACITY, dim, ACT_DIM)
        for a in range(0, CAPACITY, EP_LEN):
            b = a + EP_LEN
            buf.push_batch(
                _flat32(d["obs"][a:b]).ravel(),
                _flat32(d["obs_next"][a:b]).ravel(),
                d["act"][a:b].ravel(),
                d["rew"][a:b],
                d["terminated"][a:b].view(np.uint8),
                d["truncated"][a:b].view(np.uint8),
            )
        items = [
            (
                _flat32(s["obs"][None])[0],
                s["act"],
                s["rew"],
                s["terminated"],
                s["truncated"],
                _flat32(s["obs_next"][None])[0],
            )
            for s in singles
        ]
        nxt = cycler(items)
        seeds = itertools.count(1).__next__
        push = buf.push
        note = "float32 flat obs only" + (" (frames as float32: 4x the bytes)" if dtype == np.uint8 else "")
        return (lambda: buf.sample(BATCH, seeds())), (lambda: push(*nxt())), note
    if lib == "cpprb":
        cpprb = require("cpprb")
        env = {
            "obs": {"shape": shape, "dtype": dtype},
            "act": {"shape": ACT_DIM},
            "rew": {},
            "next_obs": {"shape": shape, "dtype": dtype},
            "done": {},
        }
        buf = cpprb.ReplayBuffer(CAPACITY, env)
        for a in range(0, CAPACITY, EP_LEN):
            b = a + EP_LEN
            buf.add(
                obs=d["obs"][a:b],
                act=d["act"][a:b],
                rew=d["rew"][a:b],
                next_obs=d["obs_next"][a:b],
                done=d["terminated"][a:b].astype(np.float32),
            )
        nxt = cycler(
            [
                dict(
                    obs=s["obs"],
                    act=s["act"],
                    rew=s["rew"],
                    next_obs=s["obs_next"],
                    done=float(s["terminated"]),
                )
                for s in singles
            ]
        )
        add = buf.add
        return (lambda: buf.sample(BATCH)), (lambda: add(**nxt())), "stores obs and next_obs"
    if lib == "sb3":
        require("stable_baselines3")
        from gymnasium import spaces
        from stable_baselines3.common.buffers import ReplayBuffer

        low, high = (0, 255) if dtype == np.uint8 else (-np.inf, np.inf)
        obs_space = spaces.Box(low, high, shape, dtype)
        act_space = spaces.Box(-1, 1, (ACT_DIM,), np.float32)
        buf = ReplayBuffer(CAPACITY, obs_space, act_space, device="cpu")
        buf.observations[:, 0] = d["obs"]
        buf.next_observations[:, 0] = d["obs_next"]
        buf.actions[:, 0] = d["act"]
        buf.rewards[:, 0] = d["rew"]
        buf.dones[:, 0] = d["terminated"] | d["truncated"]
        buf.timeouts[:, 0] = d["truncated"]
        buf.full, buf.pos = True, 0
        nxt = cycler(
            [
                (
                    s["obs"][None],
                    s["obs_next"][None],
                    s["act"][None],
                    np.array([s["rew"]]),
                    np.array([s["terminated"] or s["truncated"]]),
                    [{"TimeLimit.truncated": s["truncated"]}],
                )
                for s in singles
            ]
        )
        add = buf.add
        return (
            (lambda: buf.sample(BATCH)),
            (lambda: add(*nxt())),
            "stores obs and next_obs; torch tensors out",
        )
    if lib == "tianshou":
        require("tianshou")
        from tianshou.data import Batch, ReplayBuffer

        buf = ReplayBuffer(CAPACITY)
        buf.set_batch(
            Batch(
                obs=d["obs"].copy(),
                act=d["act"].copy(),
                rew=d["rew"].astype(np.float64),
                terminated=d["terminated"].copy(),
                truncated=d["truncated"].copy(),
                done=d["terminated"] | d["truncated"],
                obs_next=d["obs_next"].copy(),
                info=Batch(),
            )
        )
        buf._size, buf._index = CAPACITY, 0
        buf.last_index = np.array([CAPACITY - 1])
        nxt = cycler([Batch(info={}, **s) for s in singles])
        add = buf.add
        return (lambda: buf.sample(BATCH)), (lambda: add(nxt())), "stores obs and obs_next"
    if lib == "torchrl":
        require("tensordict")
        torchrl = require("torchrl")
        import torch
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        torchrl_logging_quiet(torchrl)
        buf = ReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)
        for a in range(0, CAPACITY, 10 * EP_LEN):
            b = a + 10 * EP_LEN
            buf.extend(TensorDict({k: torch.as_tensor(v[a:b]) for k, v in d.items()}, batch_size=[b - a]))
        tds = [
            TensorDict({k: torch.as_tensor(np.asarray(v)) for k, v in s.items()}, batch_size=[])
            for s in singles
        ]
        nxt = cycler(tds)
        add = buf.add
        return (
            (lambda: buf.sample()),
            (lambda: add(nxt())),
            "LazyTensorStorage (obs and obs_next); TensorDict in and out",
        )
    raise AssertionError(lib)


_CACHE: dict[tuple[str, str], tuple[Any, Any, str]] = {}


def _ops(lib: str, obs: str) -> tuple[Any, Any, str]:
    if (lib, obs) not in _CACHE:
        _CACHE.clear()  # one buffer alive at a time: frame buffers are hundreds of MB
        gc.collect()
        _CACHE[(lib, obs)] = build_or_skip(lib, lambda: _build(lib, obs))
    return _CACHE[(lib, obs)]


@pytest.mark.parametrize(
    ("obs", "lib", "op"), CASES, ids=[f"{lib}-{op}-obs{o.split()[0]}" for o, lib, op in CASES]
)
def test_obs_scale(benchmark: Any, obs: str, lib: str, op: str) -> None:
    name = f"sample({BATCH})" if op == "sample" else "add one transition"
    group_op = f"{name}, obs {obs}"
    tag(benchmark, group_op, lib, capacity=CAPACITY, obs=obs)
    sample, add, note = _ops(lib, obs)
    fn = sample if op == "sample" else add
    fn()
    tag(benchmark, group_op, lib, note, capacity=CAPACITY, obs=obs)
    benchmark(fn)


def teardown_module() -> None:
    _CACHE.clear()
    data.cache_clear()
    gc.collect()
