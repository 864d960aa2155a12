"""Frame-stacked storage (``frame_stack=k``, docs/frames.md): one frame per row, stacks of
``obs`` and ``obs_next`` rebuilt at sample time, byte for byte as gymnasium's
``FrameStackObservation`` returned them (on a real ALE game and on a synthetic env whose frames
encode (episode, step)), against a small numpy reference of the documented semantics (prefix
rows, the continuity cut, which rows are sampleable after the ring wraps), for uniform, PER,
n-step, sequences, ``out=``, views and save/load; and every bad input kind."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from gymnasium.wrappers import FrameStackObservation
from hypothesis import given, settings
from hypothesis import strategies as st
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, SaveFileError, ShapeError

U8 = np.uint8


# ---------------------------------------------------------------------------------------------
# the reference: per env a ring of rows, each holding one frame


class FrameRef:
    """What a frame-stacked buffer holds, from its documented semantics (docs/frames.md)."""

    def __init__(self, capacity: int, num_envs: int, k: int) -> None:
        self.seg, self.k, self.n = capacity // num_envs, k, num_envs
        self.rows: list[dict[int, dict]] = [{} for _ in range(num_envs)]
        self.head = [0] * num_envs
        self.open = [False] * num_envs
        self.fs = [0] * num_envs

    def stack(self, e: int, a: int) -> np.ndarray:
        rows, k = self.rows[e], self.k
        fs = rows[a]["fs"]
        return np.stack([rows[max(a - (k - 1) + j, fs)]["frame"] for j in range(k)])

    def _claim(self, e: int, row: dict) -> int:
        a = self.head[e]
        self.rows[e].pop(a - self.seg, None)
        self.rows[e][a] = row
        self.head[e] += 1
        return a

    def add(self, e: int, obs, act, rew, term, trunc, obs_next) -> None:
        k = self.k
        if self.open[e] and not np.array_equal(self.stack(e, self.head[e] - 1), obs):
            self.rows[e][self.head[e] - 1]["kind"] = "terminal"  # the continuity cut
            self.open[e] = False
        if not self.open[e]:
            r = 0
            while r + 1 < k and np.array_equal(obs[0], obs[r + 1]):
                r += 1
            self.fs[e] = fs = self.head[e]
            for j in range(r, k - 1):
                self._claim(e, {"kind": "prefix", "frame": obs[j], "fs": fs})
            self._claim(e, {"kind": "open", "frame": obs[k - 1], "fs": fs})
            self.open[e] = True
        row = self.rows[e][self.head[e] - 1]
        row.update(kind="transition", obs=obs, obs_next=obs_next, act=act, rew=rew, term=term, trunc=trunc)
        self._claim(e, {"kind": "open", "frame": obs_next[k - 1], "fs": self.fs[e]})
        if term or trunc:
            self.rows[e][self.head[e] - 1]["kind"] = "terminal"
            self.open[e] = False

    def phys(self, e: int, a: int) -> int:
        return e * self.seg + a % self.seg

    def sampleable(self) -> dict[int, tuple[int, int]]:
        """Physical row -> (env, absolute row) of every transition whose k frames all survive."""
        out = {}
        for e in range(self.n):
            lo = max(0, self.head[e] - self.seg)
            for a, row in self.rows[e].items():
                if row["kind"] == "transition" and (row["fs"] >= lo or a - (self.k - 1) >= lo):
                    out[self.phys(e, a)] = (e, a)
        return out

    def window(self, e: int, a: int, n: int) -> tuple[int, dict]:
        """(m, the row of the window's last step) of the n-step window at row a."""
        m = 1
        while m < n and self.rows[e].get(a + m, {}).get("kind") == "transition":
            m += 1
        return m, self.rows[e][a + m - 1]


def frame(env: int, ep: int, t: int) -> np.ndarray:
    """A (2, 3) uint8 frame naming its env, episode and step."""
    return np.array([[env, ep % 256, t % 256], [7, (ep * 31 + t) % 256, 200]], U8)


def check_against(buf: rlcore.ReplayBuffer, ref: FrameRef, n_step: int = 1) -> None:
    """Every sampleable row, and nothing else, is a transition of the buffer; its stacks and
    fields are the ones given to add; random draws return only such rows."""
    good = ref.sampleable()
    rows = np.arange(buf.capacity)
    assert buf.is_transition(rows).tolist() == [int(r) in good for r in rows]
    assert len(buf) == len(good)
    if not good:
        return
    idx = np.array(sorted(good), np.int64)
    b = buf.sample_at(idx, n_step=n_step, gamma=0.5)
    for i, r in enumerate(idx):
        e, a = good[int(r)]
        row = ref.rows[e][a]
        m, last = ref.window(e, a, n_step)
        np.testing.assert_array_equal(b.obs[i], row["obs"], err_msg=f"obs of row {r}")
        np.testing.assert_array_equal(b.obs_next[i], last["obs_next"], err_msg=f"obs_next of row {r}")
        np.testing.assert_array_equal(b.obs_next[i], ref.stack(e, a + m))
        assert b.act[i] == row["act"] and b.truncated[i] == last["trunc"] and b.terminated[i] == last["term"]
    s = buf.sample(64, n_step=n_step)
    sampled = s.indices & ((1 << 40) - 1)  # rows (a prioritized buffer's indices carry a generation)
    assert set(sampled.tolist()) <= set(good)
    for i, r in enumerate(sampled):
        e, a = good[int(r)]
        np.testing.assert_array_equal(s.obs[i], ref.rows[e][a]["obs"])


class Streams:
    """Per-env frame streams of a FrameStackObservation-like env, with the glitches the
    continuity rules cover: episodes that begin mid-stream, zero-padded starts, a broken chain."""

    def __init__(self, num_envs: int, k: int) -> None:
        self.k = k
        self.ep = [0] * num_envs
        self.t = [0] * num_envs
        self.st = [self._reset(e, "reset") for e in range(num_envs)]

    def _reset(self, e: int, how: str) -> list[np.ndarray]:
        self.ep[e] += 1
        self.t[e] = 0
        f = frame(e, self.ep[e], 0)
        if how == "zero":
            return [np.zeros_like(f)] * (self.k - 1) + [f]
        if how == "mid":  # a stack from the middle of a stream: k distinct frames
            self.t[e] = self.k - 1
            return [frame(e, self.ep[e], j) for j in range(self.k)]
        return [f] * self.k

    def step(self, e: int, event: int) -> tuple[np.ndarray, bool, bool, np.ndarray]:
        """(obs, terminated, truncated, obs_next) of env e's next step; ``event`` picks a
        glitch (0-2: none, 3: episode ends, 4: truncated, 5: the chain breaks before it)."""
        if event == 5:
            self.st = self.st[:e] + [self._reset(e, "mid")] + self.st[e + 1 :]
        obs = np.stack(self.st[e])
        self.t[e] += 1
        nxt = self.st[e][1:] + [frame(e, self.ep[e], self.t[e])]
        term, trunc = event == 3, event == 4
        self.st[e] = nxt
        if term or trunc:
            how = ("reset", "zero", "mid")[self.ep[e] % 3]
            self.st[e] = self._reset(e, how)
        return obs, term, trunc, np.stack(nxt)


# ---------------------------------------------------------------------------------------------
# against the reference


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(1, 4),
    num_envs=st.integers(1, 3),
    seg=st.integers(6, 24),
    events=st.lists(st.integers(0, 5), min_size=1, max_size=160),
    n_step=st.integers(1, 3),
    prioritized=st.booleans(),
    use_extend=st.booleans(),
)
def test_stacks_match_a_numpy_reference_on_random_streams_with_wraparound(
    k, num_envs, seg, events, n_step, prioritized, use_extend
):
    cls = rlcore.PrioritizedReplayBuffer if prioritized else rlcore.ReplayBuffer
    buf = cls(seg * num_envs, num_envs=num_envs, seed=1, frame_stack=k)
    ref = FrameRef(seg * num_envs, num_envs, k)
    streams = Streams(num_envs, k)
    steps = []
    for s, ev in enumerate(events):
        rows = [streams.step(e, (ev + 2 * e) % 6 if e else ev) for e in range(num_envs)]
        obs, term, trunc, nxt = (np.stack([r[j] for r in rows]) for j in range(4))
        act = np.full(num_envs, s, np.int64)
        for e in range(num_envs):
            ref.add(e, obs[e], s, 1.0, bool(term[e]), bool(trunc[e]), nxt[e])
        steps.append((obs, act, term, trunc, nxt))
        if not use_extend:
            buf.add(obs, act, np.ones(num_envs), term, trunc, nxt)
    if use_extend:
        obs, act, term, trunc, nxt = (np.stack([x[j] for x in steps]) for j in range(5))
        buf.extend(obs, act, np.ones(term.shape), term, trunc, nxt)
    check_against(buf, ref, n_step)
    # save/load round trip: the same rows, stacks and draws
    copy = cls(seg * num_envs, num_envs=num_envs, frame_stack=k)
    copy.load_state_dict(buf.state_dict())
    check_against(copy, ref, n_step)


