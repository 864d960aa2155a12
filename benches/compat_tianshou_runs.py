"""Long proofs for ``rlcore.compat.tianshou``: Tianshou 2.0's own algorithms, Collector and
trainer with Tianshou's buffers and with rlcore's, same seed.

``cartpole`` (the default task): Tianshou's DQN on CartPole-v1 with ``VectorReplayBuffer``.

Settings as Tianshou's ``examples/discrete/discrete_dqn.py``: 4 train envs, net [128, 128], lr
1e-3, gamma 0.9, 3-step returns, target update every 320 gradient steps, buffer 20k, batch 64,
10 env steps per collection and 0.1 gradient steps per env step, eps 0.1 -> 0.05. Every
``buffer.sample`` is timed inside the run. Appends one JSON line to ``--out``::

    nice -n 10 python benches/compat_tianshou_runs.py --buffer tianshou --seed 0 --epochs 2
    nice -n 10 python benches/compat_tianshou_runs.py --buffer rlcore --seed 0 --epochs 2
    python benches/compat_tianshou_runs.py --paired-report runs.jsonl   # the table of docs/compat.md

``fetch``: Tianshou's DDPG with ``HERVectorReplayBuffer`` on FetchReach-v4, set up like Tianshou's
``examples/mujoco/fetch_her_ddpg.py`` (dict observations flattened by
``get_dict_state_decorator``, ``TruncatedAsTerminated`` so episode ends reach the buffer, future
k = 8, horizon 50, actor lr 1e-3, one train env, one gradient step per env step) but scaled to
this machine and to learn within a few thousand steps: nets [64, 64] instead of [256, 256],
critic lr 1e-3, tau 0.05, Gaussian noise 0.2 (``--fetch-example`` keeps the example's critic lr
3e-3, tau 0.005 and noise 0.1), gamma 0.98, batch 256, 1000 random warm-up steps instead of 25k,
and ``--epochs`` epochs of 2500 env steps. Score: the deterministic policy's success rate over 50
episodes of a separate env; the curve evaluates 20 episodes after each epoch::

    nice -n 10 python benches/compat_tianshou_runs.py --task fetch --buffer rlcore --seed 0 --epochs 4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def _time_samples(buf: Any) -> list[float]:
    """Wrap ``buf.sample`` so each call's seconds are appended to the returned list."""
    sample_s: list[float] = []
    inner = buf.sample

    def timed(batch_size: int | None) -> Any:
        t0 = time.perf_counter()
        out = inner(batch_size)
        sample_s.append(time.perf_counter() - t0)
        return out

    buf.sample = timed
    return sample_s


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
    sample_s = _time_samples(buf)

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


