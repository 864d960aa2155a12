"""Local D4RL-format offline datasets made with rlcore itself: ``medium``, ``medium-replay``, ``expert``.

One command per env (datasets are generated, never committed)::

    python benches/offline_datasets.py --env Hopper-v5 --out data/offline/hopper --medium-return 1300
    python benches/offline_datasets.py --env HalfCheetah-v5 --out data/offline/halfcheetah --medium-return 4000
    python benches/offline_datasets.py --env Pendulum-v1 --out data/offline --env-steps 8000

Each writes, under ``--out``, three D4RL-format HDF5 files named as D4RL names its tasks
(``hopper-medium.hdf5``, ``hopper-medium-replay.hdf5``, ``hopper-expert.hdf5``; observations
float32, with ``next_observations``) and ``references.json``:

* SAC (rlcore, one env, one thread) trains with the env's ``rlcore train`` preset
  (:func:`rlcore.presets.preset_for`: on MuJoCo Tianshou's settings, 10k random warm-up steps;
  on Pendulum lr 1e-3 and 1k warm-up steps). From ``--medium-at`` env steps on, every
  ``--check-every`` env steps, its deterministic policy plays ``--check-episodes`` episodes; the
  first time their mean return reaches ``--medium-return`` that policy is kept: the *medium* policy.
  On MuJoCo the default target is 40 % of the committed expert's recorded return
  (``experts/manifest.json``: Hopper 1330, HalfCheetah 4024), in the issue's third-to-half range.
* ``ENV-medium``: ``--transitions`` steps of the medium policy with sampled (stochastic) actions,
  as D4RL's medium sets.
* ``ENV-medium-replay``: the SAC run's replay buffer up to the moment the medium policy was kept
  (its random warm-up steps included), with next observations, as D4RL's medium-replay sets.
* ``ENV-expert``: ``--transitions`` steps of the expert policy, which on MuJoCo is the committed
  ``experts/ENV-sac.npz`` loaded with :func:`rlcore.load_policy` (``--expert``). Such a file holds
  the actor's deterministic policy only, so the expert data has deterministic actions (D4RL's expert
  sets sampled theirs from a stochastic SAC policy): less action coverage than D4RL's. Without an
  expert file (Pendulum) SAC trains on to ``--env-steps`` and the final policy, deterministic, is
  the expert.
* ``references.json``: D4RL's normalisation references measured here: the mean return of uniform
  random actions and of the expert policy (``--ref-episodes`` episodes each), the medium policy's
  deterministic return on fresh episodes and the env step it was kept at, per file its transitions,
  episodes and mean return of its complete episodes, D4RL's own reference returns of the task
  (for comparison only), the wall time and the command.

Rollouts end every episode by termination or time limit; the last episode of a file is cut at
``--transitions`` steps and its last step flagged as a timeout (truncated: targets bootstrap from
its next observation). ``--transitions`` defaults to 200k on MuJoCo (D4RL's files hold 1M: five
times the CPU time of rolling out, and of every offline epoch over them, on the 2-core machine
these are made on) and to 10k on Pendulum (50 episodes). MuJoCo SAC stops as soon as the medium
policy is kept (``--env-steps`` is the most it may take; it fails with the best return seen if the
target is not reached); Pendulum trains to ``--env-steps``.

``--from-run RUN_DIR`` takes the medium policy and medium-replay from a checkpoint of a MuJoCo
campaign run instead of training SAC here: ``RUN_DIR`` holds the run's ``config.json`` and a
``checkpoint/`` (``rlcore train`` checkpoints every 25k env steps, replay buffer included); a copy
of the checkpoint at the env step where the run's evaluation is in the medium range serves. The
SAC policy of that checkpoint is the medium policy, its buffer the medium-replay file; the expert
is the committed expert file as above::

    python benches/offline_datasets.py --env Hopper-v5 --out data/offline/hopper --from-run runs/sac-hopper-s0-at-75k

``--random-only`` skips all of that and writes ``ENV-random.hdf5`` (D4RL's random sets:
``--transitions`` steps of uniform random actions) and a ``references.json`` with the random
reference return only: files of the right shapes in seconds, for ``offline_d3rlpy.py speed``
(a gradient step costs the same whatever the data hold), not for scores::

    python benches/offline_datasets.py --env Hopper-v5 --out data/offline/hopper-random --random-only --transitions 50000

``benches/offline_d3rlpy.py`` (``speed``, ``scores``) reads the env and the files from
``references.json``. Not part of the test suite."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import rlcore
import torch
from rlcore.algos.sac import SAC, SACConfig
from rlcore.datasets import D4RL_REFERENCE_RETURNS, write_d4rl
from rlcore.presets import MUJOCO_ENVS, preset_for
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

EXPERTS = Path(__file__).resolve().parents[1] / "experts"

Policy = Callable[[np.ndarray], np.ndarray]
"""``policy(obs [1, O]) -> act [1, A]``."""


# -- what each env family gets by default -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The defaults of one env's datasets (each overridable by a flag)."""

    sac: SACConfig
    """SAC's config: the env's ``rlcore train`` preset (Pendulum: lr 1e-3, as the first datasets)."""
    trainer: OffPolicyTrainerConfig
    """The preset's schedule (update-to-data ratio, batch size, warm-up); length and seed set per run."""
    env_steps: int
    """SAC env steps: the whole run without an expert file, else the most before giving up."""
    medium_return: float
    """Mean deterministic return at which the medium policy is kept."""
    medium_at: int
    """First env step at which the medium check runs."""
    check_every: int
    """Env steps between medium checks."""
    check_episodes: int
    """Deterministic episodes per medium check."""
    transitions: int
    """Steps per rolled-out file (medium, expert)."""
    expert: Path | None
    """The expert policy file (``rlcore export-policy``); ``None``: SAC's final policy."""


