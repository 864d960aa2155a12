"""rlcore.compat.sb3 against Stable-Baselines3 2.9's own buffers: identical episode streams go
into both, and what comes out is compared (contents, next observations at time limits, dones,
n-step returns and discounts, HER goal sources and rewards), then SB3's own SAC runs with both."""

from __future__ import annotations

import io
import itertools
import pickle
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from gymnasium import spaces  # noqa: E402
from rlcore.compat import sb3 as compat  # noqa: E402
from stable_baselines3.common import buffers as sb3_buffers  # noqa: E402
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: E402
from stable_baselines3.her import HerReplayBuffer as Sb3Her  # noqa: E402

torch.set_num_threads(1)
F32 = np.float32
OBS = spaces.Box(-np.inf, np.inf, (3,), F32)
ACT = spaces.Box(-1, 1, (2,), F32)


# -- streams --------------------------------------------------------------------------------------


def episode_stream(n_envs: int, lengths: list[list[tuple[int, str]]], seed: int = 0):
    """SB3-style ``add`` arguments for N envs running episodes side by side.

    ``lengths[e]`` lists env e's episodes as (length, end) with end ``"term"``, ``"timeout"``
    or ``"open"`` (still running at the end of the stream). Observation of env e, episode k,
    step t: ``[e, k, t]`` (unique); ``next_obs`` at a done step is the true final observation
    ``[e, k, L]``, as SB3's ``_store_transition`` passes it. Yields (obs, next_obs, action,
    reward, done, infos) per vector step until the shortest env's stream runs out.
    """
    rng = np.random.default_rng(seed)
    plans = []
    for e in range(n_envs):
        steps = []
        for k, (length, end) in enumerate(lengths[e]):
            for t in range(length):
                last = t == length - 1
                steps.append((k, t, last and end != "open", last and end == "timeout"))
        plans.append(steps)
    for i in range(min(len(p) for p in plans)):
        obs = np.zeros((n_envs, 3), F32)
        nxt = np.zeros((n_envs, 3), F32)
        done = np.zeros(n_envs, bool)
        infos: list[dict[str, Any]] = []
        for e in range(n_envs):
            k, t, d, timeout = plans[e][i]
            obs[e] = (e, k, t)
            nxt[e] = (e, k, t + 1)
            done[e] = d
            info: dict[str, Any] = {}
            if d:
                info["terminal_observation"] = nxt[e].copy()
                info["TimeLimit.truncated"] = timeout
            infos.append(info)
        act = rng.uniform(-1, 1, (n_envs, 2)).astype(F32)
        rew = (obs[:, 2] + 10 * obs[:, 1] + 100 * obs[:, 0]).astype(F32)
        yield obs, nxt, act, rew, done, infos


def sb3_transitions(buf: sb3_buffers.ReplayBuffer) -> dict[bytes, tuple]:
    """Every transition SB3's buffer holds, keyed by its observation's bytes."""
    n = buf.buffer_size if buf.full else buf.pos
    out = {}
    for i in range(n):
        for e in range(buf.n_envs):
            done = buf.dones[i, e] * (1 - buf.timeouts[i, e])
            out[buf.observations[i, e].tobytes()] = (
                buf.actions[i, e],
                buf.rewards[i, e],
                buf.next_observations[i, e],
                done,
            )
    return out


def check_against(samples: ReplayBufferSamples, truth: dict[bytes, tuple]) -> set[bytes]:
    """Every sampled transition equals the peer's transition of the same observation."""
    seen = set()
    obs = samples.observations.numpy()
    for j in range(obs.shape[0]):
        key = obs[j].tobytes()
        assert key in truth, f"sampled {obs[j]} which the peer does not hold"
        act, rew, nxt, done = truth[key]
        np.testing.assert_array_equal(samples.actions[j].numpy(), act)
        assert samples.rewards[j, 0].item() == pytest.approx(float(rew))
        np.testing.assert_array_equal(samples.next_observations[j].numpy(), nxt)
        assert samples.dones[j, 0].item() == float(done)
        seen.add(key)
    return seen


EPISODES = [
    [(3, "term"), (4, "timeout"), (5, "term"), (2, "timeout"), (6, "open")],
    [(5, "timeout"), (1, "term"), (6, "term"), (3, "timeout"), (5, "open")],
]


