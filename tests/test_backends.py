"""Vector-env backends through the send/recv stepper: gymnasium Sync/Async and EnvPool (lock-step and
asynchronous) store exactly the transitions a plain loop over the same envs and seeds gives;
asynchronous partial batches of a scripted env whose steps take different times; concurrent resets."""

from __future__ import annotations

import heapq
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from rlcore.collect.collector import Collector
from rlcore.envs import EnvPoolBackend, make_vec
from rlcore.envs.robotics import register_robotics
from rlcore.errors import ApiUsageError, InvalidValueError

SEED = 7


def flat(obs: Any) -> np.ndarray:
    """[K, D] float64 of a batch of observations (dict values concatenated in key order)."""
    if isinstance(obs, Mapping):
        return np.concatenate(
            [np.asarray(obs[k], np.float64).reshape(len(obs[k]), -1) for k in sorted(obs)], 1
        )
    a = np.asarray(obs, np.float64)
    return a.reshape(len(a), -1)


def policy_for(space: gym.Space) -> Any:
    """A deterministic policy: actions are a function of the observation only, so each env's stream
    is the same whatever order the envs are stepped in."""

    def policy(obs: Any) -> np.ndarray:
        h = np.sin(1000.0 * flat(obs).sum(1))
        if isinstance(space, gym.spaces.Discrete):
            return (h > 0).astype(np.int64)
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        k = np.arange(space.shape[0])
        return (low + (high - low) * (0.5 + 0.5 * np.sin(h[:, None] * 7.0 + k))).astype(space.dtype)

    return policy


def row(obs: Any, i: int) -> Any:
    """Env i's observation, copied (an env may reuse its arrays)."""
    return {k: np.array(v[i]) for k, v in obs.items()} if isinstance(obs, Mapping) else np.array(obs[i])


def plain_gym_streams(env_id: str, n: int, vector_steps: int) -> list[list[tuple]]:
    """Per env: (obs, act, rew, term, trunc, obs_next) of a plain gymnasium loop over single envs
    seeded SEED + i, with NEXT_STEP autoreset done by hand (the step after a done is a reset)."""
    envs = [gym.make(env_id) for _ in range(n)]
    policy = policy_for(envs[0].action_space)
    obs = [env.reset(seed=SEED + i)[0] for i, env in enumerate(envs)]
    pending = [False] * n
    out: list[list[tuple]] = [[] for _ in range(n)]
    for _ in range(vector_steps):
        for i, env in enumerate(envs):
            batch = {k: v[None] for k, v in obs[i].items()} if isinstance(obs[i], dict) else obs[i][None]
            a = policy(batch)[0]
            if pending[i]:
                obs[i], _ = env.reset()
                pending[i] = False
                continue
            o2, r, te, tr, _ = env.step(a)
            out[i].append((obs[i], a, r, te, tr, o2))
            pending[i] = te or tr
            obs[i] = o2
    return out


def plain_envpool_streams(env_id: str, n: int, vector_steps: int) -> list[list[tuple]]:
    """The same for a plain loop over an EnvPool env (its own NEXT_STEP autoreset)."""
    envpool = pytest.importorskip("envpool")
    with warnings.catch_warnings():  # EnvPool's spaces warn about float64 bounds cast to float32
        warnings.simplefilter("ignore")
        pool = envpool.make(env_id, env_type="gymnasium", num_envs=n, seed=SEED)
        policy = policy_for(pool.action_space)
        assert pool.observation_space is not None  # built (and cached) here, quietly
    return plain_pool_streams(pool, policy, n, vector_steps)


def plain_pool_streams(pool: Any, policy: Any, n: int, vector_steps: int) -> list[list[tuple]]:
    """Per env (obs, act, rew, term, trunc, obs_next) of a plain lock-step loop over an EnvPool
    pool (raw, or rlcore's ``EnvPoolBackend``), the rows after a done (its resets) left out."""
    obs = pool.reset()
    obs = obs[0] if isinstance(obs, tuple) else obs  # a raw pool returns (obs, info)
    pending = np.zeros(n, bool)
    out: list[list[tuple]] = [[] for _ in range(n)]
    for _ in range(vector_steps):
        act = policy(obs)
        o2, r, te, tr, _ = pool.step(act)
        for i in range(n):
            if not pending[i]:
                out[i].append((row(obs, i), act[i], r[i], te[i], tr[i], row(o2, i)))
        pending = np.where(pending, False, te | tr)
        obs = o2
    return out


