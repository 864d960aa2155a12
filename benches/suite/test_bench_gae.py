"""GAE over a rollout of T=2048 steps of N=8 envs (PPO's default shape): rlcore's Rust kernel
against rlox's, Tianshou's numba kernel, SB3's RolloutBuffer and a numpy reference loop.

Each library gets the layout it wants, prepared outside the timer: rlcore and SB3 take
time-major ``[T, N]``; rlox's batched kernels and Tianshou's take flat env-major arrays.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pytest
from conftest import build_or_skip, require, tag

T, N = 2048, 8
GAMMA, LAM = 0.99, 0.95
OP = f"GAE {T}x{N}"
GAE_LIBS = ["rlcore", "rlox", "rlox (compute_gae per env)", "tianshou", "sb3", "numpy loop"]


@lru_cache(maxsize=1)
def rollout() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    values_ext = rng.standard_normal((T + 1, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.002
    trunc = rng.random((T, N)) < 0.002
    return {
        "rew": rng.standard_normal((T, N)).astype(np.float32),
        "values": np.ascontiguousarray(values_ext[:-1]),
        "next_values": np.ascontiguousarray(values_ext[1:]),
        "terminated": term,
        "truncated": trunc & ~term,
    }


def numpy_gae(
    rew: np.ndarray, values: np.ndarray, next_values: np.ndarray, term: np.ndarray, trunc: np.ndarray
) -> Any:
    """The reference recursion of docs/gae.md, vectorised over envs."""
    not_term = 1.0 - term.astype(np.float32)
    not_done = 1.0 - (term | trunc).astype(np.float32)
    adv = np.empty_like(rew)
    last = np.zeros(rew.shape[1], np.float32)
    for t in range(rew.shape[0] - 1, -1, -1):
        delta = rew[t] + GAMMA * not_term[t] * next_values[t] - values[t]
        last = delta + GAMMA * LAM * not_done[t] * last
        adv[t] = last
    return adv, adv + values


def _gae_op(lib: str) -> tuple[Any, str]:
    d = rollout()
    done = d["terminated"] | d["truncated"]
    if lib == "rlcore":
        import rlcore

        args = (d["rew"], d["values"], d["next_values"], d["terminated"], d["truncated"])
        return (lambda: rlcore.compute_gae(*args, GAMMA, LAM)), "[T, N] float32"
    if lib == "numpy loop":
        return (
            lambda: numpy_gae(d["rew"], d["values"], d["next_values"], d["terminated"], d["truncated"])
        ), ""
    if lib == "rlox":
        rlox = require("rlox")
        rew, val = d["rew"].T.ravel().copy(), d["values"].T.ravel().copy()
        dones = done.T.ravel().astype(np.float32)
        last = d["next_values"][-1].copy()
        return (
            lambda: rlox.compute_gae_batched_f32(rew, val, dones, last, T, GAMMA, LAM)
        ), "compute_gae_batched_f32, env-major flat input"
    if lib == "rlox (compute_gae per env)":
        rlox = require("rlox")
        per_env = [
            (
                d["rew"][:, e].astype(np.float64),
                d["values"][:, e].astype(np.float64),
                done[:, e].astype(np.float64),
                float(d["next_values"][-1, e]),
            )
            for e in range(N)
        ]
        gae = rlox.compute_gae
        return (
            lambda: [gae(r, v, dn, lv, GAMMA, LAM) for r, v, dn, lv in per_env]
        ), "compute_gae (f64) once per env"
    if lib == "tianshou":
        require("tianshou")
        from tianshou.algorithm.algorithm_base import _gae

        v_s = d["values"].T.ravel().astype(np.float64)
        v_s_ = (d["next_values"] * ~d["terminated"]).T.ravel().astype(np.float64)
        rew = d["rew"].T.ravel().astype(np.float64)
        end = done.T.copy()
        end[:, -1] = True
        end = end.ravel()
        _gae(v_s, v_s_, rew, end, GAMMA, LAM)  # numba compile outside the timer
        return (lambda: _gae(v_s, v_s_, rew, end, GAMMA, LAM)), "numba _gae, env-major flat float64"
    if lib == "sb3":
        require("stable_baselines3")
        import torch
        from gymnasium import spaces
        from stable_baselines3.common.buffers import RolloutBuffer

        buf = RolloutBuffer(
            T,
            spaces.Box(-1, 1, (17,), np.float32),
            spaces.Box(-1, 1, (6,), np.float32),
            device="cpu",
            gae_lambda=LAM,
            gamma=GAMMA,
            n_envs=N,
        )
        buf.rewards[:] = d["rew"]
        buf.values[:] = d["values"]
        buf.episode_starts[1:] = done[:-1]
        last_values = torch.as_tensor(d["next_values"][-1])
        last_dones = done[-1].astype(np.float32)
        return (
            lambda: buf.compute_returns_and_advantage(last_values, last_dones)
        ), "RolloutBuffer (Python loop over T)"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", GAE_LIBS)
def test_gae(benchmark: Any, lib: str) -> None:
    tag(benchmark, OP, lib)
    op, note = build_or_skip(lib, lambda: _gae_op(lib))
    op()
    tag(benchmark, OP, lib, note)
    benchmark(op)


def test_gae_matches_reference() -> None:
    """The benchmarked rlcore call computes what the reference loop computes."""
    import rlcore

    d = rollout()
    adv, ret = rlcore.compute_gae(
        d["rew"], d["values"], d["next_values"], d["terminated"], d["truncated"], GAMMA, LAM
    )
    ref_adv, ref_ret = numpy_gae(d["rew"], d["values"], d["next_values"], d["terminated"], d["truncated"])
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-4, atol=1e-4)