def make_pair(klass_rl, klass_sb3, n_envs=2, buffer_size=400, **kw):
    rl = klass_rl(buffer_size, OBS, ACT, device="cpu", n_envs=n_envs, seed=1, **kw)
    ref = klass_sb3(buffer_size, OBS, ACT, device="cpu", n_envs=n_envs, **kw)
    return rl, ref


# -- classes and attributes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (compat.ReplayBuffer, sb3_buffers.ReplayBuffer),
        (compat.DictReplayBuffer, sb3_buffers.DictReplayBuffer),
        (compat.NStepReplayBuffer, sb3_buffers.NStepReplayBuffer),
        (compat.HerReplayBuffer, Sb3Her),
    ],
)
def test_classes_subclass_sb3_classes(ours, theirs):
    assert issubclass(ours, theirs)
    assert issubclass(ours, sb3_buffers.ReplayBuffer)


def test_sb3_attributes_without_sb3_arrays():
    buf = compat.ReplayBuffer(1000, OBS, ACT, device="cpu", n_envs=4)
    assert (buf.buffer_size, buf.n_envs, buf.pos, buf.full, buf.size()) == (250, 4, 0, False, 0)
    assert buf.device == torch.device("cpu") and buf.handle_timeout_termination
    assert buf.observation_space is OBS and buf.action_space is ACT
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        assert not hasattr(buf, name), f"SB3 array {name} was allocated"
    for args in list(episode_stream(4, [[(300, "open")]] * 4))[:251]:
        buf.add(*args)
    assert (buf.pos, buf.full, buf.size()) == (1, True, 250)
    buf.reset()
    assert (buf.pos, buf.full, len(buf.core)) == (0, False, 0)


def test_optimize_memory_usage_is_refused():
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        compat.ReplayBuffer(100, OBS, ACT, optimize_memory_usage=True, handle_timeout_termination=False)


# -- contents and time limits ---------------------------------------------------------------------


@pytest.mark.parametrize("handle_timeout", [True, False])
def test_same_transitions_as_sb3(handle_timeout):
    rl, ref = make_pair(
        compat.ReplayBuffer, sb3_buffers.ReplayBuffer, handle_timeout_termination=handle_timeout
    )
    for args in episode_stream(2, EPISODES):
        rl.add(*args)
        ref.add(*args)
    truth = sb3_transitions(ref)
    samples = rl.sample(4000)
    assert isinstance(samples, ReplayBufferSamples) and samples.discounts is None
    assert samples.observations.dtype == torch.float32 and samples.dones.shape == (4000, 1)
    assert check_against(samples, truth) == set(truth), "some stored transitions are never sampled"
    assert (rl.pos, rl.full) == (ref.pos, ref.full)


def test_timeout_keeps_final_obs_and_bootstraps():
    rl = compat.ReplayBuffer(100, OBS, ACT, device="cpu", seed=0)
    for args in episode_stream(1, [[(3, "timeout"), (2, "term"), (2, "open")]]):
        rl.add(*args)
    s = rl.sample(500)
    obs, nxt, dones = s.observations.numpy(), s.next_observations.numpy(), s.dones.numpy()[:, 0]
    last_of_timeout = (obs[:, 1] == 0) & (obs[:, 2] == 2)
    last_of_term = (obs[:, 1] == 1) & (obs[:, 2] == 1)
    assert last_of_timeout.any() and last_of_term.any()
    np.testing.assert_array_equal(nxt[last_of_timeout], [[0, 0, 3]] * last_of_timeout.sum())
    assert (dones[last_of_timeout] == 0).all() and (dones[last_of_term] == 1).all()
    assert dones.sum() == last_of_term.sum()


def test_wrapped_ring_holds_sb3s_transitions():
    rl, ref = make_pair(compat.ReplayBuffer, sb3_buffers.ReplayBuffer, buffer_size=16)
    stream = list(episode_stream(2, EPISODES))
    for args in stream:
        rl.add(*args)
        ref.add(*args)
    assert ref.full
    everything = {}
    for obs, nxt, act, rew, done, infos in stream:
        for e in range(2):
            term = done[e] and not infos[e]["TimeLimit.truncated"] if done[e] else False
            everything[obs[e].tobytes()] = (act[e], rew[e], nxt[e], float(term))
    seen = check_against(rl.sample(4000), everything)
    assert set(sb3_transitions(ref)) <= seen, "rlcore lost a transition that SB3 still holds"