def stored_streams(buf: rlcore.ReplayBuffer, n: int) -> list[list[tuple]]:
    """Per env, the stored transitions in order (no ring wrap-around in these tests)."""
    seg = buf.capacity // n
    out = []
    for i in range(n):
        rows = np.arange(i * seg, (i + 1) * seg)
        idx = rows[buf.is_transition(rows)]
        b = buf.sample_at(idx, n_step=1, gamma=1.0)
        out.append(
            [
                (row(b.obs, k), b.act[k], b.rew[k], b.terminated[k], b.truncated[k], row(b.obs_next, k))
                for k in range(len(idx))
            ]
        )
    return out


def assert_same_streams(stored: list[list[tuple]], plain: list[list[tuple]], min_len: int) -> None:
    for i, (got, want) in enumerate(zip(stored, plain, strict=True)):
        assert len(got) >= min_len, f"env {i}: only {len(got)} transitions"
        assert len(want) >= len(got)
        for t, (g, w) in enumerate(zip(got, want[: len(got)], strict=True)):
            for name, x, y in zip(("obs", "act", "rew", "term", "trunc", "obs_next"), g, w, strict=True):
                if isinstance(x, dict):
                    for k in x:
                        np.testing.assert_allclose(x[k], y[k], rtol=1e-6, err_msg=f"env {i} t {t} {name}.{k}")
                else:
                    np.testing.assert_allclose(
                        np.asarray(x, np.float64),
                        np.asarray(y, np.float64),
                        rtol=1e-6,
                        err_msg=f"env {i} t {t} {name}",
                    )


def collect(envs: Any, n_env_steps: int, n: int) -> tuple[rlcore.ReplayBuffer, Any]:
    space = envs.single_action_space
    buf = rlcore.ReplayBuffer(4 * n_env_steps, num_envs=n, seed=0)
    col = Collector(envs, buf)
    col.reset(seed=SEED)
    stats = col.collect(n_env_steps, policy=policy_for(space))
    return buf, stats


ENV_IDS = ["CartPole-v1", "Pendulum-v1", "FetchReach-v4"]


def need(env_id: str) -> None:
    if env_id not in gym.registry and not register_robotics():
        pytest.skip("FetchReach needs gymnasium-robotics")


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_backends_store_what_a_plain_gymnasium_loop_gives(env_id: str, mode: str) -> None:
    need(env_id)
    n = 3
    envs = make_vec(env_id, n, async_batch=None if mode == "sync" else n)
    assert isinstance(envs, AsyncVectorEnv if mode == "async" else SyncVectorEnv)
    try:
        buf, _ = collect(envs, 300 * n, n)
    finally:
        envs.close()
    assert_same_streams(stored_streams(buf, n), plain_gym_streams(env_id, n, 330), 290)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("async_batch", [None, 2])
def test_envpool_stores_what_a_plain_envpool_loop_gives_lock_step_and_async(
    env_id: str, async_batch: int | None
) -> None:
    pytest.importorskip("envpool")
    n = 4
    envs = make_vec(env_id, n, backend="envpool", async_batch=async_batch, seed=SEED)
    assert isinstance(envs, EnvPoolBackend) and envs.batch_size == (async_batch or n)
    buf, stats = collect(envs, 250 * n, n)
    envs.close()
    # async: the envs finish in any order, so the per-env counts differ; each env's stream does not
    assert_same_streams(stored_streams(buf, n), plain_envpool_streams(env_id, n, 600), 100)
    if env_id == "FetchReach-v4":  # EnvPool's dict info carries is_success
        assert len(stats.episode_successes) == len(stats.episode_returns) > 0


def test_envpool_next_step_reset_rows_are_not_stored_and_episodes_match_the_env() -> None:
    pytest.importorskip("envpool")
    envs = make_vec("CartPole-v1", 4, backend="envpool", async_batch=2, seed=SEED)
    buf, stats = collect(envs, 2000, 4)
    envs.close()
    # CartPole's reward is 1 per step: an episode's return is its length, and every stored
    # transition belongs to an episode (no reset row was written as a transition)
    np.testing.assert_array_equal(stats.episode_returns, stats.episode_lengths)
    idx = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    starts, _, lens = buf.episode_bounds(idx)
    assert set(stats.episode_lengths) <= set(lens.tolist()) | {0}
    b = buf.sample_at(idx, n_step=1, gamma=1.0)
    np.testing.assert_array_equal(b.rew, 1.0)


# -- asynchronous partial batches: a scripted env whose steps take different times -------------


