"""Cost of the collector's own copy of the observation it holds across an env step (CASES.md #15).

The same ``Collector.collect`` loop is timed with ``rlcore.collector._copy`` as it is and replaced
by the identity (what the collector did before it copied), interleaved in one process
(CPU time of this process, so other load on the machine counts less), on 8 no-op envs (the
cheapest env possible, so the copy's share is the largest it can be)::

    python benches/collector_obs_copy.py            # obs (17,) float32, HalfCheetah-sized
    python benches/collector_obs_copy.py --atari    # obs (4, 84, 84) uint8, stacked Atari frames
"""

from __future__ import annotations

import argparse
import time
import timeit

import gymnasium as gym
import numpy as np
import rlcore
import rlcore.collector as collector_module
from rlcore.collect.collector import Collector

N_ENVS = 8
ROUNDS = 20
STEPS = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atari", action="store_true", help="(4, 84, 84) uint8 observations")
    args = parser.parse_args()
    shape, dtype = ((4, 84, 84), np.dtype(np.uint8)) if args.atari else ((17,), np.dtype(np.float32))

    class NoOpEnv(gym.Env):
        observation_space = gym.spaces.Box(0, 255, shape, dtype)
        action_space = gym.spaces.Box(-1, 1, (6,), np.float32)

        def __init__(self) -> None:
            self._obs = np.zeros(shape, dtype)
            self.t = 0

        def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
            self.t = 0
            return self._obs.copy(), {}

        def step(self, action):  # type: ignore[no-untyped-def]
            self.t += 1
            return self._obs.copy(), 0.0, False, self.t >= 1000, {}

    envs = gym.vector.SyncVectorEnv([NoOpEnv] * N_ENVS)  # copy=True: right without our copy too
    buf = rlcore.ReplayBuffer.from_spaces(
        envs.single_observation_space, envs.single_action_space, capacity=20_000, num_envs=N_ENVS
    )
    col = Collector(envs, buf)
    col.reset(seed=0)
    act = np.zeros((N_ENVS, 6), np.float32)
    col.collect(N_ENVS * 200, policy=lambda obs: act)  # warm up
    copy = collector_module._copy
    us: dict[str, list[float]] = {"copy": [], "no copy": []}
    for r in range(ROUNDS):
        for name in ("copy", "no copy") if r % 2 else ("no copy", "copy"):
            collector_module._copy = copy if name == "copy" else (lambda x: x)
            t0 = time.process_time()
            col.collect(N_ENVS * STEPS, policy=lambda obs: act)
            us[name].append((time.process_time() - t0) / STEPS * 1e6)
    collector_module._copy = copy
    with_copy, without = np.median(us["copy"]), np.median(us["no copy"])
    obs = np.zeros((N_ENVS, *shape), dtype)
    alone = min(timeit.repeat(lambda: copy(obs), number=2000, repeat=7)) / 2000 * 1e6
    print(
        f"obs {shape} {dtype} x {N_ENVS} envs: {with_copy:.1f} vs {without:.1f} us per vector step "
        f"with / without the copy (median of {ROUNDS}): +{with_copy - without:.2f} us "
        f"({(with_copy - without) / without * 100:.1f} %); the copy alone {alone:.2f} us"
    )


if __name__ == "__main__":
    main()
