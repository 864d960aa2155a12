"""The goal-env stream that the HER tests feed to an rlcore HER buffer and to the numpy reference
side by side, the check of a sampled HER batch against the reference, and the buffers those tests
build (test_her*.py, test_sequences.py)."""

from __future__ import annotations

import itertools

import numpy as np
import rlcore
from reference import RefBuffer, fetch_reward

F32 = np.float32
W = np.array([1.0, 0.001, 0.5])


def asym_reward(achieved_goal, desired_goal, info):
    """Asymmetric in its arguments: swapping them flips the sign."""
    assert isinstance(info, dict)
    return ((np.asarray(achieved_goal, np.float64) - desired_goal) @ W).astype(F32)


class HERStream:
    """Goal-env steps fed to an rlcore HER buffer and the reference side by side.

    Every stored observation gets a unique id: ``achieved_goal = [env, id, 0.5]``; stored desired
    goals are negative (``[-1, -1 - episode, -2]``) so that a relabeled goal is recognisable and
    names the row it came from.
    """

    def __init__(self, buf, ref: RefBuffer, num_envs: int, seed: int = 0):
        self.buf, self.ref, self.n = buf, ref, num_envs
        self.rng = np.random.default_rng(seed)
        self.ids = itertools.count(0)
        self.ep = [0] * num_envs
        self.last_next: list[dict | None] = [None] * num_envs

    def _fresh(self, e):
        return {
            "observation": self.rng.normal(size=2).astype(F32),
            "achieved_goal": np.array([e, next(self.ids), 0.5], F32),
            "desired_goal": np.array([-1, -1 - self.ep[e], -2], F32),
        }

    def step(self, kinds):
        obs, nxt = [], []
        for e, k in enumerate(kinds):
            if self.last_next[e] is None or k == "cut":
                if k == "cut":
                    self.ep[e] += 1
                obs.append(self._fresh(e))
            else:
                obs.append(self.last_next[e])
            nxt.append(self._fresh(e))
        stack = lambda ds: {key: np.stack([d[key] for d in ds]) for key in ds[0]}  # noqa: E731
        o, on = stack(obs), stack(nxt)
        kinds = np.asarray(kinds)
        term, trunc = kinds == "term", kinds == "trunc"
        act = self.rng.normal(size=(self.n, 2)).astype(F32)
        rew = self.rng.integers(-3, 1, size=self.n).astype(F32)
        self.buf.add(o, act, rew, term, trunc, on)
        self.ref.add(o, act, rew, term, trunc, on)
        for e in range(self.n):
            if term[e] or trunc[e]:
                self.last_next[e] = None
                self.ep[e] += 1
            else:
                self.last_next[e] = nxt[e]

    def row_of_goal(self):
        """id -> (env, absolute row) for every alive row."""
        out = {}
        for e, env in enumerate(self.ref.envs):
            for a in range(env.alive_lo, env.head):
                out[int(env.rows[a].obs["achieved_goal"][1])] = (e, a)
        return out


def her_buffer(capacity, num_envs=1, *, reward="python", seed=0, **kw):
    if reward == "python":
        return rlcore.HERReplayBuffer(
            capacity, num_envs=num_envs, seed=seed, compute_reward=asym_reward, **kw
        )
    return rlcore.HERReplayBuffer(capacity, num_envs=num_envs, seed=seed, distance_threshold=reward, **kw)


def check_her_batch(batch, stream: HERStream, strategy, n_step, gamma, reward="python"):
    """Every sample is either the stored n-step transition or a valid relabeling of it.

    Returns (list of relabeled flags, list of (t, t', start, end) for relabeled samples)."""
    ref = stream.ref
    goal_rows = stream.row_of_goal()
    relabeled, picks = [], []
    for i, p in enumerate(batch.indices & ((1 << rlcore._core.INDEX_ROW_BITS) - 1)):
        e, t = ref.locate(int(p))
        env = ref.envs[e]
        w = env.nstep(t, n_step, gamma)
        np.testing.assert_array_equal(batch.obs["observation"][i], w["obs"]["observation"])
        np.testing.assert_array_equal(batch.obs["achieved_goal"][i], w["obs"]["achieved_goal"])
        np.testing.assert_array_equal(batch.obs_next["observation"][i], w["obs_next"]["observation"])
        np.testing.assert_array_equal(batch.obs_next["achieved_goal"][i], w["obs_next"]["achieved_goal"])
        np.testing.assert_array_equal(batch.act[i], w["act"])
        np.testing.assert_allclose(batch.discount[i], w["discount"], rtol=1e-6)
        g = batch.obs["desired_goal"][i]
        np.testing.assert_array_equal(
            batch.obs_next["desired_goal"][i], g, err_msg="the new goal must be in obs_next too"
        )
        if g[0] < 0:  # stored goal: not relabeled
            relabeled.append(False)
            np.testing.assert_array_equal(g, w["obs"]["desired_goal"])
            np.testing.assert_allclose(batch.rew[i], w["rew"], rtol=1e-5, atol=1e-5)
            continue
        relabeled.append(True)
        gid = int(g[1])
        assert gid in goal_rows, f"goal {g} of row {p} comes from an overwritten row"
        ge, ga = goal_rows[gid]
        assert ge == e, f"goal of row {p} comes from env {ge}"
        start, end = env.bounds(t)
        tp = ga - 1  # the goal is the achieved goal after step t'
        assert env.rows[ga].ep == env.rows[t].ep, f"goal of row {p} comes from another episode"
        if strategy == "future":
            assert t <= tp <= end - 1, (t, tp, end)
        elif strategy == "final":
            assert tp == end - 1, (t, tp, end)
        else:
            assert start <= tp <= end - 1, (start, tp, end)
        picks.append((t, tp, start, end))
        # every reward of the window is recomputed against the new goal
        ags = np.stack([env.rows[t + k + 1].obs["achieved_goal"] for k in range(w["m"])])
        r = asym_reward(ags, g[None], {}) if reward == "python" else fetch_reward(ags, g[None], reward)
        want = sum(gamma**k * float(r[k]) for k in range(w["m"]))
        np.testing.assert_allclose(
            batch.rew[i], want, rtol=1e-4, atol=1e-3, err_msg=f"relabeled reward of row {p}"
        )
    return relabeled, picks


HER_KINDS = ("step", "step", "step", "term", "trunc", "cut")


def single_episode(length=10, **kw):
    buf = her_buffer(64, **kw)
    stream = HERStream(buf, RefBuffer(64, 1), 1)
    for t in range(length):
        stream.step(["trunc" if t == length - 1 else "step"])
    return buf, stream