def recipe(env_id: str) -> Recipe:
    """The defaults for ``env_id``: MuJoCo locomotion (with the committed expert of ``experts/``
    when there is one) or Pendulum.

    Raises:
        ValueError: another env family (no tested settings).
    """
    preset = preset_for(env_id, her=False)
    if env_id.startswith("Pendulum"):
        return Recipe(
            sac=SACConfig(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3),
            trainer=preset.trainer,
            env_steps=10_000,
            medium_return=-700.0,
            medium_at=2_000,
            check_every=250,
            check_episodes=3,
            transitions=10_000,
            expert=None,
        )
    if env_id.startswith(MUJOCO_ENVS):
        expert = EXPERTS / f"{env_id}-sac.npz"
        manifest = json.loads((EXPERTS / "manifest.json").read_text())["experts"]
        recorded = {e["env"]: float(e["eval_return_mean"]) for e in manifest}
        return Recipe(
            sac=preset.configs["sac"],  # type: ignore[arg-type]
            trainer=preset.trainer,
            env_steps=300_000,
            medium_return=round(0.4 * recorded[env_id]) if env_id in recorded else 1000.0,
            medium_at=preset.trainer.warmup_env_steps,
            check_every=2_500,
            check_episodes=preset.trainer.eval_episodes,
            transitions=200_000,
            expert=expert if expert.is_file() else None,
        )
    raise ValueError(f"{env_id}: datasets are made for MuJoCo locomotion envs and Pendulum only")


def dataset_prefix(env_id: str) -> str:
    """D4RL's task name of an env id: ``Hopper-v5`` -> ``hopper``, ``HalfCheetah-v5`` -> ``halfcheetah``."""
    return env_id.split("-v")[0].split("/")[-1].lower()


# -- rollouts ---------------------------------------------------------------------------------------


def rollouts(
    env_id: str,
    policy: Policy,
    *,
    seed: int,
    episodes: int | None = None,
    transitions: int | None = None,
) -> tuple[dict[str, np.ndarray], list[float]]:
    """Play ``policy`` on fresh envs (reset seeds ``seed``, ``seed + 1``, ...) for ``episodes``
    whole episodes or exactly ``transitions`` steps, whichever is given.

    Returns:
        the steps as arrays of T rows: ``obs`` float32 ``[T, O]``, ``act`` float32 ``[T, A]``,
        ``rew`` float32 ``[T]``, ``terminated``/``truncated`` bool ``[T]`` (time limits and, with
        ``transitions``, the cut last step are truncated), ``obs_next`` float32 ``[T, O]``; and the
        undiscounted return of each complete episode (a cut one not included).

    Raises:
        ValueError: neither or both of ``episodes`` and ``transitions``.
    """
    if (episodes is None) == (transitions is None):
        raise ValueError("rollouts: give episodes or transitions, one of them")
    env = gym.make(env_id)
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "act", "rew", "terminated", "truncated", "obs_next")}
    returns: list[float] = []
    k = 0
    while (episodes is None or k < episodes) and (transitions is None or len(rows["rew"]) < transitions):
        obs, _ = env.reset(seed=seed + k)
        done, ret = False, 0.0
        while not done:
            act = np.asarray(policy(obs[None]))[0]
            nxt, rew, term, trunc, _ = env.step(act)
            cut = transitions is not None and len(rows["rew"]) + 1 == transitions
            for key, v in zip(rows, (obs, act, rew, term, trunc or cut, nxt), strict=True):
                rows[key].append(v)
            ret += float(rew)
            obs, done = nxt, term or trunc or cut
        if term or trunc:
            returns.append(ret)
        k += 1
    env.close()
    arrays = {k: np.asarray(v) for k, v in rows.items()}
    for key in ("obs", "act", "rew", "obs_next"):
        arrays[key] = arrays[key].astype(np.float32)
    return arrays, returns