def test_reset_padding_repeats_the_first_frame_and_no_stack_mixes_episodes():
    k = 4
    buf = rlcore.ReplayBuffer(200, seed=0, frame_stack=k)
    ref = FrameRef(200, 1, k)
    streams = Streams(1, k)
    for s in range(60):
        obs, term, trunc, nxt = streams.step(0, 3 if s % 7 == 6 else 0)
        buf.add(obs, np.int64(s), 1.0, term, trunc, nxt)
        ref.add(0, obs, s, 1.0, term, trunc, nxt)
    check_against(buf, ref)
    b = buf.sample(256)
    for s in [*b.obs, *b.obs_next]:
        eps = {int(f[0, 1]) for f in s if f.any()}  # zero padding frames aside
        assert len(eps) == 1, "a stack mixes episodes"
        steps = [int(f[0, 2]) for f in s if f.any()]
        assert steps == sorted(steps) and all(b - a <= 1 for a, b in zip(steps, steps[1:], strict=False))


def test_only_the_first_k_minus_1_surviving_rows_of_an_overwritten_episode_are_retired():
    k, seg = 4, 12
    buf = rlcore.ReplayBuffer(seg, seed=0, frame_stack=k)
    streams = Streams(1, k)
    for s in range(seg + 5):  # one long episode: its start is overwritten
        obs, term, trunc, nxt = streams.step(0, 0)
        buf.add(obs, np.int64(s), 0.0, term, trunc, nxt)
    head = seg + 5 + 1  # rows ever written: one per step and the newest observation
    lo = head - seg
    trans = buf.is_transition(np.arange(seg))
    # rows lo .. lo + k - 2 hold no stack any more; the rest up to the open row are transitions
    want = {(lo + j) % seg: False for j in range(k - 1)}
    want.update({a % seg: True for a in range(lo + k - 1, head - 1)})
    want[(head - 1) % seg] = False
    assert {r: bool(trans[r]) for r in want} == want
    assert len(buf) == seg - 1 - (k - 1)
    starts, _, lens = buf.episode_bounds(buf.last_index())
    assert starts[0] == (lo + k - 1) % seg and lens[0] == len(buf)


