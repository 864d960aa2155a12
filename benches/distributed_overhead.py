"""Overhead of remote sampling per SAC gradient step, with and without prefetch, for 1, 2, 4 shards.

One SAC update (Pendulum-sized: obs 3, act 1, two 256x256 critics, batch 256, one torch thread) is
timed with its batch from (a) a local ``ReplayBuffer``, (b) a ``ShardedReplayBuffer`` sampled
synchronously, (c) the same with a ``PrefetchingSampler`` (one request in flight during the
update), (d) the same with 4 batches per request (one Ray call per shard every 4 steps). All
buffers hold the same 20,000 random transitions. Configurations alternate within each round; the report gives medians over rounds of: wall time per gradient step, the part of it spent
waiting for the batch (``sample``/``next(sampler)``), the learner process's CPU time per step, and
the overhead: extra waiting time versus the local ``sample`` of the same round, relative to the
update time of the same run (load noise mostly cancels out of this figure; on a loaded machine the
wall totals do not).

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

    def timed(get_batch) -> tuple[float, float, float]:
        """(wall s per step, wall s per step spent getting the batch, learner CPU s per step)."""
        t_get = 0.0
        cpu, t0 = time.process_time(), time.perf_counter()
        for _ in range(args.steps):
            t = time.perf_counter()
            batch = get_batch()
            t_get += time.perf_counter() - t
            sac.update(batch)
        n = args.steps
        return (time.perf_counter() - t0) / n, t_get / n, (time.process_time() - cpu) / n

    def configs(s: int, buf: ShardedReplayBuffer):
        yield f"{s} shard(s), synchronous", lambda: buf.sample(256)
        for k in (1, 4):
            sampler = buf.prefetch(256, batches_per_request=k)
            next(sampler)  # the first request is not hidden
            yield f"{s} shard(s), prefetch, {k} batch(es) per request", lambda sampler=sampler: next(sampler)

    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    timed(lambda: local.sample(256))  # warm up torch
    for _ in range(args.rounds):
        base = timed(lambda: local.sample(256))
        rows.setdefault("local ReplayBuffer", []).append((*base, 0.0))
        for s, buf in sharded.items():
            for key, get in configs(s, buf):
                r = timed(get)
                # overhead: extra time waiting for the batch (vs the local sample of this round),
                # relative to the update time measured in the same run
                rows.setdefault(key, []).append((*r, (r[1] - base[1]) / (r[0] - r[1])))
            t = time.perf_counter()
            for _ in range(args.steps):
                buf.sample(256)
            rows.setdefault(f"{s} shard(s), sample only (no update)", []).append(
                ((time.perf_counter() - t) / args.steps, float("nan"), float("nan"), float("nan"))
            )

    med = statistics.median
    print(
        "| configuration | wall ms per step | ms per step waiting for the batch | learner CPU ms per step "
        "| added to the update by remote sampling |"
    )
    print("|---|---|---|---|---|")
    for key, vals in rows.items():
        w, g, c, o = (med(v[i] for v in vals) for i in range(4))
        cells = [f"{1e3 * w:.2f}"] + ["—" if x != x else f"{1e3 * x:.2f}" for x in (g, c)]
        cells.append("—" if o != o or key.startswith("local") else f"{100 * o:+.1f} %")
        print(f"| {key} | " + " | ".join(cells) + " |")
    print("add (one 1-env step per call, incl. generating the data), us per row:")
    print({k: round(1e6 * v, 1) for k, v in ingest.items()})
    print("rounds (wall ms per step):", {k: [round(1e3 * v[0], 2) for v in vals] for k, vals in rows.items()})


if __name__ == "__main__":
    main()
