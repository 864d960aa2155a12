"""Shared data and peer adapters for the side-by-side benchmarks.

Every group runs rlcore and each peer (Tianshou, Stable-Baselines3, cpprb, TorchRL, rlox) on the
same generated data in the same process. A peer that is not installed, or that fails while its
buffer is built, is skipped with the reason (``pytest.skip``); the skips are written to the file
named by ``$RLCORE_BENCH_SKIPS`` so the report (``benches/report.py``) can list them next to the tables.

Conventions (docs/benchmarks.md, issue 8):

- obs 17 float32, act 6 float32, capacity 200k, batch 256 unless a test says otherwise;
- uniform buffers are filled to capacity (through the ring, so the steady state is measured)
  with each library's bulk path where it has one, otherwise step by step before timing;
- episodes of 1000 steps ending in truncation (MuJoCo-like) for the uniform buffers, 50 steps
  (FetchReach) for HER;
- data arrives in each library's native container, built outside the timed region (a TensorDict
  for TorchRL, a ``Batch`` for Tianshou, numpy arrays for the others); rlox gets flat arrays and
  uint8 flags, which its ``push_batch`` requires.

Run them with ``make bench`` (``python benches/report.py``), or directly with
``pytest benches/suite --benchmark-enable``.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import numpy as np
import pytest

OBS_DIM = 17
ACT_DIM = 6
CAPACITY = 200_000
BATCH = 256
EP_LEN = 1000
GAMMA = 0.99
N_STEP = 3

# FetchReach-sized goal data
HER_OBS, HER_GOAL, HER_ACT, HER_EP = 10, 3, 4, 50
HER_K = 4
HER_EPS = 0.05

LIBS = ["rlcore", "rlox", "cpprb", "sb3", "tianshou", "torchrl"]


def _one_torch_thread() -> None:
    """Tiny tensor ops (256 rows) gain nothing from intra-op threads, and on a loaded 2-core machine
    torch's OpenMP threads wait for a core: an index of 256 rows then takes ~20 ms instead of ~6 µs.
    One thread is the fair setting for the peers that use torch (TorchRL, SB3's tensors)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


_one_torch_thread()

_SKIPS: list[dict[str, str]] = []
# test node id -> (group, library), set by ``tag`` so that a skip names the group it belongs to
_TAGS: dict[str, tuple[str, str]] = {}


# ------------------------------------------------------------------------------------------
# peers and skips


def require(module: str) -> Any:
    """Import a peer or skip the test with the reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is a skip reason
        pytest.skip(f"{module} unavailable: {type(e).__name__}: {e}")


def build_or_skip(what: str, fn: Callable[[], Any]) -> Any:
    """Run a peer's setup; a failure there is the peer's skip reason (an rlcore failure is not)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except pytest.skip.Exception:
        raise
    except Exception as e:  # noqa: BLE001
        if what.startswith("rlcore"):
            raise
        pytest.skip(f"{what} failed during setup: {type(e).__name__}: {str(e)[:200]}")


def tag(benchmark: Any, op: str, lib: str, note: str = "", capacity: int | None = None, **extra: Any) -> None:
    """Name the benchmark's group (``op`` plus ``@ capacity`` when the op is measured at several).

    Call it before building the peer's buffer: a skip raised afterwards is then reported under
    this group. ``extra`` goes to the JSON's ``extra_info`` (e.g. ``unit="s"``, ``disk_bytes=...``).
    """
    group = op if capacity is None else f"{op} @ {fmt_cap(capacity)}"
    benchmark.group = group
    benchmark.extra_info.update(group=group, op=op, lib=lib, **extra)
    if capacity is not None:
        benchmark.extra_info["capacity"] = capacity
    if note:
        benchmark.extra_info["note"] = note
    _TAGS[benchmark.fullname] = (group, lib)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        rec = {"test": report.nodeid, "reason": reason.removeprefix("Skipped: ")}
        if report.nodeid in _TAGS:
            rec["group"], rec["lib"] = _TAGS[report.nodeid]
        _SKIPS.append(rec)


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("RLCORE_BENCH_SKIPS")
    if path:
        with open(path, "w") as f:
            json.dump(_SKIPS, f, indent=1)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------------------------------
# data


@lru_cache(maxsize=2)
def stream(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One env's stream of ``n`` steps: episodes of EP_LEN steps ending in truncation.

    ``obs_next[t] == obs[t + 1]`` inside an episode; a new episode starts with a fresh obs.
    """
    rng = np.random.default_rng(seed)
    n_ep = -(-n // EP_LEN)
    obs_all = rng.standard_normal((n_ep, EP_LEN + 1, OBS_DIM), dtype=np.float32)
    obs = np.ascontiguousarray(obs_all[:, :-1].reshape(-1, OBS_DIM)[:n])
    obs_next = np.ascontiguousarray(obs_all[:, 1:].reshape(-1, OBS_DIM)[:n])
    del obs_all
    trunc = np.zeros(n, bool)
    trunc[EP_LEN - 1 :: EP_LEN] = True
    trunc[-1] = True
    return {
        "obs": obs,
        "act": rng.uniform(-1, 1, (n, ACT_DIM)).astype(np.float32),
        "rew": rng.standard_normal(n).astype(np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": trunc,
        "obs_next": obs_next,
    }


@lru_cache(maxsize=4)
def steps(n_envs: int, n_steps: int = 4 * EP_LEN, seed: int = 1) -> list[dict[str, np.ndarray]]:
    """``n_steps`` vector steps of ``n_envs`` envs (per env a continuous stream whose cycle
    ends in a truncation, so cycling it keeps every library's episode logic honest).
    With ``n_envs == 1`` the arrays have no env dimension and rew/terminated/truncated are
    Python scalars, as a single gymnasium env returns them."""
    s = [stream(n_steps, seed + e) for e in range(n_envs)] if n_envs > 1 else [stream(n_steps, seed)]
    out = []
    for t in range(n_steps):
        if n_envs == 1:  # what a single gymnasium env returns: arrays, a float and two bools
            row = {k: v[t] for k, v in s[0].items()}
            row["rew"] = float(row["rew"])
            row["terminated"], row["truncated"] = bool(row["terminated"]), bool(row["truncated"])
            out.append(row)
        else:
            out.append({k: np.stack([se[k][t] for se in s]) for k in s[0]})
    return out


def cycler(items: list[Any]) -> Callable[[], Any]:
    it = itertools.cycle(items)
    return it.__next__


def fetch_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any = None) -> np.ndarray:
    """Vectorised Fetch-style sparse reward: -(||ag - g||_2 > 0.05) as float32."""
    d = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
    return -(d > HER_EPS).astype(np.float32)


@lru_cache(maxsize=1)
def her_stream(n_episodes: int, seed: int = 2) -> dict[str, Any]:
    """FetchReach-sized episodes (obs 10 / goals 3 float64, act 4 float32, 50 steps, truncated)."""
    rng = np.random.default_rng(seed)
    e, t = n_episodes, HER_EP
    observation = rng.standard_normal((e, t + 1, HER_OBS))
    achieved = np.cumsum(rng.normal(0, 0.02, (e, t + 1, HER_GOAL)), axis=1) + rng.uniform(
        -0.15, 0.15, (e, 1, HER_GOAL)
    )
    desired = np.broadcast_to(rng.uniform(-0.15, 0.15, (e, 1, HER_GOAL)), (e, t + 1, HER_GOAL))

    def cur(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x[:, :-1].reshape(e * t, -1))

    def nxt(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x[:, 1:].reshape(e * t, -1))

    obs = {"observation": cur(observation), "achieved_goal": cur(achieved), "desired_goal": cur(desired)}
    obs_next = {"observation": nxt(observation), "achieved_goal": nxt(achieved), "desired_goal": nxt(desired)}
    trunc = np.zeros(e * t, bool)
    trunc[t - 1 :: t] = True
    return {
        "obs": obs,
        "obs_next": obs_next,
        "act": rng.uniform(-1, 1, (e * t, HER_ACT)).astype(np.float32),
        "rew": fetch_reward(obs_next["achieved_goal"], obs_next["desired_goal"]),
        "terminated": np.zeros(e * t, bool),
        "truncated": trunc,
    }


def fmt_cap(cap: int) -> str:
    return f"{cap // 1_000_000}M" if cap >= 1_000_000 and cap % 1_000_000 == 0 else f"{cap // 1000}k"


# ------------------------------------------------------------------------------------------
# uniform replay buffers: build (filled to capacity) per library


def build_rlcore(cap: int, n_envs: int = 1, kind: str = "uniform") -> Any:
    import rlcore

    klass = rlcore.PrioritizedReplayBuffer if kind == "per" else rlcore.ReplayBuffer
    if n_envs == 1:
        d = stream(cap)
        buf = klass.from_arrays(
            d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"], capacity=cap, seed=0
        )
        if kind == "per":
            buf.update_priorities(np.arange(cap), initial_priorities(cap))
        return buf
    buf = klass(cap, num_envs=n_envs, seed=0)
    vec = steps(n_envs)
    for k in range(cap // n_envs):
        s = vec[k % len(vec)]
        buf.add(s["obs"], s["act"], s["rew"], s["terminated"], s["truncated"], s["obs_next"])
    return buf


def build_rlox(cap: int, kind: str = "uniform") -> Any:
    rlox = require("rlox")
    d = stream(cap)
    if kind == "per":
        buf = rlox.PrioritizedReplayBuffer(cap, OBS_DIM, ACT_DIM, alpha=0.6, beta=0.4)
        obs, act, rew, nxt = d["obs"], d["act"], d["rew"].tolist(), d["obs_next"]
        term, trunc = d["terminated"].tolist(), d["truncated"].tolist()
        push = buf.push
        for i in range(cap):
            push(obs[i], act[i], rew[i], term[i], trunc[i], nxt[i])
        return buf
    buf = rlox.ReplayBuffer(cap, OBS_DIM, ACT_DIM)
    buf.push_batch(
        d["obs"].ravel(),
        d["obs_next"].ravel(),
        d["act"].ravel(),
        d["rew"],
        d["terminated"].view(np.uint8),
        d["truncated"].view(np.uint8),
    )
    return buf


CPPRB_ENV = {
    "obs": {"shape": OBS_DIM},
    "act": {"shape": ACT_DIM},
    "rew": {},
    "next_obs": {"shape": OBS_DIM},
    "done": {},
}


def build_cpprb(cap: int, kind: str = "uniform", nstep: bool = False) -> Any:
    cpprb = require("cpprb")
    d = stream(cap)
    kw: dict[str, Any] = {}
    if nstep:
        kw["Nstep"] = {"size": N_STEP, "gamma": GAMMA, "rew": "rew", "next": "next_obs"}
    if kind == "per":
        buf = cpprb.PrioritizedReplayBuffer(cap, CPPRB_ENV, alpha=0.6, **kw)
    else:
        buf = cpprb.ReplayBuffer(cap, CPPRB_ENV, **kw)
    done = d["terminated"].astype(np.float32)
    # one episode per add, so cpprb's n-step accumulation sees episode ends
    for a in range(0, cap, EP_LEN):
        b = min(a + EP_LEN, cap)
        buf.add(
            obs=d["obs"][a:b],
            act=d["act"][a:b],
            rew=d["rew"][a:b],
            next_obs=d["obs_next"][a:b],
            done=done[a:b],
        )
        if nstep:
            buf.on_episode_end()
    return buf


def build_sb3(cap: int, n_envs: int = 1, nstep: bool = False) -> Any:
    require("stable_baselines3")
    from gymnasium import spaces
    from stable_baselines3.common import buffers

    obs_space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    act_space = spaces.Box(-1, 1, (ACT_DIM,), np.float32)
    if nstep:
        if not hasattr(buffers, "NStepReplayBuffer"):
            pytest.skip("stable-baselines3 has no NStepReplayBuffer in this version")
        buf = buffers.NStepReplayBuffer(
            cap, obs_space, act_space, device="cpu", n_envs=n_envs, n_steps=N_STEP, gamma=GAMMA
        )
    else:
        buf = buffers.ReplayBuffer(cap, obs_space, act_space, device="cpu", n_envs=n_envs)
    rows = cap // n_envs
    d = stream(rows)
    # SB3 stores [buffer_size, n_envs, ...] numpy arrays; write them directly (its add is a copy per field)
    buf.observations[:] = d["obs"][:, None]
    buf.next_observations[:] = d["obs_next"][:, None]
    buf.actions[:] = d["act"][:, None]
    buf.rewards[:] = d["rew"][:, None]
    buf.dones[:] = (d["terminated"] | d["truncated"])[:, None]
    buf.timeouts[:] = d["truncated"][:, None]
    buf.full, buf.pos = True, 0
    return buf


def build_tianshou(cap: int, n_envs: int = 1, kind: str = "uniform") -> Any:
    require("tianshou")
    from tianshou.data import Batch, PrioritizedReplayBuffer, ReplayBuffer, VectorReplayBuffer

    if n_envs > 1:
        buf = VectorReplayBuffer(cap, n_envs)
        batches = tianshou_batches(n_envs)
        for k in range(cap // n_envs):
            buf.add(batches[k % len(batches)])
        return buf
    d = stream(cap)
    buf = PrioritizedReplayBuffer(cap, alpha=0.6, beta=0.4) if kind == "per" else ReplayBuffer(cap)
    buf.set_batch(
        Batch(
            obs=d["obs"],
            act=d["act"],
            rew=d["rew"].astype(np.float64),
            terminated=d["terminated"],
            truncated=d["truncated"],
            done=d["terminated"] | d["truncated"],
            obs_next=d["obs_next"],
            info=Batch(),
        )
    )
    buf._size, buf._index = cap, 0
    buf.last_index = np.array([cap - 1])
    if kind == "per":
        buf.update_weight(np.arange(cap), initial_priorities(cap))
    return buf


def tianshou_batches(n_envs: int) -> list[Any]:
    from tianshou.data import Batch

    return [
        Batch(
            obs=s["obs"],
            act=s["act"],
            rew=s["rew"],
            terminated=s["terminated"],
            truncated=s["truncated"],
            obs_next=s["obs_next"],
            info={} if n_envs == 1 else Batch(),
        )
        for s in steps(n_envs)
    ]


def torchrl_td(d: dict[str, np.ndarray], batch: list[int]) -> Any:
    import torch
    from tensordict import TensorDict

    return TensorDict({k: torch.as_tensor(v) for k, v in d.items()}, batch_size=batch)


def build_torchrl(cap: int, kind: str = "uniform") -> Any:
    require("tensordict")
    torchrl = require("torchrl")
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, ReplayBuffer

    torchrl_logging_quiet(torchrl)
    d = stream(cap)
    sampler = PrioritizedSampler(cap, alpha=0.6, beta=0.4) if kind == "per" else None
    kw = {"sampler": sampler} if sampler is not None else {}
    buf = ReplayBuffer(storage=LazyTensorStorage(cap), batch_size=BATCH, **kw)
    buf.extend(torchrl_td(d, [cap]))
    if kind == "per":
        import torch

        buf.update_priority(torch.arange(cap), torch.as_tensor(initial_priorities(cap), dtype=torch.float32))
    return buf


def torchrl_logging_quiet(torchrl: Any) -> None:
    import logging

    logging.getLogger("torchrl").setLevel(logging.WARNING)


@lru_cache(maxsize=2)
def initial_priorities(n: int) -> np.ndarray:
    return np.random.default_rng(3).uniform(0.01, 2.0, n)


def update_priorities_batch() -> Callable[[], np.ndarray]:
    rng = np.random.default_rng(4)
    return cycler([rng.uniform(0.01, 2.0, BATCH) for _ in range(64)])
