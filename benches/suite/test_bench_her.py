"""HER sample(256), and a goal env's add of one transition, on FetchReach-sized data (dict obs: observation 10, achieved/desired goal 3,
float64; act 4; 50-step truncated episodes; strategy future, k=4), with rlcore's native
threshold reward and with a vectorised Python reward, at capacity 100k and 1M holding the same
100k stored transitions (2,000 episodes).

Peers: SB3 ``HerReplayBuffer`` (its reward is always the env's Python ``compute_reward``, here a
DummyVecEnv of a real FetchReach-v4), Tianshou ``HERReplayBuffer`` (Python ``compute_reward_fn``;
it relabels by writing into its storage and restores on the next call), rlox ``HERBuffer``
(native threshold reward only; flat float32 obs of 16 with the goals at offsets 10 and 13).

The native-reward groups also time the *floor* (issue 20): ``RawBuffer._floor_gather`` on the same
HER buffer, the bench-only bare Rust gather that ``test_bench_sample.py`` times, here copying the
same columns of uniformly drawn rows t and t + 1 (the three observation keys of both, action,
reward, flags, index) into the same fresh arrays behind the same one PyO3 call. It does none of
HER's per-row work: no episode bounds, no goal draw, no read of the goal row's achieved goal, no
reward. So rlcore / floor is the cost of that work (and of the goal row's line) over a gather of
the rows themselves.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any

import numpy as np
import pytest
from conftest import (
    BATCH,
    HER_ACT,
    HER_EP,
    HER_EPS,
    HER_GOAL,
    HER_K,
    HER_OBS,
    build_or_skip,
    cycler,
    fetch_reward,
    her_stream,
    require,
    tag,
)

STORED_EPISODES = 2_000  # 100k transitions
CAPACITIES = [100_000, 1_000_000]
KEYS = ("observation", "achieved_goal", "desired_goal")


def _data() -> dict[str, Any]:
    return her_stream(STORED_EPISODES)


def _rows(d: dict[str, Any]) -> int:
    return len(d["rew"])


def build_rlcore_her(cap: int, reward: str, episodes: int = STORED_EPISODES) -> Any:
    import rlcore

    kw: dict[str, Any] = (
        {"distance_threshold": HER_EPS} if reward == "native" else {"compute_reward": fetch_reward}
    )
    buf = rlcore.HERReplayBuffer(cap, seed=0, strategy="future", future_k=HER_K, **kw)
    d = her_stream(episodes)
    # the bulk path behind ReplayBuffer.from_arrays: the same episode index as step-by-step adds
    buf._extend(d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"])
    return buf


@lru_cache(maxsize=1)
def fetch_vec_env() -> tuple[Any, str]:
    """A DummyVecEnv of FetchReach-v4, or of a tiny goal env of the same sizes if it cannot run."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    try:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        env = gym.make("FetchReach-v4")
        env.reset(seed=0)
        return DummyVecEnv([lambda: env]), "FetchReach-v4 compute_reward"
    except Exception as e:  # noqa: BLE001
        return DummyVecEnv([TinyGoalEnv]), f"tiny goal env (FetchReach-v4 failed: {type(e).__name__})"


class TinyGoalEnv:  # minimal gymnasium goal env with FetchReach's spaces and reward
    def __new__(cls) -> Any:
        import gymnasium as gym
        from gymnasium import spaces

        class _Env(gym.Env):
            observation_space = spaces.Dict(
                {
                    "observation": spaces.Box(-np.inf, np.inf, (HER_OBS,), np.float64),
                    "achieved_goal": spaces.Box(-np.inf, np.inf, (HER_GOAL,), np.float64),
                    "desired_goal": spaces.Box(-np.inf, np.inf, (HER_GOAL,), np.float64),
                }
            )
            action_space = spaces.Box(-1, 1, (HER_ACT,), np.float32)

            def reset(self, *, seed: Any = None, options: Any = None) -> Any:
                return {k: np.zeros(s.shape) for k, s in self.observation_space.spaces.items()}, {}

            def step(self, action: Any) -> Any:
                return self.reset()[0], -1.0, False, False, {}

            def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
                return fetch_reward(achieved_goal, desired_goal, info)

        return _Env()