def mean_return(env_id: str, policy: Policy, episodes: int, seed: int) -> float:
    """The mean undiscounted return of ``episodes`` episodes of ``policy`` (reset seeds from ``seed``)."""
    return float(np.mean(rollouts(env_id, policy, episodes=episodes, seed=seed)[1]))


def write(path: Path, steps: dict[str, np.ndarray], **metadata: Any) -> None:
    """One D4RL-format file (with ``next_observations`` and ``metadata/*``) from :func:`rollouts`' arrays."""
    write_d4rl(
        path,
        obs=steps["obs"].astype(np.float32),
        act=steps["act"].astype(np.float32),
        rew=steps["rew"],
        terminated=steps["terminated"],
        truncated=steps["truncated"],
        obs_next=steps["obs_next"].astype(np.float32),
        metadata=metadata,
    )


def file_summary(steps: dict[str, np.ndarray], returns: list[float]) -> dict[str, Any]:
    """A file's line in references.json: transitions, complete episodes, their mean return."""
    return {
        "transitions": int(steps["rew"].shape[0]),
        "episodes": len(returns),
        "return_mean": round(float(np.mean(returns)), 1) if returns else None,
    }


# -- the command ------------------------------------------------------------------------------------


@dataclass
class Medium:
    """The medium policy and the replay it was trained on."""

    sac: Any
    """The SAC learner (acts with sampled or deterministic actions)."""
    env_steps: int
    """Env steps SAC had taken."""
    replay: dict[str, np.ndarray]
    """Its replay buffer up to then, as :func:`rollouts`' arrays."""
    source: str
    """Where it came from, for the files' metadata and references.json."""
    final: Any = None
    """SAC at the end of its run when it trained on past the medium point (no expert file), else ``None``."""


def buffer_rows(buffer: rlcore.ReplayBuffer) -> dict[str, np.ndarray]:
    """Every stored transition of ``buffer`` in storage order (one env: the order of collection)."""
    rows = np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity))))
    b = buffer.sample_at(rows)
    return {
        "obs": np.asarray(b.obs), "act": np.asarray(b.act), "rew": np.asarray(b.rew),
        "terminated": np.asarray(b.terminated), "truncated": np.asarray(b.truncated),
        "obs_next": np.asarray(b.obs_next),
    }  # fmt: skip


def train_medium(env_id: str, r: Recipe, args: argparse.Namespace, t_start: float) -> Medium:
    """Train SAC until its deterministic policy reaches ``r.medium_return`` (module docstring);
    without an expert file, train on to ``r.env_steps`` for the final (expert) policy."""
    seed = args.seed
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)])
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    assert isinstance(act_space, gym.spaces.Box)  # SAC: continuous actions
    sac = SAC.from_spaces(obs_space, act_space, dataclasses.replace(r.sac, seed=seed), device="cpu")
    buffer = rlcore.ReplayBuffer.from_spaces(obs_space, act_space, capacity=r.env_steps + 1000, seed=seed)
    warmup = args.warmup_env_steps if args.warmup_env_steps is not None else r.trainer.warmup_env_steps
    config = dataclasses.replace(r.trainer, max_env_steps=r.env_steps, warmup_env_steps=warmup, seed=seed)
    medium: Medium | None = None
    best = -np.inf
    for stats in OffPolicyTrainer(sac, buffer, envs, config=config):
        n = stats.env_steps
        if medium is None and n >= r.medium_at and n % r.check_every == 0:
            ret = mean_return(env_id, lambda o: sac.act(o, deterministic=True), r.check_episodes, 9_000)
            best = max(best, ret)
            print(
                f"env step {n}: deterministic return {ret:.1f} ({time.perf_counter() - t_start:.0f} s)",
                flush=True,
            )
            if ret >= r.medium_return:
                medium = Medium(copy.deepcopy(sac), n, buffer_rows(buffer), f"SAC at env step {n}")
                if r.expert is not None:
                    break
    envs.close()
    if medium is None:
        sys.exit(
            f"{env_id}: SAC did not reach the medium return {r.medium_return} in {r.env_steps} env steps "
            f"(best check {best:.1f}); raise --env-steps or lower --medium-return"
        )
    if r.expert is None:
        medium.final = sac
    return medium