def test_real_vec_env_stream_matches_sb3():
    """SB3's own collection loop (_store_transition with terminal_observation) into both."""

    def model(klass):
        env = DummyVecEnv([lambda: gym.wrappers.TimeLimit(gym.make("Pendulum-v1").unwrapped, 7)] * 2)
        m = sb3.SAC(
            "MlpPolicy", env, seed=3, learning_starts=10_000, buffer_size=1000, replay_buffer_class=klass
        )
        m.learn(60)
        return m.replay_buffer

    rl, ref = model(compat.ReplayBuffer), model(sb3_buffers.ReplayBuffer)
    truth = sb3_transitions(ref)
    assert len(truth) == 60 and sum(ref.timeouts.ravel()) == 8
    assert check_against(rl.sample(3000), truth) == set(truth)


def test_dict_buffer_matches_sb3():
    space = spaces.Dict({"a": OBS, "b": spaces.Discrete(5)})
    rl = compat.DictReplayBuffer(100, space, ACT, device="cpu", seed=0)
    ref = sb3_buffers.DictReplayBuffer(100, space, ACT, device="cpu")
    for obs, nxt, act, rew, done, infos in episode_stream(1, [[(4, "timeout"), (3, "term"), (5, "open")]]):
        d_obs = {"a": obs, "b": obs[:, 2].astype(np.int64)}
        d_nxt = {"a": nxt, "b": nxt[:, 2].astype(np.int64)}
        rl.add(d_obs, d_nxt, act, rew, done, infos)
        ref.add(d_obs, d_nxt, act, rew, done, infos)
    s = rl.sample(500)
    assert isinstance(s, DictReplayBufferSamples) and list(s.observations) == ["a", "b"]
    assert s.observations["b"].shape == (500, 1) and s.observations["b"].dtype == torch.int64
    truth = {
        ref.observations["a"][i, 0].tobytes(): (
            ref.next_observations["a"][i, 0],
            ref.next_observations["b"][i, 0],
            ref.dones[i, 0] * (1 - ref.timeouts[i, 0]),
        )
        for i in range(ref.pos)
    }
    for j in range(500):
        nxt_a, nxt_b, done = truth[s.observations["a"][j].numpy().tobytes()]
        np.testing.assert_array_equal(s.next_observations["a"][j].numpy(), nxt_a)
        np.testing.assert_array_equal(s.next_observations["b"][j].numpy(), nxt_b)
        assert s.dones[j, 0].item() == done


def test_vecnormalize_applied_at_sample():
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), gamma=0.9)
    venv.reset()
    for _ in range(50):
        venv.step(np.zeros((1, 1), F32))  # fit the running statistics
    a = compat.ReplayBuffer(100, OBS, ACT, device="cpu", seed=7)
    b = compat.ReplayBuffer(100, OBS, ACT, device="cpu", seed=7)
    for args in episode_stream(1, [[(6, "term"), (9, "open")]]):
        a.add(*args)
        b.add(*args)
    raw, normed = a.sample(64), b.sample(64, env=venv)
    np.testing.assert_allclose(
        normed.observations.numpy(), venv.normalize_obs(raw.observations.numpy()), rtol=1e-6
    )
    np.testing.assert_allclose(
        normed.next_observations.numpy(), venv.normalize_obs(raw.next_observations.numpy()), rtol=1e-6
    )
    np.testing.assert_allclose(normed.rewards.numpy(), venv.normalize_reward(raw.rewards.numpy()), rtol=1e-6)


# -- n-step ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["term", "timeout"])
def test_nstep_oracle(end):
    """The n-step oracle: one 6-step episode, reward 1, n = 3, gamma = 0.5."""
    buf = compat.NStepReplayBuffer(100, OBS, ACT, device="cpu", n_steps=3, gamma=0.5, seed=0)
    for obs, nxt, act, _, done, infos in episode_stream(1, [[(6, end)]]):
        buf.add(obs, nxt, act, np.ones(1, F32), done, infos)
    s = buf.sample(2000)
    t = s.observations[:, 2].numpy().astype(int)
    want_rew = np.array([1.75, 1.75, 1.75, 1.75, 1.5, 1.0])
    want_next = np.array([3, 4, 5, 6, 6, 6])
    want_disc = np.array([0.125, 0.125, 0.125, 0.125, 0.25, 0.5])
    want_done = np.array([0, 0, 0, 1, 1, 1]) if end == "term" else np.zeros(6)
    np.testing.assert_allclose(s.rewards[:, 0].numpy(), want_rew[t], rtol=1e-6)
    np.testing.assert_array_equal(s.next_observations[:, 2].numpy(), want_next[t])
    np.testing.assert_allclose(s.discounts[:, 0].numpy(), want_disc[t], rtol=1e-6)
    np.testing.assert_array_equal(s.dones[:, 0].numpy(), want_done[t])


