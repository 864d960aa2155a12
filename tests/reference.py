"""Small, obviously-correct numpy reference implementations of the semantics in docs/ (replay-buffer, n-step, gae, her, per).

Nothing here is fast; everything is written the way those pages state it, so that the Rust core
can be compared against it row by row.

Storage model (docs/replay-buffer.md, "Storage model"), per env:

* rows are numbered by an absolute counter ``a = 0, 1, 2, ...`` that never wraps; row ``a`` lives
  at physical row ``env * seg + a % seg`` and is alive while ``a >= head - seg``;
* an episode of L steps occupies L + 1 consecutive rows (L transition rows + one row holding the
  final observation);
* a new ``obs`` that is not byte-equal to the previous step's ``obs_next`` cuts the open episode
  (its last transition is flagged "cut"; the row after it keeps the true ``obs_next``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# replay storage


@dataclass
class Row:
    obs: Any  # np.ndarray or dict of np.ndarray (stored dtype)
    ep: int  # episode id (per env)
    transition: bool = False
    act: Any = None
    rew: float = 0.0
    term: bool = False
    trunc: bool = False
    cut: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


def _obs_bytes(obs: Any) -> bytes:
    if isinstance(obs, dict):
        return b"".join(np.ascontiguousarray(obs[k]).tobytes() for k in sorted(obs))
    return np.ascontiguousarray(obs).tobytes()


def _copy(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    return np.array(obs, copy=True)


class RefEnv:
    """One env's ring segment of ``seg`` rows, kept as its full history of rows."""

    def __init__(self, seg: int) -> None:
        self.seg = seg
        self.rows: list[Row] = []
        self.open = False
        self.next_ep = 0
        self.ep_start: dict[int, int] = {}
        self.ep_end: dict[int, int] = {}  # absolute row of the final observation

    @property
    def head(self) -> int:
        return len(self.rows)

    @property
    def alive_lo(self) -> int:
        return max(0, self.head - self.seg)

    def add(self, obs, act, rew, term, trunc, obs_next, extras=None) -> tuple[int, tuple[float, int] | None]:
        """One step; returns (absolute row of the transition, (return, length) if it ended)."""
        if self.open and _obs_bytes(obs) != _obs_bytes(self.rows[-1].obs):
            # continuity cut: the open episode ends at its last transition
            self.rows[-2].cut = True
            self.ep_end[self.rows[-1].ep] = self.head - 1
            self.open = False
        if not self.open:
            ep = self.next_ep
            self.next_ep += 1
            self.ep_start[ep] = self.head
            self.rows.append(Row(obs=_copy(obs), ep=ep))
            self.open = True
        cur = self.rows[-1]
        cur.transition = True
        cur.act = np.array(act, copy=True)
        cur.rew = float(np.float32(rew))
        cur.term, cur.trunc = bool(term), bool(trunc)
        cur.extras = {k: np.array(v, copy=True) for k, v in (extras or {}).items()}
        t = self.head - 1
        self.rows.append(Row(obs=_copy(obs_next), ep=cur.ep))
        done = None
        if term or trunc:
            self.ep_end[cur.ep] = self.head - 1
            self.open = False
            s = self.ep_start[cur.ep]
            done = (sum(r.rew for r in self.rows[s : self.head - 1]), self.head - 1 - s)
        return t, done

    # -- queries on absolute rows --------------------------------------------------------------

    def alive(self, a: int) -> bool:
        return self.alive_lo <= a < self.head

    def sampleable(self) -> list[int]:
        return [a for a in range(self.alive_lo, self.head) if self.rows[a].transition]

    def bounds(self, a: int) -> tuple[int, int]:
        """(first surviving row, row of the final — or newest — observation) of a's episode."""
        ep = self.rows[a].ep
        start = max(self.ep_start[ep], self.alive_lo)
        end = self.ep_end.get(ep, self.head - 1)  # open episode: its newest observation
        return start, end

    def ends_episode(self, a: int) -> bool:
        r = self.rows[a]
        return r.term or r.trunc or r.cut or (self.open and a == self.head - 2)

    def window(self, t: int, n_step: int) -> int:
        """m of docs/n-step.md's definition."""
        for k in range(1, n_step + 1):
            if self.ends_episode(t + k - 1):
                return k
        return n_step

    def nstep(self, t: int, n_step: int, gamma: float) -> dict[str, Any]:
        m = self.window(t, n_step)
        rew = sum(gamma**k * self.rows[t + k].rew for k in range(m))
        last = self.rows[t + m - 1]
        return {
            "m": m,
            "rew": rew,
            "obs": self.rows[t].obs,
            "act": self.rows[t].act,
            "obs_next": self.rows[t + m].obs,
            "terminated": last.term,
            "truncated": last.trunc,
            "discount": gamma**m * (1.0 - last.term),
            "extras": self.rows[t].extras,
        }