@lru_cache(maxsize=1)
def build_sb3_her(cap: int) -> tuple[Any, str]:
    require("stable_baselines3")
    from stable_baselines3 import HerReplayBuffer

    venv, how = fetch_vec_env()
    buf = HerReplayBuffer(
        cap,
        venv.observation_space,
        venv.action_space,
        env=venv,
        device="cpu",
        n_envs=1,
        n_sampled_goal=HER_K,
        goal_selection_strategy="future",
    )
    d = _data()
    add = buf.add
    for t in range(_rows(d)):
        add(*_sb3_add_args(d, t))
    return buf, how


def _sb3_add_args(d: dict[str, Any], t: int) -> tuple[Any, ...]:
    """SB3 ``HerReplayBuffer.add``'s arguments for stored step t (one env)."""
    trunc = bool(d["truncated"][t])
    return (
        {k: d["obs"][k][t : t + 1] for k in KEYS},
        {k: d["obs_next"][k][t : t + 1] for k in KEYS},
        d["act"][t : t + 1],
        d["rew"][t : t + 1],
        np.array([trunc]),
        [{"TimeLimit.truncated": trunc}],
    )


@lru_cache(maxsize=1)
def build_tianshou_her(cap: int) -> Any:
    require("tianshou")
    from tianshou.data import Batch, HERReplayBuffer

    buf = HERReplayBuffer(
        cap, compute_reward_fn=lambda ag, g: fetch_reward(ag, g), horizon=HER_EP, future_k=HER_K
    )
    d = _data()
    for t in range(_rows(d)):
        buf.add(
            Batch(
                obs=Batch({k: d["obs"][k][t] for k in KEYS}),
                act=d["act"][t],
                rew=float(d["rew"][t]),
                terminated=False,
                truncated=bool(d["truncated"][t]),
                obs_next=Batch({k: d["obs_next"][k][t] for k in KEYS}),
                info={},
            )
        )
    return buf


@lru_cache(maxsize=1)
def build_rlox_her(cap: int) -> Any:
    rlox = require("rlox")
    buf = rlox.HERBuffer(
        cap,
        HER_OBS + 2 * HER_GOAL,
        HER_ACT,
        HER_GOAL,
        HER_OBS,
        HER_OBS + HER_GOAL,
        strategy="future",
        k=HER_K,
        goal_tolerance=HER_EPS,
    )
    d = _data()
    obs = np.concatenate([d["obs"][k] for k in KEYS], axis=1).astype(np.float32)
    nxt = np.concatenate([d["obs_next"][k] for k in KEYS], axis=1).astype(np.float32)
    rew, trunc = d["rew"].tolist(), d["truncated"].tolist()
    for t in range(_rows(d)):
        buf.push(obs[t], nxt[t], d["act"][t], rew[t], False, trunc[t])
    return buf


