"""rlcore's TD3+BC, IQL and CQL side by side with d3rlpy's on locally generated datasets.

Two subcommands, each one command; the datasets and their ``references.json`` (env, files,
reference returns) come from ``benches/offline_datasets.py`` (generated, never committed)::

    python benches/offline_datasets.py --env Pendulum-v1 --out data/offline --env-steps 8000
    python benches/offline_d3rlpy.py speed --data data/offline        # gradient steps/s, one process
    python benches/offline_d3rlpy.py scores --data data/offline --seeds 0 1 --steps 5000

    python benches/offline_datasets.py --env Hopper-v5 --out data/offline/hopper --medium-return 1300
    python benches/offline_d3rlpy.py speed --data data/offline/hopper --rounds 5

d3rlpy 2.8.1 pins gymnasium 1.0.0 (rlcore's environment has a newer one), so it runs from a venv
of its own, with rlcore's extension and Python package taken from the checkout::

    python -m venv ../venv-d3rlpy      # with the Python of rlcore's venv (3.11)
    ../venv-d3rlpy/bin/pip install d3rlpy==2.8.1 torch==2.15.0 numpy==2.4.6 scipy==1.17.1 \
        h5py==3.16.0 mujoco==3.11.0 imageio==2.38.2 tqdm==4.70.1 rich==15.0.0 matplotlib==3.11.2 \
        tensorboard==2.21.0
    PYTHONPATH=python ../venv-d3rlpy/bin/python benches/offline_d3rlpy.py speed --data ...

(the versions are those of rlcore's venv, so both libraries run on the same torch and numpy;
gymnasium 1.0.0's MuJoCo envs also import imageio).

``speed`` builds each algorithm in both libraries on one dataset and times them in alternating
blocks of ``--block`` gradient steps (``--rounds`` rounds, the order swapped every round), in one
process and one thread; a gradient step is a batch draw from the library's own buffer plus the
update, so the buffer's share is included. Ratios are medians of per-round ratios, of wall time and
of the process's CPU time (the fairer figure on a loaded machine).

``scores`` trains each algorithm of each library on each dataset for ``--steps`` gradient steps per
seed (the same loop for both: draw a batch, update) and evaluates the deterministic policy for 10
episodes of the datasets' env with the same reset seeds; it prints the D4RL normalised scores.

d3rlpy is used with its defaults and, as its MuJoCo reproduction scripts do, a standard observation
scaler for TD3+BC and a return-based reward scaler (x1000) for IQL. d3rlpy's CQL default is the
Lagrange variant (alpha_learning_rate 1e-4, threshold 10); rlcore's default is the fixed weight 5.0.
Not part of the test suite."""

from __future__ import annotations

import argparse
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
from rlcore.algos.td3bc import TD3BC, TD3BCConfig
from rlcore.buffers.draws import DatasetDraws
from rlcore.datasets import load_d4rl, normalized_score, read_d4rl

ALGOS = ("td3bc", "iql", "cql")


# -- the datasets and their env --------------------------------------------------------------------


def references(data: Path) -> dict[str, Any]:
    """``DATA/references.json`` of ``benches/offline_datasets.py``: the env, the files, the reference returns."""
    return json.loads((data / "references.json").read_text())


def dataset_names(refs: dict[str, Any]) -> list[str]:
    """The files of a references.json (``hopper-medium``, ...; older Pendulum ones: the two of then)."""
    return list(refs.get("files", ("pendulum-medium", "pendulum-medium-replay")))


def _mean_return(env_id: str, policy: Any, episodes: int, seed: int) -> float:
    env = gym.make(env_id)
    total = 0.0
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        done = False
        while not done:
            obs, rew, term, trunc, _ = env.step(np.asarray(policy(obs[None]))[0])
            total, done = total + float(rew), term or trunc
    return total / episodes


# -- the two libraries ------------------------------------------------------------------------------


def _d3rlpy() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import d3rlpy
    return d3rlpy


def _spaces(env_id: str) -> tuple[gym.Space, gym.spaces.Box]:
    env = gym.make(env_id)
    return env.observation_space, env.action_space


class RlcoreLearner:
    """rlcore: a buffer from the D4RL file, draws with the trainer's generator, ``update``."""

    def __init__(self, algo: str, path: Path, env_id: str, seed: int, steps: int) -> None:
        self.buffer = load_d4rl(
            path, make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=seed), progress=False
        )
        self.draws = DatasetDraws(self.buffer, seed)
        obs_space, act_space = _spaces(env_id)
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

    def __init__(self, algo: str, path: Path, env_id: str, seed: int, steps: int) -> None:
        del env_id  # d3rlpy reads the spaces from the dataset
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


def evaluate(learner: Any, env_id: str, episodes: int = 10) -> float:
    return _mean_return(env_id, learner.act, episodes, seed=20_000)


# -- speed and scores -------------------------------------------------------------------------------