def test_prioritized_sampling_never_returns_a_retired_row():
    k, seg = 4, 10
    buf = rlcore.PrioritizedReplayBuffer(seg, seed=3, frame_stack=k)
    streams = Streams(1, k)
    for s in range(25):
        obs, term, trunc, nxt = streams.step(0, 0)
        res = buf.add(obs, np.int64(s), 0.0, term, trunc, nxt)
        buf.update_priorities(res.indices, [1e6])  # the newest rows are the most likely draws
    good = set(np.flatnonzero(buf.is_transition(np.arange(seg))).tolist())
    assert len(good) == seg - 1 - (k - 1)
    for _ in range(20):
        assert set(buf.rows_of(buf.sample(32).indices).tolist()) <= good
    assert (buf.priorities(sorted(set(range(seg)) - good)) == 0).all()


def test_nstep_and_sequences_rebuild_the_stacks_of_every_step():
    k = 3
    buf = rlcore.PrioritizedReplayBuffer(60, num_envs=2, seed=0, frame_stack=k)
    ref = FrameRef(60, 2, k)
    streams = Streams(2, k)
    for s in range(90):
        rows = [streams.step(e, 3 if (s + 5 * e) % 11 == 10 else 0) for e in range(2)]
        obs, term, trunc, nxt = (np.stack([r[j] for r in rows]) for j in range(4))
        buf.add(obs, np.full(2, s, np.int64), np.ones(2), term, trunc, nxt)
        for e in range(2):
            ref.add(e, obs[e], s, 1.0, bool(term[e]), bool(trunc[e]), nxt[e])
    check_against(buf, ref, n_step=3)
    good = ref.sampleable()
    sb = buf.sample_sequences(16, 4, burn_in=1, n_step=2)
    assert sb.obs.shape == sb.obs_next.shape == (16, 5, k, 2, 3)
    for i in range(16):
        for j in range(5):
            if not sb.mask[i, j]:
                assert not sb.obs[i, j].any()
                continue
            e, a = good[int(sb.indices[i, j])]
            np.testing.assert_array_equal(sb.obs[i, j], ref.rows[e][a]["obs"])
            np.testing.assert_array_equal(sb.obs_next[i, j], ref.stack(e, a + int(sb.horizon[i, j])))


