"""The random episode stream that the replay-buffer tests feed to an rlcore buffer and to the numpy
reference (tests/reference.py) side by side, the check that every structural query and sampled
field of the buffer equals the reference's, and the buffers and comparisons those tests share
(test_buffer*.py, test_per.py, test_sequences.py)."""

from __future__ import annotations

import itertools

import numpy as np
import rlcore
from hypothesis import strategies as st
from reference import RefBuffer

F32 = np.float32
KINDS = ("step", "step", "step", "term", "trunc", "cut", "mask")


# ---------------------------------------------------------------------------------------------
# a random episode stream fed to rlcore and to the reference side by side


class Stream:
    """Feeds the same random vector-env steps to an rlcore buffer and to the reference."""

    def __init__(self, buf, ref: RefBuffer, num_envs: int, *, dict_obs: bool = False, seed: int = 0):
        self.buf, self.ref, self.n, self.dict_obs = buf, ref, num_envs, dict_obs
        self.rng = np.random.default_rng(seed)
        self.counter = itertools.count(1)
        self.last_next: list[np.ndarray | None] = [None] * num_envs

    def _obs(self, vals: np.ndarray):
        if self.dict_obs:
            return {"pos": vals.copy(), "tag": (vals[:, 1:2] % 7).astype(np.int16)}
        return vals.copy()

    def step(self, kinds) -> None:
        n = self.n
        obs = np.empty((n, 2), F32)
        nxt = np.empty((n, 2), F32)
        for e, k in enumerate(kinds):
            if self.last_next[e] is None or k == "cut":
                obs[e] = (e, next(self.counter))
            else:
                obs[e] = self.last_next[e]
            nxt[e] = (e, next(self.counter))
        kinds = np.asarray(kinds)
        term, trunc, mask = kinds == "term", kinds == "trunc", kinds != "mask"
        act = self.rng.integers(-5, 5, size=(n, 2)).astype(F32)
        rew = (self.rng.integers(-8, 9, size=n) / 4).astype(F32)
        aux = self.rng.integers(0, 1000, size=n).astype(np.int32)
        res = self.buf.add(self._obs(obs), act, rew, term, trunc, self._obs(nxt), mask=mask, aux=aux)
        rows, dones = self.ref.add(
            self._obs(obs), act, rew, term, trunc, self._obs(nxt), mask=mask, extras={"aux": aux}
        )
        assert index_rows(res.indices).tolist() == rows
        assert res.done_envs.tolist() == [d[0] for d in dones]
        np.testing.assert_allclose(res.episode_returns, [d[1] for d in dones], rtol=1e-6, atol=1e-6)
        assert res.episode_lengths.tolist() == [d[2] for d in dones]
        for e in range(n):
            if mask[e]:
                self.last_next[e] = None if (term[e] or trunc[e]) else nxt[e].copy()


def obs_at(obs, i):
    return {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]


def assert_obs_equal(got, want, msg=""):
    if isinstance(want, dict):
        assert set(got) == set(want), msg
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{msg} key {k}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


def index_rows(indices: np.ndarray) -> np.ndarray:
    """The rows of a buffer's indices (-1 stays -1): a prioritized buffer's indices carry the
    generation of their transition above bit INDEX_ROW_BITS."""
    return np.where(indices >= 0, indices & ((1 << rlcore._core.INDEX_ROW_BITS) - 1), indices)


