"""Draw injection for Tianshou: Tianshou's own buffers draw, rlcore's compat buffers are read at
the same transitions, and what Tianshou's algorithms read must be the same.

Both buffers get the same real CartPole-v1 stream (4 envs, random actions, done envs reset as
Tianshou's Collector does). Tianshou's ``add`` and rlcore's return the index each step was
written to, which maps Tianshou's indices to rlcore's. Batches Tianshou samples (its
``sample_indices``, seeded) are read from both buffers at the mapped indices: every field,
``prev``/``next``, ``unfinished_index`` and Tianshou's own n-step return code
(``Algorithm.compute_nstep_return``, what DQN/DDPG/SAC call) must agree bit for bit.
One stated difference: rlcore stores rewards as float32 (Tianshou keeps what it is given,
float64 from gymnasium), so ``rew`` is compared by value, which is exact for CartPole's 1.0.
"""

# Tianshou draws from NumPy's legacy global generator; seeding it is how its draws are fixed.
# ruff: noqa: NPY002

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

ts = pytest.importorskip("tianshou")
torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402
import tianshou.data as tsd  # noqa: E402
from rlcore.compat import tianshou as compat  # noqa: E402
from tianshou.algorithm.algorithm_base import Algorithm  # noqa: E402
from tianshou.data import Batch  # noqa: E402

N_ENVS = 4
FIELDS = ("obs", "act", "terminated", "truncated", "done", "obs_next")


def cartpole_stream(steps: int, seed: int = 0) -> Iterator[Batch]:
    envs = [gym.make("CartPole-v1") for _ in range(N_ENVS)]
    obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(envs)])
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        act = rng.integers(0, 2, N_ENVS)
        out = [e.step(int(a)) for e, a in zip(envs, act, strict=True)]
        nxt = np.stack([o[0] for o in out])
        term = np.array([o[2] for o in out])
        trunc = np.array([o[3] for o in out])
        rew = np.array([o[1] for o in out])
        yield Batch(obs=obs, act=act, rew=rew, terminated=term, truncated=trunc, obs_next=nxt, info={})
        obs = nxt.copy()
        for i in np.flatnonzero(term | trunc):
            obs[i] = envs[i].reset()[0]


def filled(ours: Any, theirs: Any, steps: int) -> dict[int, int]:
    """Add the stream to both; Tianshou's index -> rlcore's index of every stored step."""
    index = {}
    for batch in cartpole_stream(steps):
        mine = ours.add(batch, buffer_ids=np.arange(N_ENVS))[0]
        peer = theirs.add(batch, buffer_ids=np.arange(N_ENVS))[0]
        index.update(zip(peer.tolist(), mine.tolist(), strict=True))
    return index


def mapped(index: dict[int, int], idx: np.ndarray) -> np.ndarray:
    return np.array([index[int(i)] for i in idx], dtype=np.int64)


def assert_same_batch(a: Batch, b: Batch) -> None:
    for key in FIELDS:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), key
    np.testing.assert_array_equal(np.asarray(a.rew, np.float64), np.asarray(b.rew))


@pytest.mark.parametrize("n_step", [1, 3])
def test_vector_buffer_reads_like_tianshous_at_tianshous_draws(n_step: int) -> None:
    ours, theirs = compat.VectorReplayBuffer(20_000, N_ENVS), tsd.VectorReplayBuffer(20_000, N_ENVS)
    index = filled(ours, theirs, 600)
    assert sorted(mapped(index, theirs.unfinished_index()).tolist()) == sorted(ours.unfinished_index().tolist())

    def target_q(buf: Any, idx: np.ndarray) -> Any:  # a fixed Q' of the bootstrap observation
        return torch.as_tensor(buf[idx].obs_next.astype(np.float64) @ np.array([1.0, -2.0, 3.0, 0.5]))

    np.random.seed(5)
    for _ in range(8):
        it = theirs.sample_indices(64)
        io = mapped(index, it)
        assert_same_batch(ours[io], theirs[it])
        for step in ("prev", "next"):
            np.testing.assert_array_equal(getattr(ours, step)(io), mapped(index, getattr(theirs, step)(it)))
        ro = Algorithm.compute_nstep_return(ours[io], ours, io, target_q, gamma=0.9, n_step=n_step).returns
        rt = Algorithm.compute_nstep_return(theirs[it], theirs, it, target_q, gamma=0.9, n_step=n_step).returns
        assert ro.dtype == rt.dtype and torch.equal(ro, rt)


