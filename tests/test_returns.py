"""compute_gae and compute_nstep_returns against the numpy references of tests/reference.py."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import gae, nstep_returns
from rlcore.errors import DTypeError, InvalidValueError, RlcoreError, ShapeError

F32 = np.float32


@st.composite
def rollouts(draw):
    t_len, n = draw(st.integers(1, 30)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    rew = rng.normal(size=(t_len, n)).astype(F32)
    values = rng.normal(size=(t_len, n)).astype(F32)
    next_values = rng.normal(size=(t_len, n)).astype(F32)
    p_term, p_trunc = draw(st.sampled_from([0.0, 0.1, 0.3])), draw(st.sampled_from([0.0, 0.1, 0.3]))
    term = rng.random((t_len, n)) < p_term
    trunc = rng.random((t_len, n)) < p_trunc
    gamma = draw(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
    lam = draw(st.sampled_from([0.0, 0.5, 0.95, 1.0]))
    return rew, values, next_values, term, trunc, gamma, lam


@settings(max_examples=150, deadline=None)
@given(r=rollouts())
def test_gae_matches_reference(r):
    rew, values, next_values, term, trunc, gamma, lam = r
    adv, ret = rlcore.compute_gae(rew, values, next_values, term, trunc, gamma, lam)
    want_adv, want_ret = gae(rew, values, next_values, term, trunc, gamma, lam)
    assert adv.dtype == np.float32 and adv.shape == rew.shape and ret.shape == rew.shape
    np.testing.assert_allclose(adv, want_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ret, want_ret, rtol=1e-4, atol=1e-4)
    # 1-d input is one env
    a1, r1 = rlcore.compute_gae(
        rew[:, 0], values[:, 0], next_values[:, 0], term[:, 0], trunc[:, 0], gamma, lam
    )
    assert a1.shape == (rew.shape[0],)
    np.testing.assert_allclose(a1, want_adv[:, 0], rtol=1e-4, atol=1e-4)
    # integer 0/1 flags mean the same as bool flags
    a2, _ = rlcore.compute_gae(
        rew, values, next_values, term.astype(np.int64), trunc.astype(np.uint8), gamma, lam
    )
    np.testing.assert_array_equal(a2, adv)


def test_gae_at_episode_starts_does_not_use_previous_episode():
    """Episodes of length 3 (terminated) and 2 (cut by the rollout end) in one column."""
    gamma, lam = 0.9, 0.8
    rew = np.array([1.0, 2.0, 3.0, 4.0, 5.0], F32)
    values = np.array([0.5, 0.6, 0.7, 0.8, 0.9], F32)
    next_values = np.array([0.6, 0.7, 123.0, 0.9, 2.0], F32)  # 123: V of o_3 after termination (unused)
    term = np.array([0, 0, 1, 0, 0], bool)
    trunc = np.zeros(5, bool)
    adv, ret = rlcore.compute_gae(rew, values, next_values, term, trunc, gamma, lam)
    # the last step bootstraps from the value of its next observation
    d4 = 5.0 + gamma * 2.0 - 0.9
    assert adv[4] == pytest.approx(d4, rel=1e-6)
    # the first step of episode 2 sees only episode 2
    d3 = 4.0 + gamma * 0.9 - 0.8
    assert adv[3] == pytest.approx(d3 + gamma * lam * d4, rel=1e-6)
    # the terminated step of episode 1 does not bootstrap and does not see episode 2
    assert adv[2] == pytest.approx(3.0 - 0.7, rel=1e-6)
    np.testing.assert_allclose(ret, adv + values, rtol=1e-6)
    # changing everything about episode 1 leaves episode 2's advantages bit-identical
    rew2, values2, nv2 = rew.copy(), values.copy(), next_values.copy()
    rew2[:3], values2[:3], nv2[:3] = [-7, 8, -9], [10, -11, 12], [13, 14, -15]
    adv2, _ = rlcore.compute_gae(rew2, values2, nv2, term, trunc, gamma, lam)
    np.testing.assert_array_equal(adv2[3:], adv[3:])
    # and changing episode 2 leaves episode 1's advantages bit-identical
    rew3, values3, nv3 = rew.copy(), values.copy(), next_values.copy()
    rew3[3:], values3[3:], nv3[3:] = [40, -50], [7, 7], [-3, 99]
    adv3, _ = rlcore.compute_gae(rew3, values3, nv3, term, trunc, gamma, lam)
    np.testing.assert_array_equal(adv3[:3], adv[:3])


def test_gae_truncated_step_bootstraps_from_final_observation_and_stops_recursion():
    gamma, lam = 0.9, 0.95
    rew = np.array([[1.0], [1.0], [1.0]], F32)
    values = np.array([[0.1], [0.2], [0.3]], F32)
    next_values = np.array([[0.2], [7.0], [0.4]], F32)  # 7.0: V of the final observation o_2
    term = np.zeros((3, 1), bool)
    trunc = np.array([[False], [True], [False]])
    adv, _ = rlcore.compute_gae(rew, values, next_values, term, trunc, gamma, lam)
    d1 = 1.0 + gamma * 7.0 - 0.2
    d0 = 1.0 + gamma * 0.2 - 0.1
    assert adv[1, 0] == pytest.approx(d1, rel=1e-6)
    assert adv[0, 0] == pytest.approx(d0 + gamma * lam * d1, rel=1e-6)
    assert adv[2, 0] == pytest.approx(1.0 + gamma * 0.4 - 0.3, rel=1e-6)


@pytest.mark.parametrize(
    "call,err",
    [
        (lambda z, f: rlcore.compute_gae(z, z, z[:-1], f, f, 0.9, 0.9), ShapeError),
        (lambda z, f: rlcore.compute_gae(z, z, z, f[:, :1], f, 0.9, 0.9), ShapeError),
        (lambda z, f: rlcore.compute_gae(z[None], z[None], z[None], f[None], f[None], 0.9, 0.9), ShapeError),
        (lambda z, f: rlcore.compute_gae(z, z, z, f, f, 1.5, 0.9), InvalidValueError),
        (lambda z, f: rlcore.compute_gae(z, z, z, f, f, 0.9, -0.1), InvalidValueError),
        (lambda z, f: rlcore.compute_gae(z, z, z, f, f, float("nan"), 0.9), InvalidValueError),
        (lambda z, f: rlcore.compute_gae(z, z, z, f.astype(F32), f, 0.9, 0.9), DTypeError),
    ],
    ids=["next-values-shape", "flags-shape", "3-d", "gamma", "lambda", "nan-gamma", "float-flags"],
)
def test_gae_bad_input_raises_typed_error(call, err):
    z = np.zeros((4, 2), F32)
    f = np.zeros((4, 2), bool)
    with pytest.raises(err) as info:
        call(z, f)
    assert isinstance(info.value, RlcoreError)


# ---------------------------------------------------------------------------------------------
# n-step


@settings(max_examples=150, deadline=None)
@given(
    t_len=st.integers(1, 40),
    n_step=st.integers(1, 6),
    gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    p_done=st.sampled_from([0.0, 0.15, 0.4]),
    seed=st.integers(0, 2**32 - 1),
)
def test_nstep_returns_match_reference(t_len, n_step, gamma, p_done, seed):
    rng = np.random.default_rng(seed)
    rew = rng.normal(size=t_len).astype(F32)
    term = rng.random(t_len) < p_done / 2
    trunc = (rng.random(t_len) < p_done / 2) & ~term
    ret, disc, hor = rlcore.compute_nstep_returns(rew, term, trunc, n_step, gamma)
    w_ret, w_disc, w_hor = nstep_returns(rew, term, trunc, n_step, gamma)
    assert ret.dtype == np.float32 and disc.dtype == np.float32 and hor.dtype == np.int64
    np.testing.assert_array_equal(hor, w_hor)
    np.testing.assert_allclose(ret, w_ret, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(disc, w_disc, rtol=1e-6, atol=0)


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_nstep_returns_design_oracle(end):
    rew = np.ones(6, F32)
    flag = np.array([0, 0, 0, 0, 0, 1], bool)
    z = np.zeros(6, bool)
    term, trunc = (flag, z) if end == "terminated" else (z, flag)
    ret, disc, hor = rlcore.compute_nstep_returns(rew, term, trunc, 3, 0.5)
    np.testing.assert_allclose(ret, [1.75, 1.75, 1.75, 1.75, 1.5, 1.0], rtol=1e-7)
    np.testing.assert_array_equal(hor, [3, 3, 3, 3, 2, 1])
    power = np.array([0.125, 0.125, 0.125, 0.125, 0.25, 0.5])
    masked = np.array([0, 0, 0, 1, 1, 1], bool) if end == "terminated" else np.zeros(6, bool)
    np.testing.assert_allclose(disc, np.where(masked, 0.0, power), rtol=1e-7)


def test_nstep_returns_agree_with_buffer_samples():
    """The free function and the buffer's sampler implement the same definition."""
    rng = np.random.default_rng(3)
    t_len = 30
    rew = rng.normal(size=t_len).astype(F32)
    term = np.zeros(t_len, bool)
    trunc = np.zeros(t_len, bool)
    term[[6, 20]] = True
    trunc[13] = True
    buf = rlcore.ReplayBuffer(64, seed=0)
    for t in range(t_len):
        buf.add(np.array([t], F32), np.zeros(1, F32), rew[t], term[t], trunc[t], np.array([t + 1], F32))
    ret, disc, hor = rlcore.compute_nstep_returns(rew, term, trunc, 4, 0.9)
    b = buf.sample(500, n_step=4, gamma=0.9)
    t = b.obs[:, 0].astype(int)
    np.testing.assert_allclose(b.rew, ret[t], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.discount, disc[t], rtol=1e-6)
    np.testing.assert_array_equal(b.obs_next[:, 0].astype(int), t + hor[t])


