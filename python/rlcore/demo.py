"""A short demo of the replay core on a real gymnasium environment.

``python -m rlcore.demo`` fills a HER buffer from FetchReach-v4 (when gymnasium-robotics is
installed; Pendulum-v1 otherwise) with random actions in a vector env, samples n-step and
relabeled batches, and prints what came out.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import rlcore
from rlcore.collect import Collector
from rlcore.envs.robotics import register_robotics


def _fetch_env(num_envs: int) -> gym.vector.VectorEnv | None:
    if not register_robotics():
        return None
    return gym.make_vec("FetchReach-v4", num_envs=num_envs, vectorization_mode="sync")


def main(num_envs: int = 4, steps: int = 500, seed: int = 0) -> None:
    """Collect about ``steps`` vector steps of random actions on ``num_envs`` envs, then sample."""
    envs = _fetch_env(num_envs)
    goal_env = envs is not None
    if envs is None:
        envs = gym.make_vec("Pendulum-v1", num_envs=num_envs, vectorization_mode="sync")
    env_id = envs.spec.id if envs.spec else "?"
    if goal_env:
        compute_reward = envs.envs[0].unwrapped.compute_reward  # type: ignore[attr-defined]
        buf: rlcore.ReplayBuffer = rlcore.HERReplayBuffer.from_spaces(
            envs.single_observation_space,
            envs.single_action_space,
            capacity=20_000,
            num_envs=num_envs,
            seed=seed,
            compute_reward=compute_reward,
        )
    else:
        buf = rlcore.ReplayBuffer.from_spaces(
            envs.single_observation_space,
            envs.single_action_space,
            capacity=20_000,
            num_envs=num_envs,
            seed=seed,
        )
    # The collector steps the env (gymnasium's default NEXT_STEP autoreset: the step after a done is
    # a reset, not a transition) and writes each vector step into the buffer with its own obs copy.
    collector = Collector(envs, buf)
    collector.reset(seed=seed)
    t0 = time.perf_counter()
    stats = collector.collect(steps * num_envs)
    elapsed = time.perf_counter() - t0
    returns = stats.episode_returns
    print(
        f"env {env_id} x{num_envs}: {stats.vector_steps} vector steps in {elapsed:.2f} s, "
        f"{len(buf)} transitions stored"
    )
    print(
        f"episodes finished: {len(returns)}, mean return {np.mean(returns) if returns else float('nan'):.2f}"
    )
    batch = buf.sample(256, n_step=3, gamma=0.98)
    obs_desc = {k: v.shape for k, v in batch.obs.items()} if isinstance(batch.obs, dict) else batch.obs.shape
    print(f"sample(256, n_step=3): obs {obs_desc}, act {batch.act.shape}, rew {batch.rew.dtype}")
    print(
        f"  mean n-step reward {batch.rew.mean():.3f}, discounts {np.unique(batch.discount.round(4)).tolist()}"
    )
    if goal_env:
        stored = buf.column("obs")["desired_goal"][batch.indices]  # type: ignore[index]
        relabeled = np.any(batch.obs["desired_goal"] != stored, axis=1)
        print(f"  relabeled fraction {relabeled.mean():.2f} (expected {4 / 5:.2f} with future_k=4)")
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        buf.sample(256)
    print(f"sample(256) takes {(time.perf_counter() - t0) / n * 1e6:.1f} us here")
    envs.close()


if __name__ == "__main__":
    main()