def test_prioritized_buffer_reads_like_tianshous_at_tianshous_draws() -> None:
    ours = compat.PrioritizedVectorReplayBuffer(20_000, N_ENVS, alpha=0.6, beta=0.4)
    theirs = tsd.PrioritizedVectorReplayBuffer(20_000, N_ENVS, alpha=0.6, beta=0.4)
    index = filled(ours, theirs, 400)
    np.random.seed(6)
    td = np.random.default_rng(1).exponential(size=64)
    for _ in range(6):
        it = theirs.sample_indices(64)
        io = mapped(index, it)
        assert_same_batch(ours[io], theirs[it])
        # IS weights: the same formula; rlcore computes them in float32 (rounding only)
        np.testing.assert_allclose(ours[io].weight, theirs[it].weight, rtol=2e-6)
        theirs.update_weight(it, td)
        ours.update_weight(io, td)


# -- HER ------------------------------------------------------------------------------------------
# Tianshou's HER draws its relabeling from NumPy's global generator (one ``uniform`` and one
# ``choice`` per sub-buffer that got rows, sub-buffers in order); the rows themselves come from
# the buffer's own RandomState. Both are recorded while Tianshou samples and handed to rlcore's
# buffer: the rows through ``rewrite_transitions`` (Tianshou's method name), the relabeling
# draws through the two methods the compat layer draws with.


class Recorded:
    """The draws Tianshou's ``rewrite_transitions`` made, replayed in the same order."""

    def __init__(self) -> None:
        self.uniform: list[np.ndarray] = []
        self.choice: list[np.ndarray] = []

    def record(self, monkeypatch: pytest.MonkeyPatch) -> None:
        uniform, choice = np.random.uniform, np.random.choice

        def rec_uniform(*a: Any, **k: Any) -> np.ndarray:
            out = np.asarray(uniform(*a, **k))
            self.uniform.append(out)
            return out

        def rec_choice(*a: Any, **k: Any) -> np.ndarray:
            out = np.asarray(choice(*a, **k))
            self.choice.append(out)
            return out

        monkeypatch.setattr(np.random, "uniform", rec_uniform)
        monkeypatch.setattr(np.random, "choice", rec_choice)


def injected(klass: type) -> type:
    class Injected(klass):  # type: ignore[misc,valid-type]
        draws: Recorded

        def _draw_uniform(self, n: int) -> np.ndarray:
            out = self.draws.uniform.pop(0)
            assert out.shape == (n,), "rlcore asked for a different number of offsets"
            return out

        def _draw_groups(self, n_groups: int, k: int) -> np.ndarray:
            out = self.draws.choice.pop(0)
            assert out.shape == (k,) and (out < n_groups).all(), "rlcore chose among other episodes"
            return out

    return Injected


def fetch_stream(n_envs: int, steps: int, seed: int = 0) -> Iterator[Batch]:
    """FetchReach-v4 (real MuJoCo robotics env), random actions, done envs reset."""
    robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(robotics)
    envs = [gym.make("FetchReach-v4") for _ in range(n_envs)]
    for i, e in enumerate(envs):
        e.action_space.seed(seed + i)
    obs = [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)]
    for _ in range(steps):
        act = [e.action_space.sample() for e in envs]
        out = [e.step(a) for e, a in zip(envs, act, strict=True)]
        yield Batch(
            obs=stacked(obs),
            act=np.stack(act),
            rew=np.array([o[1] for o in out]),
            terminated=np.array([o[2] for o in out]),
            truncated=np.array([o[3] for o in out]),
            obs_next=stacked([o[0] for o in out]),
            info={},
        )
        obs = [envs[i].reset()[0] if (o[2] or o[3]) else o[0] for i, o in enumerate(out)]