class RefBuffer:
    """Reference vector buffer: ``num_envs`` independent :class:`RefEnv` segments."""

    def __init__(self, capacity: int, num_envs: int = 1) -> None:
        self.num_envs = num_envs
        self.seg = capacity // num_envs
        self.envs = [RefEnv(self.seg) for _ in range(num_envs)]

    def add(self, obs, act, rew, term, trunc, obs_next, mask=None, extras=None):
        """One vector step (arrays with a leading N dim; dict obs as dict of [N, ...])."""
        rows, dones = [], []
        for e in range(self.num_envs):
            if mask is not None and not mask[e]:
                rows.append(-1)
                continue
            pick = (
                (lambda x, e=e: {k: v[e] for k, v in x.items()})
                if isinstance(obs, dict)
                else (lambda x, e=e: x[e])
            )
            ex = {k: v[e] for k, v in (extras or {}).items()}
            a, done = self.envs[e].add(pick(obs), act[e], rew[e], term[e], trunc[e], pick(obs_next), ex)
            rows.append(self.phys(e, a))
            if done is not None:
                dones.append((e, *done))
        return rows, dones

    def phys(self, e: int, a: int) -> int:
        return e * self.seg + a % self.seg

    def locate(self, p: int) -> tuple[int, int]:
        """(env, absolute row) of an alive physical row."""
        e, local = divmod(int(p), self.seg)
        env = self.envs[e]
        for a in range(env.alive_lo, env.head):
            if a % self.seg == local:
                return e, a
        raise KeyError(f"row {p} is not alive")

    def __len__(self) -> int:
        return sum(len(env.sampleable()) for env in self.envs)

    def sampleable(self) -> set[int]:
        return {self.phys(e, a) for e, env in enumerate(self.envs) for a in env.sampleable()}

    def alive_rows(self) -> list[int]:
        return [self.phys(e, a) for e, env in enumerate(self.envs) for a in range(env.alive_lo, env.head)]

    def nstep(self, p: int, n_step: int, gamma: float) -> dict[str, Any]:
        e, a = self.locate(p)
        return self.envs[e].nstep(a, n_step, gamma)

    def episode_bounds(self, p: int) -> tuple[int, int, int]:
        e, a = self.locate(p)
        s, en = self.envs[e].bounds(a)
        return self.phys(e, s), self.phys(e, en), en - s

    def prev(self, p: int) -> int:
        e, a = self.locate(p)
        s, _ = self.envs[e].bounds(a)
        return self.phys(e, a - 1 if a > s else a)

    def next(self, p: int) -> int:
        e, a = self.locate(p)
        _, en = self.envs[e].bounds(a)
        return self.phys(e, a + 1 if a + 1 < en else a)

    def last_index(self) -> list[int]:
        out = []
        for e, env in enumerate(self.envs):
            a = env.head - 2
            out.append(self.phys(e, a) if a >= env.alive_lo and a >= 0 and env.rows[a].transition else -1)
        return out

    def unfinished_index(self) -> list[int]:
        return [self.phys(e, env.head - 2) for e, env in enumerate(self.envs) if env.open]


# ---------------------------------------------------------------------------------------------
# returns


def nstep_returns(rew, terminated, truncated, n_step: int, gamma: float):
    """docs/n-step.md over one env's stream [T]: (returns, discounts, horizons)."""
    rew = np.asarray(rew, np.float64)
    done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
    t_len = len(rew)
    ret, disc, hor = np.zeros(t_len), np.zeros(t_len), np.zeros(t_len, np.int64)
    for t in range(t_len):
        m = n_step
        for k in range(1, n_step + 1):
            if t + k - 1 == t_len - 1 or done[t + k - 1]:
                m = k
                break
        ret[t] = sum(gamma**k * rew[t + k] for k in range(m))
        disc[t] = gamma**m * (1.0 - bool(terminated[t + m - 1]))
        hor[t] = m
    return ret, disc, hor


def gae(rew, values, next_values, terminated, truncated, gamma: float, lam: float):
    """docs/gae.md GAE over [T, N] (float64), written as the recursion reads."""
    rew, values, next_values = (np.asarray(x, np.float64) for x in (rew, values, next_values))
    term = np.asarray(terminated, bool)
    done = term | np.asarray(truncated, bool)
    t_len = rew.shape[0]
    adv = np.zeros_like(rew)
    nxt = np.zeros_like(rew[0])
    for t in reversed(range(t_len)):
        delta = rew[t] + gamma * (1.0 - term[t]) * next_values[t] - values[t]
        nxt = delta + gamma * lam * (1.0 - done[t]) * nxt
        adv[t] = nxt
    return adv, adv + values


# ---------------------------------------------------------------------------------------------
# prioritized replay


def per_weights(priorities_all: np.ndarray, sampled: np.ndarray, beta: float) -> np.ndarray:
    """(N P(i))^-β / max_j (N P(j))^-β over the stored (positive) priorities, in log space so that
    priorities spanning hundreds of decades neither overflow nor underflow."""
    p = np.asarray(priorities_all, np.float64)
    p = p[p > 0]
    log_total = np.log(p).max() + np.log(np.exp(np.log(p) - np.log(p).max()).sum())
    log_np = np.log(len(p)) + np.log(np.asarray(sampled, np.float64)) - log_total  # log(N P(i))
    log_np_min = np.log(len(p)) + np.log(p.min()) - log_total
    return np.exp(-beta * log_np + beta * log_np_min)


# ---------------------------------------------------------------------------------------------
# HER


def fetch_reward(achieved_goal, desired_goal, eps: float) -> np.ndarray:
    """gymnasium-robotics Fetch sparse reward: -(||ag - g||_2 > eps) as float32."""
    d = np.linalg.norm(np.asarray(achieved_goal, np.float64) - np.asarray(desired_goal, np.float64), axis=-1)
    return -(d > eps).astype(np.float32)


def chi2_critical(dof: int, z: float = 4.265) -> float:
    """Upper quantile of chi-square(dof) by Wilson–Hilferty (z = 4.265: p ≈ 1e-5)."""
    k = float(dof)
    return k * (1 - 2 / (9 * k) + z * np.sqrt(2 / (9 * k))) ** 3


def chi2_stat(counts, expected) -> float:
    counts = np.asarray(counts, np.float64)
    expected = np.asarray(expected, np.float64)
    return float(((counts - expected) ** 2 / expected).sum())
