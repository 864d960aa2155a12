"""Per-call cost of the compat buffers next to the peers' own, in one process (median of 5
repeats of N calls; µs per call). Data: 50k Pendulum-sized transitions (obs 3, act 1) or 50k
FetchReach-sized ones (obs 10 + goals 3 + 3, act 4; 50-step episodes)::

    python benches/compat_micro.py            # prints a markdown table
"""

from __future__ import annotations

import statistics
import sys
import timeit
from collections.abc import Callable

import numpy as np

F32 = np.float32


def per_call(fn: Callable[[], object], number: int) -> float:
    return 1e6 * statistics.median(timeit.repeat(fn, number=number, repeat=5)) / number


def sb3_rows() -> list[tuple[str, float, float]]:
    import gymnasium as gym
    from gymnasium import spaces
    from rlcore.compat import sb3 as rc
    from stable_baselines3.common import buffers as sb
    from stable_baselines3.common.vec_env import DummyVecEnv
    from stable_baselines3.her import HerReplayBuffer as SbHer

    obs_s = spaces.Box(-10, 10, (3,), F32)
    act_s = spaces.Box(-1, 1, (1,), F32)
    rng = np.random.default_rng(0)
    rows = []
    pairs = [
        ("ReplayBuffer", sb.ReplayBuffer, rc.ReplayBuffer, {}),
        ("NStepReplayBuffer n=3", sb.NStepReplayBuffer, rc.NStepReplayBuffer, {"n_steps": 3}),
    ]
    for name, theirs, ours, kw in pairs:
        bufs = [k(100_000, obs_s, act_s, device="cpu", **kw) for k in (theirs, ours)]
        for i in range(50_000):
            o = rng.normal(size=(1, 3)).astype(F32)
            args = (
                o,
                o + 1,
                rng.uniform(-1, 1, (1, 1)).astype(F32),
                np.ones(1, F32),
                np.array([i % 200 == 199]),
                [{"TimeLimit.truncated": True}],
            )
            for b in bufs:
                b.add(*args)
        t, r = (per_call(lambda b=b: b.sample(256), 300) for b in bufs)
        rows.append((f"SB3 {name} sample(256)", t, r))
        o = np.zeros((1, 3), F32)
        a = np.zeros((1, 1), F32)
        t, r = (
            per_call(lambda b=b, o=o, a=a: b.add(o, o, a, np.ones(1, F32), np.zeros(1, bool), [{}]), 3000)
            for b in bufs
        )
        rows.append((f"SB3 {name} add", t, r))

    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    venv = DummyVecEnv([lambda: gym.make("FetchReach-v4")])
    space = venv.observation_space
    bufs = [
        SbHer(100_000, space, venv.action_space, venv, device="cpu"),
        rc.HerReplayBuffer(100_000, space, venv.action_space, venv, device="cpu"),
        rc.HerReplayBuffer(100_000, space, venv.action_space, venv, device="cpu", distance_threshold=0.05),
    ]
    for i in range(50_000):
        o = {k: rng.normal(size=(1, *space[k].shape)) for k in space.spaces}
        n = {k: v + 0.01 for k, v in o.items()}
        args = (
            o,
            n,
            rng.uniform(-1, 1, (1, 4)).astype(F32),
            -np.ones(1, F32),
            np.array([i % 50 == 49]),
            [{"TimeLimit.truncated": True}],
        )
        for b in bufs:
            b.add(*args)
    t, r, r_native = (per_call(lambda b=b: b.sample(256), 100) for b in bufs)
    rows.append(("SB3 HerReplayBuffer sample(256), FetchReach data", t, r))
    rows.append(("... rlcore with distance_threshold=0.05 (native reward)", t, r_native))
    return rows


def tianshou_rows() -> list[tuple[str, float, float]]:
    from rlcore.compat.tianshou import VectorReplayBuffer as RcVec
    from tianshou.algorithm.algorithm_base import Algorithm
    from tianshou.data import Batch
    from tianshou.data import VectorReplayBuffer as TsVec

    rng = np.random.default_rng(0)
    bufs = [TsVec(100_000, 4), RcVec(100_000, 4)]
    obs = rng.normal(size=(4, 3)).astype(F32)
    for i in range(12_500):
        nxt = rng.normal(size=(4, 3)).astype(F32)
        end = np.full(4, i % 200 == 199)
        batch = Batch(
            obs=obs,
            act=rng.integers(0, 2, 4),
            rew=np.ones(4),
            terminated=np.zeros(4, bool),
            truncated=end,
            obs_next=nxt,
            info={},
        )
        for b in bufs:
            b.add(batch, buffer_ids=np.arange(4))
        obs = nxt
    rows = []
    t, r = (per_call(lambda b=b: b.sample(256), 300) for b in bufs)
    rows.append(("Tianshou VectorReplayBuffer sample(256)", t, r))

    def nstep(b):
        batch, idx = b.sample(256)
        return Algorithm.compute_nstep_return(
            batch, b, idx, lambda bf, i: __import__("torch").as_tensor(bf[i].obs_next[:, 0] * 1.0), 0.99, 3
        )

    nstep(bufs[0]), nstep(bufs[1])  # numba compilation
    t, r = (per_call(lambda b=b: nstep(b), 100) for b in bufs)
    rows.append(("Tianshou sample(256) + compute_nstep_return(n=3)", t, r))
    step = Batch(
        obs=obs,
        act=np.zeros(4, int),
        rew=np.ones(4),
        terminated=np.zeros(4, bool),
        truncated=np.zeros(4, bool),
        obs_next=obs,
        info={},
    )
    t, r = (per_call(lambda b=b: b.add(step, buffer_ids=np.arange(4)), 2000) for b in bufs)
    rows.append(("Tianshou VectorReplayBuffer add (4 envs)", t, r))
    return rows


def main() -> None:
    import torch

    torch.set_num_threads(1)
    rows = sb3_rows() + tianshou_rows()
    print("| operation | peer's buffer µs | rlcore compat µs | ratio |")
    print("|---|---|---|---|")
    for name, theirs, ours in rows:
        print(f"| {name} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.1f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
