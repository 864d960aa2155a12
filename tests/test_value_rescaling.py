"""R2D2's invertible value rescaling (rlcore.algos.common.value_rescale / value_rescale_inverse) and
the recurrent DQN's rescaled n-step double-Q target, against small numpy references."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rlcore.algos.common import adam, value_rescale, value_rescale_inverse
from rlcore.algos.r2d2 import R2D2, R2D2Config
from rlcore.batch import SequenceBatch
from rlcore.cli.main import main
from rlcore.errors import ApiUsageError, InvalidValueError
from torch import nn

EPS = 1e-3


def h_np(x: np.ndarray) -> np.ndarray:
    """Pohlen et al. 2018 / Kapturowski et al. 2019, sec. 2.3, as written there."""
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPS * x


def h_inv_np(x: np.ndarray) -> np.ndarray:
    """The paper's closed form of the inverse, as written (with its cancellation)."""
    return np.sign(x) * (((np.sqrt(1.0 + 4.0 * EPS * (np.abs(x) + 1.0 + EPS)) - 1.0) / (2.0 * EPS)) ** 2 - 1.0)


finite = st.floats(min_value=-1e7, max_value=1e7, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=32))
def test_value_rescale_inverse_undoes_value_rescale_in_float64(xs):
    x = torch.tensor(xs, dtype=torch.float64)
    back = value_rescale_inverse(value_rescale(x))
    np.testing.assert_allclose(back.numpy(), x.numpy(), rtol=1e-12, atol=1e-12)
    y = value_rescale(x)  # h is a bijection of the reals: h(h^-1(y)) == y as well
    np.testing.assert_allclose(value_rescale(value_rescale_inverse(y)).numpy(), y.numpy(), rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=-1e5, max_value=1e5, allow_nan=False, width=32), min_size=1, max_size=32))
def test_value_rescale_inverse_round_trips_in_float32_to_a_few_ulps(xs):
    x = torch.tensor(xs, dtype=torch.float32)
    back = value_rescale_inverse(value_rescale(x))
    assert back.dtype == torch.float32
    np.testing.assert_allclose(back.numpy(), x.numpy(), rtol=2e-6, atol=1e-6)


def test_value_rescale_matches_the_papers_formula_and_its_inverse():
    x = np.concatenate([-np.logspace(-6, 7, 60), [0.0], np.logspace(-6, 7, 60), np.linspace(-3, 3, 61)])
    np.testing.assert_allclose(value_rescale(torch.tensor(x)).numpy(), h_np(x), rtol=1e-14, atol=1e-15)
    y = h_np(x)
    # the paper's form loses digits to sqrt(1 + small) - 1 near 0; ours does not, hence atol
    np.testing.assert_allclose(value_rescale_inverse(torch.tensor(y)).numpy(), h_inv_np(y), rtol=1e-9, atol=1e-9)
    # known values: h(0) = 0, h(3) = 1 + 3e-3, h(-8) = -(2 + 8e-3); odd and increasing
    np.testing.assert_allclose(value_rescale(torch.tensor([0.0, 3.0, -8.0], dtype=torch.float64)).numpy(),
                               [0.0, 1.003, -2.008], rtol=1e-15)
    hx = value_rescale(torch.tensor(np.sort(x)))
    assert torch.all(hx[1:] >= hx[:-1])
    torch.testing.assert_close(value_rescale(torch.tensor(-x)), -value_rescale(torch.tensor(x)))


@pytest.mark.parametrize("fn", [value_rescale, value_rescale_inverse])
@pytest.mark.parametrize("eps", [0.0, -1e-3, float("nan")])
def test_value_rescale_refuses_a_non_positive_eps(fn, eps):
    with pytest.raises(InvalidValueError):
        fn(torch.ones(3), eps)