@pytest.mark.parametrize("n_steps", [1, 3, 5])
def test_nstep_matches_sb3(n_steps):
    """Every transition's n-step reward, next obs, done and discount equal SB3's (one env:
    SB3's ``_get_samples`` over all rows is deterministic)."""
    kw = dict(n_steps=n_steps, gamma=0.9)
    rl, ref = make_pair(compat.NStepReplayBuffer, sb3_buffers.NStepReplayBuffer, n_envs=1, **kw)
    for args in episode_stream(1, [EPISODES[0][:-1] + EPISODES[1]]):  # only the last episode is open
        rl.add(*args)
        ref.add(*args)
    want = ref._get_samples(np.arange(ref.pos))
    truth = {
        want.observations[i].numpy().tobytes(): (
            want.rewards[i, 0].item(),
            want.next_observations[i].numpy(),
            want.dones[i, 0].item(),
            want.discounts[i, 0].item(),
        )
        for i in range(ref.pos)
    }
    s = rl.sample(3000)
    seen = set()
    for j in range(3000):
        key = s.observations[j].numpy().tobytes()
        rew, nxt, done, disc = truth[key]
        assert s.rewards[j, 0].item() == pytest.approx(rew, rel=1e-6)
        np.testing.assert_array_equal(s.next_observations[j].numpy(), nxt)
        assert s.dones[j, 0].item() == done
        assert s.discounts[j, 0].item() == pytest.approx(disc, rel=1e-6)
        seen.add(key)
    assert seen == set(truth)


# -- HER ------------------------------------------------------------------------------------------


class TinyGoalEnv(gym.Env):
    """A goal env whose reward is asymmetric in its arguments: ``ag - g`` (detects a swap)."""

    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, (3,), F32),
            "achieved_goal": spaces.Box(-np.inf, np.inf, (1,), F32),
            "desired_goal": spaces.Box(-np.inf, np.inf, (1,), F32),
        }
    )
    action_space = ACT

    def reset(self, *, seed=None, options=None):
        return {k: np.zeros(s.shape, F32) for k, s in self.observation_space.spaces.items()}, {}

    def step(self, action):
        return self.reset()[0], 0.0, False, False, {}

    def compute_reward(self, achieved_goal, desired_goal, info):
        assert len(info) == len(achieved_goal)
        return (np.asarray(achieved_goal) - desired_goal)[..., 0].astype(F32)


def goal_stream(n_envs: int, lengths: list[int], n_episodes: int):
    """Finished episodes of the given lengths in every env. Env e, episode k, step t:
    ``observation = [e, k, t]``, ``achieved_goal = [1000 k + t]`` (so the goal achieved after
    step t' is ``1000 k + t' + 1``), ``desired_goal = [-1 - k]`` (never an achieved goal)."""
    plan = [
        [
            (k, t, t == lengths[k % len(lengths)] - 1)
            for k in range(n_episodes)
            for t in range(lengths[k % len(lengths)])
        ]
    ]
    for k, t, last in plan[0]:

        def ob(tt, k=k):
            return {
                "observation": np.array([[e, k, tt] for e in range(n_envs)], F32),
                "achieved_goal": np.full((n_envs, 1), 1000 * k + tt, F32),
                "desired_goal": np.full((n_envs, 1), -1 - k, F32),
            }

        infos = [
            {"TimeLimit.truncated": True, "terminal_observation": None} if last else {} for _ in range(n_envs)
        ]
        yield (
            ob(t),
            ob(t + 1),
            np.zeros((n_envs, 2), F32),
            np.zeros(n_envs, F32),
            np.full(n_envs, last),
            infos,
        )