def medium_from_run(env_id: str, run_dir: Path) -> Medium:
    """The medium policy and replay of a checkpointed ``rlcore train --algo sac`` run directory
    (``config.json`` and ``checkpoint/``, e.g. a copy of a campaign run's checkpoint at some env
    step): its SAC and the checkpoint's replay buffer.

    Raises:
        SystemExit: the run is not a SAC run on ``env_id``, or its checkpoint holds no buffer.
    """
    from rlcore.trainers import checkpoint as ckpt_format

    policy = rlcore.load_policy(run_dir)
    args = json.loads((run_dir / "config.json").read_text())["args"]
    if args["algo"] != "sac" or args["env"] != env_id:
        sys.exit(f"{run_dir}: a {args['algo']} run on {args['env']}, not SAC on {env_id}")
    ckpt = ckpt_format.load(run_dir / "checkpoint")
    if not ckpt.has_buffer:
        sys.exit(f"{run_dir}/checkpoint holds no replay buffer")
    buffer = rlcore.ReplayBuffer.load(ckpt.data_dir / ckpt_format.BUFFER_DIR)
    n = int(ckpt.counter("env_steps"))
    source = f"rlcore train --algo sac --env {env_id} --seed {args['seed']}, checkpoint at env step {n}"
    return Medium(policy.algorithm, n, buffer_rows(buffer), source)


def make_datasets(args: argparse.Namespace) -> dict[str, Any]:
    """Keep a medium SAC policy (trained here, or ``--from-run``'s), write the three files and
    references.json (module docstring)."""
    t_start = time.perf_counter()
    env_id, out, seed = args.env, Path(args.out), args.seed
    out.mkdir(parents=True, exist_ok=True)
    prefix = dataset_prefix(env_id)
    base = recipe(env_id)
    flags = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(Recipe) if f.name != "expert"}
    r = dataclasses.replace(base, **{k: v for k, v in flags.items() if v is not None})
    if args.expert is not None:
        r = dataclasses.replace(r, expert=None if args.expert == "none" else Path(args.expert))
    expert = rlcore.load_policy(r.expert) if r.expert is not None else None
    if args.from_run is not None and expert is None:
        sys.exit("--from-run needs an expert policy file (--expert): the run's checkpoint is the medium policy")
    act_space = gym.make(env_id).action_space
    torch.set_num_threads(1)
    torch.manual_seed(seed)

    medium = medium_from_run(env_id, Path(args.from_run)) if args.from_run else train_medium(env_id, r, args, t_start)
    files: dict[str, dict[str, Any]] = {}
    name = f"{prefix}-medium-replay"
    replay = medium.replay
    write(out / f"{name}.hdf5", replay, env=env_id, policy=f"replay buffer of {medium.source}")
    ends = replay["terminated"] | replay["truncated"]
    files[name] = {
        "transitions": int(replay["rew"].shape[0]),
        "episodes": int(ends.sum()),
        "return_mean": round(float(np.mean(_episode_returns(replay["rew"], ends))), 1),
    }

    name = f"{prefix}-medium"
    steps, returns = rollouts(
        env_id, lambda o: medium.sac.act(o, deterministic=False), transitions=r.transitions, seed=1_000
    )
    write(out / f"{name}.hdf5", steps, env=env_id, policy=f"{medium.source}, sampled actions")
    files[name] = file_summary(steps, returns)

    final = medium.final
    expert_policy: Policy = expert if expert is not None else (lambda o: final.act(o, deterministic=True))
    expert_source = _shown(r.expert) if r.expert is not None else f"SAC at env step {r.env_steps}"
    name = f"{prefix}-expert"
    steps, returns = rollouts(env_id, expert_policy, transitions=r.transitions, seed=2_000)
    write(out / f"{name}.hdf5", steps, env=env_id, policy=f"{expert_source}, deterministic actions")
    files[name] = file_summary(steps, returns)

    rng = np.random.default_rng(seed)
    refs: dict[str, Any] = {
        "env": env_id,
        "random_return": mean_return(
            env_id,
            lambda o: rng.uniform(act_space.low, act_space.high, (1, *act_space.shape)),
            args.ref_episodes,
            5_000,
        ),
        "expert_return": mean_return(env_id, expert_policy, args.ref_episodes, 5_000),
        "expert_policy": expert_source,
        "reference_episodes": args.ref_episodes,
        "d4rl_reference_returns": D4RL_REFERENCE_RETURNS.get(prefix),
        "medium_target_return": r.medium_return,
        "medium_policy": medium.source,
        "medium_at_env_steps": medium.env_steps,
        "medium_policy_return": mean_return(
            env_id, lambda o: medium.sac.act(o, deterministic=True), args.ref_episodes, 5_000
        ),
        "sac_env_steps": medium.env_steps if expert is not None else r.env_steps,
        "seed": seed,
        "files": files,
        "wall_s": round(time.perf_counter() - t_start, 1),
        "command": shlex.join(["python", "benches/offline_datasets.py", *sys.argv[1:]]),
    }
    (out / "references.json").write_text(json.dumps(refs, indent=2) + "\n")
    print(json.dumps(refs, indent=2))
    return refs