def _her_op(lib: str, cap: int, reward: str) -> tuple[Any, str]:
    if lib == "floor":
        floor = build_rlcore_her(cap, "native")
        seeds = itertools.count(1).__next__
        return (lambda: floor._floor_gather(BATCH, seeds())), (
            "bare Rust gather of rows t and t + 1 into the same arrays (no bounds, goal draw, goal read or reward)"
        )
    if lib == "rlcore":
        buf = build_rlcore_her(cap, reward)
        return (lambda: buf.sample(BATCH)), (
            "native threshold reward" if reward == "native" else "numpy reward, one call"
        )
    if lib == "rlcore (1M rows stored)":
        buf = build_rlcore_her(cap, reward, episodes=cap // (HER_EP + 1))
        return (lambda: buf.sample(BATCH)), "buffer filled to capacity instead of 100k transitions"
    if lib == "sb3":
        buf, how = build_sb3_her(cap)
        return (lambda: buf.sample(BATCH)), f"always a Python reward ({how}); torch out"
    if lib == "tianshou":
        buf = build_tianshou_her(cap)
        return (lambda: buf.sample(BATCH)), "always a Python reward (numpy fn)"
    if lib == "rlox":
        if reward == "python":
            pytest.skip("rlox 1.2.0 HERBuffer has no Python reward callback (threshold reward only)")
        buf = build_rlox_her(cap)
        seeds = itertools.count(1).__next__
        return (
            lambda: buf.sample(BATCH, her_ratio=HER_K / (HER_K + 1), seed=seeds())
        ), "native threshold reward, f32 flat obs"
    raise AssertionError(lib)


CASES = [
    (cap, reward, lib)
    for cap in CAPACITIES
    for lib in ["rlcore", "rlox", "tianshou", "sb3", "rlcore (1M rows stored)", "floor"]
    for reward in ["native", "python"]
    if not (lib == "rlcore (1M rows stored)" and cap != 1_000_000)
    and not (lib == "floor" and reward != "native")
]


@pytest.mark.parametrize(("cap", "reward", "lib"), CASES, ids=[f"{lib}-{r}-cap{c}" for c, r, lib in CASES])
def test_her_sample(benchmark: Any, cap: int, reward: str, lib: str) -> None:
    tag(benchmark, f"HER sample({BATCH}), {reward} reward", lib, capacity=cap)
    op, note = build_or_skip(lib, lambda: _her_op(lib, cap, reward))
    op()
    tag(benchmark, f"HER sample({BATCH}), {reward} reward", lib, note, capacity=cap)
    benchmark(op)


ADD_ROWS = 10 * HER_EP  # the add cycles through the first 10 stored episodes


def _her_add_op(lib: str) -> tuple[Any, str]:
    """A zero-argument callable adding the next transition of a goal env (dict obs) to a buffer
    holding the 100k stored transitions, and a note."""
    d = _data()
    rows = range(ADD_ROWS)
    if lib == "rlcore":
        buf = build_rlcore_her(100_000, "native")
        nxt = cycler(
            [
                (
                    {k: d["obs"][k][t] for k in KEYS},
                    d["act"][t],
                    float(d["rew"][t]),
                    False,
                    bool(d["truncated"][t]),
                    {k: d["obs_next"][k][t] for k in KEYS},
                )
                for t in rows
            ]
        )
        add = buf.add
        return (lambda: add(*nxt())), "dict of numpy arrays, Python scalars"
    if lib == "sb3":
        buf, _ = build_sb3_her.__wrapped__(100_000)  # its own buffer: the sample cases keep theirs
        nxt = cycler([_sb3_add_args(d, t) for t in rows])
        add = buf.add
        return (lambda: add(*nxt())), "dicts of [1, ...] arrays, done and infos"
    if lib == "rlox":
        buf = build_rlox_her.__wrapped__(100_000)
        obs = np.concatenate([d["obs"][k] for k in KEYS], axis=1).astype(np.float32)
        nxo = np.concatenate([d["obs_next"][k] for k in KEYS], axis=1).astype(np.float32)
        rew, trunc = d["rew"].tolist(), d["truncated"].tolist()
        nxt = cycler([(obs[t], nxo[t], d["act"][t], rew[t], False, trunc[t]) for t in rows])
        push = buf.push
        return (lambda: push(*nxt())), "flat float32 obs of 16 (no dict)"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", ["rlcore", "rlox", "sb3"])
def test_her_add(benchmark: Any, lib: str) -> None:
    tag(benchmark, "HER add one transition (dict obs)", lib)
    op, note = build_or_skip(lib, lambda: _her_add_op(lib))
    op()
    tag(benchmark, "HER add one transition (dict obs)", lib, note)
    benchmark(op)


def test_her_rlcore_relabels() -> None:
    """Sanity: the benchmarked native-reward buffer relabels about k/(k+1) of the batch to
    goals it reached, so the reward is 0 far more often than in the stored data."""
    buf = build_rlcore_her(100_000, "native")
    b = buf.sample(4096)
    stored = (_data()["rew"] == 0).mean()
    assert (b.rew == 0).mean() > stored + 0.2
