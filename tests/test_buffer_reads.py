"""Reading a ReplayBuffer: read-only column views that share its memory, extras and dict-observation
columns, ``from_spaces``, ``sample(out=...)``, ``to_torch``, large gathers and the bench floor."""

from __future__ import annotations

import gc
import weakref

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from reference import RefBuffer
from reference_stream import F32, Stream, batches_equal, filled_buffer, long_buffer, wrapped_buffer

# ---------------------------------------------------------------------------------------------
# views


@pytest.mark.parametrize("name", ["obs", "act", "rew", "terminated", "truncated", "flags", "aux"])
def test_column_views_are_read_only(name):
    buf, _, _ = filled_buffer()
    view = buf.column(name)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1
    with pytest.raises(ValueError):
        view.setflags(write=True)


def test_column_views_share_memory_and_show_later_writes():
    buf, ref, stream = filled_buffer(capacity=16, num_envs=2, steps=2)
    obs, rew, act = buf.column("obs"), buf.rew, buf.act
    assert obs.shape == (16, 2) and rew.shape == (16,) and act.shape == (16, 2)
    assert rew.dtype == np.float32
    assert buf.terminated.dtype == buf.truncated.dtype == buf.column("flags").dtype == np.uint8
    assert not obs.flags.owndata and obs.base is not None
    before = rew.copy()
    for _ in range(9):  # wraps both 8-row segments
        stream.step(["step", "term"])
    assert not np.array_equal(rew, before), "later writes must show through the view"
    for p in ref.alive_rows():
        e, a = ref.locate(p)
        np.testing.assert_array_equal(obs[p], ref.envs[e].rows[a].obs)
    # memory is never reallocated: a fresh view starts at the same address
    assert buf.column("obs").__array_interface__["data"][0] == obs.__array_interface__["data"][0]
    buf.clear()
    assert buf.column("obs").__array_interface__["data"][0] == obs.__array_interface__["data"][0]


def test_column_view_keeps_buffer_alive_after_del():
    buf, ref, stream = filled_buffer(capacity=8, num_envs=1, steps=3)
    del stream  # holds a reference to buf
    ref_obs = [ref.envs[0].rows[a].obs for a in range(4)]
    alive = weakref.ref(buf)
    view = buf.column("obs")
    del buf
    gc.collect()
    assert alive() is not None, "the view's base must keep the buffer alive"
    for a in range(4):
        np.testing.assert_array_equal(view[a], ref_obs[a])
    del view
    gc.collect()
    assert alive() is None