def stacked(dicts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([d[k] for d in dicts]) for k in dicts[0]}


@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("horizon", [50, 20])
def test_her_buffer_relabels_like_tianshous_at_tianshous_draws(
    n_envs: int, horizon: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row of the buffer after each of Tianshou's samples: goals of ``obs`` and ``obs_next``
    and rewards, bit for bit. Horizon 20 < FetchReach's 50 steps makes several windows per
    episode that overlap (the later write wins, as in Tianshou)."""
    robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(robotics)
    env = gym.make("FetchReach-v4").unwrapped

    def reward(ag: np.ndarray, g: np.ndarray) -> np.ndarray:
        return env.compute_reward(ag, g, None)

    kwargs = dict(compute_reward_fn=reward, horizon=horizon, future_k=4)
    if n_envs == 1:
        ours = injected(compat.HERReplayBuffer)(5_000, **kwargs)
        theirs = tsd.HERReplayBuffer(5_000, **kwargs)
    else:
        ours = injected(compat.HERVectorReplayBuffer)(5_000 * n_envs, n_envs, **kwargs)
        theirs = tsd.HERVectorReplayBuffer(5_000 * n_envs, n_envs, **kwargs)
    index = {}
    for batch in fetch_stream(n_envs, 420):  # 8 finished episodes per env, the 9th running
        mine = ours.add(batch, buffer_ids=np.arange(n_envs))[0]
        peer = theirs.add(batch, buffer_ids=np.arange(n_envs))[0]
        index.update(zip(peer.tolist(), mine.tolist(), strict=True))
    every_t = np.array(sorted(index))
    every_o = mapped(index, every_t)
    draws = Recorded()
    draws.record(monkeypatch)
    ours.draws = draws
    np.random.seed(7)
    relabeled = stale = 0
    for _ in range(12):
        it = theirs.sample_indices(96)
        ours.rewrite_transitions(mapped(index, it))
        assert not draws.uniform and not draws.choice, "rlcore used fewer draws than Tianshou"
        a, b = ours[every_o], theirs[every_t]
        stale += assert_same_relabeling(a, b, reward, np.isin(every_t, overlapped_rows(theirs)))
        relabeled += int(
            (a.obs.desired_goal != ours.core.column("obs")["desired_goal"][every_o]).any(1).sum()
        )
    assert relabeled > 0, "no sample relabeled anything: the test checked nothing"
    assert (stale > 0) == (horizon < 50), "Tianshou's stale rewards come from overlapping windows only"


def overlapped_rows(theirs: Any) -> np.ndarray:
    """Tianshou's rows that lie in the windows of two or more groups of its last relabeling."""
    children = getattr(theirs, "buffers", [theirs])
    offsets = getattr(theirs, "_offset", [0])
    rows = []
    for child, off in zip(children, offsets, strict=True):
        alt = np.asarray(child._altered_indices, np.int64)
        if alt.size:
            cells = np.unique(
                np.stack([alt + off, np.broadcast_to(np.arange(alt.shape[1]), alt.shape)], -1).reshape(-1, 2),
                axis=0,
            )
            r, n = np.unique(cells[:, 0], return_counts=True)
            rows.append(r[n > 1])
    return np.concatenate(rows) if rows else np.array([], np.int64)


def assert_same_relabeling(a: Batch, b: Batch, reward: Any, overlap: np.ndarray) -> int:
    """rlcore's rows ``a`` against Tianshou's ``b`` after the same relabeling draws; ``overlap``
    marks the rows in two or more windows. Returns the number of rows where Tianshou's stored
    reward belongs to another goal than its stored one.

    rlcore's reward is always the reward of the goal it stores. Tianshou's is too, except where
    windows overlap and the goal has more than one dimension: its rewards take the last write
    in the index array's memory order (the later window, rlcore's rule), its goals the last in
    C order (the earlier window). There rlcore has Tianshou's reward and the goal it belongs to;
    everywhere else the two agree bit for bit.
    """
    np.testing.assert_array_equal(a.rew, reward(a.obs_next.achieved_goal, a.obs_next.desired_goal))
    theirs_ok = reward(b.obs_next.achieved_goal, b.obs_next.desired_goal) == b.rew
    assert theirs_ok[~overlap].all(), "Tianshou's rewards disagree with its goals outside overlaps"
    np.testing.assert_array_equal(a.rew, np.asarray(b.rew, np.float32))
    for key in ("obs", "obs_next"):
        for part in ("desired_goal", "achieved_goal", "observation"):
            x, y = np.asarray(a[key][part]), np.asarray(b[key][part])
            assert x.dtype == y.dtype, (key, part)
            same = part != "desired_goal" or b[key][part].shape[-1] == 1
            rows = slice(None) if same else ~overlap
            assert x[rows].tobytes() == y[rows].tobytes(), (key, part)
    return int((~theirs_ok).sum())


def counter_stream(n_envs: int, n_episodes: int, length: int) -> Iterator[Batch]:
    """1-D goals that name their step: env e, episode k, step t has ``observation [e, k, t]``,
    ``achieved_goal [1000 k + t]`` (after step t: ``1000 k + t + 1``), ``desired_goal [-1 - k]``."""
    for k in range(n_episodes):
        for t in range(length):

            def ob(tt: int, k: int = k) -> dict[str, np.ndarray]:
                return {
                    "observation": np.array([[e, k, tt] for e in range(n_envs)], np.float32),
                    "achieved_goal": np.full((n_envs, 1), 1000 * k + tt, np.float32),
                    "desired_goal": np.full((n_envs, 1), -1 - k, np.float32),
                }

            yield Batch(
                obs=ob(t),
                obs_next=ob(t + 1),
                act=np.zeros((n_envs, 2), np.float32),
                rew=np.full(n_envs, 1000 * k + t + 1 - (-1 - k), np.float32),  # the env's reward
                terminated=np.zeros(n_envs, bool),
                truncated=np.full(n_envs, t == length - 1),
                info={},
            )


@pytest.mark.parametrize("n_envs", [1, 2])
def test_her_overlapping_windows_with_1d_goals_match_tianshou_everywhere(
    n_envs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 1-D goals Tianshou's goal and reward writes resolve overlaps the same way (the later
    window wins), which is rlcore's rule: every row agrees bit for bit, overlaps included."""

    def reward(ag: np.ndarray, g: np.ndarray) -> np.ndarray:
        return (ag - g)[..., 0].astype(np.float32)  # the stream's; asymmetric: a swapped call flips the sign

    kwargs = dict(compute_reward_fn=reward, horizon=4, future_k=4)
    if n_envs == 1:
        ours, theirs = injected(compat.HERReplayBuffer)(900, **kwargs), tsd.HERReplayBuffer(900, **kwargs)
    else:
        ours = injected(compat.HERVectorReplayBuffer)(1800, 2, **kwargs)
        theirs = tsd.HERVectorReplayBuffer(1800, 2, **kwargs)
    index = {}
    for batch in counter_stream(n_envs, 30, 10):
        mine = ours.add(batch, buffer_ids=np.arange(n_envs))[0]
        peer = theirs.add(batch, buffer_ids=np.arange(n_envs))[0]
        index.update(zip(peer.tolist(), mine.tolist(), strict=True))
    every_t = np.array(sorted(index))
    every_o = mapped(index, every_t)
    draws = Recorded()
    draws.record(monkeypatch)
    ours.draws = draws
    np.random.seed(3)
    overlaps = 0
    for _ in range(10):
        it = theirs.sample_indices(64)
        ours.rewrite_transitions(mapped(index, it))
        overlap = np.isin(every_t, overlapped_rows(theirs))
        assert assert_same_relabeling(ours[every_o], theirs[every_t], reward, overlap) == 0
        overlaps += int(overlap.sum())
    assert overlaps > 0, "no windows overlapped: the test checked nothing beyond the FetchReach one"
