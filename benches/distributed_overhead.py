"""Overhead of remote sampling per SAC gradient step, with and without prefetch, for 1, 2, 4 shards.

One SAC update (Pendulum-sized: obs 3, act 1, two 256x256 critics, batch 256, one torch thread) is
timed with its batch from (a) a local ``ReplayBuffer``, (b) a ``ShardedReplayBuffer`` sampled
synchronously, (c) the same with a ``PrefetchingSampler`` (one request in flight during the
update), (d) the same with 4 batches per request (one Ray call per shard every 4 steps). All
buffers hold the same 20,000 random transitions. Configurations alternate within each round; the report gives the median over rounds of the mean time per gradient step, and the overhead
relative to the local buffer of the same round.

    nice -n 10 python benches/distributed_overhead.py --rounds 3 --steps 300

Not part of the test suite (needs Ray; takes about a minute).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import gymnasium as gym
import numpy as np
import rlcore
import torch
from rlcore.algos import SAC, SACConfig
from rlcore.distributed import ShardedReplayBuffer, init_ray


def fill(bufs: list, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(1, 3)).astype(np.float32)
    for t in range(n):
        nxt = rng.normal(size=(1, 3)).astype(np.float32)
        trunc = np.array([t % 200 == 199])
        act = rng.uniform(-2, 2, size=(1, 1)).astype(np.float32)
        rew = rng.normal(size=1).astype(np.float32)
        for b in bufs:
            b.add(obs, act, rew, np.zeros(1, bool), trunc, nxt)
        obs = rng.normal(size=(1, 3)).astype(np.float32) if trunc[0] else nxt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="gradient steps per configuration and round")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()

    torch.set_num_threads(1)
    init_ray(num_cpus=2, log_to_driver=False)
    env = gym.make("Pendulum-v1")
    sac = SAC.from_spaces(env.observation_space, env.action_space, SACConfig(), device="cpu")
    local = rlcore.ReplayBuffer(50_000, seed=0)
    sharded = {
        s: ShardedReplayBuffer(functools.partial(rlcore.ReplayBuffer, 50_000), num_shards=s, seed=s)
        for s in args.shards
    }
    ingest = {}
    for name, buf in [("local", local), *((f"{s} shard(s)", b) for s, b in sharded.items())]:
        t = time.perf_counter()
        fill([buf], 20_000)
        if name != "local":
            buf.flush(wait=True)
        ingest[name] = (time.perf_counter() - t) / 20_000
        assert len(buf) == 20_000

    def run_local() -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            sac.update(local.sample(256))
        return (time.perf_counter() - t) / args.steps

    def run_sync(buf: ShardedReplayBuffer) -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            sac.update(buf.sample(256))
        return (time.perf_counter() - t) / args.steps

    def run_prefetch(buf: ShardedReplayBuffer) -> float:
        sampler = buf.prefetch(256)
        next(sampler)  # the first request is not hidden
        t = time.perf_counter()
        for _ in range(args.steps):
            sac.update(next(sampler))
        return (time.perf_counter() - t) / args.steps

    def run_prefetch4(buf: ShardedReplayBuffer) -> float:
        sampler = buf.prefetch(256, batches_per_request=4)
        next(sampler)
        t = time.perf_counter()
        for _ in range(args.steps):
            sac.update(next(sampler))
        return (time.perf_counter() - t) / args.steps

    def run_sample_only(buf: ShardedReplayBuffer) -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            buf.sample(256)
        return (time.perf_counter() - t) / args.steps

    results: dict[str, list[float]] = {}
    overheads: dict[str, list[float]] = {}
    run_local()  # warm up torch
    for _ in range(args.rounds):
        base = run_local()
        results.setdefault("local", []).append(base)
        for s, buf in sharded.items():
            for name, fn in (
                ("sync", run_sync),
                ("prefetch", run_prefetch),
                ("prefetch, 4 batches per request", run_prefetch4),
                ("sample only", run_sample_only),
            ):
                key = f"{s} shard(s), {name}"
                v = fn(buf)
                results.setdefault(key, []).append(v)
                if name != "sample only":
                    overheads.setdefault(key, []).append(v / base - 1)
    print("| configuration | ms per gradient step (median of rounds) | overhead vs local (median) |")
    print("|---|---|---|")
    for key, vals in results.items():
        ov = overheads.get(key)
        ov_s = f"{100 * statistics.median(ov):+.1f} %" if ov else "—"
        print(f"| {key} | {1e3 * statistics.median(vals):.2f} | {ov_s} |")
    print("add (one 1-env step per call, incl. generating the data), us per row:")
    print({k: round(1e6 * v, 1) for k, v in ingest.items()})
    print("rounds:", {k: [round(1e3 * v, 2) for v in vals] for k, vals in results.items()})


if __name__ == "__main__":
    main()
