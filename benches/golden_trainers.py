"""Golden before/after comparison of every trainer: run the same short fixed-seed trainings on two
versions of rlcore and check that the stats and the final weights are identical, bit for bit.

Each case (``LOCAL_CASES`` and ``distributed_ddpg_pendulum``) is trained twice in one process of
one rlcore version:

* ``straight``: from a fresh build, to the horizon; a checkpoint is saved after ``save_at``
  iterations into ``--ckpt-dir/<case>``;
* ``resumed``: a fresh build loads the checkpoint found in ``--resume-from/<case>`` (this version's
  own, or the other version's: the checkpoint format is meant to be unchanged) with
  ``trust_env_state=True`` and runs to the horizon.

For every iteration the script records ``rlcore.stats.flatten_stats`` without the wall-clock keys
(``*_s``, ``time/env_steps_per_s``), and at the end a SHA-256 of every entry of
``algorithm.state_dict()`` (tensors and arrays by dtype, shape and bytes). ``compare`` then
checks version A against version B, and each version's resumed rows against the tail of its
straight run. The distributed trainer's straight run is not deterministic (the learner samples
while a collector actor writes), so for it only the resumed leg of one shared checkpoint is
compared (``_resumable_parts`` of tests/test_distributed_trainer.py: after the resume no sample
overlaps a write).

Usage (CPU, one torch thread; about 3 minutes per version on 2 shared cores)::

    # in a checkout of the old version, then in one of the new version:
    PYTHONPATH=python .venv/bin/python benches/golden_trainers.py \
        run /tmp/g/main.json --ckpt-dir /tmp/g/ck_main --resume-from /tmp/g/ck_main
    PYTHONPATH=python .venv/bin/python benches/golden_trainers.py \
        run /tmp/g/new.json --ckpt-dir /tmp/g/ck_new --resume-from /tmp/g/ck_main
    python benches/golden_trainers.py compare /tmp/g/main.json /tmp/g/new.json

(the new version resumes from the old version's checkpoints: the format is unchanged).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import math
import random
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def seed_everything(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the process RNGs the trainers checkpoint
    random.seed(seed)


def vec(env_id: str, n: int, **kwargs: Any) -> Any:
    import gymnasium as gym

    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync", **kwargs)


def expert_data() -> Any:
    """256 CartPole-shaped transitions whose action is ``obs[2] > 0`` (the tests' expert)."""
    import rlcore

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(256, 4)).astype(np.float32)
    act = (obs[:, 2] > 0).astype(np.int64)
    done = np.zeros(256, bool)
    done[-1] = True
    return rlcore.ReplayBuffer.from_arrays(obs, act, np.ones(256, np.float32), done, np.zeros(256, bool), obs, seed=0)


# --------------------------------------------------------------------------- the cases
# Each builder returns (trainer, save_at): a fresh trainer, and the iteration after which the
# straight run saves its checkpoint.


def dqn_cartpole(prioritized: bool = False) -> tuple[Any, int]:
    import rlcore
    from rlcore.algos import DQN, DQNConfig
    from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig

    envs = vec("CartPole-v1", 2)
    if prioritized:
        buffer = rlcore.PrioritizedReplayBuffer(10_000, num_envs=2, alpha=0.6, beta=0.4, seed=0)
    else:
        buffer = rlcore.ReplayBuffer(10_000, num_envs=2, seed=0)
    agent = DQN.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        DQNConfig(hidden=(64, 64), target_update_interval=50, eps_decay_env_steps=2_000, seed=0),
        device="cpu",
    )
    config = OffPolicyTrainerConfig(
        max_env_steps=3_000,
        collect_env_steps=100,
        utd_ratio=0.25,
        batch_size=64,
        n_step=3 if prioritized else 1,
        warmup_env_steps=500,
        eval_every=10,
        eval_episodes=3,
        per_beta_end=1.0 if prioritized else None,
        seed=0,
    )
    return OffPolicyTrainer(agent, buffer, envs, config=config, eval_envs=vec("CartPole-v1", 2)), 15


