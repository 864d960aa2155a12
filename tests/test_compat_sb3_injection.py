"""Draw injection: SB3's own buffers draw, rlcore's compat buffers replay the same draws.

Both buffers get the same real FetchReach-v4 stream (random actions, SB3's DummyVecEnv,
terminal observations put into ``next_obs`` as SB3's ``_store_transition`` does). Each batch
SB3's buffer samples is recorded: its (row, env) cells and, for HER, the transition whose next
achieved goal became each relabeled sample's goal. The same cells, mapped to the core's rows,
are fed to ``sample_at`` of rlcore's compat buffer, and every field of the two batches must be
equal bit for bit. This separates "same semantics" from "same random draws": a difference here
is a difference in what the buffer hands the algorithm, never in luck.

SB3's draws are recorded from the arguments SB3 passes to its own helpers (``_get_samples``,
``_get_real_samples``, ``_get_virtual_samples``) and the goals it returns (``_sample_goals``),
so nothing of SB3's sampling is re-implemented here.
"""

# SB3 draws from NumPy's legacy global generator; recording and replaying its draws needs it.
# ruff: noqa: NPY002

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
gymnasium_robotics = pytest.importorskip("gymnasium_robotics")

import gymnasium as gym  # noqa: E402
import torch as th  # noqa: E402
from rlcore.compat import sb3 as compat  # noqa: E402
from stable_baselines3.common import buffers as sb3_buffers  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402
from stable_baselines3.her import HerReplayBuffer as SB3Her  # noqa: E402

gym.register_envs(gymnasium_robotics)

STEPS = 400  # vector steps: 8 FetchReach episodes of 50 steps per env
BATCH = 256
BATCHES = 6


def _fetch_venv(n_envs: int) -> DummyVecEnv:
    def make(i: int) -> Any:
        def thunk() -> gym.Env:
            return gym.make("FetchReach-v4")

        return thunk

    venv = DummyVecEnv([make(i) for i in range(n_envs)])
    venv.seed(7)
    venv.action_space.seed(7)
    return venv


def _stream(venv: DummyVecEnv, buffers: list[Any], cells: dict[tuple[int, int], int]) -> None:
    """Add STEPS vector steps of random actions to every buffer; ``cells`` maps SB3's
    (pos, env) of each step to the core row rlcore's buffer (the last one) wrote it to."""
    obs = venv.reset()
    n = venv.num_envs
    for _ in range(STEPS):
        act = np.stack([venv.action_space.sample() for _ in range(n)])
        new_obs, rew, done, infos = venv.step(act)
        next_obs = {k: v.copy() for k, v in new_obs.items()} if isinstance(new_obs, dict) else new_obs.copy()
        for i in np.flatnonzero(done):
            term = infos[i]["terminal_observation"]
            if isinstance(next_obs, dict):
                for k in next_obs:
                    next_obs[k][i] = term[k]
            else:
                next_obs[i] = term
        pos = buffers[0].pos
        for buf in buffers:
            buf.add(obs, next_obs, act, rew, done, infos)
        rows = buffers[-1].core.last_index()
        for e in range(n):
            cells[(pos, e)] = int(rows[e])
        obs = new_obs


def _assert_same(ours: Any, theirs: Any, rewards_within_ulp: bool = False) -> None:
    """Every field equal bit for bit; with ``rewards_within_ulp``, n-step ``rewards`` within one
    float32 ulp (rlcore sums the window in float64 and rounds once; SB3 rounds every product
    and partial sum to float32, so its sum can be one ulp off the correctly rounded one)."""
    for field in theirs._fields:
        a, b = getattr(ours, field), getattr(theirs, field)
        if b is None:
            assert a is None, field
            continue
        if isinstance(b, dict):
            assert a.keys() == b.keys(), field
            pairs = [(f"{field}[{k}]", a[k], b[k]) for k in b]
        else:
            pairs = [(field, a, b)]
        for name, x, y in pairs:
            assert isinstance(x, th.Tensor), name
            assert x.dtype == y.dtype and x.shape == y.shape, (name, x.dtype, y.dtype, x.shape, y.shape)
            if rewards_within_ulp and name == "rewards":
                xa, ya = x.numpy(), y.numpy()
                assert (np.abs(xa - ya) <= np.spacing(np.abs(ya))).all(), name
                continue
            # bit for bit: compare the bytes, so that -0.0 vs 0.0 or NaN payloads would count
            assert x.numpy().tobytes() == y.numpy().tobytes(), name


class _RecordingHer(SB3Her):
    """SB3's HerReplayBuffer, recording what each ``sample`` drew."""

    def sample(self, batch_size: int, env: Any = None) -> Any:
        self.drawn: dict[str, Any] = {}
        return super().sample(batch_size, env)

    def _get_real_samples(self, batch_indices: np.ndarray, env_indices: np.ndarray, env: Any = None) -> Any:
        self.drawn["real"] = (batch_indices.copy(), env_indices.copy())
        return super()._get_real_samples(batch_indices, env_indices, env)

    def _get_virtual_samples(
        self, batch_indices: np.ndarray, env_indices: np.ndarray, env: Any = None
    ) -> Any:
        self.drawn["virtual"] = (batch_indices.copy(), env_indices.copy())
        return super()._get_virtual_samples(batch_indices, env_indices, env)

    def _sample_goals(self, batch_indices: np.ndarray, env_indices: np.ndarray) -> np.ndarray:
        goals = super()._sample_goals(batch_indices, env_indices)
        # the transition whose next achieved goal SB3 took: search the sample's episode (goals
        # of a random-action FetchReach episode are distinct; an equal one gives the same batch)
        steps = []
        for b, e, g in zip(batch_indices, env_indices, goals, strict=True):
            start, length = self.ep_start[b, e], self.ep_length[b, e]
            cand = (start + np.arange(length)) % self.buffer_size
            hit = np.flatnonzero((self.next_observations["achieved_goal"][cand, e] == g).all(axis=1))
            assert hit.size >= 1
            steps.append(cand[hit[0]])
        self.drawn["goal_steps"] = np.asarray(steps)
        return goals