def test_column_views_are_strided_and_usable_by_numpy():
    buf, ref, _ = filled_buffer(capacity=16, num_envs=2, steps=5)
    obs, rew = buf.column("obs"), buf.rew
    # rows are interleaved records: the row stride is the record size, not the item size
    assert obs.strides[1] == 4 and obs.strides[0] >= 2 * 4
    assert rew.strides[0] == obs.strides[0]
    rows = np.array(ref.alive_rows())
    want = np.stack([ref.envs[p // 8].rows[ref.locate(p)[1]].obs for p in rows])
    np.testing.assert_array_equal(obs[rows], want)
    np.testing.assert_array_equal(np.ascontiguousarray(obs)[rows], want)
    assert obs[rows].sum() == want.sum()


# ---------------------------------------------------------------------------------------------
# columns: extras, dict observations, from_spaces


def test_extras_columns_are_stored_and_sampled_at_step_t():
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    for t in range(6):
        o = np.array([[t, 0], [t, 1]], F32)
        buf.add(
            o,
            np.zeros((2, 1), F32),
            np.zeros(2, F32),
            np.zeros(2, bool),
            np.zeros(2, bool),
            o + [1, 0],
            logp=np.array([t * 0.5, -t * 0.5], np.float64),
            mask_bits=np.array([[t, 1, 0], [0, 1, t]], np.uint8),
        )
    assert buf.column("logp").dtype == np.float64 and buf.column("mask_bits").shape == (20, 3)
    b = buf.sample(100)
    assert set(b.extras) == {"logp", "mask_bits"}
    t = b.obs[:, 0]
    env = b.obs[:, 1]
    np.testing.assert_array_equal(b.extras["logp"], np.where(env == 0, t * 0.5, -t * 0.5))
    np.testing.assert_array_equal(b.extras["mask_bits"][:, 1], 1)
    np.testing.assert_array_equal(b.extras["mask_bits"][:, 0], np.where(env == 0, t, 0))


def test_dict_obs_key_order_of_obs_next_does_not_matter():
    buf = rlcore.ReplayBuffer(10, seed=0)
    a, b = np.zeros(2, F32), np.zeros(1, F32)
    buf.add({"a": a, "b": b}, np.zeros(1, F32), 0.0, False, False, {"b": b + 1, "a": a + 1})
    assert len(buf) == 1
    np.testing.assert_array_equal(buf.sample(1).obs_next["a"][0], [1, 1])


def test_dict_obs_key_order_after_first_add_does_not_matter():
    buf = rlcore.ReplayBuffer(10, seed=0)
    a, b = np.zeros(2, F32), np.zeros(1, F32)
    buf.add({"a": a, "b": b}, np.zeros(1, F32), 0.0, False, False, {"a": a + 1, "b": b + 1})
    buf.add({"b": b + 1, "a": a + 1}, np.zeros(1, F32), 0.0, False, False, {"b": b + 2, "a": a + 2})
    s, e, ln = buf.episode_bounds(np.array([0]))
    assert ln.tolist() == [2], "same keys in another order are the same observation (no cut)"
    assert buf.column("obs.a")[2].tolist() == [2, 2]


def test_from_spaces_declares_columns_before_any_add():
    obs_space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1, 1, (3,), F32),
            "grid": gym.spaces.MultiBinary(4),
            "k": gym.spaces.Discrete(5),
        }
    )
    buf = rlcore.ReplayBuffer.from_spaces(
        obs_space, gym.spaces.Discrete(3), capacity=12, num_envs=2, seed=0, extras={"logp": ((), np.float32)}
    )
    obs_schema, step_schema = buf._schema()
    assert dict((s[0], (s[1], tuple(s[2]))) for s in obs_schema) == {
        "obs.pos": ("float32", (3,)),
        "obs.grid": ("int8", (4,)),
        "obs.k": ("int64", ()),
    }
    assert [(s[0], s[1], tuple(s[2])) for s in step_schema] == [("act", "int64", ()), ("logp", "float32", ())]
    views = buf.column("obs")
    assert views["pos"].shape == (12, 3) and buf.act.dtype == np.int64
    o = obs_space.sample()
    vo = {k: np.stack([v, v]) for k, v in o.items()}
    buf.add(vo, np.array([1, 2]), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), vo, logp=np.zeros(2, F32))
    assert len(buf) == 2
    b = buf.sample(4)
    assert b.obs["grid"].dtype == np.int8 and b.act.dtype == np.int64 and b.extras["logp"].dtype == np.float32
    assert set(b.act.tolist()) <= {1, 2}


def test_from_spaces_box_observation_and_box_action():
    buf = rlcore.PrioritizedReplayBuffer.from_spaces(
        gym.spaces.Box(-1, 1, (4,), np.float64), gym.spaces.Box(-1, 1, (2,), F32), capacity=8, seed=0
    )
    assert buf.column("obs").dtype == np.float64 and buf.act.shape == (8, 2)
    buf.add(np.ones(4), np.ones(2, F32), 1.0, True, False, np.zeros(4))
    assert len(buf) == 1 and buf.sample(2).weights.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------------------------
# out= and to_torch


def test_sample_out_fills_and_returns_caller_arrays():
    buf = wrapped_buffer()
    twin = rlcore.ReplayBuffer(18, num_envs=3)
    twin.load_state_dict(buf.state_dict())
    out = buf.sample(32, n_step=2)
    twin.sample(32, n_step=2)
    ids = {f: id(getattr(out, f)) for f in ("obs", "act", "rew", "obs_next", "discount", "indices")}
    ids["aux"] = id(out.extras["aux"])
    got = buf.sample(32, n_step=3, gamma=0.7, out=out)
    want = twin.sample(32, n_step=3, gamma=0.7)
    batches_equal(got, want)
    for f, i in ids.items():
        arr = got.extras["aux"] if f == "aux" else getattr(got, f)
        assert id(arr) == i, f"{f} is not the caller's array"
    assert got.rew is out.rew


def test_sample_out_with_dict_obs_and_extras():
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(20, 2), 2, dict_obs=True)
    for _ in range(6):
        stream.step(["step", "trunc"])
    out = buf.sample(8)
    pos = out.obs["pos"]
    res = buf.sample(8, out=out)
    assert res.obs["pos"] is pos
    for i, p in enumerate(res.indices):
        np.testing.assert_array_equal(res.obs["pos"][i], buf.column("obs.pos")[p])