def her_pair(strategy, n_envs=1, k=4):
    venv = DummyVecEnv([TinyGoalEnv] * n_envs)
    kw = dict(device="cpu", n_envs=n_envs, n_sampled_goal=k, goal_selection_strategy=strategy)
    rl = compat.HerReplayBuffer(2000, TinyGoalEnv.observation_space, ACT, venv, seed=5, **kw)
    ref = Sb3Her(2000, TinyGoalEnv.observation_space, ACT, venv, **kw)
    for args in goal_stream(n_envs, [5, 8, 3], 9):
        rl.add(*args)
        ref.add(*args)
    return rl, ref


def her_summary(s: DictReplayBufferSamples) -> dict[str, np.ndarray]:
    """Per sample: relabeled?, goal step t' (achieved after step t'), t, episode length, reward."""
    o, no = s.observations, s.next_observations
    k = o["observation"][:, 1].numpy().astype(int)
    t = o["observation"][:, 2].numpy().astype(int)
    g = o["desired_goal"][:, 0].numpy()
    np.testing.assert_array_equal(g, no["desired_goal"][:, 0].numpy())  # same goal in both
    relabeled = g >= 0
    goal_step = np.where(relabeled, g - 1000 * k - 1, -1).astype(int)
    want_rew = no["achieved_goal"][:, 0].numpy() - g  # compute_reward(next ag, new goal)
    np.testing.assert_allclose(s.rewards[:, 0].numpy()[relabeled], want_rew[relabeled])
    length = np.array([5, 8, 3])[k % 3]
    return {"relabeled": relabeled, "goal_step": goal_step, "t": t, "length": length, "k": k}


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_her_goal_sources_and_rewards_match_sb3(strategy):
    rl, ref = her_pair(strategy)
    ours = her_summary(rl.sample(6000))
    np.random.seed(0)  # noqa: NPY002 - SB3 samples from the global generator
    theirs = her_summary(ref.sample(6000))
    for d in (ours, theirs):
        r, gs, t, n = d["relabeled"], d["goal_step"], d["t"], d["length"]
        assert (gs[r] < n[r]).all() and (gs[r] >= 0).all(), "goal from outside the episode"
        if strategy == "future":
            assert (gs[r] >= t[r]).all()
        if strategy == "final":
            assert (gs[r] == n[r] - 1).all()
    # same relabeled fraction (SB3: exactly int(0.8 B); rlcore: Bernoulli(0.8) per sample)
    assert ours["relabeled"].mean() == pytest.approx(theirs["relabeled"].mean(), abs=0.02)
    # same goal distribution: mean relative position of the goal step in the episode
    rel = {}
    for name, d in (("ours", ours), ("theirs", theirs)):
        r = d["relabeled"]
        rel[name] = (d["goal_step"][r] + 0.5) / d["length"][r]
    se = np.sqrt(rel["ours"].var() / rel["ours"].size + rel["theirs"].var() / rel["theirs"].size) + 1e-9
    assert abs(rel["ours"].mean() - rel["theirs"].mean()) < 5 * se


def test_her_final_goal_is_the_achieved_goal_after_the_last_step():
    """HER goals are achieved goals of next observations (after the step), never before."""
    rl, _ = her_pair("final")
    d = her_summary(rl.sample(2000))
    r = d["relabeled"]
    np.testing.assert_array_equal(d["goal_step"][r], d["length"][r] - 1)


def test_her_pickle_drops_env_and_round_trips():
    rl, _ = her_pair("future")
    clone = pickle.loads(pickle.dumps(rl))
    assert clone.env is None
    with pytest.raises(RuntimeError, match="set_env"):
        clone.sample(8)
    clone.set_env(rl.env)
    a, b = rl.sample(64), clone.sample(64)
    for key in a.observations:
        torch.testing.assert_close(a.observations[key], b.observations[key])
    torch.testing.assert_close(a.rewards, b.rewards)
    with pytest.raises(ValueError, match="already initialized"):
        clone.set_env(rl.env)


def test_her_copy_info_dict_refused():
    with pytest.raises(NotImplementedError, match="copy_info_dict"):
        compat.HerReplayBuffer(100, TinyGoalEnv.observation_space, ACT, None, copy_info_dict=True)


# -- size(), full, pos ----------------------------------------------------------------------------