def ddpg_her_pointgoal() -> tuple[Any, int]:
    import rlcore
    import rlcore.envs  # noqa: F401 - registers rlcore/PointGoal-v0
    from rlcore.algos import DDPG, DDPGConfig
    from rlcore.trainers import OffPolicyTrainer, OffPolicyTrainerConfig

    envs = vec("rlcore/PointGoal-v0", 2, max_episode_steps=25)
    buffer = rlcore.HERReplayBuffer(10_000, num_envs=2, seed=0, strategy="future", future_k=4, distance_threshold=0.1)
    gamma = 0.98
    agent = DDPG.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        DDPGConfig(
            hidden=(64, 64),
            tau=0.05,
            exploration_noise=0.2,
            random_action_prob=0.3,
            action_l2=1.0,
            q_target_clip=(-1.0 / (1.0 - gamma), 0.0),
            normalize_obs=True,
            seed=0,
        ),
        device="cpu",
    )
    config = OffPolicyTrainerConfig(
        max_env_steps=3_000,
        collect_env_steps=50,
        utd_ratio=0.5,
        batch_size=64,
        gamma=gamma,
        warmup_env_steps=200,
        eval_every=10,
        eval_episodes=4,
        seed=0,
    )
    eval_envs = vec("rlcore/PointGoal-v0", 2, max_episode_steps=25)
    return OffPolicyTrainer(agent, buffer, envs, config=config, eval_envs=eval_envs), 30


def ppo_cartpole() -> tuple[Any, int]:
    from rlcore.algos import PPO, PPOConfig
    from rlcore.trainers import OnPolicyTrainer, OnPolicyTrainerConfig

    envs = vec("CartPole-v1", 4)
    ppo = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(n_epochs=4, minibatch_size=128, seed=0),
        num_envs=4,
        device="cpu",
    )
    config = OnPolicyTrainerConfig(max_env_steps=4_096, num_steps=128, eval_every=2, eval_episodes=3, seed=0)
    return OnPolicyTrainer(ppo, envs, config=config, eval_envs=vec("CartPole-v1", 2)), 4


def gail_cartpole() -> tuple[Any, int]:
    from rlcore.algos import PPOConfig
    from rlcore.algos.gail import GAIL, GAILConfig
    from rlcore.trainers import OnPolicyTrainer, OnPolicyTrainerConfig

    envs = vec("CartPole-v1", 2)
    gail = GAIL.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        expert_data(),
        GAILConfig(disc_updates=2, disc_batch_size=64, seed=0),
        PPOConfig(n_epochs=2, minibatch_size=64, seed=0),
        num_envs=2,
        device="cpu",
    )
    config = OnPolicyTrainerConfig(max_env_steps=2_048, num_steps=64, eval_every=4, eval_episodes=2, seed=0)
    eval_envs = vec("CartPole-v1", 1)
    if importlib.util.find_spec("rlcore.trainers.loop") is not None:  # this branch: GAIL is the on-policy trainer with GAIL's reward
        trainer = OnPolicyTrainer(gail, envs, config=config, eval_envs=eval_envs, reward_fn=gail.reward)
    else:
        from rlcore.trainers import GAILTrainer

        trainer = GAILTrainer(gail, envs, config=config, eval_envs=eval_envs)
    return trainer, 8


def bc_offline() -> tuple[Any, int]:
    import gymnasium as gym
    from rlcore.algos.bc import BC, BCConfig
    from rlcore.trainers import OfflineTrainer, OfflineTrainerConfig

    env = gym.make("CartPole-v1")
    bc = BC.from_spaces(env.observation_space, env.action_space, BCConfig(hidden=(32, 32)))
    config = OfflineTrainerConfig(
        max_grad_steps=2_000, grad_steps_per_iteration=100, batch_size=64, eval_every=5, eval_episodes=3, seed=0
    )
    return OfflineTrainer(bc, expert_data(), config=config, eval_envs=vec("CartPole-v1", 2)), 10


LOCAL_CASES: dict[str, Callable[[], tuple[Any, int]]] = {
    "dqn_cartpole": dqn_cartpole,
    "dqn_per_nstep_cartpole": functools.partial(dqn_cartpole, prioritized=True),
    "ddpg_her_pointgoal": ddpg_her_pointgoal,
    "ppo_cartpole": ppo_cartpole,
    "gail_cartpole": gail_cartpole,
    "bc_offline": bc_offline,
}


# --------------------------------------------------------------------------- recording


def row(stats: Any) -> dict[str, Any]:
    from rlcore.stats import flatten_stats

    flat = flatten_stats(stats)
    return {k: v for k, v in flat.items() if not k.endswith("_s") and k != "time/env_steps_per_s"}


