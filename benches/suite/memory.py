"""Resident memory per stored transition, one fresh subprocess per (library, case).

Cases (act 6 float32, 1,000-step episodes ending in truncation):

- ``obs17``: obs 17 float32, 1,000,000 transitions;
- ``frames``: 84x84x4 uint8 frame stacks (as Atari wrappers store them), 10,000 transitions: 1M
  of them would be 28 GB for the observations alone, more than this machine has; the figure is
  reported per transition, which does not depend on the count (one buffer, allocated once).
- ``atari``: the same stacks from ``FrameStackObservation(4)`` with Discrete actions (int64),
  rlcore built with ``frame_stack=4`` (one 84x84 frame per row) and measured *full at 1,000,000
  transitions* (its whole-process RSS is reported too: the issue-19 target is <= 7.2 GB); the
  peers, which store every stack (obs and obs_next), are measured at 20,000 transitions and
  scaled to 1M (bytes per transition do not depend on the count), and say so.

In the subprocess: import the library, build one data chunk (whole episodes, ``obs_next[t] ==
obs[t + 1]`` inside an episode), read the resident set size (``/proc/self/statm``), build a buffer of
capacity N and fill it completely by adding the chunk again and again with the library's bulk path,
``gc.collect()``, read RSS again. bytes per transition = (RSS after - RSS before) / N. Buffers that
preallocate lazily (``np.zeros``) only count the pages the fill touched, which is all of them.

Usage::

    python memory.py --out memory.json            # every library and case (~2 min)
    python memory.py --lib rlcore --case obs17    # one measurement, printed as a JSON line
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from _data import frame_stack_stream, shifted_stream

LIBS = ["rlcore", "rlox", "cpprb", "sb3", "sb3 (optimize_memory_usage)", "tianshou", "torchrl"]
ACT_DIM = 6
EP_LEN = 1000
CASES: dict[str, dict[str, Any]] = {
    "obs17": {
        "label": "obs 17 float32",
        "shape": (17,),
        "dtype": np.float32,
        "n": 1_000_000,
        "chunk": 10_000,
    },
    "frames": {
        "label": "84x84x4 uint8 frames",
        "shape": (4, 84, 84),
        "dtype": np.uint8,
        "n": 10_000,
        "chunk": 1_000,
    },
    "atari": {
        "label": "Atari 84x84 uint8, stack of 4, Discrete act",
        "shape": (4, 84, 84),
        "dtype": np.uint8,
        "n": 1_000_000,  # rlcore (frame_stack=4), measured full
        "n_peer": 20_000,  # the peers, scaled to n
        "chunk": 10_000,
        "chunk_peer": 1_000,
        "frame_stack": 4,
    },
}


def count_for(lib: str, case: str) -> int:
    """Transitions the measurement of ``lib`` fills: the case's n, or its peer count."""
    c = CASES[case]
    return c["n"] if lib == "rlcore" else c.get("n_peer", c["n"])


def rss_bytes() -> int:
    """Resident set size of this process in bytes (Linux ``/proc/self/statm``; psutil elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import psutil  # not a dependency on Linux

        return int(psutil.Process().memory_info().rss)


def naive_bytes(case: str) -> int:
    """obs + obs_next + act + rew (float32) + terminated + truncated (1 byte each)."""
    c = CASES[case]
    obs = int(np.prod(c["shape"])) * np.dtype(c["dtype"]).itemsize
    act = 8 if "frame_stack" in c else ACT_DIM * 4
    return 2 * obs + act + 4 + 2


def floor_bytes(case: str) -> int | None:
    """The floor without compression for frame stacks: one frame per transition."""
    c = CASES[case]
    if "frame_stack" not in c:
        return None
    return int(np.prod(c["shape"][1:])) * np.dtype(c["dtype"]).itemsize


def chunk_data(case: str, lib: str = "rlcore") -> dict[str, np.ndarray]:
    c = CASES[case]
    n = c["chunk"] if lib == "rlcore" else c.get("chunk_peer", c["chunk"])
    shape, dtype = c["shape"], c["dtype"]
    if "frame_stack" in c:
        return frame_stack_stream(n, shape[1:], c["frame_stack"], seed=0, ep_len=EP_LEN)
    return shifted_stream(n, shape, dtype, seed=0, ep_len=EP_LEN, act_dim=ACT_DIM)


def importer(lib: str) -> Any:
    """Import what the library needs (before the baseline reading)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lib == "rlcore":
            import rlcore

            return rlcore
        if lib == "rlox":
            import rlox

            return rlox
        if lib == "cpprb":
            import cpprb

            return cpprb
        if lib.startswith("sb3"):
            import gymnasium  # noqa: F401
            import stable_baselines3.common.buffers as b

            return b
        if lib == "tianshou":
            import tianshou.data as t

            return t
        if lib == "torchrl":
            import logging

            import tensordict
            import torch
            import torchrl.data as t

            logging.getLogger("torchrl").setLevel(logging.WARNING)
            return (t, tensordict, torch)
    raise ValueError(f"unknown library {lib!r}")


