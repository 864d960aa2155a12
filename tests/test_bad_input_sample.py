"""Bad inputs to ``sample`` (batch size, n_step, gamma, ``out=`` arrays), ``column`` and the
episode queries: the typed error and a buffer (and ``out=``) left exactly as it was."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from bad_inputs import F32, N, add, rejects, started_buffer, step
from rlcore.errors import ApiUsageError, DTypeError, EmptyBufferError, InvalidValueError, ShapeError


@pytest.fixture
def buf():
    return started_buffer()


# ---------------------------------------------------------------------------------------------
# sample


def test_sample_empty_buffer_raises_empty_buffer_error():
    b = rlcore.ReplayBuffer(10, seed=0)
    rejects(b, EmptyBufferError, IndexError, lambda: b.sample(4))
    # columns declared but no transition yet
    import gymnasium as gym

    d = rlcore.ReplayBuffer.from_spaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), capacity=10)
    rejects(d, EmptyBufferError, IndexError, lambda: d.sample(1))
    # cleared buffer
    add(d, **{k: v[0] for k, v in step(0, n=1).items()})
    d.clear()
    rejects(d, EmptyBufferError, IndexError, lambda: d.sample(1))


@pytest.mark.parametrize("batch_size", [0, -1, -(2**40)])
def test_sample_batch_size_not_positive_raises_invalid_value(buf, batch_size):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(batch_size))


@pytest.mark.parametrize("batch_size", [2**31, 10**12, 2**64, -(2**70)])
def test_sample_batch_size_beyond_any_allocation_raises_invalid_value(buf, batch_size):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(batch_size))


@pytest.mark.parametrize("n_step", [0, -1])
def test_sample_n_step_below_one_raises_invalid_value(buf, n_step):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(4, n_step=n_step))


@pytest.mark.parametrize("gamma", [-0.01, 1.0001, 2.0, float("nan"), float("inf")])
def test_sample_gamma_outside_unit_interval_raises_invalid_value(buf, gamma):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(4, gamma=gamma))


def test_n_step_beyond_the_segment_gives_the_windows_of_n_step_segment_len():
    a, b = rlcore.ReplayBuffer(20, num_envs=N, seed=5), rlcore.ReplayBuffer(20, num_envs=N, seed=5)
    for k in range(14):
        for x in (a, b):
            add(x, **step(k))
    x, y = a.sample(64, n_step=2**63, gamma=0.5), b.sample(64, n_step=a.segment_len, gamma=0.5)
    for f in ("obs_next", "rew", "discount", "indices"):
        np.testing.assert_array_equal(getattr(x, f), getattr(y, f))


def test_column_unknown_name_raises_api_usage_error(buf):
    e = rejects(buf, ApiUsageError, RuntimeError, lambda: buf.column("observations"))
    assert "obs" in str(e)
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.column("obs.pos"))
    fresh = rlcore.ReplayBuffer(10)
    rejects(fresh, ApiUsageError, RuntimeError, lambda: fresh.column("obs"))


# ---------------------------------------------------------------------------------------------
# sample(out=...)


def _out(buf, b=4, **override):
    out = buf.sample(b)
    return out._replace(**override)


@pytest.mark.parametrize(
    "make,err,builtin",
    [
        (lambda o: o._replace(rew=np.zeros(4, np.float64)), DTypeError, TypeError),
        (lambda o: o._replace(act=np.zeros(4, np.int32)), DTypeError, TypeError),
        (lambda o: o._replace(terminated=np.zeros(4, np.uint8)), DTypeError, TypeError),
        (lambda o: o._replace(rew=[0.0] * 4), DTypeError, TypeError),
        (lambda o: o._replace(obs=np.zeros((4, 2), F32)), ShapeError, ValueError),
        (lambda o: o._replace(indices=np.zeros(5, np.int64)), ShapeError, ValueError),
        (lambda o: o._replace(extras={"info": np.zeros((4, 1), np.int32)}), ShapeError, ValueError),
        (lambda o: o._replace(obs=np.zeros((4, 6), F32)[:, ::2]), ApiUsageError, RuntimeError),
        (lambda o: o._replace(discount=_read_only(np.zeros(4, F32))), ApiUsageError, RuntimeError),
        (lambda o: o._replace(rew=_misaligned(4, F32)), ApiUsageError, RuntimeError),
    ],
    ids=[
        "rew-f64",
        "act-i32",
        "term-u8",
        "list",
        "obs-shape",
        "indices-len",
        "extra-shape",
        "strided",
        "read-only",
        "misaligned",
    ],
)
def test_sample_bad_out_arrays_raise_and_leave_buffer_and_out_unchanged(buf, make, err, builtin):
    out = make(_out(buf))
    keep = {
        f: np.array(getattr(out, f), copy=True) for f in ("obs", "obs_next", "rew", "discount", "indices")
    }
    rejects(buf, err, builtin, lambda: buf.sample(4, out=out))
    for f, v in keep.items():
        np.testing.assert_array_equal(getattr(out, f), v, err_msg=f"out.{f} was written by a failed call")


def test_sample_out_for_another_batch_size_raises_shape_error(buf):
    out = _out(buf, b=4)
    rejects(buf, ShapeError, ValueError, lambda: buf.sample(5, out=out))


def test_sample_out_with_aliased_arrays_is_rejected(buf):
    out = _out(buf)
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.sample(4, out=out._replace(obs_next=out.obs)))


def _misaligned(n, dtype):
    """A writable, C-contiguous array of n elements whose data starts one byte past alignment."""
    a = np.frombuffer(bytearray(n * np.dtype(dtype).itemsize + 1), dtype=dtype, count=n, offset=1)
    assert a.flags.writeable and a.flags.c_contiguous and not a.flags.aligned
    return a


def _read_only(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("out", [{}, 3, None.__class__])
def test_sample_out_that_is_not_a_batch_raises_api_usage_error(buf, out):
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.sample(4, out=out))


@pytest.mark.parametrize("drop", ["extra", "obs key"])
def test_sample_out_missing_an_extra_or_an_obs_key_raises_api_usage_error(drop):
    b = rlcore.ReplayBuffer(12, num_envs=N, seed=0)
    o = {"a": np.zeros((N, 2), F32), "b": np.zeros((N, 1), np.int32)}
    z = np.zeros(N, bool)
    b.add(o, np.zeros(N, np.int64), np.ones(N), z, z, o, info=np.zeros(N, np.int32))
    out = b.sample(4)
    if drop == "extra":
        out = out._replace(extras={})
    else:
        out = out._replace(obs_next={"a": out.obs_next["a"]})
    rejects(b, ApiUsageError, RuntimeError, lambda: b.sample(4, out=out))


# ---------------------------------------------------------------------------------------------
# episode queries


@pytest.mark.parametrize("query", ["prev", "next", "episode_bounds", "is_transition"])
@pytest.mark.parametrize(
    "indices,err,builtin",
    [
        (np.array([20]), InvalidValueError, ValueError),
        (np.array([0, -1]), InvalidValueError, ValueError),
        (np.array([2**40]), InvalidValueError, ValueError),
        (np.array([1.0]), DTypeError, TypeError),
        (np.array([True]), DTypeError, TypeError),
        (np.array(["1"]), DTypeError, TypeError),
        (np.zeros((1, 1), np.int64), ShapeError, ValueError),
    ],
    ids=["past-end", "negative", "huge", "float", "bool", "str", "2-d"],
)
def test_episode_queries_bad_indices_raise(buf, query, indices, err, builtin):
    rejects(buf, err, builtin, lambda: getattr(buf, query)(indices))


@pytest.mark.parametrize("query", ["prev", "next", "episode_bounds"])
def test_episode_queries_on_never_written_row_raise_invalid_value(query):
    b = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    add(b, **step(0))  # rows 0, 1 and 10, 11 written
    rejects(b, InvalidValueError, ValueError, lambda: getattr(b, query)(np.array([0, 5])))
    rejects(b, InvalidValueError, ValueError, lambda: getattr(b, query)(np.array([12])))
