"""Speed of ``sample_sequences(32, 80, burn_in=40)`` (issue 18), side by side in one process:

- rlcore at capacity 10k and 1M, num_envs 1 and 8 (obs 17 float32, act 6 float32, 1000-step
  episodes ending in truncation, the ring filled through its wrap);
- the floor: a plain gather of the same number of rows (32 * 120 = 3840) — rlcore's own
  ``sample(3840)`` and a numpy fancy-index gather of obs, act, rew from contiguous arrays;
- TorchRL 0.14's ``SliceSampler`` (slice_len 120, strict_length) on a ``LazyTensorStorage`` with
  the same data, when torchrl is installed.

Prints median microseconds per call over ``--repeats`` timed calls; never part of the test run.

    python benches/sequences_speed.py [--repeats 200] [--skip-torchrl]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import rlcore

OBS, ACT, EP = 17, 6, 1000
B, SEQ, BURN = 32, 80, 40


def fill(capacity: int, num_envs: int) -> rlcore.ReplayBuffer:
    buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=0)
    steps = capacity // num_envs + 2 * EP  # through the wrap
    rng = np.random.default_rng(0)
    chunk = 1000
    t = 0
    obs = rng.normal(size=(num_envs, OBS)).astype(np.float32)
    while t < steps:
        k = min(chunk, steps - t)
        o = rng.normal(size=(k + 1, num_envs, OBS)).astype(np.float32)
        o[0] = obs
        trunc = ((t + np.arange(k)) % EP == EP - 1)[:, None].repeat(num_envs, 1)
        buf.extend(
            o[:-1], rng.normal(size=(k, num_envs, ACT)).astype(np.float32), np.ones((k, num_envs), np.float32),
            np.zeros((k, num_envs), bool), trunc, o[1:],
        )
        obs = o[-1]
        t += k
    return buf


def median_us(f, repeats: int) -> float:
    for _ in range(5):
        f()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e6)


def torchrl_us(capacity: int, repeats: int) -> float:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import SliceSampler

    n = capacity
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[EP - 1 :: EP] = True
    td = TensorDict(
        {
            "observation": torch.randn(n, OBS),
            "action": torch.randn(n, ACT),
            "next": TensorDict(
                {"observation": torch.randn(n, OBS), "reward": torch.ones(n, 1), "done": done,
                 "truncated": done.clone(), "terminated": torch.zeros(n, 1, dtype=torch.bool)},
                batch_size=[n],
            ),
        },
        batch_size=[n],
    )
    rb = ReplayBuffer(
        storage=LazyTensorStorage(n),
        sampler=SliceSampler(slice_len=SEQ + BURN, end_key=("next", "done"), strict_length=True),
        batch_size=B * (SEQ + BURN),
    )
    rb.extend(td)
    return median_us(rb.sample, repeats)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--skip-torchrl", action="store_true")
    a = ap.parse_args()
    rows = B * (SEQ + BURN)
    for cap in (10_000, 1_000_000):
        for n in (1, 8):
            buf = fill(cap, n)
            seq = median_us(lambda buf=buf: buf.sample_sequences(B, SEQ, burn_in=BURN), a.repeats)
            out = buf.sample_sequences(B, SEQ, burn_in=BURN)
            seq_out = median_us(lambda buf=buf, out=out: buf.sample_sequences(B, SEQ, burn_in=BURN, out=out), a.repeats)
            flat = median_us(lambda buf=buf: buf.sample(rows), a.repeats)
            print(f"capacity {cap:>9,} num_envs {n}: sample_sequences {seq:8.1f} us (out= {seq_out:8.1f}) | "
                  f"sample({rows}) {flat:8.1f} us | ratio {seq / flat:.2f}")
        obs = np.random.default_rng(0).normal(size=(cap, OBS)).astype(np.float32)
        act = np.zeros((cap, ACT), np.float32)
        rew = np.zeros(cap, np.float32)
        rng = np.random.default_rng(1)

        def np_gather(obs=obs, act=act, rew=rew, rng=rng, cap=cap):
            i = rng.integers(0, cap - 1, rows)
            return obs[i], obs[i + 1], act[i], rew[i]

        print(f"capacity {cap:>9,}: numpy gather of {rows} rows (obs, obs_next, act, rew) {median_us(np_gather, a.repeats):8.1f} us")
        if not a.skip_torchrl:
            try:
                print(f"capacity {cap:>9,}: TorchRL SliceSampler(slice_len={SEQ + BURN}) {torchrl_us(cap, max(20, a.repeats // 10)):8.1f} us")
            except ImportError as e:
                print(f"TorchRL skipped: {e}")


if __name__ == "__main__":
    main()