def speed_command(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    refs = references(Path(args.data))
    names = dataset_names(refs)
    dataset = args.dataset or next((n for n in names if n.endswith("-medium-replay")), names[0])
    path = Path(args.data) / f"{dataset}.hdf5"
    print(f"{refs['env']}, {dataset}", flush=True)
    out: dict[str, Any] = {"env": refs["env"], "dataset": dataset, "block": args.block, "rounds": args.rounds}
    for algo in args.algos:
        learners = {name: cls(algo, path, refs["env"], 0, 10**6) for name, cls in LEARNERS.items()}
        for learner in learners.values():  # warm up
            for _ in range(10):
                learner.step()
        times: dict[str, list[float]] = {name: [] for name in learners}
        cpu: dict[str, list[float]] = {name: [] for name in learners}
        for r in range(args.rounds):
            order = list(learners) if r % 2 == 0 else list(reversed(learners))
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.block):
                    learners[name].step()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        ratios = [d / r for r, d in zip(times["rlcore"], times["d3rlpy"], strict=True)]
        cpu_ratios = [d / r for r, d in zip(cpu["rlcore"], cpu["d3rlpy"], strict=True)]
        out[algo] = {
            "rlcore_steps_per_s": round(args.block / statistics.median(times["rlcore"]), 1),
            "d3rlpy_steps_per_s": round(args.block / statistics.median(times["d3rlpy"]), 1),
            "rlcore_over_d3rlpy": round(statistics.median(ratios), 3),
            "rlcore_steps_per_cpu_s": round(args.block / statistics.median(cpu["rlcore"]), 1),
            "d3rlpy_steps_per_cpu_s": round(args.block / statistics.median(cpu["d3rlpy"]), 1),
            "rlcore_over_d3rlpy_cpu": round(statistics.median(cpu_ratios), 3),
        }
        print(algo, out[algo], flush=True)
    print(json.dumps(out, indent=2))


def scores_command(args: argparse.Namespace) -> None:
    """Train and evaluate every (dataset, algorithm, library, seed); one JSON line per run, printed
    and, with ``--json``, appended to that file as soon as the run ends (a long sweep that stops
    keeps what it finished). With ``--eval-every N`` the policy is also evaluated every N gradient
    steps (the ``curve`` of the row: ``[grad_steps, score]`` pairs; training time excludes them)."""
    torch.set_num_threads(1)
    refs = references(Path(args.data))
    reference = (refs["random_return"], refs["expert_return"])
    for dataset in args.datasets or dataset_names(refs):
        path = Path(args.data) / f"{dataset}.hdf5"
        for algo in args.algos:
            steps = args.steps if algo != "cql" else args.cql_steps
            for seed in args.seeds:
                for lib in args.libs:
                    learner = LEARNERS[lib](algo, path, refs["env"], seed, steps)
                    train_s, curve = 0.0, []
                    for done in range(1, steps + 1):
                        t0 = time.perf_counter()
                        learner.step()
                        train_s += time.perf_counter() - t0
                        if args.eval_every and done % args.eval_every == 0 and done < steps:
                            score = normalized_score(evaluate(learner, refs["env"], args.eval_episodes), reference)
                            curve.append([done, round(score, 1)])
                    ret = evaluate(learner, refs["env"])
                    score = round(normalized_score(ret, reference), 1)
                    row = {
                        "dataset": dataset,
                        "algo": algo,
                        "lib": lib,
                        "seed": seed,
                        "grad_steps": steps,
                        "return": round(ret, 1),
                        "score": score,
                        "train_s": round(train_s, 1),
                        "curve": [*curve, [steps, score]],
                    }
                    print(json.dumps(row), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--data", default="data/offline")
    s.add_argument("--dataset", help="default: the medium-replay file of references.json, else its first")
    s.add_argument("--algos", nargs="+", default=list(ALGOS))
    s.add_argument("--block", type=int, default=20)
    s.add_argument("--rounds", type=int, default=9)
    c = sub.add_parser("scores")
    c.add_argument("--data", default="data/offline")
    c.add_argument("--datasets", nargs="+", help="default: every file of references.json")
    c.add_argument("--algos", nargs="+", default=list(ALGOS))
    c.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    c.add_argument("--steps", type=int, default=5_000)
    c.add_argument("--cql-steps", type=int, default=1_000)
    c.add_argument("--libs", nargs="+", default=list(LEARNERS), choices=list(LEARNERS))
    c.add_argument("--eval-every", type=int, default=0, help="also evaluate every N gradient steps (0: at the end only)")
    c.add_argument("--eval-episodes", type=int, default=5, help="episodes of each intermediate evaluation")
    c.add_argument("--json", default=None, help="append one JSON line per run to this file")
    args = parser.parse_args()
    {"speed": speed_command, "scores": scores_command}[args.command](args)


if __name__ == "__main__":
    main()