def run_fetch(buffer: str, seed: int, epochs: int, example: bool = False) -> dict[str, Any]:
    import gymnasium as gym
    import gymnasium_robotics
    import numpy as np
    import torch
    from rlcore.compat.tianshou import HERVectorReplayBuffer as RlHer
    from tianshou.algorithm import DDPG
    from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Batch, Collector, CollectStats
    from tianshou.data import HERVectorReplayBuffer as TsHer
    from tianshou.env import DummyVectorEnv, TruncatedAsTerminated
    from tianshou.exploration import GaussianNoise
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net, get_dict_state_decorator
    from tianshou.utils.net.continuous import ContinuousActorDeterministic, ContinuousCritic

    torch.set_num_threads(1)
    gym.register_envs(gymnasium_robotics)
    np.random.seed(seed)  # noqa: NPY002 - Tianshou draws from the global generator
    torch.manual_seed(seed)
    env = TruncatedAsTerminated(gym.make("FetchReach-v4"))
    train_envs = DummyVectorEnv([lambda: TruncatedAsTerminated(gym.make("FetchReach-v4"))])
    test_envs = DummyVectorEnv([lambda: TruncatedAsTerminated(gym.make("FetchReach-v4"))])
    train_envs.seed(seed)
    test_envs.seed(seed + 100)
    keys = ["observation", "achieved_goal", "desired_goal"]
    shapes = {k: env.observation_space[k].shape for k in keys}
    dec, flat = get_dict_state_decorator(state_shape=shapes, keys=keys)
    act_shape = env.action_space.shape
    net_a = dec(Net)(state_shape=flat, hidden_sizes=[64, 64])
    actor = dec(ContinuousActorDeterministic)(preprocess_net=net_a, action_shape=act_shape, max_action=1.0)
    net_c = dec(Net)(state_shape=flat, action_shape=act_shape, hidden_sizes=[64, 64], concat=True)
    critic = dec(ContinuousCritic)(preprocess_net=net_c)
    sigma, critic_lr, tau = (0.1, 3e-3, 0.005) if example else (0.2, 1e-3, 0.05)
    policy = ContinuousDeterministicPolicy(
        actor=actor, exploration_noise=GaussianNoise(sigma=sigma), action_space=env.action_space
    )
    algo = DDPG(
        policy=policy,
        policy_optim=AdamOptimizerFactory(lr=1e-3),
        critic=critic,
        critic_optim=AdamOptimizerFactory(lr=critic_lr),
        tau=tau,
        gamma=0.98,
    )

    def compute_reward_fn(ag: np.ndarray, g: np.ndarray) -> np.ndarray:
        return env.unwrapped.compute_reward(ag, g, {})

    her_kwargs = dict(compute_reward_fn=compute_reward_fn, horizon=50, future_k=8)
    buf = (TsHer if buffer == "tianshou" else RlHer)(100_000, 1, **her_kwargs)
    training = Collector[CollectStats](algo, train_envs, buf, exploration_noise=True)
    training.reset()
    training.collect(n_step=1000, random=True)
    sample_s = _time_samples(buf)
    eval_env = gym.make("FetchReach-v4")
    eval_env.reset(seed=10_000 + seed)
    curve: list[tuple[int, float]] = []
    eval_s = [0.0]

    def success_rate(episodes: int) -> float:
        t0 = time.perf_counter()
        policy.eval()
        wins = 0.0
        with torch.no_grad():
            for _ in range(episodes):
                obs, info = eval_env.reset()
                done = False
                while not done:
                    batch = Batch(obs=Batch({k: obs[k][None] for k in obs}), info=Batch())
                    act = policy.map_action(policy(batch).act.detach().cpu().numpy()[0])
                    obs, _, term, trunc, info = eval_env.step(act)
                    done = term or trunc
                wins += float(info["is_success"])
        policy.train()
        eval_s[0] += time.perf_counter() - t0
        return wins / episodes

    seen = [1]

    def training_fn(epoch: int, env_step: int) -> None:
        # called before every collection step: evaluate once when a new epoch begins
        if epoch > seen[0]:
            seen[0] = epoch
            curve.append((env_step, success_rate(20)))

    t0 = time.perf_counter()
    algo.run_training(
        OffPolicyTrainerParams(
            training_collector=training,
            test_collector=Collector[CollectStats](algo, test_envs),
            max_epochs=epochs,
            epoch_num_steps=2500,
            collection_step_num_env_steps=1,
            test_step_num_episodes=1,
            batch_size=256,
            update_step_num_gradient_steps_per_sample=1.0,
            training_fn=training_fn,
            show_progress=False,
            verbose=False,
        )
    )
    wall = time.perf_counter() - t0 - eval_s[0]
    score = success_rate(50)
    return {
        "task": "fetch-ddpg-her" + ("-example" if example else ""),
        "buffer": buffer,
        "seed": seed,
        "epochs": epochs,
        "env_steps": 1000 + 2500 * epochs,
        "score": score,
        "score_kind": "success rate (50 episodes)",
        "curve": curve,
        "grad_steps": len(sample_s),
        "sample_us_median": 1e6 * float(np.median(sample_s)),
        "wall_s": wall,
    }


def paired_report(path: Path, task: str = "cartpole-dqn") -> str:
    """Paired table of rlcore's buffer against Tianshou's on the seeds both ran (``task`` rows
    only): best test return, mean ± standard error, paired difference and its sign-flip p-value
    (``benches/paired.py``)."""
    from paired import paired_table

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("task") == task]
    return paired_table(rows, [("best_reward", "best test return")], baseline="tianshou", digits=1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["cartpole", "fetch"], default="cartpole")
    p.add_argument("--buffer", choices=["tianshou", "rlcore"], default="rlcore")
    p.add_argument("--fetch-example", action="store_true", help="fetch: the example's tau, noise, critic lr")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("runs/compat_tianshou.jsonl"))
    p.add_argument("--paired-report", type=Path, default=None, help="print the paired table of a JSONL file")
    a = p.parse_args(argv)
    if a.paired_report is not None:
        print(paired_report(a.paired_report))
        return
    if a.task == "cartpole":
        res = run(a.buffer, a.seed, a.epochs)
    else:
        res = run_fetch(a.buffer, a.seed, a.epochs, a.fetch_example)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
