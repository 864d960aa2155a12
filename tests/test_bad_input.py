"""One test per kind of bad input to ``add`` and ``from_arrays``: the typed error (which also
subclasses the builtin a user would catch) and a buffer left exactly as it was (docs/replay-buffer.md,
"Errors"); bool inputs read as 0/1 whatever their bytes. The other calls' bad inputs:
test_bad_input_sample.py (sample, out=, episode queries), test_bad_input_state.py (load_state_dict,
load), test_bad_input_columns.py (column names), test_bad_input_arguments.py (constructors and every
numeric argument)."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from bad_inputs import F32, N, add, bad, offline_arrays, rejects, started_buffer, step
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, RlcoreError, ShapeError


@pytest.fixture
def buf():
    return started_buffer()


# ---------------------------------------------------------------------------------------------
# add


@pytest.mark.parametrize(
    "field,value",
    [
        ("obs", np.zeros((N, 4), F32)),
        ("obs", np.zeros((N, 3, 1), F32)),
        ("obs_next", np.zeros((N, 2), F32)),
        ("act", np.zeros((N, 2), np.int64)),
        ("terminated", np.zeros((N, 1), bool)),
        ("truncated", np.zeros(N + 1, bool)),
        ("rew", np.zeros((N, 1), F32)),
        ("info", np.zeros((N, 2), np.int32)),
    ],
)
def test_add_wrong_shape_raises_shape_error(buf, field, value):
    rejects(buf, ShapeError, ValueError, lambda: add(buf, **bad(**{field: value})))


@pytest.mark.parametrize("n", [1, 3])
def test_add_wrong_number_of_envs_raises_shape_error(buf, n):
    s = step(4, n=n)
    s["info"] = np.zeros(n, np.int32)
    rejects(buf, ShapeError, ValueError, lambda: add(buf, **s))


def test_add_single_env_step_without_leading_dim_to_vector_buffer_raises_shape_error(buf):
    s = {k: v[0] for k, v in bad().items()}
    rejects(buf, ShapeError, ValueError, lambda: add(buf, **s))


@pytest.mark.parametrize(
    "field,value",
    [
        ("act", np.array([0.5, 1.0], F32)),  # float into the int64 action column
        ("act", [0.5, 1.5]),
        ("act", np.array([-1, 1], np.int64).astype(object)),
        ("obs", np.zeros((N, 3), F32).astype(object)),
        ("act", np.array(["a", "b"])),
        ("rew", np.array(["1", "2"])),
        ("terminated", np.zeros(N, F32)),
        ("info", np.zeros(N, F32)),  # float into an int32 extra
        ("info", np.array([-1, 2], np.float64)),
    ],
    ids=[
        "float-act",
        "float-list-act",
        "object-act",
        "object-obs",
        "str-act",
        "str-rew",
        "float-flags",
        "float-extra",
        "f64-extra",
    ],
)
def test_add_unsafe_dtype_raises_dtype_error(buf, field, value):
    rejects(buf, DTypeError, TypeError, lambda: add(buf, **bad(**{field: value})))


def test_add_signed_into_unsigned_column_raises_dtype_error():
    b = rlcore.ReplayBuffer(10, seed=0)
    b.add(np.zeros(2, np.uint8), np.zeros(1, F32), 0.0, False, False, np.ones(2, np.uint8))
    rejects(
        b,
        DTypeError,
        TypeError,
        lambda: b.add(np.ones(2, np.int16), np.zeros(1, F32), 0.0, False, False, np.full(2, -3, np.int16)),
    )


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_add_non_finite_reward_raises_invalid_value(buf, value):
    rejects(buf, InvalidValueError, ValueError, lambda: add(buf, **bad(rew=np.array([0.0, value], F32))))


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_add_non_finite_reward_as_python_float_single_env(value):
    b = rlcore.ReplayBuffer(6, seed=0)
    b.add(np.zeros(2, F32), 0, 0.0, False, False, np.ones(2, F32))
    rejects(
        b,
        InvalidValueError,
        ValueError,
        lambda: b.add(np.ones(2, F32), 0, value, False, False, np.ones(2, F32) * 2),
    )


@pytest.mark.parametrize("value", [1e39, -3.5e38])
def test_add_reward_overflowing_float32_raises_invalid_value(buf, value):
    rejects(
        buf, InvalidValueError, ValueError, lambda: add(buf, **bad(rew=np.array([0.0, value], np.float64)))
    )


def test_add_missing_extra_raises_api_usage_error(buf):
    s = bad()
    del s["info"]
    rejects(buf, ApiUsageError, RuntimeError, lambda: add(buf, **s))


@pytest.mark.parametrize("extra", [{"other": np.zeros(N)}, {"infox": np.zeros(N, np.int32)}])
def test_add_unknown_extra_raises_api_usage_error(buf, extra):
    s = bad(**extra)
    if "infox" in extra:
        del s["info"]
    rejects(buf, ApiUsageError, RuntimeError, lambda: add(buf, **s))


@pytest.mark.parametrize(
    "mask,err,builtin",
    [(np.ones(N, np.int64), DTypeError, TypeError), (np.ones(N + 1, bool), ShapeError, ValueError)],
    ids=["int-mask", "long-mask"],
)
def test_add_bad_mask_raises(buf, mask, err, builtin):
    rejects(buf, err, builtin, lambda: add(buf, **bad(), mask=mask))


def test_add_dict_obs_to_array_buffer_raises_shape_error(buf):
    s = bad(obs={"x": np.zeros((N, 3), F32)}, obs_next={"x": np.zeros((N, 3), F32)})
    rejects(buf, ShapeError, ValueError, lambda: add(buf, **s))


@pytest.fixture
def dict_buf():
    b = rlcore.ReplayBuffer(12, num_envs=N, seed=0)
    o = {"a": np.zeros((N, 2), F32), "b": np.zeros((N, 1), np.int32)}
    b.add(o, np.zeros(N, np.int64), np.ones(N), np.zeros(N, bool), np.zeros(N, bool), o)
    return b


@pytest.mark.parametrize(
    "obs",
    [
        np.zeros((N, 3), F32),
        {"a": np.zeros((N, 2), F32)},
        {"a": np.zeros((N, 2), F32), "b": np.zeros((N, 1), np.int32), "c": np.zeros((N, 1), F32)},
        {"a": np.zeros((N, 2), F32), "c": np.zeros((N, 1), np.int32)},
        {"a": np.zeros((N, 3), F32), "b": np.zeros((N, 1), np.int32)},
    ],
    ids=["array", "missing-key", "extra-key", "renamed-key", "key-shape"],
)
def test_add_array_or_wrong_keys_to_dict_buffer_raises_shape_error(dict_buf, obs):
    z = np.zeros(N, bool)
    rejects(
        dict_buf,
        ShapeError,
        ValueError,
        lambda: dict_buf.add(obs, np.zeros(N, np.int64), np.ones(N), z, z, obs),
    )


def test_dict_obs_key_with_unsafe_dtype_raises_dtype_error(dict_buf):
    o = {"a": np.zeros((N, 2), F32), "b": np.zeros((N, 1), F32)}
    z = np.zeros(N, bool)
    rejects(
        dict_buf, DTypeError, TypeError, lambda: dict_buf.add(o, np.zeros(N, np.int64), np.ones(N), z, z, o)
    )


@pytest.mark.parametrize(
    "field,value,err,builtin",
    [
        ("obs", np.zeros((N, 3), F32).astype(object), DTypeError, TypeError),
        ("act", np.array(["a", "b"]), DTypeError, TypeError),
        ("rew", np.array([0.0, np.nan]), InvalidValueError, ValueError),
        ("rew", np.zeros(N + 1), ShapeError, ValueError),
        ("obs_next", np.zeros((N, 4), F32), ShapeError, ValueError),
        ("terminated", np.zeros(N, F32), DTypeError, TypeError),
    ],
    ids=["object-obs", "str-act", "nan-rew", "wrong-N", "obs-next-shape", "float-flags"],
)
def test_failed_first_add_leaves_buffer_empty_and_undeclared(field, value, err, builtin):
    b = rlcore.ReplayBuffer(10, num_envs=N, seed=0)
    s = step(0)
    s[field] = value
    rejects(b, err, builtin, lambda: add(b, **s))
    assert b._schema() == ([], []) and len(b) == 0
    # the failed call did not fix the columns: a different (valid) layout is accepted now
    z = np.zeros(N, bool)
    b.add(np.zeros((N, 5), np.float64), np.zeros((N, 2), F32), np.ones(N), z, z, np.ones((N, 5)))
    assert b.column("obs").shape == (10, 5) and len(b) == N


# ---------------------------------------------------------------------------------------------
# values that a permitted cast cannot hold


@pytest.mark.parametrize(
    "field,value",
    [
        ("act", np.full(N, 2**63 + 1, np.uint64)),  # int64 column: would wrap around
        ("obs", np.full((N, 3), 1e300)),  # float32 column: would become inf
        ("info", np.full(N, 2**40, np.int64)),  # int32 extra column: out of range
    ],
)
def test_add_value_out_of_the_column_range_raises_dtype_error(buf, field, value):
    over = {"obs_next": value} if field == "obs" else {}
    rejects(buf, DTypeError, TypeError, lambda: add(buf, **bad(**{field: value}, **over)))


def test_add_narrowing_casts_that_fit_are_accepted(buf):
    # float64 into float32 (rounded), non-finite floats kept, uint64 into int64 within range
    s = bad(obs=np.full((N, 3), 4.0), obs_next=np.full((N, 3), np.inf), act=np.full(N, 7, np.uint64))
    add(buf, **s)
    assert np.isinf(buf.column("obs")).any()


# ---------------------------------------------------------------------------------------------
# from_arrays


@pytest.mark.parametrize(
    "override,err,builtin",
    [
        pytest.param(dict(rew=np.ones(5, F32)), ShapeError, ValueError, id="rew-long"),
        pytest.param(dict(rew=np.ones((4, 1), F32)), ShapeError, ValueError, id="rew-2d"),
        pytest.param(
            dict(obs_next=np.zeros((3, 3), F32)),
            ShapeError,
            ValueError,
            id="obs-next-short",
        ),
        pytest.param(dict(obs=np.zeros((5, 3), F32)), ShapeError, ValueError, id="obs-long"),
        pytest.param(dict(act=np.zeros(3, np.int64)), ShapeError, ValueError, id="act-short"),
        pytest.param(
            dict(obs={"a": np.zeros((4, 3), F32)}, obs_next={"b": np.zeros((4, 3), F32)}),
            ShapeError,
            ValueError,
            id="dict-keys",
        ),
        pytest.param(
            dict(obs={"a": np.zeros((4, 3), F32)}),
            ShapeError,
            ValueError,
            id="dict-vs-array",
        ),
        pytest.param(dict(rew=np.array([0, np.nan, 0, 0], F32)), InvalidValueError, ValueError, id="nan-rew"),
        pytest.param(dict(terminated=np.zeros(4, F32)), DTypeError, TypeError, id="float-flags"),
        pytest.param(
            dict(obs=np.zeros((4, 3), F32).astype(object)),
            DTypeError,
            TypeError,
            id="object-obs",
        ),
    ],
)
def test_from_arrays_bad_input_raises_typed_error(override, err, builtin):
    kw = {**offline_arrays(), **override}
    with pytest.raises(err) as info:
        rlcore.ReplayBuffer.from_arrays(
            kw["obs"], kw["act"], kw["rew"], kw["terminated"], kw["truncated"], kw["obs_next"], capacity=16
        )
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    # without capacity=, the default capacity is computed from the same arrays first
    with pytest.raises(err):
        rlcore.ReplayBuffer.from_arrays(
            kw["obs"], kw["act"], kw["rew"], kw["terminated"], kw["truncated"], kw["obs_next"]
        )


# ---------------------------------------------------------------------------------------------
# bool inputs are 0/1 whatever their bytes (numpy's bool casts)


ALL_DTYPES = [
    np.bool_,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.float32,
    np.float64,
]


def _odd_bools(byte, shape):
    """A bool array of ``shape`` whose true elements are stored as ``byte`` (2 or 255)."""
    raw = (np.arange(int(np.prod(shape))).reshape(shape) % 3 != 0).astype(np.uint8) * np.uint8(byte)
    return raw.view(np.bool_)


@pytest.mark.parametrize("byte", [2, 255])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_bool_bytes_2_and_255_are_stored_as_one_in_every_declared_column_dtype(dtype, byte):
    import gymnasium as gym

    b = rlcore.ReplayBuffer.from_spaces(
        gym.spaces.Box(-1, 1, (2,)),
        gym.spaces.Box(-1, 1, (3,)),
        capacity=12,
        num_envs=N,
        extras={"flag": ((3,), dtype)},
    )
    flag, act = _odd_bools(byte, (N, 3)), _odd_bools(byte, (N, 3))
    s = step(0)
    s["obs"], s["obs_next"] = np.zeros((N, 2), F32), np.ones((N, 2), F32)
    s["act"] = act
    res = add(b, **s, flag=flag)
    want = np.asarray(flag).astype(dtype)  # numpy's cast: 1 for every true element
    assert want.max() == 1
    stored = b.column("flag")[res.indices]
    np.testing.assert_array_equal(stored, want)
    assert stored.view(np.uint8).max() <= 1 if dtype is np.bool_ else True
    np.testing.assert_array_equal(b.column("act")[res.indices], np.asarray(act).astype(np.float32))
    batch = b.sample(16)
    assert set(np.unique(batch.extras["flag"].astype(np.float64))) <= {0.0, 1.0}


@pytest.mark.parametrize("byte", [2, 255])
def test_bool_bytes_2_and_255_in_inferred_columns_flags_mask_and_reward_read_as_one(byte):
    b = rlcore.ReplayBuffer(12, num_envs=N, seed=0)
    o0, o1, o2 = _odd_bools(byte, (N, 4)), ~_odd_bools(1, (N, 4)), _odd_bools(1, (N, 4))
    one = np.full(N, byte, np.uint8).view(np.bool_)
    r0 = b.add(
        o0,
        _odd_bools(byte, (N, 2)),
        one,
        np.zeros(N, bool),
        np.zeros(N, bool),
        o1,
        mask=one,
        info=_odd_bools(byte, (N, 2)),
    )
    assert b._schema()[0] == [("obs", "uint8", (4,))]
    assert r0.indices.tolist() == [0, 6], "a mask byte of 2/255 must mean True"
    np.testing.assert_array_equal(b.column("obs")[r0.indices], np.asarray(o0).astype(np.uint8))
    np.testing.assert_array_equal(
        b.column("info")[r0.indices], np.asarray(_odd_bools(byte, (N, 2))).astype(np.uint8)
    )
    np.testing.assert_array_equal(
        b.column("act")[r0.indices], np.asarray(_odd_bools(byte, (N, 2))).astype(np.uint8)
    )
    np.testing.assert_array_equal(b.column("rew")[r0.indices], 1.0)
    # the next obs is o1 again but with true stored as `byte`: the episode continues (no cut),
    # and a terminated flag of byte 2/255 ends it
    o1_odd = (np.asarray(o1).view(np.uint8) * np.uint8(byte)).view(np.bool_)
    r1 = b.add(
        o1_odd, _odd_bools(byte, (N, 2)), one, one, np.zeros(N, bool), o2, info=_odd_bools(byte, (N, 2))
    )
    assert r1.indices.tolist() == [1, 7] and r1.done_envs.tolist() == [0, 1]
    assert b.column("terminated")[r1.indices].tolist() == [1, 1]
    np.testing.assert_array_equal(b.episode_bounds(r1.indices)[2], [2, 2])


def test_from_arrays_bool_observations_with_odd_bytes_continue_one_episode():
    t_len = 6
    o = np.arange(t_len * 3).reshape(t_len, 3) % 2 == 0
    o_next = np.roll(o, -3)
    o_next[-1] = True
    obs = (o.view(np.uint8) * np.uint8(255)).view(np.bool_)  # the same truth values, byte 255
    z = np.zeros(t_len, bool)
    b = rlcore.ReplayBuffer.from_arrays(obs, np.zeros(t_len, F32), np.ones(t_len, F32), z, z, o_next)
    assert b.capacity == t_len + 1, "the default capacity must count one episode"
    assert b.episode_bounds(np.array([0]))[2].tolist() == [t_len]