def test_out_arrays_views_and_nbytes():
    k = 4
    buf = rlcore.ReplayBuffer(100, seed=0, frame_stack=k)
    streams = Streams(1, k)
    for s in range(30):
        obs, term, trunc, nxt = streams.step(0, 0)
        last = buf.add(obs, np.int64(s), 0.0, term, trunc, nxt)
    view = buf.column("obs")
    assert view.shape == (100, 2, 3) and view.dtype == U8 and not view.flags.writeable
    np.testing.assert_array_equal(view[last.indices[0]], obs[-1])  # the newest frame of the row
    out = buf.sample(8)
    again = buf.sample(8, out=out)
    assert again.obs is out.obs and again.obs.shape == (8, k, 2, 3)
    # the row records (16 bytes of header, the 6-byte frame, the int64 action: 32 bytes) and the
    # episode index (17 bytes per row) dominate nbytes
    assert 100 * (32 + 17) <= buf.nbytes <= 100 * (32 + 17) + 4096
    plain = rlcore.ReplayBuffer(100, seed=0)
    plain.add(obs, np.int64(0), 0.0, False, False, nxt)
    assert plain.nbytes > buf.nbytes + 100 * (k - 1) * 6 - 4096


def test_save_load_round_trip_keeps_stacks_and_config(tmp_path):
    k = 4
    buf = rlcore.PrioritizedReplayBuffer(40, num_envs=2, seed=5, frame_stack=k)
    streams = Streams(2, k)
    for s in range(50):
        rows = [streams.step(e, 3 if s % 9 == 8 else 0) for e in range(2)]
        obs, term, trunc, nxt = (np.stack([r[j] for r in rows]) for j in range(4))
        buf.add(obs, np.full(2, s, np.int64), np.ones(2), term, trunc, nxt)
    buf.save(tmp_path / "b")
    back = rlcore.PrioritizedReplayBuffer.load(tmp_path / "b")
    assert back.frame_stack == k and len(back) == len(buf)
    a, b = buf.sample(32), back.sample(32)
    for x, y in zip(a[:7], b[:7], strict=True):
        np.testing.assert_array_equal(x, y)
    other = rlcore.PrioritizedReplayBuffer(40, num_envs=2, frame_stack=3)
    with pytest.raises(SaveFileError, match="frame_stack"):
        other.restore(tmp_path / "b")
    plain = rlcore.PrioritizedReplayBuffer(40, num_envs=2)
    with pytest.raises(SaveFileError, match="frame_stack"):
        plain.restore(tmp_path / "b")