def weight_hashes(state: Any, prefix: str = "") -> dict[str, str]:
    """SHA-256 of every leaf of a state dict (tensors/arrays: dtype, shape, bytes; others: repr)."""
    import torch

    out: dict[str, str] = {}
    if isinstance(state, dict):
        for k, v in state.items():
            out.update(weight_hashes(v, f"{prefix}{k}."))
        return out
    if isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            out.update(weight_hashes(v, f"{prefix}{i}."))
        return out
    if isinstance(state, torch.Tensor):
        a = state.detach().cpu().contiguous()
        data = f"{a.dtype}{tuple(a.shape)}".encode() + a.reshape(-1).view(torch.uint8).numpy().tobytes()
    elif isinstance(state, np.ndarray):
        data = f"{state.dtype}{state.shape}".encode() + np.ascontiguousarray(state).tobytes()
    else:
        data = repr(state).encode()
    out[prefix.rstrip(".")] = hashlib.sha256(data).hexdigest()[:16]
    return out


def leg(trainer: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rows": rows, "weights": weight_hashes(trainer.algorithm.state_dict())}


def dataset_of(trainer: Any) -> Any | None:
    """The fixed dataset a trainer samples from (BC's buffer, GAIL's expert), or ``None``.

    A checkpoint does not hold it (it is data at its own path), so neither does it hold the
    dataset's sampling RNG: a resumed run draws other samples than the straight one. To compare the
    rest exactly, the script saves the dataset (with its RNG) beside the checkpoint and restores it
    on resume."""
    if type(trainer).__name__ == "OfflineTrainer":
        return trainer.buffer
    return getattr(trainer.algorithm, "expert", None)


def run_local(name: str, ckpt_dir: Path | None, resume_from: Path | None) -> dict[str, Any]:
    build = LOCAL_CASES[name]
    seed_everything(0)
    trainer, save_at = build()
    rows = []
    for stats in trainer:
        rows.append(row(stats))
        if ckpt_dir is not None and stats.iteration == save_at:
            trainer.save_checkpoint(ckpt_dir / name)
            if (dataset := dataset_of(trainer)) is not None:
                dataset.save(ckpt_dir / f"{name}.dataset")
    result: dict[str, Any] = {"save_at": save_at, "straight": leg(trainer, rows)}
    if resume_from is not None:
        seed_everything(123)  # disturbed: the checkpoint's RNG states must take over
        trainer, _ = build()
        trainer.load_checkpoint(resume_from / name, trust_env_state=True)
        if (dataset := dataset_of(trainer)) is not None:
            dataset.restore(resume_from / f"{name}.dataset")
        result["resumed"] = leg(trainer, [row(s) for s in trainer])
    return result


def _short_pendulum(n: int) -> Any:
    return vec("Pendulum-v1", n, max_episode_steps=50)


def _ddpg() -> Any:
    import gymnasium as gym
    from rlcore.algos import DDPG, DDPGConfig

    env = gym.make("Pendulum-v1")
    return DDPG.from_spaces(env.observation_space, env.action_space, DDPGConfig(hidden=(16,), seed=0), device="cpu")


def _resumable_parts() -> tuple[Any, ...]:
    """As in tests/test_distributed_trainer.py: one collector, no prefetch, weights published only at the
    start and after a load, and a budget whose last collect call is the only one after a resume at
    300 env steps, so the resumed leg never samples while a collector writes."""
    import rlcore
    import torch
    from rlcore.distributed import DistributedConfig, ShardedReplayBuffer
    from rlcore.trainers import OffPolicyTrainerConfig

    torch.manual_seed(0)
    algorithm = _ddpg()
    buf = ShardedReplayBuffer(functools.partial(rlcore.ReplayBuffer, 1_000), num_shards=2, num_envs=1, seed=0)
    config = OffPolicyTrainerConfig(
        max_env_steps=400, batch_size=32, utd_ratio=0.2, warmup_env_steps=100, eval_every=2, eval_episodes=1, seed=3
    )
    dist = DistributedConfig(
        num_collectors=1, collect_env_steps=100, weight_sync_every=10**6, chunk_rows=50, prefetch=False
    )
    return algorithm, buf, config, dist, _short_pendulum(1)


def run_distributed(ckpt_dir: Path | None, resume_from: Path | None) -> dict[str, Any]:
    """Straight run to iteration 3 (saved, not compared), then the deterministic resumed leg."""
    import ray
    from rlcore.distributed import DistributedTrainer

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    make_envs = functools.partial(_short_pendulum, 1)
    result: dict[str, Any] = {"save_at": 3}
    try:
        if ckpt_dir is not None:
            algorithm, buf, config, dist, eval_envs = _resumable_parts()
            first = DistributedTrainer(algorithm, buf, make_envs, _ddpg, config=config, dist=dist, eval_envs=eval_envs)
            for _ in range(3):
                next(first)
            first.close()
            first.save_checkpoint(ckpt_dir / "distributed_ddpg_pendulum")
            first.buffer.close()
        if resume_from is not None:
            algorithm, buf, config, dist, eval_envs = _resumable_parts()
            seed_everything(123)
            trainer = DistributedTrainer.resume(
                resume_from / "distributed_ddpg_pendulum",
                algorithm,
                buf,
                make_envs,
                _ddpg,
                config=config,
                dist=dist,
                eval_envs=eval_envs,
            )
            rows = [row(s) for s in trainer]
            trainer.close()
            result["resumed"] = leg(trainer, rows)
            trainer.buffer.close()
    finally:
        ray.shutdown()
    return result


def cmd_run(args: argparse.Namespace) -> None:
    import rlcore
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the resume-without-snapshot and deprecation notes
    out: dict[str, Any] = {"rlcore": str(Path(rlcore.__file__).parent), "cases": {}}
    names = args.only or [*LOCAL_CASES, "distributed_ddpg_pendulum"]
    for name in names:
        if args.ckpt_dir is not None:
            args.ckpt_dir.mkdir(parents=True, exist_ok=True)
        if name == "distributed_ddpg_pendulum":
            out["cases"][name] = run_distributed(args.ckpt_dir, args.resume_from)
        else:
            out["cases"][name] = run_local(name, args.ckpt_dir, args.resume_from)
        print(f"{name}: done", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))


