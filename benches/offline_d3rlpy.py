"""rlcore's TD3+BC, IQL and CQL side by side with d3rlpy's on small locally generated datasets.

Three subcommands, each one command (datasets are generated, never committed)::

    python benches/offline_d3rlpy.py datasets --out data/offline      # SAC on Pendulum-v1 -> D4RL files
    python benches/offline_d3rlpy.py speed --data data/offline        # gradient steps/s, one process
    python benches/offline_d3rlpy.py scores --data data/offline --seeds 0 1 --steps 5000

``datasets`` trains SAC (lr 1e-3, rlcore) on Pendulum-v1 for ``--env-steps``; the first time after
``--medium-at`` env steps that its deterministic policy returns ``--medium-return`` or more (3
episodes, checked every 250 env steps) it keeps a copy of the policy. It writes ``pendulum-medium.hdf5`` (``--episodes``
episodes of that policy, sampled actions), ``pendulum-medium-replay.hdf5`` (the replay buffer up to
then, with next_observations) and ``references.json`` (the mean return of a uniform random policy and
of the final SAC policy, deterministic: D4RL's random and expert reference returns here).

``speed`` builds each algorithm in both libraries on one dataset and times them in alternating
blocks of ``--block`` gradient steps (``--rounds`` rounds, the order swapped every round), in one
process and one thread; a gradient step is a batch draw from the library's own buffer plus the
update, so the buffer's share is included. Ratios are medians of per-round ratios.

``scores`` trains each algorithm of each library on each dataset for ``--steps`` gradient steps per
seed (the same loop for both: draw a batch, update) and evaluates the deterministic policy for 10
episodes of Pendulum-v1 with the same reset seeds; it prints the D4RL normalised scores.

d3rlpy is used with its defaults and, as its MuJoCo reproduction scripts do, a standard observation
scaler for TD3+BC and a return-based reward scaler (x1000) for IQL. d3rlpy's CQL default is the
Lagrange variant (alpha_learning_rate 1e-4, threshold 10); rlcore's default is the fixed weight 5.0.
Not part of the test suite."""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import rlcore
import torch
from rlcore.algos.cql import CQL, CQLConfig
from rlcore.algos.iql import IQL, IQLConfig, iql_reward_scale
from rlcore.algos.sac import SAC, SACConfig
from rlcore.algos.td3bc import TD3BC, TD3BCConfig
from rlcore.buffers.draws import DatasetDraws
from rlcore.datasets import load_d4rl, normalized_score, read_d4rl, write_d4rl
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

ENV = "Pendulum-v1"
DATASETS = ("pendulum-medium", "pendulum-medium-replay")
ALGOS = ("td3bc", "iql", "cql")


# -- datasets ---------------------------------------------------------------------------------------


def _rollouts(policy: Any, episodes: int, seed: int) -> dict[str, np.ndarray]:
    env = gym.make(ENV)
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc", "obs_next")}
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        done = False
        while not done:
            act = np.asarray(policy(obs[None]))[0]
            nxt, rew, term, trunc, _ = env.step(act)
            for key, v in zip(rows, (obs, act, rew, term, trunc, nxt), strict=True):
                rows[key].append(v)
            obs, done = nxt, term or trunc
    return {k: np.asarray(v) for k, v in rows.items()}


def _mean_return(policy: Any, episodes: int, seed: int) -> float:
    a = _rollouts(policy, episodes, seed)
    return float(a["rew"].sum() / episodes)


