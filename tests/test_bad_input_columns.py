"""Column names: the reserved names are refused at declaration the same way on every path (add,
extend, from_arrays, from_spaces), names that are not ``str`` raise ``DTypeError``, any other name
is a column."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from bad_inputs import F32, N, add, offline_arrays, step
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, RlcoreError

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
        kw = offline_arrays(t_len)
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


def test_from_arrays_extra_named_mask_is_refused_not_used_as_the_row_mask():
    kw = offline_arrays(10)
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

    kw = offline_arrays(4)
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