class CountEnv(gym.Env):
    """obs = (seed tag, t); reward = t + a; episodes of ``length`` steps, terminated."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, length: int) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.tag, self.t = float(self.np_random.integers(0, 10_000)), 0
        return np.array([self.tag, 0.0], np.float32), {}

    def step(self, a: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return (
            np.array([self.tag, self.t], np.float32),
            float(self.t + a[0]),
            self.t == self.length,
            False,
            {},
        )


class ScriptedAsyncBackend:
    """N CountEnvs where env i's step takes ``durations[i]`` time units: each ``recv`` returns the
    ``batch_size`` in-flight envs that finish first on a virtual clock (ties: lower id first), with
    gymnasium's NEXT_STEP autoreset."""

    def __init__(self, n: int, batch_size: int, durations: list[int]) -> None:
        self.envs_ = [CountEnv(length=3 + i) for i in range(n)]
        self.envs = None
        self.num_envs, self.batch_size, self.durations = n, batch_size, durations
        self.autoreset_mode = AutoresetMode.NEXT_STEP
        self.single_observation_space = self.envs_[0].observation_space
        self.single_action_space = self.envs_[0].action_space
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.clock, self.queue, self.done = 0, [], [False] * n
        self.recv_ids: list[list[int]] = []

    def reset(self, *, seed: int | None = None) -> np.ndarray:
        self.queue, self.done = [], [False] * self.num_envs
        return np.stack(
            [e.reset(seed=None if seed is None else seed + i)[0] for i, e in enumerate(self.envs_)]
        )

    def send(self, act: np.ndarray, env_ids: np.ndarray) -> None:
        for a, i in zip(act, env_ids, strict=True):
            i = int(i)
            if self.done[i]:
                result = (self.envs_[i].reset()[0], 0.0, False, False)
                self.done[i] = False
            else:
                o, r, te, tr, _ = self.envs_[i].step(a)
                result = (o, r, te, tr)
                self.done[i] = te or tr
            heapq.heappush(self.queue, (self.clock + self.durations[i], i, result))

    def recv(self) -> tuple:
        got = [heapq.heappop(self.queue) for _ in range(self.batch_size)]
        self.clock = got[-1][0]
        ids = np.array([g[1] for g in got], np.int64)
        self.recv_ids.append(ids.tolist())
        res = [g[2] for g in got]
        return (
            np.stack([r[0] for r in res]),
            np.array([r[1] for r in res], np.float64),
            np.array([r[2] for r in res]),
            np.array([r[3] for r in res]),
            {},
            ids,
        )

    def close(self) -> None:
        pass


def scripted_policy(obs: np.ndarray) -> np.ndarray:
    return (np.sin(obs[:, :1] * 3.0 + obs[:, 1:]) * 0.5).astype(np.float32)


def test_async_partial_batches_of_a_scripted_env_store_each_envs_own_stream() -> None:
    n = 4
    durations = [1, 2, 3, 5]  # env 0 steps five times as often as env 3
    backend = ScriptedAsyncBackend(n, 2, durations)
    buf = rlcore.ReplayBuffer(4000, num_envs=n, seed=0)
    col = Collector(backend, buf)
    col.reset(seed=SEED)
    stats = col.collect(600, policy=scripted_policy)
    # the recv batches really were partial, unordered and uneven
    assert all(len(ids) == 2 for ids in backend.recv_ids)
    assert any(ids != sorted(ids) for ids in backend.recv_ids)
    stored = stored_streams(buf, n)
    counts = [len(s) for s in stored]
    assert counts[0] > 3 * counts[3], counts
    # reference: each env alone, same seeds, same policy, NEXT_STEP by hand
    for i in range(n):
        env = CountEnv(length=3 + i)
        obs, _ = env.reset(seed=SEED + i)
        want, pending = [], False
        while len(want) < counts[i]:
            a = scripted_policy(obs[None])[0]
            if pending:
                obs, _ = env.reset()
                pending = False
                continue
            o2, r, te, tr, _ = env.step(a)
            want.append((obs, a, r, te, tr, o2))
            pending, obs = te or tr, o2
        assert_same_streams([stored[i]], [want], 1)
    # episode statistics: env i's episodes have length 3 + i, one per stored termination, and
    # their returns are the stored rewards of those episodes
    lengths = list(stats.episode_lengths)
    for i in range(n):
        ends = [t for t, tr in enumerate(stored[i]) if tr[3]]
        assert lengths.count(3 + i) == len(ends) > 0
        want = sorted(sum(float(x[2]) for x in stored[i][e - 2 - i : e + 1]) for e in ends)
        got = sorted(r for r, ln in zip(stats.episode_returns, lengths, strict=True) if ln == 3 + i)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_scripted_env_in_lock_step_equals_async_per_env() -> None:
    n = 3
    bufs = []
    for batch in (n, 1):
        backend = ScriptedAsyncBackend(n, batch, [1, 2, 4])
        buf = rlcore.ReplayBuffer(3000, num_envs=n, seed=0)
        col = Collector(backend, buf)
        col.reset(seed=SEED)
        col.collect(300, policy=scripted_policy)
        bufs.append(stored_streams(buf, n))
    lock, part = bufs
    for i in range(n):
        k = min(len(lock[i]), len(part[i]))
        assert k > 20
        assert_same_streams([part[i][:k]], [lock[i]], k)