# ---------------------------------------------------------------------------------------------
# real envs wrapped in FrameStackObservation


class CountingEnv(gym.Env):
    """Frames (4, 5) uint8 that encode (episode, step); episodes of random length end by
    termination or truncation."""

    def __init__(self, seed: int) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (4, 5), U8)
        self.action_space = gym.spaces.Discrete(3)
        self.rng = np.random.default_rng(seed)
        self.ep, self.t, self.len = -1, 0, 0

    def _frame(self) -> np.ndarray:
        f = np.zeros((4, 5), U8)
        f[0, 0], f[0, 1], f[1] = self.ep % 256, self.t % 256, self.rng.integers(0, 256, 5)
        return f

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.ep, self.t, self.len = self.ep + 1, 0, int(self.rng.integers(1, 30))
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.len
        return self._frame(), 1.0, done and self.ep % 2 == 0, done and self.ep % 2 == 1, {}


def collect_and_check(envs: gym.vector.VectorEnv, buf: rlcore.ReplayBuffer, steps: int, seed: int) -> None:
    """Step ``envs`` with random actions, add every vector step (NEXT_STEP autoreset: the step
    after a done is masked), and check that every sampleable row returns exactly the stacks the
    env gave for it, and that the rows that are not sampleable are only those the docs name."""
    n = envs.num_envs
    given: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    obs, _ = envs.reset(seed=seed)
    done = np.zeros(n, bool)
    rng = np.random.default_rng(seed)
    added = 0
    for _ in range(steps):
        act = rng.integers(0, envs.single_action_space.n, n)
        nxt, rew, term, trunc, _ = envs.step(act)
        res = buf.add(obs, act, rew, term, trunc, nxt, mask=~done)
        for e in range(n):
            if not done[e]:
                given[int(res.indices[e]) & ((1 << 40) - 1)] = (obs[e].copy(), nxt[e].copy())
                added += 1
        obs, done = nxt, term | trunc
    rows = np.flatnonzero(buf.is_transition(np.arange(buf.capacity)))
    b = buf.sample_at(rows)
    for i, r in enumerate(rows):
        o, on = given[int(r)]
        assert np.array_equal(b.obs[i], o), f"obs of row {r}"
        assert np.array_equal(b.obs_next[i], on), f"obs_next of row {r}"
    # the ring wrapped, and most rows hold a sampleable transition (which rows do not is the
    # reference tests' business)
    assert added > buf.capacity and len(rows) > buf.capacity // 2


def test_stacks_equal_frame_stack_observation_on_a_synthetic_env_byte_for_byte():
    envs = gym.vector.SyncVectorEnv([lambda s=s: FrameStackObservation(CountingEnv(s), 4) for s in range(3)])
    buf = rlcore.ReplayBuffer.from_spaces(
        envs.single_observation_space, envs.single_action_space, capacity=3 * 150, num_envs=3, seed=0, frame_stack=4
    )
    assert buf.column("obs").shape == (450, 4, 5)
    collect_and_check(envs, buf, 600, seed=1)
    b = buf.sample(512)
    for o, on in zip(b.obs, b.obs_next, strict=True):  # reset padding and no mixing of episodes
        for s in (o, on):
            assert len(set(s[:, 0, 0].tolist())) == 1
            t = s[:, 0, 1].astype(int)
            assert (np.diff(t) >= 0).all() and (np.diff(t) <= 1).all()
            assert t[0] == max(t[-1] - 3, 0)