# --------------------------------------------------------------------------- comparing


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff_rows(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> list[str]:
    if len(rows_a) != len(rows_b):
        return [f"{len(rows_a)} vs {len(rows_b)} iterations"]
    out = []
    for i, (a, b) in enumerate(zip(rows_a, rows_b, strict=True)):
        for k in sorted(set(a) | set(b)):
            if not same(a.get(k), b.get(k)):
                out.append(f"iteration {i + 1} {k}: {a.get(k)!r} vs {b.get(k)!r}")
    return out


def diff_weights(wa: dict[str, str], wb: dict[str, str]) -> list[str]:
    return [f"weights {k}: {wa.get(k)} vs {wb.get(k)}" for k in sorted(set(wa) | set(wb)) if wa.get(k) != wb.get(k)]


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    print(f"A = {a['rlcore']}\nB = {b['rlcore']}")
    failures = 0
    for name in a["cases"]:
        ca, cb = a["cases"][name], b["cases"].get(name)
        if cb is None:
            print(f"{name}: missing in B")
            failures += 1
            continue
        checks: list[tuple[str, list[str], int]] = []
        for which in ("straight", "resumed"):
            if which in ca and which in cb:
                d = diff_rows(ca[which]["rows"], cb[which]["rows"]) + diff_weights(
                    ca[which]["weights"], cb[which]["weights"]
                )
                checks.append((f"{which} A==B", d, len(ca[which]["rows"])))
        for label, c in (("A", ca), ("B", cb)):
            if "straight" in c and "resumed" in c:
                tail = c["straight"]["rows"][c["save_at"] :]
                d = diff_rows(tail, c["resumed"]["rows"]) + diff_weights(
                    c["straight"]["weights"], c["resumed"]["weights"]
                )
                checks.append((f"{label} resumed==straight tail", d, len(tail)))
        for label, d, n in checks:
            status = "identical" if not d else f"{len(d)} differences"
            print(f"{name:26s} {label:26s} {n:3d} iterations: {status}")
            for line in d[:10]:
                print(f"    {line}")
            failures += bool(d)
    print("ALL IDENTICAL" if failures == 0 else f"{failures} checks differ")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="train every case with the rlcore on the path; write OUT")
    run.add_argument("out", type=Path)
    run.add_argument("--ckpt-dir", type=Path, default=None, help="save each straight run's checkpoint here")
    run.add_argument("--resume-from", type=Path, default=None, help="resume each case from the checkpoint here")
    run.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    cmp = sub.add_parser("compare", help="compare two outputs of run")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.cmd == "run":
        cmd_run(args)
        return 0
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
