"""rlcore.distributed's trainer on a loopback Ray (2 CPUs): a killed collector actor is restarted
without losing stored rows, the local Ray listens on the loopback only, a checkpoint is plain files
that restore every shard, a resume continues exactly, and shutdown leaves no process behind.

One Ray session serves the whole module (starting Ray costs seconds; tests/local_ray.py); the last
Ray test shuts it down.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest
import rlcore

ray = pytest.importorskip("ray")

from local_ray import local_ray  # noqa: E402
from rlcore.distributed import (  # noqa: E402
    DistributedConfig,
    DistributedTrainer,
    ShardedReplayBuffer,
    init_ray,
)
from rlcore.stats import not_logged  # noqa: E402

F32 = np.float32
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module")
def ray_session():
    yield from local_ray(sys.modules[__name__])


def _descendants(pid: int) -> set[int]:
    """Pids of every live descendant process of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# collectors


@dataclass(frozen=True)
class _Stats:
    loss: float
    priorities: np.ndarray | None = not_logged()


class _RandomAlgo:
    """A stand-in algorithm: random actions, a no-op update (the test is about the plumbing)."""

    def __init__(self) -> None:
        import torch

        self.device = torch.device("cpu")
        self.net = torch.nn.Linear(3, 1)
        self.rng = np.random.default_rng(0)

    def act(self, obs, *, deterministic=False):
        return self.rng.uniform(-2, 2, size=(len(obs), 1)).astype(F32)

    def update(self, batch):
        assert batch.obs.shape[0] == 64
        priorities = None
        if batch.weights is not None:  # priorities flow back through the trainer
            assert batch.weights.dtype == np.float32 and (batch.weights <= 1).all()
            priorities = np.abs(batch.rew).astype(np.float32) + 0.1
        return _Stats(loss=float(batch.rew.mean()), priorities=priorities)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        assert state == {}


def _make_envs(n):
    import gymnasium as gym

    return gym.make_vec("Pendulum-v1", num_envs=n, vectorization_mode="sync")


def test_killed_collector_restarts_and_keeps_rows(ray_session):
    """A PER run: collectors write, the learner samples and sends priorities back; one collector is
    killed mid-run."""
    from rlcore.trainers.off_policy import OffPolicyTrainerConfig

    buf = ShardedReplayBuffer(
        functools.partial(rlcore.PrioritizedReplayBuffer, 20_000), num_shards=2, num_envs=2, seed=0
    )
    trainer = DistributedTrainer(
        _RandomAlgo(),
        buf,
        functools.partial(_make_envs, 1),
        _RandomAlgo,
        config=OffPolicyTrainerConfig(
            max_env_steps=2_400,
            batch_size=64,
            utd_ratio=0.1,
            warmup_env_steps=200,
            per_beta_end=1.0,
            seed=0,
        ),
        dist=DistributedConfig(num_collectors=2, collect_env_steps=300, weight_sync_every=10, chunk_rows=100),
    )
    victim = trainer.collectors[0]
    pid = ray.get(victim.pid.remote())
    killed_at = None
    for stats in trainer:
        if killed_at is None and stats.env_steps >= 800:
            stored_before = len(buf)
            killed_at = stats.env_steps
            ray.kill(victim, no_restart=False)
        if killed_at is not None:
            assert len(buf) >= stored_before  # nothing stored is lost
    assert killed_at is not None
    assert trainer.env_steps == 2_400  # the run went on to the end
    assert trainer.collector_failures + trainer.collector_restarts >= 1
    assert ray.get(victim.pid.remote()) != pid  # a new process serves the same handle
    assert len(buf) >= trainer.env_steps  # every completed collect call is stored
    assert trainer.grad_steps > 0
    assert buf.beta == 1.0
    trainer.close()
    buf.close()


# ---------------------------------------------------------------------------------------------
# the local Ray session