GOAL_SPACE = TinyGoalEnv.observation_space
PATTERNS = {
    "1-step": lambda rng: 1,
    "long": lambda rng: 50,
    "mixed": lambda rng: int(rng.integers(1, 13)),
}


def fill_stream(n_envs: int, pattern: str, steps: int, goal: bool, seed: int = 0):
    """``add`` arguments for ``steps`` vector steps; env e's episode lengths drawn from
    ``PATTERNS[pattern]``, ends alternating between timeout and termination. Observation of
    env e, episode k, step t: ``[e, k, t]`` (as ``"observation"`` of a goal dict when ``goal``)."""
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(n_envs):
        plan: list[tuple[int, str]] = []
        while sum(length for length, _ in plan) < steps:
            plan.append((PATTERNS[pattern](rng), "timeout" if len(plan) % 2 else "term"))
        plans.append(plan)
    for obs, nxt, act, rew, done, infos in itertools.islice(episode_stream(n_envs, plans, seed), steps):
        if goal:
            obs, nxt = (
                {
                    "observation": o,
                    "achieved_goal": o[:, 2:] + 1000 * o[:, 1:2],
                    "desired_goal": -1 - o[:, 1:2],
                }
                for o in (obs, nxt)
            )
            for e, info in enumerate(infos):
                if done[e]:
                    info["terminal_observation"] = {k: v[e] for k, v in nxt.items()}
        yield obs, nxt, act, rew, done, infos


def fill_pair(klass: str, n_envs: int, buffer_size: int):
    """Ours and SB3's own buffer of the same class and arguments."""
    kw: dict[str, Any] = dict(device="cpu", n_envs=n_envs)
    if klass == "HerReplayBuffer":
        venv = DummyVecEnv([TinyGoalEnv] * n_envs)
        return (
            compat.HerReplayBuffer(buffer_size, GOAL_SPACE, ACT, venv, seed=3, **kw),
            Sb3Her(buffer_size, GOAL_SPACE, ACT, venv, **kw),
        )
    theirs = {
        "ReplayBuffer": sb3_buffers.ReplayBuffer,
        "DictReplayBuffer": sb3_buffers.DictReplayBuffer,
        "NStepReplayBuffer": sb3_buffers.NStepReplayBuffer,
    }[klass]
    space = GOAL_SPACE if klass == "DictReplayBuffer" else OBS
    return getattr(compat, klass)(buffer_size, space, ACT, seed=3, **kw), theirs(
        buffer_size, space, ACT, **kw
    )


@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize(
    "klass", ["ReplayBuffer", "DictReplayBuffer", "NStepReplayBuffer", "HerReplayBuffer"]
)
def test_size_full_pos_tell_what_can_be_sampled_and_match_sb3_until_short_episodes_wrap(
    klass, n_envs, pattern
):
    """After every add of a stream that wraps the ring three times over:

    - ours never claims more than it holds: ``size() = min(len(core) // N, buffer_size)`` and
      SB3's reading ``size() == (buffer_size if full else pos)``, ``0 <= pos < buffer_size``;
    - ours equals SB3's (size, full, pos) while nothing was overwritten, and whenever the core
      holds ``buffer_size`` per env (long episodes: always);
    - deliberate difference: once short episodes wrap the ring, the core holds fewer (two rows
      per 1-step episode) and says so, ``full`` False, where SB3 reports ``buffer_size``.
    """
    per_env = 40
    ours, ref = fill_pair(klass, n_envs, per_env * n_envs)
    goal = klass in ("DictReplayBuffer", "HerReplayBuffer")
    differ = 0
    for added, args in enumerate(fill_stream(n_envs, pattern, 3 * per_env, goal), start=1):
        ours.add(*args)
        ref.add(*args)
        stored = len(ours.core) // n_envs
        assert ours.size() == min(stored, per_env)
        assert ours.size() == (per_env if ours.full else ours.pos) and 0 <= ours.pos < per_env
        if stored >= per_env or len(ours.core) == added * n_envs:
            assert (ours.size(), ours.full, ours.pos) == (ref.size(), ref.full, ref.pos), added
        else:
            differ += 1
            assert ours.size() == stored < ref.size() and not ours.full
    assert added == 3 * per_env
    if pattern == "long":
        assert differ == 0 and ours.full
    if pattern == "1-step":
        assert differ > 0 and ours.size() == (per_env + ours.extra_rows) // 2
    # every stored transition can be sampled, and nothing else; HER's exact parity (SB3's rule)
    # samples the transitions of finished episodes whose first step is still stored
    assert len(ours.core) >= ours.size() * n_envs
    core = ours.core
    rows = np.flatnonzero(core.is_transition(np.arange(core.capacity)))
    if klass == "HerReplayBuffer":
        start, end, _ = core.episode_bounds(rows)
        flags = core.column("flags")
        rows = rows[((flags[start] & 2) != 0) & ((flags[end] & (4 | 8)) != 0)]
        if rows.size == 0:
            # episodes longer than the ring: none is whole, so there is nothing to sample (SB3
            # 2.9 samples on, from episode bounds taken modulo its buffer: a stated difference)
            with pytest.raises(RuntimeError, match="finished episodes"):
                ours.sample(4)
            return
    s = ours.sample(4000)
    obs = s.observations["observation"] if goal else s.observations
    stored_obs = core.column("obs")["observation"] if goal else core.column("obs")
    assert {row.tobytes() for row in obs.numpy()} == {stored_obs[r].tobytes() for r in rows}


