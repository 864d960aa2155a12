"""Constructor and numeric arguments: capacities, PER parameters, seeds, beta and schedules out of
range, and every int/float argument of the public calls swept with wrong types and out-of-range
values (``DTypeError``/``InvalidValueError``)."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from bad_inputs import N, add, rejects, started_buffer, step
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, RlcoreError


@pytest.fixture
def buf():
    return started_buffer()


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


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_seed_outside_uint64_raises_invalid_value(seed):
    with pytest.raises(rlcore.errors.InvalidValueError, match="seed"):
        rlcore.ReplayBuffer(10, seed=seed)


# ---------------------------------------------------------------------------------------------
# priorities on a uniform buffer, beta, schedules


def test_prioritized_api_on_uniform_buffer_raises_api_usage_error(buf):
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.update_priorities(np.array([0]), np.array([1.0])))
    rejects(buf, ApiUsageError, RuntimeError, lambda: buf.priorities(np.array([0])))

    def set_beta():
        buf.beta = 0.5

    rejects(buf, ApiUsageError, RuntimeError, set_beta)


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


def test_numpy_integer_scalars_are_accepted_as_integer_arguments():
    b = rlcore.ReplayBuffer(np.int64(20), num_envs=np.int32(N), seed=np.uint64(2**63))
    for k in range(3):
        add(b, **step(k))
    assert b.sample(np.int16(5), n_step=np.uint8(2), gamma=np.float32(0.5)).batch_size == 5