@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_her_batches_equal_sb3s_bit_for_bit_when_given_sb3s_draws(n_envs: int, strategy: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venv = _fetch_venv(n_envs)
        kw = dict(
            env=venv,
            device="cpu",
            n_envs=n_envs,
            n_sampled_goal=4,
            goal_selection_strategy=strategy,
        )
        theirs = _RecordingHer(100_000, venv.observation_space, venv.action_space, **kw)
        ours = compat.HerReplayBuffer(100_000, venv.observation_space, venv.action_space, seed=0, **kw)
    cells: dict[tuple[int, int], int] = {}
    _stream(venv, [theirs, ours], cells)
    rng_state = np.random.get_state()
    np.random.seed(123)
    for _ in range(BATCHES):
        sb3_batch = theirs.sample(BATCH)
        real_b, real_e = theirs.drawn["real"]
        virt_b, virt_e = theirs.drawn["virtual"]
        assert virt_b.size == int((1 - 1 / 5) * BATCH)  # SB3's count, which exact parity matches
        rows = [cells[(b, e)] for b, e in zip(real_b, real_e, strict=True)] + [
            cells[(b, e)] for b, e in zip(virt_b, virt_e, strict=True)
        ]
        goal_rows = [-1] * real_b.size + [
            cells[(g, e)] for g, e in zip(theirs.drawn["goal_steps"], virt_e, strict=True)
        ]
        _assert_same(ours.sample_at(np.asarray(rows), np.asarray(goal_rows)), sb3_batch)
    np.random.set_state(rng_state)


def _recorded_get_samples(buf: Any, parent: type, batch_inds: np.ndarray, env: Any) -> Any:
    """``parent._get_samples`` of SB3, recording the (row, env) cells it read in ``buf.drawn``."""
    before = np.random.get_state()
    out = parent._get_samples(buf, batch_inds, env)  # type: ignore[attr-defined]
    after = np.random.get_state()
    # SB3 draws the env of each sample inside _get_samples: replay that one draw
    np.random.set_state(before)
    env_inds = np.random.randint(0, high=buf.n_envs, size=(len(batch_inds),))
    assert np.random.get_state()[2] == after[2]  # the replayed draw is exactly SB3's one
    np.random.set_state(after)
    buf.drawn = (batch_inds.copy(), env_inds)
    return out


class _RecordingPlain(sb3_buffers.ReplayBuffer):
    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:
        return _recorded_get_samples(self, sb3_buffers.ReplayBuffer, batch_inds, env)


class _RecordingDict(sb3_buffers.DictReplayBuffer):
    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:  # type: ignore[override]
        return _recorded_get_samples(self, sb3_buffers.DictReplayBuffer, batch_inds, env)


class _RecordingNStep(sb3_buffers.NStepReplayBuffer):
    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:
        return _recorded_get_samples(self, sb3_buffers.NStepReplayBuffer, batch_inds, env)


@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("kind", ["plain", "dict", "n_step"])
def test_plain_dict_and_n_step_batches_equal_sb3s_when_given_sb3s_draws(n_envs: int, kind: str) -> None:
    from gymnasium.wrappers import FlattenObservation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "dict":
            venv = _fetch_venv(n_envs)
        else:  # plain buffers take Box spaces: FetchReach's observation flattened
            venv = DummyVecEnv([lambda: FlattenObservation(gym.make("FetchReach-v4")) for _ in range(n_envs)])
            venv.seed(7)
            venv.action_space.seed(7)
    space, act_space = venv.observation_space, venv.action_space
    kw: dict[str, Any] = dict(device="cpu", n_envs=n_envs)
    theirs: Any
    ours: Any
    if kind == "plain":
        theirs = _RecordingPlain(100_000, space, act_space, **kw)
        ours = compat.ReplayBuffer(100_000, space, act_space, seed=0, **kw)
    elif kind == "dict":
        theirs = _RecordingDict(100_000, space, act_space, **kw)
        ours = compat.DictReplayBuffer(100_000, space, act_space, seed=0, **kw)
    else:
        theirs = _RecordingNStep(100_000, space, act_space, n_steps=3, gamma=0.98, **kw)
        ours = compat.NStepReplayBuffer(100_000, space, act_space, n_steps=3, gamma=0.98, seed=0, **kw)
    cells: dict[tuple[int, int], int] = {}
    _stream(venv, [theirs, ours], cells)
    rng_state = np.random.get_state()
    np.random.seed(321)
    for _ in range(BATCHES):
        sb3_batch = theirs.sample(BATCH)
        b_inds, e_inds = theirs.drawn
        rows = np.asarray([cells[(b, e)] for b, e in zip(b_inds, e_inds, strict=True)])
        _assert_same(ours.sample_at(rows), sb3_batch, rewards_within_ulp=kind == "n_step")
    np.random.set_state(rng_state)