def test_to_torch_is_zero_copy_on_cpu():
    torch = pytest.importorskip("torch")
    buf = rlcore.PrioritizedReplayBuffer(16, num_envs=2, seed=0)
    Stream(buf, RefBuffer(16, 2), 2).step(["step", "term"])
    b = buf.sample(8)
    t = b.to_torch("cpu")
    assert isinstance(t.obs, torch.Tensor) and t.obs.dtype == torch.float32
    assert t.terminated.dtype == torch.bool and t.indices.dtype == torch.int64
    assert t.weights.dtype == torch.float32 and t.extras["aux"].dtype == torch.int32
    for f in ("obs", "act", "rew", "obs_next", "discount", "indices", "weights"):
        assert getattr(t, f).data_ptr() == getattr(b, f).__array_interface__["data"][0], f
        np.testing.assert_array_equal(getattr(t, f).numpy(), getattr(b, f))


def test_to_torch_with_dict_obs_gives_dict_of_tensors():
    torch = pytest.importorskip("torch")
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(20, 2), 2, dict_obs=True)
    for _ in range(4):
        stream.step(["step", "step"])
    b = buf.sample(8)
    t = b.to_torch()
    assert set(t.obs) == {"pos", "tag"} and t.obs["tag"].dtype == torch.int16
    assert t.obs_next["pos"].data_ptr() == b.obs_next["pos"].__array_interface__["data"][0]
    assert t.weights is None


def test_to_torch_cuda_from_pinned_out_arrays():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")

    buf = rlcore.PrioritizedReplayBuffer(64, num_envs=2, seed=0)
    stream = Stream(buf, RefBuffer(64, 2), 2)
    for _ in range(10):
        stream.step(["step", "trunc"])

    def pinned(a):
        return torch.from_numpy(np.ascontiguousarray(a)).pin_memory().numpy()

    fresh = buf.sample(32)
    out = fresh._replace(
        **{
            f: pinned(getattr(fresh, f))
            for f in (
                "obs",
                "act",
                "rew",
                "obs_next",
                "terminated",
                "truncated",
                "discount",
                "indices",
                "weights",
            )
        },
        extras={k: pinned(v) for k, v in fresh.extras.items()},
    )
    b = buf.sample(32, n_step=2, out=out)
    t = b.to_torch("cuda")
    torch.cuda.synchronize()
    for f in ("obs", "act", "rew", "obs_next", "terminated", "discount", "indices", "weights"):
        assert getattr(t, f).device.type == "cuda", f
        np.testing.assert_array_equal(getattr(t, f).cpu().numpy(), getattr(b, f), err_msg=f)
    np.testing.assert_array_equal(t.extras["aux"].cpu().numpy(), b.extras["aux"])


# ---------------------------------------------------------------------------------------------
# gathers: large batches, rows of every size, the batch repr, the bench floor