@pytest.mark.parametrize(
    "call,err",
    [
        (lambda r, f: rlcore.compute_nstep_returns(r, f, f, 0, 0.9), InvalidValueError),
        (lambda r, f: rlcore.compute_nstep_returns(r, f, f, 3, 1.01), InvalidValueError),
        (lambda r, f: rlcore.compute_nstep_returns(r, f, f, 3, -0.5), InvalidValueError),
        (lambda r, f: rlcore.compute_nstep_returns(r, f[:-1], f, 3, 0.9), ShapeError),
        (lambda r, f: rlcore.compute_nstep_returns(r[None], f[None], f[None], 3, 0.9), ShapeError),
        (lambda r, f: rlcore.compute_nstep_returns(r, f.astype(np.float64), f, 3, 0.9), DTypeError),
    ],
    ids=["n0", "gamma-high", "gamma-low", "flags-length", "2-d", "float-flags"],
)
def test_nstep_returns_bad_input_raises_typed_error(call, err):
    with pytest.raises(err) as info:
        call(np.zeros(5, F32), np.zeros(5, bool))
    assert isinstance(info.value, RlcoreError)


@pytest.mark.parametrize("fn", ["gae", "nstep"])
def test_gamma_just_above_one_is_rejected(fn):
    z, f = np.zeros(3, F32), np.zeros(3, bool)
    with pytest.raises(InvalidValueError):
        if fn == "gae":
            rlcore.compute_gae(z, z, z, f, f, 1 + 1e-9, 0.9)
        else:
            rlcore.compute_nstep_returns(z, f, f, 2, 1 + 1e-9)
