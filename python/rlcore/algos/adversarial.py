"""The discriminator that GAIL (:mod:`rlcore.algos.gail`, on-policy) and DAC (:mod:`rlcore.algos.dac`,
off-policy) share: the network, its gradient penalty, one BCE + gradient-penalty step on policy
against expert pairs, the learned reward of its logit and the closed-form reward of the absorbing
state.

* **Discriminator** ``D(s, a)``: the probability that a pair is the *expert's*, an MLP on the
  normalised observation and the encoded action returning ``x = logit D(s, a)``.
* **Step** (Ho & Ermon 2016, eq. 17, with the labels swapped as in most implementations): descend
  ``BCE(x_E, 1) + BCE(x_pi, 0) + lambda * GP``, the gradient penalty of Gulrajani et al. 2017, eq. 3,
  ``GP = E[(||grad_x logit D(x_hat)||_2 - 1)^2]`` at interpolates ``x_hat`` of expert and policy
  inputs (Kostrikov et al. 2019 use it with ``lambda = 10``).
* **Learned reward** of ``x = logit D(s, a)``: ``"softplus"``, ``-log(1 - D) = softplus(x)`` (the
  generator cost of eq. 17 as a reward; always > 0, a survival bonus), or ``"logit"``,
  ``log D - log(1 - D) = x`` (Fu et al. 2018, AIRL; Kostrikov et al. 2019, section 4.1, and the
  default ``gail_loss='airl'`` of their code), without that bias.
* **Absorbing state** (after Kostrikov et al. 2019, "Discriminator-Actor-Critic", section 4.2): a
  terminated episode continues in an absorbing state ``s_a`` forever, whose value is
  ``V(s_a) = r_a / (1 - gamma)``, so a terminated step's reward gets ``gamma r_a / (1 - gamma)``
  added instead of the implicit 0 of a terminal state. ``s_a`` is one discrete state, so its
  discriminator output is the Bayes-optimal one instead of an MLP's: with ``s_E`` and ``s_pi`` the
  shares of absorbing pairs among the expert's and the policy's pairs,
  ``logit D(s_a) = clip(log(s_E / s_pi), -10, 10)`` and ``r_a`` is the reward form of that logit
  (:func:`absorbing_reward`). The paper feeds an absorbing flag to the discriminator network
  instead; why rlcore does not is in :mod:`rlcore.algos.gail`'s docstring.

Dimension letters: B batch, O flat observation, A action (one-hot K for ``Discrete``), X = O + A.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlcore.algos.common import gradient_step
from rlcore.nets import ObsEncoder, mlp

__all__ = [
    "ABSORBING_LOGIT_CLIP",
    "Discriminator",
    "DiscriminatorStats",
    "RewardForm",
    "absorbing_reward",
    "action_bounds",
    "discriminator_step",
    "expert_absorbing_share",
    "gradient_penalty",
    "learned_reward",
]

RewardForm = Literal["softplus", "logit"]
"""The learned reward of a discriminator logit ``x``: ``softplus(x)`` or ``x`` (module docstring)."""

ABSORBING_LOGIT_CLIP = 10.0
"""``|logit D(s_a)|`` is clipped to this (an expert that never terminates has ``s_E = 0``)."""


@dataclass(frozen=True)
class DiscriminatorStats:
    """Statistics of discriminator steps (one step, or the mean of an iteration's steps)."""

    loss: float
    """Binary cross-entropy (expert label 1, policy label 0) plus the weighted gradient penalty,
    mean over the steps (NaN: no step)."""
    expert_acc: float
    """Share of expert pairs with ``D > 0.5`` at the last step."""
    policy_acc: float
    """Share of policy pairs with ``D < 0.5`` at the last step."""
    grad_penalty: float
    """Gradient penalty before its weight (0 when disabled), mean over the steps."""


class Discriminator(nn.Module):
    """``logit D(s, a)``: an MLP (tanh) on the normalised observation and the encoded action.

    Actions are one-hot for ``Discrete(K)`` and rescaled to ``[-1, 1]`` for a bounded ``Box``.
    The observation normaliser is fitted once, on the expert's observations (:meth:`fit_obs`).

    Args:
        observation_space: single-env ``Box`` (or ``Dict`` of ``Box``) space.
        action_space: ``Discrete`` or bounded ``Box``.
        hidden: hidden widths.

    Raises:
        ValueError: another action space, or an unbounded ``Box``.
    """

    act_scale: torch.Tensor
    act_bias: torch.Tensor

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden: Sequence[int]) -> None:
        super().__init__()
        self.encoder = ObsEncoder(observation_space, normalize=True)
        if isinstance(action_space, gym.spaces.Discrete):
            self.n_actions: int | None = int(action_space.n)
            act_dim = self.n_actions
            scale, bias = torch.ones(1), torch.zeros(1)
        elif isinstance(action_space, gym.spaces.Box):
            low = np.asarray(action_space.low, np.float32).reshape(-1)
            high = np.asarray(action_space.high, np.float32).reshape(-1)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError("the discriminator needs a bounded Box action space")
            self.n_actions = None
            act_dim = low.size
            scale, bias = torch.from_numpy((high - low) / 2), torch.from_numpy((high + low) / 2)
        else:
            raise ValueError(f"the discriminator supports Discrete or Box action spaces, got {action_space}")
        self.register_buffer("act_scale", scale)
        self.register_buffer("act_bias", bias)
        self.net = mlp(self.encoder.dim + act_dim, 1, hidden, activation=nn.Tanh)

    @torch.no_grad()
    def fit_obs(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> None:
        """Set the observation normaliser's statistics from expert observations ``[B, *O]``."""
        self.encoder.update(obs)

    def features(self, obs: torch.Tensor | Mapping[str, torch.Tensor], act: torch.Tensor) -> torch.Tensor:
        """Input ``x`` float32 ``[B, O + A]`` of the MLP from obs ``[B, *O]`` and act (int ``[B]`` or ``[B, A]``)."""
        x_BO = self.encoder(obs)
        if self.n_actions is not None:
            a_BA = F.one_hot(act.reshape(-1).long(), self.n_actions).float()
        else:
            a_BA = (act.reshape(x_BO.shape[0], -1).float() - self.act_bias) / self.act_scale
        return torch.cat([x_BO, a_BA], dim=-1)

    def logit(self, x_BX: torch.Tensor) -> torch.Tensor:
        """``logit D`` float32 ``[B]`` of features from :meth:`features`."""
        return self.net(x_BX).squeeze(-1)


def gradient_penalty(
    disc: Discriminator,
    x_expert_BX: torch.Tensor,
    x_policy_BX: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``E[(||grad_x logit D(x_hat)||_2 - 1)^2]`` at ``x_hat = u x_E + (1 - u) x_pi``, ``u ~ U(0, 1)``
    per row drawn from ``generator`` (``None``: torch's global one) (Gulrajani et al. 2017, eq. 3);
    a scalar tensor with a graph."""
    u_B1 = torch.rand(x_expert_BX.shape[0], 1, device=x_expert_BX.device, generator=generator)
    x_hat = (u_B1 * x_expert_BX + (1 - u_B1) * x_policy_BX).requires_grad_(True)
    (grad,) = torch.autograd.grad(disc.logit(x_hat).sum(), x_hat, create_graph=True)
    return ((grad.norm(dim=-1) - 1.0) ** 2).mean()


def discriminator_step(
    disc: Discriminator,
    optimizer: torch.optim.Optimizer,
    x_expert_BX: torch.Tensor,
    x_policy_BX: torch.Tensor,
    *,
    grad_penalty: float,
    generator: torch.Generator | None,
) -> DiscriminatorStats:
    """One Adam step of the discriminator on B expert and B policy features (:meth:`Discriminator.features`,
    float32 ``[B, X]``): descend ``BCE(logit_E, 1) + BCE(logit_pi, 0) + grad_penalty * GP``
    (module docstring; ``GP`` mixes with ``generator``, and is 0 without a draw when
    ``grad_penalty`` is 0). Returns this step's statistics."""
    logit_e, logit_p = disc.logit(x_expert_BX), disc.logit(x_policy_BX)
    loss = F.binary_cross_entropy_with_logits(logit_e, torch.ones_like(logit_e)) + F.binary_cross_entropy_with_logits(
        logit_p, torch.zeros_like(logit_p)
    )
    gp = torch.zeros((), device=x_expert_BX.device)
    if grad_penalty > 0:
        gp = gradient_penalty(disc, x_expert_BX.detach(), x_policy_BX.detach(), generator)
        loss = loss + grad_penalty * gp
    gradient_step(optimizer, loss, disc.parameters(), None)
    return DiscriminatorStats(
        loss=loss.item(),
        expert_acc=(logit_e > 0).float().mean().item(),
        policy_acc=(logit_p < 0).float().mean().item(),
        grad_penalty=gp.item(),
    )


def learned_reward(logit_B: torch.Tensor, form: RewardForm) -> torch.Tensor:
    """The learned reward ``[B]`` of discriminator logits ``[B]``: ``softplus(x) = -log(1 - D)`` or
    ``x = log D - log(1 - D)`` (module docstring)."""
    return F.softplus(logit_B) if form == "softplus" else logit_B


def expert_absorbing_share(expert: Any) -> float:
    """``s_E``: terminated expert episodes / (expert transitions + terminated episodes), i.e. the
    share of absorbing pairs among the expert's pairs when each terminated episode adds one.

    Raises:
        ValueError: the expert buffer has no ``terminated`` array.
    """
    if not hasattr(expert, "terminated"):
        raise ValueError("absorbing states need an expert buffer with a `terminated` array")
    n_term = int(np.count_nonzero(np.asarray(expert.terminated)))
    return n_term / (len(expert) + n_term)


def absorbing_reward(expert_share: float, policy_share: float, form: RewardForm) -> float:
    """Reward ``r_a`` of the absorbing state: the reward form of the Bayes-optimal
    ``logit D(s_a) = clip(log(s_E / s_pi), -10, 10)`` for expert and policy absorbing shares
    ``s_E = expert_share`` (floored at 1e-12) and ``s_pi = policy_share`` (> 0)."""
    s_e = max(expert_share, 1e-12)
    logit = float(np.clip(np.log(s_e) - np.log(policy_share), -ABSORBING_LOGIT_CLIP, ABSORBING_LOGIT_CLIP))
    return float(np.logaddexp(0.0, logit)) if form == "softplus" else logit


def action_bounds(action_space: gym.Space) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high)`` float32 ``[A]`` of a ``Box`` action space (policy actions are clipped to them
    before the discriminator sees them, as the env and the expert data saw them); ``None`` otherwise."""
    if isinstance(action_space, gym.spaces.Box):
        return action_space.low.astype(np.float32), action_space.high.astype(np.float32)
    return None