def test_size_with_one_step_episodes_counts_the_stored_transitions():
    """The issue's example: buffer_size 40, one env, 40 one-step episodes. SB3 holds 40 and
    reports 40 (full); the core holds 23 (47 rows, two per episode) and now reports 23."""
    ours, ref = fill_pair("ReplayBuffer", 1, 40)
    for args in fill_stream(1, "1-step", 40, goal=False):
        ours.add(*args)
        ref.add(*args)
    assert (ref.size(), ref.full, ref.pos) == (40, True, 0)
    assert (ours.size(), ours.full, ours.pos, len(ours.core)) == (23, False, 23, 23)
    ours.reset()
    assert (ours.size(), ours.full, ours.pos) == (0, False, 0)


def test_unpickled_buffer_reports_the_same_size_full_pos():
    ours, _ = fill_pair("ReplayBuffer", 2, 80)
    for args in fill_stream(2, "mixed", 100, goal=False):
        ours.add(*args)
    clone = pickle.loads(pickle.dumps(ours))
    assert (clone.size(), clone.full, clone.pos) == (ours.size(), ours.full, ours.pos)
    # a pickle written before size/full/pos came from the core: SB3-style counters, now corrected
    state = ours.__getstate__()
    del state["_steps_added"]
    state["pos"], state["full"] = 20, True
    old = compat.ReplayBuffer.__new__(compat.ReplayBuffer)
    old.__setstate__(state)
    assert old.size() == min(len(old.core) // 2, 40) and old.size() == (40 if old.full else old.pos)
    for args in fill_stream(2, "mixed", 30, goal=False, seed=1):
        ours.add(*args)
        clone.add(*args)
        assert (clone.size(), clone.full, clone.pos) == (ours.size(), ours.full, ours.pos)


def test_pickle_round_trip_continues_identically():
    rl = compat.ReplayBuffer(300, OBS, ACT, device="cpu", seed=11, n_envs=2)
    for args in episode_stream(2, EPISODES):
        rl.add(*args)
    f = io.BytesIO()
    pickle.dump(rl, f)
    f.seek(0)
    clone = pickle.load(f)
    assert (clone.pos, clone.full, clone.buffer_size, len(clone.core)) == (
        rl.pos,
        rl.full,
        rl.buffer_size,
        len(rl.core),
    )
    a, b = rl.sample(128), clone.sample(128)
    for x, y in zip(a, b, strict=True):
        if x is not None:
            torch.testing.assert_close(x, y)


# -- SB3's own algorithms -------------------------------------------------------------------------


def test_sac_pendulum_with_both_buffers(tmp_path):
    """SB3 SAC, same seed, SB3's buffer vs rlcore's: both learn (better than a random policy's
    about -1230) after 3000 steps with small nets; rlcore's sample is faster."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    results = {}
    for name, klass in (("sb3", sb3_buffers.ReplayBuffer), ("rlcore", compat.ReplayBuffer)):
        model = sb3.SAC(
            "MlpPolicy",
            "Pendulum-v1",
            seed=0,
            learning_rate=1e-3,
            learning_starts=200,
            batch_size=128,
            policy_kwargs=dict(net_arch=[64, 64]),
            replay_buffer_class=klass,
        )
        model.learn(3000)
        env = Monitor(gym.make("Pendulum-v1"))
        env.reset(seed=123)
        ret, _ = evaluate_policy(model, env, n_eval_episodes=5)
        t0 = time.perf_counter()
        for _ in range(200):
            model.replay_buffer.sample(128)
        results[name] = (ret, time.perf_counter() - t0)
        if name == "rlcore":
            model.save_replay_buffer(tmp_path / "rb.pkl")
            model.load_replay_buffer(tmp_path / "rb.pkl")
            assert isinstance(model.replay_buffer, compat.ReplayBuffer) and model.replay_buffer.size() == 3000
            model.learn(200, reset_num_timesteps=False)
    print(results)
    assert results["sb3"][0] > -1100 and results["rlcore"][0] > -1100, results  # random policy: about -1230
    assert results["rlcore"][1] < results["sb3"][1], results


def test_sac_her_fetchreach_short_run(tmp_path):
    """SB3 SAC + rlcore HerReplayBuffer on FetchReach-v4: runs, trains, round-trips its buffer."""
    gymnasium_robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(gymnasium_robotics)
    model = sb3.SAC(
        "MultiInputPolicy",
        "FetchReach-v4",
        seed=0,
        learning_starts=200,
        batch_size=64,
        gamma=0.95,
        policy_kwargs=dict(net_arch=[64, 64], n_critics=1),
        replay_buffer_class=compat.HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
    )
    model.learn(600)
    rb = model.replay_buffer
    s = rb.sample(256)
    env = model.get_env()
    want = env.env_method(
        "compute_reward",
        s.next_observations["achieved_goal"].numpy(),
        s.observations["desired_goal"].numpy(),
        [{}] * 256,
        indices=[0],
    )[0]
    np.testing.assert_array_equal(s.rewards[:, 0].numpy(), want)
    assert (s.dones == 0).all()  # FetchReach only times out
    model.save_replay_buffer(tmp_path / "her.pkl")
    model.load_replay_buffer(tmp_path / "her.pkl")
    assert isinstance(model.replay_buffer, compat.HerReplayBuffer) and model.replay_buffer.env is env
    model.learn(100, reset_num_timesteps=False)


def test_rlcore_imports_without_the_peers():
    """``import rlcore`` and ``rlcore.compat`` never import a peer; the compat modules name the extra."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['stable_baselines3'] = None; sys.modules['tianshou'] = None\n"
        "import rlcore, rlcore.compat\n"
        "for mod in ('sb3', 'tianshou'):\n"
        "    try:\n"
        "        __import__('rlcore.compat.' + mod)\n"
        "    except ImportError as e:\n"
        "        assert \"pip install -e '.[compat]'\" in str(e), e\n"
        "    else:\n"
        "        raise AssertionError(mod)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_her_on_real_fetchreach_stream_matches_sb3_statistically():
    """The same FetchReach-v4 stream (SB3's own collection, random actions) into SB3's HER buffer
    and rlcore's: relabeled rewards and goal distances agree in distribution."""
    gymnasium_robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(gymnasium_robotics)
    stats = {}
    for name, klass in (("sb3", Sb3Her), ("rlcore", compat.HerReplayBuffer)):
        model = sb3.SAC(
            "MultiInputPolicy",
            "FetchReach-v4",
            seed=3,
            learning_starts=100_000,
            buffer_size=10_000,
            replay_buffer_class=klass,
            replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
        )
        model.learn(1000)
        np.random.seed(0)  # noqa: NPY002 - SB3 samples from the global generator
        rew, near = [], []
        for _ in range(40):
            s = model.replay_buffer.sample(256)
            d = np.linalg.norm(
                s.next_observations["achieved_goal"].numpy() - s.observations["desired_goal"].numpy(), axis=1
            )
            np.testing.assert_array_equal(s.rewards[:, 0].numpy(), -(d > 0.05).astype(F32))
            rew.append(s.rewards.mean().item())
            near.append((d < 0.02).mean())
        stats[name] = (np.mean(rew), np.mean(near))
    assert stats["rlcore"][0] == pytest.approx(stats["sb3"][0], abs=0.02), stats
    assert stats["rlcore"][1] == pytest.approx(stats["sb3"][1], abs=0.02), stats