def check_against_reference(buf, ref: RefBuffer, n_step: int, gamma: float, batch_size: int = 64) -> None:
    """Every structural query and every sampled field equals the reference."""
    assert len(buf) == len(ref)
    rows = np.arange(buf.capacity)
    sampleable = ref.sampleable()
    assert buf.is_transition(rows).tolist() == [int(p) in sampleable for p in rows]
    alive = np.array(ref.alive_rows(), np.int64)
    s, e, ln = buf.episode_bounds(alive)
    want = [ref.episode_bounds(p) for p in alive]
    assert list(zip(s.tolist(), e.tolist(), ln.tolist(), strict=True)) == want
    assert buf.prev(alive).tolist() == [ref.prev(p) for p in alive]
    assert buf.next(alive).tolist() == [ref.next(p) for p in alive]
    assert buf.last_index().tolist() == ref.last_index()
    assert buf.unfinished_index().tolist() == ref.unfinished_index()
    # the views hold the reference's rows
    flags = buf.column("flags")
    obs_view = buf.column("obs")
    for p in alive:
        en, a = ref.locate(p)
        r = ref.envs[en].rows[a]
        assert_obs_equal(obs_at(obs_view, p), r.obs, f"row {p}")
        is_terminal_row = ref.envs[en].ep_end.get(r.ep) == a
        assert bool(flags[p] & 8) == is_terminal_row, f"row {p} terminal flag"
        if r.transition:
            np.testing.assert_array_equal(buf.act[p], r.act)
            assert buf.rew[p] == np.float32(r.rew)
            assert (buf.terminated[p], buf.truncated[p]) == (r.term, r.trunc)
            assert bool(flags[p] & 4) == r.cut, f"row {p} cut flag"
            for k, v in r.extras.items():
                np.testing.assert_array_equal(buf.column(k)[p], v)
    if len(ref) == 0:
        return
    batch = buf.sample(batch_size, n_step=n_step, gamma=gamma)
    assert batch.indices.dtype == np.int64 and batch.indices.shape == (batch_size,)
    assert batch.rew.dtype == np.float32 and batch.discount.dtype == np.float32
    for flag in (batch.terminated, batch.truncated):  # real numpy bools: bytes 0 or 1 only
        assert flag.dtype == np.bool_ and flag.view(np.uint8).max() <= 1
    for i, p in enumerate(index_rows(batch.indices)):
        assert int(p) in sampleable, f"sampled row {p} is not a stored transition"
        w = ref.nstep(int(p), n_step, gamma)
        assert_obs_equal(obs_at(batch.obs, i), w["obs"], f"obs of row {p}")
        assert_obs_equal(obs_at(batch.obs_next, i), w["obs_next"], f"obs_next of row {p} (m={w['m']})")
        np.testing.assert_array_equal(batch.act[i], w["act"])
        np.testing.assert_allclose(batch.rew[i], w["rew"], rtol=1e-5, atol=1e-5, err_msg=f"rew_n of row {p}")
        np.testing.assert_allclose(
            batch.discount[i], w["discount"], rtol=1e-6, atol=0, err_msg=f"discount of row {p}"
        )
        assert (bool(batch.terminated[i]), bool(batch.truncated[i])) == (w["terminated"], w["truncated"])
        assert set(batch.extras) == set(w["extras"])
        for k, v in w["extras"].items():
            np.testing.assert_array_equal(batch.extras[k][i], v)


stream_params = st.fixed_dictionaries(
    {
        "num_envs": st.integers(1, 3),
        "seg": st.integers(2, 12),
        "n_step": st.integers(1, 4),
        "gamma": st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
        "seed": st.integers(0, 2**32 - 1),
    }
)


# ---------------------------------------------------------------------------------------------
# buffers the tests build from a stream, and how two buffers or two batches are compared


def filled_buffer(capacity=16, num_envs=2, steps=5, seed=0):
    buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs, seed=seed)
    ref = RefBuffer(capacity, num_envs)
    stream = Stream(buf, ref, num_envs, seed=seed)
    for _ in range(steps):
        stream.step(["step"] * num_envs)
    return buf, ref, stream


def long_buffer(seed, num_envs=1, steps=50):
    buf = rlcore.ReplayBuffer(64 * num_envs, num_envs=num_envs, seed=seed)
    stream = Stream(buf, RefBuffer(64 * num_envs, num_envs), num_envs)
    for k in range(steps):
        stream.step(["term" if k % 10 == 9 else "step"] * num_envs)
    return buf


def wrapped_buffer(kind="replay"):
    cls = {"replay": rlcore.ReplayBuffer, "prioritized": rlcore.PrioritizedReplayBuffer}[kind]
    buf = cls(18, num_envs=3, seed=42)
    stream = Stream(buf, RefBuffer(18, 3), 3, seed=1)
    rng = np.random.default_rng(2)
    for _ in range(20):
        stream.step(list(rng.choice(KINDS, size=3)))
    buf.sample(8)  # advance the RNG
    return buf


def batches_equal(a, b):
    for f in ("obs", "act", "rew", "obs_next", "terminated", "truncated", "discount", "indices", "weights"):
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, dict):
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{f}.{k}")
        elif x is None:
            assert y is None
        else:
            np.testing.assert_array_equal(x, y, err_msg=f)
    assert set(a.extras) == set(b.extras)
    for k in a.extras:
        np.testing.assert_array_equal(a.extras[k], b.extras[k])


def state_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["config"] == sb["config"] and sa["schema"] == sb["schema"]
    assert set(sa["arrays"]) == set(sb["arrays"])
    for k in sa["arrays"]:
        np.testing.assert_array_equal(sa["arrays"][k], sb["arrays"][k], err_msg=k)