def datasets_command(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV)])
    space = envs.single_observation_space, envs.single_action_space
    sac = SAC.from_spaces(
        *space, SACConfig(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, seed=0), device="cpu"
    )
    buffer = rlcore.ReplayBuffer.from_spaces(*space, capacity=args.env_steps + 1000, seed=0)
    config = OffPolicyTrainerConfig(max_env_steps=args.env_steps, warmup_env_steps=1000, seed=0)
    medium: Any = None
    medium_at = 0
    rows = np.zeros(0, np.int64)
    for stats in OffPolicyTrainer(sac, buffer, envs, config=config):
        due = stats.env_steps >= args.medium_at and stats.env_steps % 250 == 0
        if (
            medium is None
            and due
            and _mean_return(lambda o: sac.act(o, deterministic=True), 3, 9_000) >= args.medium_return
        ):
            medium, medium_at = copy.deepcopy(sac), stats.env_steps
            rows = np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity))))
            b = buffer.sample_at(rows)
            write_d4rl(
                out / "pendulum-medium-replay.hdf5",
                obs=b.obs,
                act=b.act,
                rew=b.rew,
                terminated=b.terminated,
                truncated=b.truncated,
                obs_next=b.obs_next,
            )
    a = _rollouts(lambda o: medium.act(o, deterministic=False), args.episodes, seed=1_000)
    write_d4rl(
        out / "pendulum-medium.hdf5",
        obs=a["obs"],
        act=a["act"],
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
    )
    space_act = envs.single_action_space
    rng = np.random.default_rng(0)
    random_ret = _mean_return(
        lambda o: rng.uniform(space_act.low, space_act.high, (1, *space_act.shape)), 20, 5_000
    )
    expert_ret = _mean_return(lambda o: sac.act(o, deterministic=True), 20, 5_000)
    medium_ret = _mean_return(lambda o: medium.act(o, deterministic=True), 20, 5_000)
    refs = {
        "env": ENV,
        "random_return": random_ret,
        "expert_return": expert_ret,
        "medium_policy_return": medium_ret,
        "medium_dataset_return": float(a["rew"].sum() / args.episodes),
        "medium_replay_transitions": int(rows.size),
        "sac_env_steps": args.env_steps,
        "medium_at_env_steps": medium_at,
    }
    (out / "references.json").write_text(json.dumps(refs, indent=2))
    print(json.dumps(refs, indent=2))


# -- the two libraries ------------------------------------------------------------------------------


def _d3rlpy() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import d3rlpy
    return d3rlpy


def _spaces() -> tuple[gym.Space, gym.spaces.Box]:
    env = gym.make(ENV)
    return env.observation_space, env.action_space


class RlcoreLearner:
    """rlcore: a buffer from the D4RL file, draws with the trainer's generator, ``update``."""

    def __init__(self, algo: str, path: Path, seed: int, steps: int) -> None:
        self.buffer = load_d4rl(
            path, make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=seed), progress=False
        )
        self.draws = DatasetDraws(self.buffer, seed)
        obs_space, act_space = _spaces()
        if algo == "td3bc":
            self.algo: Any = TD3BC.from_spaces(obs_space, act_space, TD3BCConfig(seed=seed), device="cpu")
            self.algo.fit_obs(np.asarray(read_d4rl(path).obs))
        elif algo == "iql":
            steps_ = read_d4rl(path)
            returns = _episode_returns(steps_.rew, steps_.terminated | steps_.truncated)
            config = IQLConfig(
                seed=seed, actor_lr_decay_grad_steps=steps, reward_scale=iql_reward_scale(returns)
            )
            self.algo = IQL.from_spaces(obs_space, act_space, config, device="cpu")
        else:
            self.algo = CQL.from_spaces(obs_space, act_space, CQLConfig(seed=seed), device="cpu")

    def step(self) -> None:
        self.algo.update(self.draws.sample(256))

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.algo.act(obs, deterministic=True)