@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_stacks_equal_frame_stack_observation_on_breakout_byte_for_byte(kind):
    ale_py = pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    gym.register_envs(ale_py)
    from gymnasium.wrappers import AtariPreprocessing

    def make(seed: int):
        env = AtariPreprocessing(gym.make("ALE/Breakout-v5", frameskip=1), frame_skip=4)
        return FrameStackObservation(env, 4)

    envs = gym.vector.SyncVectorEnv([lambda s=s: make(s) for s in range(2)])
    cls = rlcore.PrioritizedReplayBuffer if kind == "prioritized" else rlcore.ReplayBuffer
    buf = cls.from_spaces(
        envs.single_observation_space, envs.single_action_space, capacity=2 * 400, num_envs=2, seed=0, frame_stack=4
    )
    assert envs.single_observation_space.shape == (4, 84, 84)
    collect_and_check(envs, buf, 1200, seed=2)
    assert buf.segment_len < 1200  # the ring wrapped
    envs.close()


def test_gymnasium_pads_with_the_reset_observation_by_default():
    """The padding the stacks are rebuilt with is gymnasium's default."""
    import inspect

    assert inspect.signature(FrameStackObservation.__init__).parameters["padding_type"].default == "reset"


# ---------------------------------------------------------------------------------------------
# bad input: typed errors, the buffer unchanged


def _state(buf):
    return {k: v.copy() for k, v in buf.state_dict()["arrays"].items()}


def _same(a, b):
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_an_obs_next_that_is_not_obs_shifted_by_one_frame_is_refused_and_nothing_changes():
    k = 4
    buf = rlcore.ReplayBuffer(40, num_envs=2, seed=0, frame_stack=k)
    streams = Streams(2, k)
    rows = [streams.step(e, 0) for e in range(2)]
    obs, term, trunc, nxt = (np.stack([r[j] for r in rows]) for j in range(4))
    buf.add(obs, np.zeros(2, np.int64), np.ones(2), term, trunc, nxt)
    before = _state(buf)
    rows = [streams.step(e, 0) for e in range(2)]
    obs, term, trunc, nxt = (np.stack([r[j] for r in rows]) for j in range(4))
    bad = nxt.copy()
    bad[1, 2, 0, 0] ^= 1
    with pytest.raises(InvalidValueError, match=r"obs_next\[1\] is not obs\[1\] shifted"):
        buf.add(obs, np.zeros(2, np.int64), np.ones(2), term, trunc, bad)
    with pytest.raises(InvalidValueError, match="shifted"):
        buf.extend(obs[None], np.zeros((1, 2), np.int64), np.ones((1, 2)), term[None], trunc[None], bad[None])
    _same(before, _state(buf))
    # a masked row is not a transition: its arrays are not checked
    buf.add(obs, np.zeros(2, np.int64), np.ones(2), term, trunc, bad, mask=np.array([True, False]))


def test_a_stack_whose_older_frames_do_not_match_the_previous_step_cuts_the_episode():
    k = 4
    buf = rlcore.ReplayBuffer(40, seed=0, frame_stack=k)
    stack = [frame(0, 0, 0)] * k
    o0, o1 = np.stack(stack), np.stack(stack[1:] + [frame(0, 0, 1)])
    buf.add(o0, np.int64(0), 1.0, False, False, o1)
    # the next obs has the right newest frame but an edited older one
    o1b = o1.copy()
    o1b[0, 1, 1] ^= 3
    o2b = np.concatenate([o1b[1:], frame(0, 0, 2)[None]])
    buf.add(o1b, np.int64(1), 1.0, False, False, o2b)
    flags = buf.column("flags")
    rows = np.flatnonzero(buf.is_transition(np.arange(40)))
    b = buf.sample_at(rows)
    # the first episode was cut after one step (its obs_next kept), the edited stack starts a
    # new episode whose distinct older frames became prefix rows: both stacks are exact
    np.testing.assert_array_equal(b.obs[0], o0)
    np.testing.assert_array_equal(b.obs_next[0], o1)
    np.testing.assert_array_equal(b.obs[1], o1b)
    np.testing.assert_array_equal(b.obs_next[1], o2b)
    assert flags[rows[0]] & 4 and flags[rows[0] + 1] & 8  # cut, then the terminal row
    assert (flags[rows[0] + 2 : rows[1]] == 16).all() and rows[1] - rows[0] - 2 == 3  # 3 prefix rows