# -- concurrent resets --------------------------------------------------------------------------


class SleepyResetEnv(gym.Env):
    """reset() sleeps 0.2 s."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        time.sleep(0.2)
        return np.zeros(1, np.float32), {}

    def step(self, a: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(1, np.float32), 0.0, False, False, {}


def timed_reset(envs: Any) -> float:
    col = Collector(envs, None)
    start = time.perf_counter()
    col.reset(seed=0)
    return time.perf_counter() - start


def test_gymnasium_async_resets_4_envs_concurrently() -> None:
    envs = AsyncVectorEnv([SleepyResetEnv] * 4)
    try:
        timed_reset(envs)  # the workers' first call
        assert timed_reset(envs) < 0.4
    finally:
        envs.close()


def test_gymnasium_sync_resets_4_envs_one_after_another() -> None:
    assert timed_reset(SyncVectorEnv([SleepyResetEnv] * 4)) >= 4 * 0.2


class SleepyPool:
    """EnvPool's gymnasium interface over N threads whose resets sleep 0.2 s (EnvPool itself runs
    only its C++ envs, so a sleeping reset cannot be hosted in it): ``async_reset`` starts every
    env's reset at once and ``recv`` waits for ``batch_size`` of them, as EnvPool's thread pool does."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, n: int, batch_size: int) -> None:
        self.config = {"num_envs": n, "batch_size": batch_size}
        self.done: list[int] = []
        self.cv = threading.Condition()

    def _finish(self, i: int, delay: float) -> None:
        time.sleep(delay)
        with self.cv:
            self.done.append(i)
            self.cv.notify_all()

    def async_reset(self) -> None:
        for i in range(self.config["num_envs"]):
            threading.Thread(target=self._finish, args=(i, 0.2), daemon=True).start()

    def send(self, act: Any, env_ids: Any) -> None:
        for i in env_ids:
            threading.Thread(target=self._finish, args=(int(i), 0.0), daemon=True).start()

    def recv(self) -> tuple:
        b = self.config["batch_size"]
        with self.cv:
            self.cv.wait_for(lambda: len(self.done) >= b)
            ids, self.done = self.done[:b], self.done[b:]
        z = np.zeros(b)
        return np.zeros((b, 1), np.float32), z, z.astype(bool), z.astype(bool), {"env_id": np.array(ids)}

    def close(self) -> None:
        pass


@pytest.mark.parametrize("batch_size", [4, 2])
def test_envpool_backend_resets_all_envs_at_once(batch_size: int) -> None:
    backend = EnvPoolBackend(SleepyPool(4, batch_size))
    assert timed_reset(backend) < 0.4
    col = Collector(backend, None)
    col.reset(seed=0)
    col.collect(8)  # steps go on after a reset, and a second reset drains the envs in flight
    assert timed_reset(backend) < 0.4


def test_real_envpool_reset_returns_every_env_in_async_mode() -> None:
    pytest.importorskip("envpool")
    envs = make_vec("CartPole-v1", 8, backend="envpool", async_batch=4, seed=SEED)
    col = Collector(envs, None)
    col.reset()
    assert col.obs.shape == (8, 4) and np.abs(col.obs).max() < 0.06  # CartPole's reset state
    col.collect(100)
    col.reset()  # the 4 envs still stepping are drained first; no recv blocks
    np.testing.assert_array_equal(col.stepper.ready_ids, np.arange(8))
    envs.close()


# -- make_vec and the protocol's refusals ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        (dict(num_envs=0), InvalidValueError),
        (dict(async_batch=2), InvalidValueError),
        (dict(backend="ray"), InvalidValueError),
        (dict(env_id="NoSuchEnv-v0"), ApiUsageError),
    ],
    ids=["no_envs", "gymnasium_partial_batch", "unknown_backend", "unknown_env"],
)
def test_make_vec_refuses_what_the_backend_cannot_do(kwargs: dict, err: type) -> None:
    args = dict(env_id="CartPole-v1", num_envs=4) | kwargs
    with pytest.raises(err):
        make_vec(args.pop("env_id"), args.pop("num_envs"), **args)


@pytest.mark.parametrize("async_batch", [3, 0, 5])
def test_make_vec_envpool_needs_a_batch_that_divides_num_envs(async_batch: int) -> None:
    pytest.importorskip("envpool")
    with pytest.raises(InvalidValueError):
        make_vec("CartPole-v1", 4, backend="envpool", async_batch=async_batch)


def test_gymnasium_backend_refuses_partial_sends() -> None:
    from rlcore.envs.backends import GymVectorBackend

    backend = GymVectorBackend(SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2))
    backend.reset(seed=0)
    with pytest.raises(ApiUsageError, match="all 2 envs"):
        backend.send(np.zeros(1, np.int64), np.array([1]))