class LinearQ(nn.Module):
    """A stand-in for RecurrentQNetwork whose Q values are known: ``q = obs @ W`` at every step, the
    state passed through unchanged."""

    def __init__(self, w_OA: np.ndarray) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w_OA, dtype=torch.float32))
        self.obs_dim, self.recurrent_size = w_OA.shape[0], 1

    def forward(self, obs_BTO: torch.Tensor, h_BH: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return obs_BTO @ self.w, h_BH


def _tiny_batch() -> SequenceBatch:
    """B = 2 sequences of L = 5 steps (burn-in 1), 2-step windows, observations ``[B, L + 1, 2]``:
    row 0 starts its episode and is whole, its window at step 2 ends in a termination; row 1 starts
    mid-episode and has 3 valid steps (the last two are padding)."""
    rng = np.random.default_rng(7)
    b, length, n_step, gamma = 2, 5, 2, 0.99
    traj = rng.uniform(1.0, 6.0, size=(b, length + 1, 2)).astype(np.float32)
    valid = np.array([5, 3])
    obs = np.zeros((b, length, 2), np.float32)
    obs_next = np.zeros_like(obs)
    rew = np.zeros((b, length), np.float32)
    discount = np.zeros((b, length), np.float32)
    horizon = np.zeros((b, length), np.int64)
    mask = np.zeros((b, length), bool)
    terminated = np.zeros((b, length), bool)
    for i in range(b):
        for k in range(valid[i]):
            m = min(n_step, valid[i] - k)
            obs[i, k], obs_next[i, k] = traj[i, k], traj[i, k + m]
            rew[i, k] = rng.uniform(0.5, 2.0)
            terminated[i, k] = i == 0 and k == 2
            discount[i, k] = 0.0 if terminated[i, k] else gamma**m
            horizon[i, k], mask[i, k] = m, True
    act = rng.integers(0, 2, size=(b, length)).astype(np.int64) * mask
    is_first = np.zeros((b, length), bool)
    is_first[0, 0] = True
    batch = SequenceBatch(
        obs=obs, act=act, rew=rew, obs_next=obs_next, terminated=terminated, truncated=np.zeros_like(mask),
        discount=discount, mask=mask, is_first=is_first, horizon=horizon,
        indices=np.where(mask, np.arange(length)[None, :], -1), start_indices=np.array([0, 10]),
        state={"h": np.zeros((b, 1), np.float32)},
    )
    return batch


def _numpy_q(batch: SequenceBatch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """By hand, ``[B, L]`` each: Q of the taken actions and the double-Q bootstrap
    ``Q'(s', argmax_a Q(s', a))``, with ``Q(s) = s @ W`` for both networks (the target network is a
    copy of the online one) and ``s' = obs_next``."""
    q_taken = np.take_along_axis(batch.obs.astype(np.float64) @ w, batch.act[..., None], 2)[..., 0]
    q_next_all = batch.obs_next.astype(np.float64) @ w
    q_next = np.take_along_axis(q_next_all, q_next_all.argmax(-1)[..., None], 2)[..., 0]
    return q_taken, q_next


@pytest.mark.parametrize("rescale", [False, True])
def test_r2d2_target_with_value_rescaling_is_h_of_the_return_of_the_unrescaled_bootstrap(rescale):
    """The TD errors R2D2 reports are |Q - y| with y = h(rew + discount * h^-1(Q'(s', argmax Q(s'))))
    under value_rescaling (plain y = rew + discount * Q' without), step by step on a hand-built
    batch; the rescaled target is far from the targets with h or h^-1 misplaced."""
    w = np.array([[1.5, 0.4], [0.2, 1.1]])  # Q values 1.2-11, i.e. returns of 1.7-160 under h
    batch = _tiny_batch()
    q_net = LinearQ(w)
    algo = R2D2(q_net=q_net, optimizer=adam(q_net.parameters(), lr=0.0), n_actions=2, device="cpu",
                config=R2D2Config(burn_in=1, seq_len=4, value_rescaling=rescale, seed=0))
    stats = algo.update(batch)
    q_taken, q_next = _numpy_q(batch, w)
    rew, disc = batch.rew.astype(np.float64), batch.discount.astype(np.float64)
    y = h_np(rew + disc * h_inv_np(q_next)) if rescale else rew + disc * q_next
    trained = batch.mask & ((np.arange(5)[None, :] >= 1) | batch.is_first[:, :1])
    np.testing.assert_array_equal(stats.td_mask, trained)
    np.testing.assert_allclose(stats.td_abs[trained], np.abs(q_taken - y)[trained], rtol=1e-5, atol=1e-5)
    assert np.all(stats.td_abs[~trained] == 0)
    if rescale:
        wrong = {
            "no rescaling": rew + disc * q_next,
            "no inverse": h_np(rew + disc * q_next),
            "no outer h": rew + disc * h_inv_np(q_next),
            "h on the reward only": h_np(rew) + disc * q_next,
        }
        for name, y_wrong in wrong.items():
            gap = np.abs(np.abs(q_taken - y_wrong) - stats.td_abs)[trained & (disc > 0)]
            assert gap.max() > 0.1, f"the test cannot tell the target from {name!r}"


def _r2d2(rescale: bool) -> R2D2:
    q_net = LinearQ(np.eye(2))
    return R2D2(q_net=q_net, optimizer=adam(q_net.parameters(), lr=0.0), n_actions=2, device="cpu",
                config=R2D2Config(value_rescaling=rescale, seed=0))


def test_r2d2_refuses_a_state_trained_with_the_other_value_rescaling():
    """A network trained on Q must not be read as h(Q) (or the reverse): loading refuses and loads
    nothing; a state saved before the option existed counts as value_rescaling=False."""
    plain, rescaled = _r2d2(False), _r2d2(True)
    with torch.no_grad():
        plain.q_net.w.fill_(3.0)
    before = rescaled.q_net.w.detach().clone()
    with pytest.raises(ApiUsageError, match="value_rescaling"):
        rescaled.load_state_dict(plain.state_dict())
    torch.testing.assert_close(rescaled.q_net.w.detach(), before)
    old = plain.state_dict()
    del old["config"]["value_rescaling"]
    with pytest.raises(ApiUsageError):
        rescaled.load_state_dict(old)
    _r2d2(False).load_state_dict(old)
    _r2d2(True).load_state_dict(rescaled.state_dict())


def test_cli_value_rescaling_is_the_r2d2_preset_default_and_fits_resume(tmp_path, capsys):
    base = ["train", "--algo", "r2d2", "--env", "rlcore/CartPoleNoVel-v1", "--num-envs", "2",
            "--warmup-env-steps", "50", "--no-progress", "--device", "cpu"]

    def algo_config(run: str) -> dict:
        return json.loads((tmp_path / run / "config.json").read_text())["algo_config"]

    assert main([*base, "--steps", "100", "--out", str(tmp_path / "on")]) == 0
    assert algo_config("on")["value_rescaling"] is True
    assert main([*base, "--steps", "100", "--no-value-rescaling", "--out", str(tmp_path / "off")]) == 0
    assert algo_config("off")["value_rescaling"] is False
    # a run without rescaling resumes only with --no-value-rescaling, not under the new default
    ckpt = str(tmp_path / "off" / "checkpoint")
    capsys.readouterr()
    assert main([*base, "--steps", "200", "--resume", ckpt, "--trust-env-state", "--out", str(tmp_path / "r1")]) != 0
    assert "value_rescaling=False" in capsys.readouterr().err
    assert main([*base, "--steps", "200", "--no-value-rescaling", "--resume", ckpt, "--trust-env-state",
                 "--out", str(tmp_path / "r2")]) == 0
    dqn = ["train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100", "--no-progress", "--value-rescaling",
           "--out", str(tmp_path / "dqn")]
    assert main(dqn) != 0 and not (tmp_path / "dqn").exists()