def _episode_returns(rew: np.ndarray, ends: np.ndarray) -> np.ndarray:
    bounds = np.concatenate([[0], np.flatnonzero(ends) + 1])
    return np.asarray([rew[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a])


class D3rlpyLearner:
    """d3rlpy: an MDPDataset from the same file, ``sample_transition_batch`` and ``update`` (its fit loop)."""

    def __init__(self, algo: str, path: Path, seed: int, steps: int) -> None:
        d3rlpy = _d3rlpy()
        d3rlpy.seed(seed)
        # d3rlpy's dataset takes D4RL's layout: observations, actions, rewards, terminals, timeouts
        with h5_arrays(path) as a:
            self.dataset = d3rlpy.dataset.MDPDataset(
                observations=a["observations"],
                actions=a["actions"],
                rewards=a["rewards"],
                terminals=a["terminals"].astype(np.float32),
                timeouts=a["timeouts"].astype(np.float32),
            )
        if algo == "td3bc":
            config = d3rlpy.algos.TD3PlusBCConfig(
                observation_scaler=d3rlpy.preprocessing.StandardObservationScaler()
            )
        elif algo == "iql":
            config = d3rlpy.algos.IQLConfig(
                reward_scaler=d3rlpy.preprocessing.ReturnBasedRewardScaler(multiplier=1000.0),
                actor_optim_factory=d3rlpy.optimizers.AdamFactory(
                    lr_scheduler_factory=d3rlpy.optimizers.CosineAnnealingLRFactory(T_max=steps)
                ),
            )
        else:
            config = d3rlpy.algos.CQLConfig()
        self.algo = config.create(device="cpu:0")
        # what fit() does before its loop: fit the scalers, then build the networks
        build_scalers = d3rlpy.algos.qlearning.base.build_scalers_with_transition_picker
        build_scalers(self.algo, self.dataset)
        self.algo.build_with_dataset(self.dataset)

    def step(self) -> None:
        self.algo.update(self.dataset.sample_transition_batch(256))

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.algo.predict(obs.astype(np.float32))


class h5_arrays:  # noqa: N801 - a small context manager
    def __init__(self, path: Path) -> None:
        import h5py

        self.f = h5py.File(path, "r")

    def __enter__(self) -> dict[str, np.ndarray]:
        return {k: self.f[k][...] for k in ("observations", "actions", "rewards", "terminals", "timeouts")}

    def __exit__(self, *exc: object) -> None:
        self.f.close()


LEARNERS = {"rlcore": RlcoreLearner, "d3rlpy": D3rlpyLearner}


def evaluate(learner: Any, episodes: int = 10) -> float:
    return _mean_return(learner.act, episodes, seed=20_000)


# -- speed and scores -------------------------------------------------------------------------------


def speed_command(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    path = Path(args.data) / f"{args.dataset}.hdf5"
    out: dict[str, Any] = {}
    for algo in args.algos:
        learners = {name: cls(algo, path, 0, 10**6) for name, cls in LEARNERS.items()}
        for learner in learners.values():  # warm up
            for _ in range(10):
                learner.step()
        times: dict[str, list[float]] = {name: [] for name in learners}
        for r in range(args.rounds):
            order = list(learners) if r % 2 == 0 else list(reversed(learners))
            for name in order:
                t0 = time.perf_counter()
                for _ in range(args.block):
                    learners[name].step()
                times[name].append(time.perf_counter() - t0)
        ratios = [d / r for r, d in zip(times["rlcore"], times["d3rlpy"], strict=True)]
        out[algo] = {
            "rlcore_steps_per_s": round(args.block / statistics.median(times["rlcore"]), 1),
            "d3rlpy_steps_per_s": round(args.block / statistics.median(times["d3rlpy"]), 1),
            "rlcore_over_d3rlpy": round(statistics.median(ratios), 3),
        }
        print(algo, out[algo], flush=True)
    print(json.dumps(out, indent=2))


def scores_command(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    refs = json.loads((Path(args.data) / "references.json").read_text())
    reference = (refs["random_return"], refs["expert_return"])
    results = []
    for dataset in args.datasets:
        path = Path(args.data) / f"{dataset}.hdf5"
        for algo in args.algos:
            steps = args.steps if algo != "cql" else args.cql_steps
            for lib, cls in LEARNERS.items():
                for seed in args.seeds:
                    learner = cls(algo, path, seed, steps)
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        learner.step()
                    train_s = time.perf_counter() - t0
                    ret = evaluate(learner)
                    row = {
                        "dataset": dataset,
                        "algo": algo,
                        "lib": lib,
                        "seed": seed,
                        "grad_steps": steps,
                        "return": round(ret, 1),
                        "score": round(normalized_score(ret, reference), 1),
                        "train_s": round(train_s, 1),
                    }
                    results.append(row)
                    print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("datasets")
    d.add_argument("--out", default="data/offline")
    d.add_argument("--env-steps", type=int, default=10_000)
    d.add_argument("--medium-at", type=int, default=2_000)
    d.add_argument("--medium-return", type=float, default=-700.0)
    d.add_argument("--episodes", type=int, default=50)
    s = sub.add_parser("speed")
    s.add_argument("--data", default="data/offline")
    s.add_argument("--dataset", default="pendulum-medium-replay")
    s.add_argument("--algos", nargs="+", default=list(ALGOS))
    s.add_argument("--block", type=int, default=20)
    s.add_argument("--rounds", type=int, default=9)
    c = sub.add_parser("scores")
    c.add_argument("--data", default="data/offline")
    c.add_argument("--datasets", nargs="+", default=list(DATASETS))
    c.add_argument("--algos", nargs="+", default=list(ALGOS))
    c.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    c.add_argument("--steps", type=int, default=5_000)
    c.add_argument("--cql-steps", type=int, default=1_000)
    c.add_argument("--json", default=None)
    args = parser.parse_args()
    {"datasets": datasets_command, "speed": speed_command, "scores": scores_command}[args.command](args)


if __name__ == "__main__":
    main()