@pytest.mark.parametrize("n_step", [1, 3])
def test_large_batch_gather_matches_views(n_step):
    """Batches above 1 MiB are gathered with the GIL released (another code path)."""
    buf = rlcore.ReplayBuffer(4000, num_envs=4, seed=0)
    ref = RefBuffer(4000, 4)
    stream = Stream(buf, ref, 4, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(1200):
        stream.step(list(rng.choice(["step"] * 8 + ["term", "trunc", "cut"], size=4)))
    b = buf.sample(60_000, n_step=n_step, gamma=0.9)
    assert b.obs.nbytes * 2 + b.act.nbytes > 1 << 20
    sampleable = np.array(sorted(ref.sampleable()))
    assert np.isin(b.indices, sampleable).all()
    np.testing.assert_array_equal(b.obs, buf.column("obs")[b.indices])
    np.testing.assert_array_equal(b.act, buf.act[b.indices])
    np.testing.assert_array_equal(b.extras["aux"], buf.column("aux")[b.indices])
    for i in range(0, 60_000, 997):  # spot-check the windows against the reference
        w = ref.nstep(int(b.indices[i]), n_step, 0.9)
        np.testing.assert_array_equal(b.obs_next[i], w["obs_next"])
        np.testing.assert_allclose(b.rew[i], w["rew"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.discount[i], w["discount"], rtol=1e-6)


@pytest.mark.parametrize("n_step", [1, 2], ids=["one-step", "n-step"])
@pytest.mark.parametrize(
    "nbytes", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300]
)
def test_gather_copies_rows_of_every_size_exactly(nbytes, n_step):
    """The sampler copies short rows with fixed-size moves; every size must come out exact."""
    rng = np.random.default_rng(nbytes)
    n = 3
    buf = rlcore.ReplayBuffer(60, num_envs=n, seed=nbytes)
    stored_act = {}
    obs = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    for k in range(25):
        act = rng.integers(-128, 128, size=(n, nbytes), dtype=np.int8)
        nxt = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
        z = np.zeros(n, bool)
        res = buf.add(obs, act, np.zeros(n, F32), z, np.array([k % 6 == 5] * n), nxt)
        for e, p in enumerate(res.indices):
            stored_act[int(p)] = act[e].copy()
        obs = nxt if k % 6 != 5 else rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    b = buf.sample(500, n_step=n_step, gamma=0.5)
    np.testing.assert_array_equal(b.obs, buf.column("obs")[b.indices])
    np.testing.assert_array_equal(b.act, np.stack([stored_act[int(p)] for p in b.indices]))
    m = np.where(b.discount == np.float32(0.25), 2, 1)
    assert np.all((b.discount == np.float32(0.25)) | (b.discount == np.float32(0.5)))
    seg = buf.segment_len
    nxt_rows = b.indices // seg * seg + (b.indices % seg + m) % seg
    np.testing.assert_array_equal(b.obs_next, buf.column("obs")[nxt_rows])
    assert b.obs.dtype == np.uint8 and b.act.dtype == np.int8


def test_batch_repr_gives_shapes_and_dtypes_not_values():
    buf = long_buffer(0)
    r = repr(buf.sample(256))
    assert "obs=ndarray[256, 2] float32" in r and "indices=ndarray[256] int64" in r
    assert len(r) < 600


@pytest.mark.skipif(
    not hasattr(rlcore.ReplayBuffer, "_floor_gather"),
    reason="bench-only: built with the cargo feature bench (make install-test, make bench)",
)
def test_bench_floor_gather_copies_the_drawn_rows_and_their_next_rows():
    """The benchmark floor (issue 20) gathers real bytes: the observation of each row it returns,
    the next row's (with n_step, the observation n rows on and the rewards in between), the action,
    reward and flags, into arrays shaped like a sample's; it leaves the buffer's generator alone."""
    buf = rlcore.ReplayBuffer(64, num_envs=2, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(40):
        buf.add(rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32),
                rng.standard_normal(2).astype(np.float32), np.array([True, False]), np.array([False, True]),
                rng.standard_normal((2, 3)).astype(np.float32))
    before = buf.sample(8).indices
    fields = rlcore.TransitionBatch(*buf._floor_gather(50, 3)[:8])
    obs, act, rew = buf.column("obs"), buf.column("act"), buf.column("rew")
    idx = fields.indices
    seg = buf.segment_len
    nxt = np.where((idx + 1) % seg == 0, idx + 1 - seg, idx + 1)
    assert fields.obs.shape == (50, 3) and fields.obs_next.shape == (50, 3) and fields.act.shape == (50, 2)
    np.testing.assert_array_equal(fields.obs, obs[idx])
    np.testing.assert_array_equal(fields.obs_next, obs[nxt])
    np.testing.assert_array_equal(fields.act, act[idx])
    np.testing.assert_array_equal(fields.rew, rew[idx])
    np.testing.assert_array_equal(fields.terminated, buf.column("terminated")[idx])
    assert len(set(idx.tolist())) > 20
    # the buffer's own stream continues as if the floor had not run
    ref = rlcore.ReplayBuffer(64, num_envs=2, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(40):
        ref.add(rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32),
                rng.standard_normal(2).astype(np.float32), np.array([True, False]), np.array([False, True]),
                rng.standard_normal((2, 3)).astype(np.float32))
    np.testing.assert_array_equal(ref.sample(8).indices, before)
    np.testing.assert_array_equal(ref.sample(8).indices, buf.sample(8).indices)
    # with n_step, the window's rows as they come, in the env segment's ring order: the rewards of
    # rows t .. t + n - 1 summed (float32, as stored) and the observation of row t + n
    for n in (2, 3):
        f = rlcore.TransitionBatch(*buf._floor_gather(50, 4, n)[:8])
        rows = [f.indices]
        for _ in range(n):
            r = rows[-1]
            rows.append(np.where((r + 1) % seg == 0, r + 1 - seg, r + 1))
        want = rew[rows[0]]
        for r in rows[1:n]:
            want = want + rew[r]
        np.testing.assert_array_equal(f.obs, obs[f.indices])
        np.testing.assert_array_equal(f.obs_next, obs[rows[n]])
        np.testing.assert_allclose(f.rew, want, rtol=1e-6)
    with pytest.raises(rlcore.errors.InvalidValueError, match="n_step"):
        buf._floor_gather(8, 1, 0)