def fill(lib: str, mod: Any, case: str, d: dict[str, np.ndarray]) -> Any:
    """A buffer of capacity N filled with N transitions (the chunk repeated)."""
    c = CASES[case]
    n, k = count_for(lib, case), len(d["rew"])
    shape, dtype = c["shape"], c["dtype"]
    reps = n // k
    act_dim = d["act"].shape[1] if d["act"].ndim == 2 else 1
    act2 = d["act"].reshape(k, act_dim)
    if lib == "rlcore":
        # one row per episode holds its final observation: N transitions need N + episodes rows
        buf = mod.ReplayBuffer(n + n // EP_LEN, seed=0, frame_stack=c.get("frame_stack"))
        for _ in range(reps):
            buf._extend(d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"])
        return buf
    if lib == "rlox":
        dim = int(np.prod(shape))
        buf = mod.ReplayBuffer(n, dim, act_dim)
        flat = d["obs"].reshape(k, -1).astype(np.float32).ravel()
        flat_next = d["obs_next"].reshape(k, -1).astype(np.float32).ravel()
        for _ in range(reps):
            buf.push_batch(
                flat,
                flat_next,
                act2.astype(np.float32).ravel(),
                d["rew"],
                d["terminated"].view(np.uint8),
                d["truncated"].view(np.uint8),
            )
        del flat, flat_next
        return buf
    if lib == "cpprb":
        env = {
            "obs": {"shape": shape, "dtype": dtype},
            "act": {"shape": act_dim},
            "rew": {},
            "next_obs": {"shape": shape, "dtype": dtype},
            "done": {},
        }
        buf = mod.ReplayBuffer(n, env)
        done = d["terminated"].astype(np.float32)
        for _ in range(reps):
            buf.add(obs=d["obs"], act=act2, rew=d["rew"], next_obs=d["obs_next"], done=done)
        return buf
    if lib.startswith("sb3"):
        from gymnasium import spaces

        low, high = (0, 255) if dtype == np.uint8 else (-np.inf, np.inf)
        obs_space = spaces.Box(low, high, shape, dtype)
        act_space = spaces.Discrete(4) if d["act"].ndim == 1 else spaces.Box(-1, 1, (act_dim,), np.float32)
        opt = "optimize" in lib
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SB3 warns when the buffer may not fit in free memory
            buf = mod.ReplayBuffer(
                n,
                obs_space,
                act_space,
                device="cpu",
                optimize_memory_usage=opt,
                handle_timeout_termination=not opt,
            )
        for r in range(reps):  # what add() writes, a chunk at a time
            a, b = r * k, (r + 1) * k
            buf.observations[a:b, 0] = d["obs"]
            if not opt:
                buf.next_observations[a:b, 0] = d["obs_next"]
            buf.actions[a:b, 0] = act2
            buf.rewards[a:b, 0] = d["rew"]
            buf.dones[a:b, 0] = d["terminated"] | d["truncated"]
            buf.timeouts[a:b, 0] = d["truncated"]
        buf.full, buf.pos = True, 0
        return buf
    if lib == "tianshou":
        buf = mod.ReplayBuffer(n)
        buf.add(
            mod.Batch(
                obs=d["obs"][0],
                act=d["act"][0],
                rew=float(d["rew"][0]),
                terminated=False,
                truncated=False,
                obs_next=d["obs_next"][0],
                info={},
            )
        )
        meta = buf._meta  # allocated by the first add; write what the following adds would write
        for key in ("obs", "act", "rew", "terminated", "truncated", "done", "obs_next"):
            arr = meta[key]
            src = {"done": d["terminated"] | d["truncated"]}.get(key, d.get(key))
            for r in range(reps):
                arr[r * k : (r + 1) * k] = src
        buf._size, buf._index = n, 0
        return buf
    if lib == "torchrl":
        t, tensordict, torch = mod
        buf = t.ReplayBuffer(storage=t.LazyTensorStorage(n), batch_size=256)
        td = tensordict.TensorDict({key: torch.as_tensor(v) for key, v in d.items()}, batch_size=[k])
        for _ in range(reps):
            buf.extend(td)
        return buf
    raise ValueError(lib)


def stored(lib: str, buf: Any) -> int:
    """Transitions the buffer holds."""
    if lib == "cpprb":
        return int(buf.get_stored_size())
    if lib.startswith("sb3"):
        return int(buf.size())
    return len(buf)


def measure(lib: str, case: str) -> dict[str, Any]:
    mod = importer(lib)
    d = chunk_data(case, lib)
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    buf = fill(lib, mod, case, d)
    fill_s = time.perf_counter() - t0
    gc.collect()
    after = rss_bytes()
    n = count_for(lib, case)
    held = stored(lib, buf)
    assert held == n, f"{lib} holds {held} transitions, not {n}"
    d.clear()  # the fill data goes: what is left is the buffer and the interpreter
    gc.collect()
    rec = {
        "lib": lib,
        "case": case,
        "label": CASES[case]["label"],
        "n": n,
        "rss_delta": after - before,
        "rss_total": rss_bytes(),
        "bytes_per_transition": (after - before) / n,
        "naive_bytes_per_transition": naive_bytes(case),
        "fill_s": fill_s,
    }
    if floor_bytes(case) is not None:
        rec["floor_bytes_per_transition"] = floor_bytes(case)
    if n != CASES[case]["n"]:
        rec["scaled_to"] = CASES[case]["n"]
    if lib == "rlcore":
        rec["nbytes"] = buf.nbytes
    return rec


def run_all(out: Path, libs: list[str], cases: list[str], timeout: float = 600) -> list[dict[str, Any]]:
    """One subprocess per (library, case); a failure or missing import becomes a skip record."""
    results: list[dict[str, Any]] = []
    for case in cases:
        for lib in libs:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--lib", lib, "--case", case]
            print("+", " ".join(cmd), flush=True)
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                results.append(
                    {"lib": lib, "case": case, "label": CASES[case]["label"], "skipped": "timed out"}
                )
                continue
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode == 0 and lines:
                rec = json.loads(lines[-1])
            else:
                err = (p.stderr.strip().splitlines() or ["no output"])[-1]
                rec = {"lib": lib, "case": case, "label": CASES[case]["label"], "skipped": err[:200]}
            print("  ", json.dumps(rec), flush=True)
            results.append(rec)
    out.write_text(json.dumps(results, indent=1) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", choices=LIBS)
    ap.add_argument("--case", choices=list(CASES))
    ap.add_argument("--out", type=Path, help="run every library and case, write the records here")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), help="with --out: only these cases")
    args = ap.parse_args(argv)
    if args.out is not None:
        run_all(args.out, LIBS, args.cases or list(CASES))
        return 0
    if args.lib is None or args.case is None:
        ap.error("give --out, or --lib and --case")
    try:
        rec = measure(args.lib, args.case)
    except ImportError as e:
        rec = {"lib": args.lib, "case": args.case, "label": CASES[args.case]["label"], "skipped": f"{e}"}
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