_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _listening_hosts(pids: set[int]) -> list[str]:
    """Hex host of every TCP socket in LISTEN state that one of ``pids`` holds (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    hosts = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    hosts.append(fields[1].split(":")[0])
    return hosts


def test_local_ray_listens_on_loopback_only(ray_session):
    """init_ray() without an address: Ray's node, GCS and every listening socket of its processes
    are on 127.0.0.1 (Ray turns a requested 127.0.0.1 into the routable address unless told not to;
    this fixture imported Ray before init_ray, the harder case)."""
    assert ray.get_runtime_context().gcs_address.rsplit(":", 1)[0] == "127.0.0.1"
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    hosts = _listening_hosts(_descendants(os.getpid()) | {os.getpid()})
    assert hosts and set(hosts) <= _LOOPBACK, hosts
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ  # restored after the start


def test_init_ray_with_an_address_joins_it_unchanged(monkeypatch):
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    init_ray("auto")
    init_ray("10.0.0.5:6379", log_to_driver=False)
    assert calls == [{"address": "auto"}, {"address": "10.0.0.5:6379", "log_to_driver": False}]


# ---------------------------------------------------------------------------------------------
# checkpoints and resume


def _dist_trainer(buf, **cfg):
    from rlcore.trainers.off_policy import OffPolicyTrainerConfig

    return DistributedTrainer(
        _RandomAlgo(),
        buf,
        functools.partial(_make_envs, 1),
        _RandomAlgo,
        config=OffPolicyTrainerConfig(batch_size=64, utd_ratio=0.1, warmup_env_steps=100, seed=0, **cfg),
        dist=DistributedConfig(num_collectors=2, collect_env_steps=100, weight_sync_every=10, chunk_rows=50),
    )


def _stop(trainer) -> None:
    """Close the trainer and wait until its collector actors are gone (a killed actor can still
    finish a write for a moment), so the shards no longer change."""
    collectors = list(trainer.collectors)
    trainer.close()
    for c in collectors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(c.pid.remote(), timeout=30)


def _per_buffer():
    return ShardedReplayBuffer(
        functools.partial(rlcore.PrioritizedReplayBuffer, 2_000), num_shards=2, num_envs=2, seed=0
    )


def _same_shards(a, b) -> None:
    sa, sb = a.state_dict()["shards"], b.state_dict()["shards"]
    for x, y in zip(sa, sb, strict=True):
        assert x["config"] == y["config"] and x["arrays"].keys() == y["arrays"].keys()
        for k in x["arrays"]:
            np.testing.assert_array_equal(x["arrays"][k], y["arrays"][k])


def test_distributed_checkpoint_is_plain_files_and_restores_every_shard(ray_session, tmp_path):
    from rlcore.errors import CheckpointError

    buf = _per_buffer()
    trainer = _dist_trainer(buf, max_env_steps=1_000, per_beta_end=1.0)
    for _ in range(3):
        next(trainer)
    _stop(trainer)  # no collect call in flight: the shards stay as saved
    path = trainer.save_checkpoint(tmp_path / "ckpt")
    names = {p.name for p in path.rglob("*") if p.is_file()}
    assert "sharded.json" in names and not [n for n in names if n.endswith((".pkl", ".pickle"))]
    stored, beta = len(buf), buf.beta

    fresh_buf = _per_buffer()
    fresh = _dist_trainer(fresh_buf, max_env_steps=1_000, per_beta_end=1.0)
    fresh.load_checkpoint(path)
    assert (fresh.iteration, fresh.env_steps, fresh.grad_steps) == (3, trainer.env_steps, trainer.grad_steps)
    assert len(fresh_buf) == stored and fresh_buf.beta == beta
    _same_shards(buf, fresh_buf)
    s = next(fresh)
    assert s.iteration == 4 and s.env_steps > trainer.env_steps
    with pytest.raises(rlcore.errors.ApiUsageError, match="freshly built"):
        fresh.load_checkpoint(path)
    fresh.close()

    # a crafted trainer.pt and an old-format directory: refused, nothing runs
    marker = tmp_path / "marker"

    class Plant:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    gen = path / json.loads((path / "checkpoint.json").read_text())["data_dir"]
    good = (gen / "trainer.pt").read_bytes()
    import torch

    torch.save(
        {"format": "rlcore-checkpoint", "version": 2, "trainer": "distributed", "algorithm": Plant()},
        gen / "trainer.pt",
    )
    from generation_saves import resealed

    resealed(path)  # past the checksums, which only catch accidents: weights_only refuses it
    other = _dist_trainer(_per_buffer(), max_env_steps=1_000)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        other.load_checkpoint(path)
    (gen / "trainer.pt").write_bytes(good)
    old = tmp_path / "old"
    old.mkdir()
    torch.save({"dist": {}, "algorithm": Plant()}, old / "trainer.pt")
    (old / "buffer.pkl").write_bytes(__import__("pickle").dumps(Plant()))
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):  # pickles without a manifest: never opened
        other.load_checkpoint(old)
    assert not marker.exists()

    # a sharded save whose manifest or files try to leave it
    shards = gen / "buffer"
    manifest = json.loads((shards / "sharded.json").read_text())
    (shards / "sharded.json").write_text(json.dumps({**manifest, "data_dir": ".."}))
    with pytest.raises(rlcore.errors.SaveFileError, match="plain name"):
        other.buffer.restore(shards)
    (shards / "sharded.json").write_text(json.dumps(manifest))
    victim = shards / manifest["data_dir"] / manifest["shards"][0]
    os.symlink("/etc/passwd", victim / "passwd")
    with pytest.raises(rlcore.errors.SaveFileError, match="link"):
        other.buffer.restore(shards)
    other.close()


def _short_pendulum(n):
    import gymnasium as gym

    return gym.make_vec("Pendulum-v1", num_envs=n, vectorization_mode="sync", max_episode_steps=50)


def _ddpg():
    import gymnasium as gym
    from rlcore.algos import DDPG, DDPGConfig

    env = gym.make("Pendulum-v1")
    return DDPG.from_spaces(
        env.observation_space, env.action_space, DDPGConfig(hidden=(16,), seed=0), device="cpu"
    )


def _resumable_parts():
    """One collector, no prefetch, weights published only at the start (and after a load), and a
    budget whose last collect call is the only one after a resume at 300 env steps: the learner
    never samples while a collector writes, so a resumed run is deterministic."""
    import torch
    from rlcore.trainers.off_policy import OffPolicyTrainerConfig

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


def test_distributed_resume_continues_exactly_with_fresh_episodes_from_the_resume_seed(ray_session, tmp_path):
    """DistributedTrainer.resume goes through the shared trainer loop: counters, gradient-step
    credit, evaluation count, algorithm and RNGs come back; the collectors start fresh episodes
    from resume_seed(seed, iteration) + 100 k with the restored weights (their envs ran in actors:
    no snapshot); and two resumes of one checkpoint give the same stats."""
    import torch
    from rlcore.collect import Collector
    from rlcore.distributed.workers import _load_policy_weights, policy_weights
    from rlcore.stats import EpisodeStats, flatten_stats
    from rlcore.trainers.checkpoint import resume_seed

    algorithm, buf, config, dist, eval_envs = _resumable_parts()
    make_envs = functools.partial(_short_pendulum, 1)
    first = DistributedTrainer(algorithm, buf, make_envs, _ddpg, config=config, dist=dist, eval_envs=eval_envs)
    for _ in range(3):
        next(first)
    _stop(first)
    path = first.save_checkpoint(tmp_path / "ckpt")
    saved = (first.iteration, first.env_steps, first.episodes, first.grad_steps)
    assert saved[:2] == (3, 300) and first.grad_steps > 0 and first._evaluations == 1

    def resumed() -> tuple[DistributedTrainer, list]:
        algorithm, buf, config, dist, eval_envs = _resumable_parts()
        torch.manual_seed(123)  # disturb the learner's RNG: the load restores it
        trainer = DistributedTrainer.resume(
            path, algorithm, buf, make_envs, _ddpg, config=config, dist=dist, eval_envs=eval_envs
        )
        assert (trainer.iteration, trainer.env_steps, trainer.episodes, trainer.grad_steps) == saved
        assert trainer.budget.credit == first.budget.credit and trainer._evaluations == 1
        for name, tensor in first.algorithm.state_dict()["actor"].items():
            torch.testing.assert_close(trainer.algorithm.state_dict()["actor"][name], tensor, rtol=0, atol=0)
        stats = list(trainer)
        trainer.close()
        return trainer, stats

    b, stats_b = resumed()
    c, stats_c = resumed()
    assert [s.iteration for s in stats_b] == [4] and stats_b[0].env_steps == 400 and stats_b[0].eval is not None
    assert b._evaluations == 2
    comparable = [{k: v for k, v in flatten_stats(s).items() if not k.endswith("_s")} for s in stats_b]
    assert comparable == [{k: v for k, v in flatten_stats(s).items() if not k.endswith("_s")} for s in stats_c]

    # the resumed collector: fresh episodes from resume_seed(3, 3) + 100 * 0, acting with the saved weights
    replica = _ddpg()
    _load_policy_weights(replica, policy_weights(first.algorithm))
    local = Collector(_short_pendulum(1))
    local.reset(seed=resume_seed(3, 3))
    want = local.collect(100, policy=lambda o: replica.act(o, deterministic=False))
    assert len(want.episode_returns) == 2
    expected = EpisodeStats.from_episodes(want.episode_returns, want.episode_lengths, ())
    got = stats_b[0].rollout
    assert (got.episodes, got.return_mean, got.return_std, got.length_mean) == (
        expected.episodes,
        expected.return_mean,
        expected.return_std,
        expected.length_mean,
    )
    first.buffer.close()
    b.buffer.close()
    c.buffer.close()


# ---------------------------------------------------------------------------------------------
# last: shutting Ray down leaves no process behind


def test_shutdown_leaves_no_process(ray_session):
    buf = ShardedReplayBuffer(functools.partial(rlcore.ReplayBuffer, 100), num_shards=2, num_envs=1)
    assert len(buf) == 0
    before = _descendants(os.getpid())
    assert before  # Ray's own processes (gcs, raylet, workers) are children of this driver
    ray.shutdown()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in before):
        time.sleep(0.2)
    assert not [p for p in before if _alive(p)]


def test_cli_rejects_distributed_on_policy(capsys):
    from rlcore.cli import main

    assert main(["train", "--algo", "ppo", "--env", "CartPole-v1", "--distributed"]) == 2
    assert "--distributed does not apply to --algo ppo (on-policy); it is for ddpg, dqn, sac, td3" in capsys.readouterr().err