def make_random_dataset(args: argparse.Namespace) -> dict[str, Any]:
    """``--random-only``: ``ENV-random.hdf5`` of uniform random actions and its references.json."""
    t_start = time.perf_counter()
    env_id, out, seed = args.env, Path(args.out), args.seed
    out.mkdir(parents=True, exist_ok=True)
    act_space = gym.make(env_id).action_space
    assert isinstance(act_space, gym.spaces.Box)
    rng = np.random.default_rng(seed)

    def uniform(obs: np.ndarray) -> np.ndarray:
        return rng.uniform(act_space.low, act_space.high, (1, *act_space.shape)).astype(np.float32)

    transitions = args.transitions if args.transitions is not None else recipe(env_id).transitions
    name = f"{dataset_prefix(env_id)}-random"
    steps, returns = rollouts(env_id, uniform, transitions=transitions, seed=3_000)
    write(out / f"{name}.hdf5", steps, env=env_id, policy="uniform random actions")
    refs: dict[str, Any] = {
        "env": env_id,
        "random_return": mean_return(env_id, uniform, args.ref_episodes, 5_000),
        "reference_episodes": args.ref_episodes,
        "seed": seed,
        "files": {name: file_summary(steps, returns)},
        "wall_s": round(time.perf_counter() - t_start, 1),
        "command": shlex.join(["python", "benches/offline_datasets.py", *sys.argv[1:]]),
    }
    (out / "references.json").write_text(json.dumps(refs, indent=2) + "\n")
    print(json.dumps(refs, indent=2))
    return refs


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (``experts/Hopper-v5-sac.npz``)."""
    path = path.resolve()
    return str(path.relative_to(EXPERTS.parent)) if path.is_relative_to(EXPERTS.parent) else str(path)


def _episode_returns(rew: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Returns of the complete episodes of T steps (``ends``: terminated or truncated ``[T]``)."""
    bounds = np.concatenate([[0], np.flatnonzero(ends) + 1])
    return np.asarray([rew[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env", default="Pendulum-v1", help="gymnasium id: MuJoCo locomotion (-v5) or Pendulum"
    )
    parser.add_argument("--out", default="data/offline", help="directory of the files and references.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, help="SAC env steps (most, with an expert file)")
    parser.add_argument("--warmup-env-steps", type=int, help="random steps before SAC learns (preset's)")
    parser.add_argument(
        "--medium-return", type=float, help="deterministic return that makes the medium policy"
    )
    parser.add_argument("--medium-at", type=int, help="first env step of the medium checks")
    parser.add_argument("--check-every", type=int, help="env steps between medium checks")
    parser.add_argument("--check-episodes", type=int, help="episodes per medium check")
    parser.add_argument(
        "--transitions", type=int, help="steps per rolled-out file (MuJoCo 200k, Pendulum 10k)"
    )
    parser.add_argument(
        "--expert", help="expert policy file (default experts/ENV-sac.npz; 'none': SAC's final)"
    )
    parser.add_argument("--ref-episodes", type=int, default=20, help="episodes per reference return")
    parser.add_argument(
        "--from-run",
        help="a SAC run directory (config.json, checkpoint/ with its buffer) whose policy is the medium one: no training",
    )
    parser.add_argument(
        "--random-only", action="store_true", help="only ENV-random.hdf5 (uniform random actions), no SAC"
    )
    args = parser.parse_args()
    if args.random_only:
        make_random_dataset(args)
    else:
        make_datasets(args)


if __name__ == "__main__":
    main()
