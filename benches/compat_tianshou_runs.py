"""Long proof for ``rlcore.compat.tianshou``: Tianshou 2.0's own DQN, Collector and trainer on
CartPole-v1 with Tianshou's ``VectorReplayBuffer`` and with rlcore's, same seed.

Settings as Tianshou's ``examples/discrete/discrete_dqn.py``: 4 train envs, net [128, 128], lr
1e-3, gamma 0.9, 3-step returns, target update every 320 gradient steps, buffer 20k, batch 64,
10 env steps per collection and 0.1 gradient steps per env step, eps 0.1 -> 0.05. Every
``buffer.sample`` is timed inside the run. Appends one JSON line to ``--out``::

    nice -n 10 python benches/compat_tianshou_runs.py --buffer tianshou --seed 0 --epochs 2
    nice -n 10 python benches/compat_tianshou_runs.py --buffer rlcore --seed 0 --epochs 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def run(buffer: str, seed: int, epochs: int) -> dict[str, Any]:
    import gymnasium as gym
    import numpy as np
    import torch
    from rlcore.compat.tianshou import VectorReplayBuffer as RlBuffer
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats
    from tianshou.data import VectorReplayBuffer as TsBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    torch.set_num_threads(1)
    np.random.seed(seed)  # noqa: NPY002 - Tianshou's exploration draws from the global generator
    torch.manual_seed(seed)
    train_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    test_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    train_envs.seed(seed)
    test_envs.seed(seed + 100)
    env = gym.make("CartPole-v1")
    net = Net(
        state_shape=env.observation_space.shape, action_shape=env.action_space.n, hidden_sizes=[128, 128]
    )
    policy = DiscreteQLearningPolicy(
        model=net, action_space=env.action_space, eps_training=0.1, eps_inference=0.0
    )
    algo = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=1e-3),
        gamma=0.9,
        n_step_return_horizon=3,
        target_update_freq=320,
    )
    buf = (TsBuffer if buffer == "tianshou" else RlBuffer)(20_000, 4)
    training = Collector[CollectStats](algo, train_envs, buf, exploration_noise=True)
    training.reset()
    training.collect(n_step=64 * 4)
    sample_s: list[float] = []
    inner = buf.sample

    def timed(batch_size: int | None) -> Any:
        t0 = time.perf_counter()
        out = inner(batch_size)
        sample_s.append(time.perf_counter() - t0)
        return out

    buf.sample = timed  # type: ignore[method-assign]

    def training_fn(epoch: int, env_step: int) -> None:
        policy.set_eps_training(max(0.05, 0.1 - env_step / 10_000 * 0.05))

    t0 = time.perf_counter()
    result = algo.run_training(
        OffPolicyTrainerParams(
            training_collector=training,
            test_collector=Collector[CollectStats](algo, test_envs),
            max_epochs=epochs,
            epoch_num_steps=10_000,
            collection_step_num_env_steps=12,
            test_step_num_episodes=20,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.1,
            training_fn=training_fn,
            stop_fn=lambda r: r >= 500,
            show_progress=False,
            verbose=False,
        )
    )
    wall = time.perf_counter() - t0
    return {
        "task": "cartpole-dqn",
        "buffer": buffer,
        "seed": seed,
        "epochs": epochs,
        "best_reward": float(result.best_reward),
        "best_reward_std": float(result.best_reward_std),
        "grad_steps": len(sample_s),
        "sample_us_median": 1e6 * float(np.median(sample_s)),
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--buffer", choices=["tianshou", "rlcore"], default="rlcore")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("runs/compat_tianshou.jsonl"))
    a = p.parse_args(argv)
    res = run(a.buffer, a.seed, a.epochs)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
