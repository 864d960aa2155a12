"""One test per kind of bad input: the typed error (which also subclasses the builtin a user would
catch) and a buffer left exactly as it was (DESIGN.md, "Errors")."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from rlcore.errors import (
    ApiUsageError,
    DTypeError,
    EmptyBufferError,
    InvalidValueError,
    RlcoreError,
    SaveFileError,
    ShapeError,
)

F32 = np.float32
N = 2


def snapshot(buf):
    state = buf.state_dict()
    return state["schema"], {k: v.copy() for k, v in state["arrays"].items()}, len(buf)


def assert_unchanged(buf, before):
    schema, arrays, n = snapshot(buf)
    assert n == before[2]
    assert schema == before[0], "the columns changed"
    assert set(arrays) == set(before[1])
    for k, v in before[1].items():
        np.testing.assert_array_equal(arrays[k], v, err_msg=f"state part {k} changed")


def rejects(buf, err, builtin, fn):
    """fn() raises err (an RlcoreError that is also a builtin) and leaves buf as it was."""
    before = snapshot(buf)
    with pytest.raises(err) as info:
        fn()
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    assert str(info.value), "the message must say what was expected"
    assert_unchanged(buf, before)
    return info.value


def step(k=0, n=N):
    """A valid vector step continuing from step k-1 (obs = k, obs_next = k + 1)."""
    o = np.full((n, 3), k, F32)
    return dict(
        obs=o,
        act=np.zeros(n, np.int64),
        rew=np.ones(n, F32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        obs_next=o + 1,
    )


def add(buf, **kw):
    return buf.add(
        kw.pop("obs"),
        kw.pop("act"),
        kw.pop("rew"),
        kw.pop("terminated"),
        kw.pop("truncated"),
        kw.pop("obs_next"),
        **kw,
    )


@pytest.fixture
def buf():
    b = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    for k in range(4):
        add(b, **step(k), info=np.full(N, k, np.int32))
    b.sample(3)
    return b


def bad(k=4, **override):
    s = step(k)
    s["info"] = np.zeros(N, np.int32)
    s.update(override)
    return s


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


@pytest.mark.parametrize("n_step", [0, -1])
def test_sample_n_step_below_one_raises_invalid_value(buf, n_step):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(4, n_step=n_step))


@pytest.mark.parametrize("gamma", [-0.01, 1.0001, 2.0, float("nan"), float("inf")])
def test_sample_gamma_outside_unit_interval_raises_invalid_value(buf, gamma):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(4, gamma=gamma))


def test_column_unknown_name_raises_api_usage_error(buf):
    e = rejects(buf, ApiUsageError, RuntimeError, lambda: buf.column("observations"))
    assert "obs" in str(e)
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.column("obs.pos"))
    fresh = rlcore.ReplayBuffer(10)
    rejects(fresh, ApiUsageError, RuntimeError, lambda: fresh.column("obs"))


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


# ---------------------------------------------------------------------------------------------
# construction


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(capacity=1),
        dict(capacity=0),
        dict(capacity=-5),
        dict(capacity=3, num_envs=2),
        dict(capacity=8, num_envs=0),
    ],
    ids=["1-row", "0", "negative", "1-row-per-env", "no-envs"],
)
def test_capacity_too_small_raises_invalid_value(kwargs):
    with pytest.raises(InvalidValueError) as info:
        rlcore.ReplayBuffer(kwargs.pop("capacity"), **kwargs)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "kwargs",
    [dict(alpha=-0.1), dict(beta=-1.0), dict(beta=float("nan")), dict(eps=0.0), dict(eps=-1e-6)],
)
def test_prioritized_parameters_out_of_range_raise_invalid_value(kwargs):
    with pytest.raises(InvalidValueError):
        rlcore.PrioritizedReplayBuffer(8, **kwargs)


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


# ---------------------------------------------------------------------------------------------
# priorities on a non-prioritized buffer, state loading


def test_prioritized_api_on_uniform_buffer_raises_api_usage_error(buf):
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.update_priorities(np.array([0]), np.array([1.0])))
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.priorities(np.array([0])))

    def set_beta():
        buf.beta = 0.5

    rejects(buf, ApiUsageError, RuntimeError, set_beta)


def test_load_state_dict_with_corrupt_arrays_raises_save_file_error(buf):
    other = rlcore.ReplayBuffer(20, num_envs=N, seed=1)
    add(other, **step(7), info=np.zeros(N, np.int32))
    state = buf.state_dict()
    for name, damage in [
        ("flags", lambda a: a | 0x80),
        ("env.n_trans", lambda a: a + 1),
        ("ep_id", lambda a: a + 1000),
        ("col:obs", lambda a: a[:-1]),
        ("rew", lambda a: a.astype(np.float64)),
    ]:
        s = {**state, "arrays": {**state["arrays"], name: damage(state["arrays"][name])}}
        rejects(other, SaveFileError, OSError, lambda s=s: other.load_state_dict(s))
    s = {**state, "arrays": {k: v for k, v in state["arrays"].items() if k != "rng"}}
    rejects(other, SaveFileError, OSError, lambda: other.load_state_dict(s))


def test_failed_load_state_dict_into_fresh_buffer_leaves_it_undeclared(buf):
    state = buf.state_dict()
    state["arrays"]["flags"] = state["arrays"]["flags"] | 0x80
    fresh = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    rejects(fresh, SaveFileError, OSError, lambda: fresh.load_state_dict(state))


@pytest.mark.parametrize("beta", [float("nan"), -0.5, float("inf")])
def test_setting_beta_out_of_range_raises_invalid_value(beta):
    b = rlcore.PrioritizedReplayBuffer(10, beta=0.4, seed=0)
    add(b, **{k: v[0] for k, v in step(0, n=1).items()})

    def set_beta():
        b.beta = beta

    rejects(b, InvalidValueError, ValueError, set_beta)
    assert b.beta == 0.4


def test_linear_schedule_duration_below_one_raises_invalid_value():
    with pytest.raises(InvalidValueError):
        rlcore.LinearSchedule(0.4, 1.0, 0)


@pytest.mark.parametrize("name", ["rew", "terminated", "truncated", "obs", "act"])
def test_from_spaces_extra_with_reserved_name_raises_invalid_value(name):
    import gymnasium as gym

    with pytest.raises((InvalidValueError, ApiUsageError)) as info:
        rlcore.ReplayBuffer.from_spaces(
            gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), capacity=10, extras={name: ((), np.float32)}
        )
    assert isinstance(info.value, RlcoreError)


def test_extra_column_named_flags_is_rejected_or_reachable():
    b = rlcore.ReplayBuffer(10, seed=0)
    try:
        b.add(np.zeros(2, F32), np.zeros(1, F32), 0.0, False, False, np.ones(2, F32), flags=np.uint8(7))
    except InvalidValueError:
        assert b._schema() == ([], [])
        return
    assert b.column("flags")[0] == 7


def _her_state():
    b = rlcore.HERReplayBuffer(20, num_envs=2, seed=0, distance_threshold=0.1, strategy="episode")
    for t in range(7):
        o = {
            "observation": np.full((2, 2), t, F32),
            "achieved_goal": np.full((2, 2), t, F32),
            "desired_goal": np.zeros((2, 2), F32),
        }
        n = {k: v + 1 if k != "desired_goal" else v for k, v in o.items()}
        b.add(o, np.zeros((2, 1), F32), np.ones(2), np.zeros(2, bool), np.array([t % 3 == 2] * 2), n)
    return b


@pytest.mark.parametrize(
    "part,delta",
    [("ep_start", 3), ("ep_start", -1), ("ep_end", -2), ("env.head", 100), ("env.next_ep", 5)],
)
def test_load_state_dict_with_inconsistent_episode_index_raises_save_file_error(part, delta):
    src = _her_state()
    state = src.state_dict()
    a = state["arrays"][part]
    state["arrays"][part] = (a.astype(np.int64) + delta).astype(a.dtype)
    dst = rlcore.HERReplayBuffer(20, num_envs=2, seed=0, distance_threshold=0.1, strategy="episode")
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


@pytest.mark.parametrize(
    "call",
    [
        "rlcore.ReplayBuffer(10**15)",
        "rlcore.ReplayBuffer(2**62)",
        "rlcore.ReplayBuffer(10**7).add(np.zeros(10**7, np.float32), 0, 0.0, False, False, np.zeros(10**7, np.float32))",
    ],
    ids=["1e15-rows", "2**62-rows", "huge-first-add"],
)
def test_impossible_capacity_raises_instead_of_aborting(call):
    import subprocess
    import sys

    code = (
        "import numpy as np, rlcore\n"
        "try:\n"
        f"    {call}\n"
        "except (MemoryError, rlcore.errors.RlcoreError) as e:\n"
        "    print('typed', type(e).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"interpreter died (rc={proc.returncode}): {proc.stderr[-300:]}"
    assert proc.stdout.startswith("typed"), proc.stdout + proc.stderr[-300:]


@pytest.mark.parametrize("value", [1e39, -3.5e38])
def test_add_reward_overflowing_float32_raises_invalid_value(buf, value):
    rejects(
        buf, InvalidValueError, ValueError, lambda: add(buf, **bad(rew=np.array([0.0, value], np.float64)))
    )


def _offline(t_len=4):
    o = np.arange(t_len * 3, dtype=F32).reshape(t_len, 3)
    z = np.zeros(t_len, bool)
    return dict(
        obs=o,
        act=np.zeros(t_len, np.int64),
        rew=np.ones(t_len, F32),
        terminated=z,
        truncated=z,
        obs_next=o + 3,
    )


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
    kw = {**_offline(), **override}
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


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_seed_outside_uint64_raises_invalid_value(seed):
    with pytest.raises(rlcore.errors.InvalidValueError, match="seed"):
        rlcore.ReplayBuffer(10, seed=seed)


# ---------------------------------------------------------------------------------------------
# values that a permitted cast cannot hold, flags other than 0/1, malformed states and saves


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


def _per_state():
    b = rlcore.PrioritizedReplayBuffer(20, num_envs=N, seed=0)
    for k in range(5):
        add(b, **step(k))
    batch = b.sample(4)
    b.update_priorities(batch.indices, np.full(4, 3.0))
    return b.state_dict()


@pytest.mark.parametrize(
    "part,value",
    [("per.max_p", np.nan), ("per.max_p", 0.0), ("per.max_p", 1e-3), ("per.max_p", -1.0)],
)
def test_load_state_dict_with_bad_max_priority_raises_save_file_error(part, value):
    state = _per_state()
    state["arrays"][part] = np.full_like(state["arrays"][part], value)
    dst = rlcore.PrioritizedReplayBuffer(20, num_envs=N, seed=0)
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


@pytest.mark.parametrize(
    "part,damage",
    [
        ("rew", lambda a: np.where(np.arange(a.size) == 0, np.nan, a).astype(a.dtype)),
        ("terminated", lambda a: np.where(np.arange(a.size) == 1, 7, a).astype(a.dtype)),
        ("truncated", lambda a: np.where(np.arange(a.size) == 1, 2, a).astype(a.dtype)),
        ("env.ep_len", lambda a: a + 10**6),
    ],
)
def test_load_state_dict_with_impossible_rows_raises_save_file_error(buf, part, damage):
    state = buf.state_dict()
    state["arrays"][part] = damage(state["arrays"][part])
    dst = rlcore.ReplayBuffer(20, num_envs=N, seed=0)
    add(dst, **step(9), info=np.zeros(N, np.int32))
    rejects(dst, SaveFileError, OSError, lambda: dst.load_state_dict(state))


@pytest.mark.parametrize("state", [{}, {"config": {}}, {"config": {"kind": "replay"}, "schema": 3}, []])
def test_load_state_dict_with_a_malformed_state_raises_save_file_error(buf, state):
    rejects(buf, SaveFileError, OSError, lambda: buf.load_state_dict(state))


def test_load_of_a_file_or_a_manifest_pointing_elsewhere_raises_save_file_error(buf, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SaveFileError):
        rlcore.ReplayBuffer.load(tmp_path / "file")
    buf.save(tmp_path / "a")
    buf.save(tmp_path / "b")
    import json

    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    other = json.loads((tmp_path / "a" / "manifest.json").read_text())
    from rlcore.buffers.persist import seal

    for field, value in [
        ("data_dir", f"../a/{other['data_dir']}"),
        ("data_dir", ".."),
        ("files", {"rew": {**m["files"]["rew"], "file": "/etc/passwd"}}),
    ]:
        bad_m = {**m, field: value if field == "data_dir" else {**m["files"], **value}}
        bad_m["checksum"] = seal(bad_m)  # a valid checksum does not make it acceptable
        (tmp_path / "b" / "manifest.json").write_text(json.dumps(bad_m))
        with pytest.raises(SaveFileError, match="plain name"):
            rlcore.ReplayBuffer.load(tmp_path / "b")


@pytest.mark.parametrize("batch_size", [2**31, 10**12, 2**64, -(2**70)])
def test_sample_batch_size_beyond_any_allocation_raises_invalid_value(buf, batch_size):
    rejects(buf, InvalidValueError, ValueError, lambda: buf.sample(batch_size))


@pytest.mark.parametrize("out", [{}, 3, None.__class__])
def test_sample_out_that_is_not_a_batch_raises_api_usage_error(buf, out):
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.sample(4, out=out))


# ---------------------------------------------------------------------------------------------
# reserved column names: refused at declaration, the same way on every path

RESERVED = [
    "obs",
    "act",
    "rew",
    "terminated",
    "truncated",
    "obs_next",
    "mask",
    "env_ids",
    "self",
    "discount",
    "indices",
    "weights",
    "extras",
    "flags",
]
ADD_ARGS = {"obs", "act", "rew", "terminated", "truncated", "obs_next", "mask"}


def test_reserved_names_are_the_documented_ones():
    assert sorted(rlcore._core.RESERVED_NAMES) == sorted(RESERVED)


def _declare_extra(where, name):
    import gymnasium as gym

    t_len = 10
    if where == "from_spaces":
        return rlcore.ReplayBuffer.from_spaces(
            gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), capacity=10, extras={name: ((), np.float32)}
        )
    if where == "from_arrays":
        kw = _offline(t_len)
        return rlcore.ReplayBuffer.from_arrays(
            kw["obs"],
            kw["act"],
            kw["rew"],
            kw["terminated"],
            kw["truncated"],
            kw["obs_next"],
            extras={name: np.arange(t_len) % 2 == 0},
        )
    b = rlcore.ReplayBuffer(10, num_envs=N, seed=0)
    s = step(0)
    try:
        if where == "first add":
            add(b, **s, **{name: np.ones(N, F32)})
        else:
            b.extend(
                *(s[k][None] for k in ("obs", "act", "rew", "terminated", "truncated", "obs_next")),
                **{name: np.ones((1, N), F32)},
            )
    finally:
        assert b._schema() == ([], []) and len(b) == 0, "a refused first call declared columns"
    return b


# add's and extend's own argument names cannot even be passed to them as extras (Python refuses
# a second value for an argument), so those two paths are checked with the other names
_DECLARE_CASES = [
    (where, name)
    for where in ("from_spaces", "from_arrays", "first add", "first extend")
    for name in [*RESERVED, "obs.x", "obs.observation"]
    if not (where == "first add" and name in ADD_ARGS | {"env_ids"})  # add(..., env_ids=) is an argument
    and not (where == "first extend" and name in ADD_ARGS | {"self"})
]


@pytest.mark.parametrize("where,name", _DECLARE_CASES)
def test_reserved_extra_name_is_refused_at_declaration_with_invalid_value(where, name):
    with pytest.raises(InvalidValueError, match="reserved") as info:
        _declare_extra(where, name)
    assert isinstance(info.value, ValueError) and name in str(info.value)


def test_from_arrays_extra_named_mask_is_refused_not_used_as_the_row_mask():
    kw = _offline(10)
    with pytest.raises(InvalidValueError, match="'mask'"):
        rlcore.ReplayBuffer.from_arrays(
            kw["obs"],
            kw["act"],
            kw["rew"],
            kw["terminated"],
            kw["truncated"],
            kw["obs_next"],
            extras={"mask": np.arange(10) % 2 == 0},
        )


def test_extra_names_that_are_not_str_raise_dtype_error():
    import gymnasium as gym

    kw = _offline(4)
    with pytest.raises(DTypeError):
        rlcore.ReplayBuffer.from_arrays(
            kw["obs"],
            kw["act"],
            kw["rew"],
            kw["terminated"],
            kw["truncated"],
            kw["obs_next"],
            extras={1: np.zeros(4)},
        )
    with pytest.raises(DTypeError):
        rlcore.ReplayBuffer.from_spaces(
            gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), capacity=10, extras={1: ((), np.float32)}
        )


def test_unreserved_names_of_any_characters_are_columns():
    b = rlcore.ReplayBuffer(10, seed=0)
    names = {"info": 1, "obs_t": 2, "my col/ä.b": 3, "": 4, "observation": 5}
    b.add(
        np.zeros(2, F32),
        0,
        0.0,
        False,
        False,
        np.ones(2, F32),
        **{k: np.float32(v) for k, v in names.items()},
    )
    for k, v in names.items():
        assert b.column(k)[0] == v
    assert b.sample(2).extras.keys() == names.keys()


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


# ---------------------------------------------------------------------------------------------
# every int/float argument: DTypeError for a wrong type, InvalidValueError out of range

DT, IV, AU, OK = DTypeError, InvalidValueError, ApiUsageError, None
SWEEP_VALUES = [2**63, 2**64, -1, 1.5, np.float64(2.0), True, None, "x"]
SWEEP_IDS = ["2**63", "2**64", "-1", "float", "np.float64", "bool", "None", "str"]
# expected outcome per argument, in the order of SWEEP_VALUES
SWEEP = {
    "capacity": [IV, IV, IV, DT, DT, DT, DT, DT],
    "num_envs": [IV, IV, IV, DT, DT, DT, DT, DT],
    "seed": [OK, IV, IV, DT, DT, DT, OK, DT],
    "alpha": [IV, IV, IV, OK, OK, DT, DT, DT],
    "beta": [OK, OK, IV, OK, OK, DT, DT, DT],
    "eps": [OK, OK, IV, OK, OK, DT, DT, DT],
    "beta=": [OK, OK, IV, OK, OK, DT, DT, DT],
    "future_k": [OK, OK, IV, OK, OK, DT, DT, DT],
    "distance_threshold": [OK, OK, IV, OK, OK, DT, IV, DT],
    "batch_size": [IV, IV, IV, DT, DT, DT, DT, DT],
    "n_step": [OK, IV, IV, DT, DT, DT, DT, DT],
    "gamma": [IV, IV, IV, IV, IV, DT, DT, DT],
    "indices": [IV, IV, IV, DT, DT, DT, DT, DT],
    "priorities": [IV, IV, IV, OK, OK, DT, DT, DT],
    "out": [AU, AU, AU, AU, AU, AU, OK, AU],
}


def _per_buf():
    b = rlcore.PrioritizedReplayBuffer(20, num_envs=N, seed=0)
    for k in range(4):
        add(b, **step(k))
    return b


def _sweep_calls(arg, value):
    """[(buffer or None, call)]: every public call that takes ``arg``, passing ``value``."""
    if arg in ("capacity", "num_envs", "seed"):
        kw = {"capacity": 16, arg: value}
        return [
            (None, lambda: rlcore.ReplayBuffer(**kw)),
            (None, lambda: rlcore.PrioritizedReplayBuffer(**kw)),
            (None, lambda: rlcore.HERReplayBuffer(**kw, distance_threshold=0.1)),
        ]
    if arg in ("alpha", "beta", "eps"):
        return [
            (None, lambda: rlcore.PrioritizedReplayBuffer(16, **{arg: value})),
            (
                None,
                lambda: rlcore.HERReplayBuffer(16, distance_threshold=0.1, prioritized=True, **{arg: value}),
            ),
        ]
    if arg in ("future_k", "distance_threshold"):
        return [(None, lambda: rlcore.HERReplayBuffer(16, **{"distance_threshold": 0.1, arg: value}))]
    b = _per_buf()
    calls = {
        "beta=": [lambda: setattr(b, "beta", value)],
        "batch_size": [lambda: b.sample(value)],
        "n_step": [lambda: b.sample(4, n_step=value)],
        "gamma": [lambda: b.sample(4, gamma=value)],
        "indices": [
            lambda: b.update_priorities(value, np.array([1.0])),
            lambda: b.priorities(value),
            lambda: b.prev(value),
            lambda: b.episode_bounds(value),
        ],
        "priorities": [lambda: b.update_priorities(np.array([0]), value)],
        "out": [lambda: b.sample(4, out=value)],
    }[arg]
    return [(b, c) for c in calls]


@pytest.mark.parametrize("k", range(len(SWEEP_VALUES)), ids=SWEEP_IDS)
@pytest.mark.parametrize("arg", list(SWEEP))
def test_every_numeric_argument_gets_a_typed_error_for_wrong_types_and_out_of_range_values(arg, k):
    value, want = SWEEP_VALUES[k], SWEEP[arg][k]
    for buf, call in _sweep_calls(arg, value):
        if want is OK:
            call()
        elif buf is None:
            with pytest.raises(want) as info:
                call()
            assert isinstance(info.value, RlcoreError), type(info.value)
        else:
            rejects(buf, want, {DT: TypeError, IV: ValueError, AU: RuntimeError}[want], call)


def test_n_step_beyond_the_segment_gives_the_windows_of_n_step_segment_len():
    a, b = rlcore.ReplayBuffer(20, num_envs=N, seed=5), rlcore.ReplayBuffer(20, num_envs=N, seed=5)
    for k in range(14):
        for x in (a, b):
            add(x, **step(k))
    x, y = a.sample(64, n_step=2**63, gamma=0.5), b.sample(64, n_step=a.segment_len, gamma=0.5)
    for f in ("obs_next", "rew", "discount", "indices"):
        np.testing.assert_array_equal(getattr(x, f), getattr(y, f))


def test_numpy_integer_scalars_are_accepted_as_integer_arguments():
    b = rlcore.ReplayBuffer(np.int64(20), num_envs=np.int32(N), seed=np.uint64(2**63))
    for k in range(3):
        add(b, **step(k))
    assert b.sample(np.int16(5), n_step=np.uint8(2), gamma=np.float32(0.5)).batch_size == 5


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
