"""What HERReplayBuffer takes: bad goal keys, goals and constructor arguments, and a ``compute_reward``
that returns the wrong shape or dtype, raises or calls back into its buffer, each a typed error with
the buffer left as it was; custom goal keys, pickle and ``state_dict``, ``sample(out=...)`` and
``from_arrays``."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from her_stream import F32, HERStream, asym_reward, check_her_batch, her_buffer, single_episode
from reference import RefBuffer
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError, RlcoreError, ShapeError


def _snapshot(buf):
    st_ = buf.state_dict()
    return st_["schema"], {k: v.copy() for k, v in st_["arrays"].items()}


def _assert_same(buf, before):
    schema, arrays = _snapshot(buf)
    assert schema == before[0]
    for k, v in before[1].items():
        np.testing.assert_array_equal(arrays[k], v, err_msg=k)


def _goal_obs(
    ag_shape=(3,), dg_shape=(3,), keys=("observation", "achieved_goal", "desired_goal"), dg_dtype=F32
):
    shapes = {"observation": (2,), "achieved_goal": ag_shape, "desired_goal": dg_shape}
    return {k: np.zeros(shapes.get(k, (1,)), dg_dtype if k == "desired_goal" else F32) for k in keys}


@pytest.mark.parametrize(
    "obs",
    [
        _goal_obs(keys=("observation", "achieved_goal")),
        _goal_obs(keys=("observation", "desired_goal")),
        _goal_obs(ag_shape=(3,), dg_shape=(2,)),
        _goal_obs(dg_dtype=np.float64),
        np.zeros(5, F32),
    ],
    ids=["no-desired", "no-achieved", "goal-shapes", "goal-dtypes", "array-obs"],
)
def test_her_first_add_with_bad_goal_keys_raises_shape_error_and_leaves_buffer_empty(obs):
    buf = her_buffer(20)
    before = _snapshot(buf)
    with pytest.raises(ShapeError):
        buf.add(obs, np.zeros(1, F32), 0.0, False, False, obs)
    _assert_same(buf, before)
    assert len(buf) == 0 and buf._schema() == ([], [])
    good = _goal_obs()
    buf.add(good, np.zeros(1, F32), 0.0, False, False, good)
    assert len(buf) == 1


def test_her_native_reward_needs_float_goals():
    buf = her_buffer(20, reward=0.1)
    obs = {
        "observation": np.zeros(2, F32),
        "achieved_goal": np.zeros(3, np.int32),
        "desired_goal": np.zeros(3, np.int32),
    }
    with pytest.raises(DTypeError):
        buf.add(obs, np.zeros(1, F32), 0.0, False, False, obs)
    assert buf._schema() == ([], [])


def test_her_from_spaces_without_goal_keys_raises_shape_error():
    space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(-1, 1, (2,)), "achieved_goal": gym.spaces.Box(-1, 1, (3,))}
    )
    with pytest.raises(ShapeError):
        rlcore.HERReplayBuffer.from_spaces(
            space, gym.spaces.Box(-1, 1, (2,)), capacity=10, distance_threshold=0.1
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(compute_reward=asym_reward, distance_threshold=0.1),
        dict(compute_reward=42),
        dict(distance_threshold=0.1, strategy="past"),
        dict(distance_threshold=0.1, future_k=-1),
        dict(distance_threshold=-0.1),
        dict(distance_threshold=float("nan")),
    ],
    ids=["no-reward", "two-rewards", "not-callable", "strategy", "negative-k", "negative-eps", "nan-eps"],
)
def test_her_bad_constructor_arguments_raise_invalid_value(kwargs):
    with pytest.raises(InvalidValueError):
        rlcore.HERReplayBuffer(20, **kwargs)


def _bad_reward_buffer(fn):
    buf = rlcore.HERReplayBuffer(40, seed=0, compute_reward=asym_reward, future_k=1e9)
    stream = HERStream(buf, RefBuffer(40, 1), 1)
    for t in range(8):
        stream.step(["trunc" if t == 7 else "step"])
    buf._compute_reward = fn
    return buf


@pytest.mark.parametrize(
    "fn,err,builtin",
    [
        (lambda ag, g, info: ag - g, ShapeError, ValueError),
        (lambda ag, g, info: np.zeros(len(ag) + 1, F32), ShapeError, ValueError),
        (lambda ag, g, info: np.zeros((len(ag), 1), F32), ShapeError, ValueError),
        (lambda ag, g, info: np.array(["x"] * len(ag)), DTypeError, TypeError),
        (lambda ag, g, info: np.zeros(len(ag), np.complex64), DTypeError, TypeError),
        (lambda ag, g, info: None, DTypeError, TypeError),
        (lambda ag, g, info: np.full(len(ag), np.nan), InvalidValueError, ValueError),
    ],
    ids=["per-dim", "too-long", "column", "strings", "complex", "none", "nan"],
)
def test_her_compute_reward_returning_wrong_shape_or_dtype_raises_and_leaves_buffer_unchanged(
    fn, err, builtin
):
    buf = _bad_reward_buffer(fn)
    before = _snapshot(buf)
    with pytest.raises(err) as info:
        buf.sample(16)
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    _assert_same(buf, before)  # the RNG too: the next good call samples as if nothing happened
    buf._compute_reward = asym_reward
    twin = rlcore.HERReplayBuffer(40, seed=0, compute_reward=asym_reward, future_k=1e9)
    twin.load_state_dict(buf.state_dict())
    np.testing.assert_array_equal(buf.sample(16).indices, twin.sample(16).indices)


def test_her_compute_reward_exception_propagates_and_leaves_buffer_unchanged():
    def boom(ag, g, info):
        raise KeyError("user bug")

    buf = _bad_reward_buffer(boom)
    before = _snapshot(buf)
    with pytest.raises(KeyError, match="user bug"):
        buf.sample(16)
    _assert_same(buf, before)


def test_her_add_with_missing_goal_key_after_first_add_raises_shape_error():
    buf, _ = single_episode(length=3)
    before = _snapshot(buf)
    obs = {"observation": np.zeros(2, F32), "achieved_goal": np.zeros(3, F32)}
    with pytest.raises(ShapeError):
        buf.add(obs, np.zeros(2, F32), 0.0, False, False, obs)
    bad = _goal_obs(dg_shape=(4,))
    with pytest.raises(ShapeError):
        buf.add(bad, np.zeros(2, F32), 0.0, False, False, bad)
    _assert_same(buf, before)


def test_her_compute_reward_calling_back_into_its_buffer_raises_api_usage_error():
    holder = {}

    def reentrant(ag, g, info):
        len(holder["buf"])  # a user reward that touches its own buffer mid-sample
        return asym_reward(ag, g, info)

    buf = _bad_reward_buffer(reentrant)
    holder["buf"] = buf
    before = _snapshot(buf)
    with pytest.raises(ApiUsageError):
        buf.sample(16)
    _assert_same(buf, before)
    buf._compute_reward = asym_reward
    assert buf.sample(4).rew.shape == (4,)


# ---------------------------------------------------------------------------------------------
# goal keys, pickle and state_dict, out=, from_arrays


def test_her_custom_goal_keys():
    buf = rlcore.HERReplayBuffer(
        40, seed=0, distance_threshold=0.5, future_k=1e9, goal_keys=("state", "reached", "target")
    )
    for t in range(6):
        o = {"state": np.zeros(2, F32), "reached": np.full(2, t, F32), "target": np.full(2, -50, F32)}
        n = {"state": np.zeros(2, F32), "reached": np.full(2, t + 1, F32), "target": np.full(2, -50, F32)}
        buf.add(o, np.zeros(1, F32), -1.0, False, t == 5, n)
    b = buf.sample(200)
    t = b.obs["reached"][:, 0]
    g = b.obs["target"][:, 0]
    assert np.all((g >= t + 1) & (g <= 6)), "future goals are achieved goals after steps t..e-1"
    np.testing.assert_array_equal(b.obs_next["target"], b.obs["target"])
    np.testing.assert_array_equal(b.rew, np.where(g == t + 1, 0.0, -1.0))


def test_her_pickle_and_state_dict_round_trip():
    buf = her_buffer(30, num_envs=2, strategy="future", future_k=3)
    stream = HERStream(buf, RefBuffer(30, 2), 2, seed=2)
    for _ in range(12):
        stream.step(["step", "trunc"])
    clone = pickle.loads(pickle.dumps(buf))
    assert clone._compute_reward is asym_reward
    a, b = buf.sample(64, n_step=2, gamma=0.9), clone.sample(64, n_step=2, gamma=0.9)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.rew, b.rew)
    np.testing.assert_array_equal(a.obs["desired_goal"], b.obs["desired_goal"])
    check_her_batch(b, stream, "future", 2, 0.9)


def test_her_sample_into_out_arrays():
    buf = her_buffer(40, num_envs=2, strategy="final", future_k=1)
    stream = HERStream(buf, RefBuffer(40, 2), 2, seed=5)
    for _ in range(10):
        stream.step(["step", "term"])
    out = buf.sample(32)
    dg = out.obs["desired_goal"]
    for _ in range(5):
        b = buf.sample(32, n_step=2, gamma=0.7, out=out)
        assert b.obs["desired_goal"] is dg
        check_her_batch(b, stream, "final", 2, 0.7)


def test_her_from_arrays_builds_an_offline_goal_buffer_with_its_reward():
    t_len = 10
    ag = np.arange(t_len + 1, dtype=np.float64)[:, None]
    obs = {
        "observation": np.zeros((t_len, 2)),
        "achieved_goal": ag[:-1],
        "desired_goal": np.full((t_len, 1), 99.0),
    }
    obs_next = {
        "observation": np.zeros((t_len, 2)),
        "achieved_goal": ag[1:],
        "desired_goal": np.full((t_len, 1), 99.0),
    }
    trunc = np.arange(t_len) % 5 == 4
    buf = rlcore.HERReplayBuffer.from_arrays(
        obs,
        np.zeros((t_len, 1), np.float32),
        -np.ones(t_len),
        np.zeros(t_len, bool),
        trunc,
        obs_next,
        strategy="final",
        future_k=1e9,
        distance_threshold=0.1,
        seed=0,
    )
    assert len(buf) == t_len
    batch = buf.sample(200)
    # 'final' with (almost) certain relabeling: the goal is the achieved goal after the episode's last step
    t = batch.obs["achieved_goal"][:, 0]
    want_goal = np.where(t < 5, 5.0, 10.0)
    relabeled = batch.obs["desired_goal"][:, 0] != 99.0
    assert relabeled.mean() > 0.99
    np.testing.assert_array_equal(batch.obs["desired_goal"][relabeled, 0], want_goal[relabeled])
    np.testing.assert_array_equal(
        batch.rew[relabeled], np.where(t[relabeled] + 1 == want_goal[relabeled], 0.0, -1.0)
    )