@pytest.mark.parametrize(
    "kwargs, space_shape, error",
    [
        ({"frame_stack": 0}, (4, 3), InvalidValueError),
        ({"frame_stack": -1}, (4, 3), InvalidValueError),
        ({"frame_stack": 2.0}, (4, 3), DTypeError),
        ({"frame_stack": True}, (4, 3), DTypeError),
        ({"frame_stack": 3}, (4, 3), ShapeError),  # the stack axis is 4, not 3
        ({"frame_stack": 4}, (), ShapeError),  # no stack axis at all
        ({"frame_stack": 4, "capacity": 4}, (4, 3), InvalidValueError),  # <= k rows per env
    ],
)
def test_bad_frame_stack_arguments_raise_typed_errors(kwargs, space_shape, error):
    kw = {"capacity": 40, **kwargs}
    space = gym.spaces.Box(0, 255, space_shape, U8)
    with pytest.raises(error):
        rlcore.ReplayBuffer.from_spaces(space, gym.spaces.Discrete(2), **kw)


def test_wrong_frame_shapes_and_dict_observations_are_refused_unchanged():
    k = 4
    buf = rlcore.ReplayBuffer(40, seed=0, frame_stack=k)
    with pytest.raises(ShapeError, match="frame_stack=4"):  # the first add infers (3, 2, 3)
        buf.add(np.zeros((3, 2, 3), U8), np.int64(0), 0.0, False, False, np.zeros((3, 2, 3), U8))
    assert not buf._schema()[1]  # the failed first add declared nothing
    st = np.stack([frame(0, 0, 0)] * k)
    buf.add(st, np.int64(0), 0.0, False, False, st)
    before = _state(buf)
    for bad in (np.zeros((4, 3, 3), U8), np.zeros((4, 2, 3, 1), U8), np.zeros((5, 2, 3), U8)):
        with pytest.raises(ShapeError):
            buf.add(bad, np.int64(0), 0.0, False, False, bad)
    with pytest.raises(DTypeError):
        buf.add(st.astype(np.float32), np.int64(0), 0.0, False, False, st.astype(np.float32))
    _same(before, _state(buf))
    space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (4, 2), U8)})
    with pytest.raises(ApiUsageError, match="dict"):
        rlcore.ReplayBuffer.from_spaces(space, gym.spaces.Discrete(2), capacity=40, frame_stack=4)
    with pytest.raises(ApiUsageError, match="HER"):
        rlcore._core.RawBuffer(40, her_strategy="future", distance_threshold=0.05, frame_stack=4)


def test_frame_stack_of_reads_k_from_the_wrapper_of_an_env_or_a_vector_env():
    from rlcore.buffers.frames import frame_stack_of

    env = FrameStackObservation(gym.make("CartPole-v1"), 3)
    assert frame_stack_of(env) == 3
    assert frame_stack_of(gym.make("CartPole-v1")) is None
    vec = gym.vector.SyncVectorEnv([lambda: FrameStackObservation(gym.make("CartPole-v1"), 5)] * 2)
    assert frame_stack_of(vec) == 5
    buf = rlcore.ReplayBuffer(100, num_envs=2, frame_stack=frame_stack_of(vec))
    assert buf.frame_stack == 5
