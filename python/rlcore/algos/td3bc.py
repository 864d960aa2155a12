"""TD3+BC: TD3 with a behaviour-cloning term in the actor's loss, for offline RL.

Source: Fujimoto & Gu 2021, "A Minimalist Approach to Offline Reinforcement Learning". Two changes
to TD3 (Fujimoto et al. 2018, :mod:`rlcore.algos.td3`), both in the paper's section 5:

1. the actor maximises ``lambda * Q(s, pi(s)) - (pi(s) - a)^2`` (eq. 3) over dataset pairs (s, a),
   with ``lambda = alpha / ((1/N) sum_i |Q(s_i, a_i)|)`` computed on the batch's ``Q(s, pi(s))`` and
   not differentiated (eq. 4; alpha = 2.5);
2. states are normalised with the dataset's mean and standard deviation (eq. 5): call
   :meth:`TD3BC.fit_obs` with the dataset's observations once before training.

The rest is TD3's update, in the order of the authors' ``TD3_BC.py``: clipped double-Q target with
target policy smoothing, one critic step per call, every ``policy_delay``-th call an actor step and
the polyak update of both targets. Defaults are the paper's (Appendix C: lr 3e-4, batch 256,
tau 0.005, policy noise 0.2, noise clip 0.5, policy delay 2, alpha 2.5, 256x256 networks).

Differences, on purpose: ``batch.rew`` / ``batch.discount`` are the buffer's (n-step) return and
``gamma**m * (1 - terminated)``, so time-limit ends bootstrap; the observation normaliser is rlcore's
(:class:`~rlcore.nets.RunningMeanStd`: ``(s - mean) / sqrt(var + 1e-2)``, clipped to +-5; the paper
divides by ``std + 1e-3`` without clipping); before :meth:`TD3BC.fit_obs` is called, each batch is
folded into running statistics instead.

Dimension letters: B batch, N envs, O flat observation, A action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlcore.algos.common import (
    as_torch,
    check_fields,
    gradient_step,
    no_param_grad,
    obs_to_torch,
    td_target,
)
from rlcore.algos.deterministic import DeterministicActorCritic, target_action
from rlcore.batch import TransitionBatch

__all__ = ["TD3BC", "TD3BCConfig", "TD3BCStats", "td3bc_actor_loss"]


@dataclass(frozen=True, kw_only=True)
class TD3BCConfig:
    """Hyperparameters of :class:`TD3BC` (defaults: Fujimoto & Gu 2021, Appendix C)."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor and critics (used by ``from_spaces``)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor (used by ``from_spaces``)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics (used by ``from_spaces``)."""
    tau: float = 0.005
    """Polyak coefficient of the target networks, applied with every actor update."""
    policy_delay: int = 2
    """Critic gradient steps per actor (and target) update."""
    target_policy_noise: float = 0.2
    """Std of the smoothing noise on target actions, as a fraction of the action half-range."""
    target_noise_clip: float = 0.5
    """Clip of the smoothing noise, as a fraction of the action half-range."""
    alpha: float = 2.5
    """alpha of eq. 4: the weight of the Q term relative to the behaviour-cloning term."""
    normalize_obs: bool = True
    """Normalise observations with the dataset's statistics (eq. 5; :meth:`TD3BC.fit_obs`)."""
    seed: int | None = None
    """Seed of the target-smoothing generator and, in ``from_spaces``, of the initial weights;
    ``None``: drawn from torch's global generator."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("actor_lr", "critic_lr", "target_policy_noise", "target_noise_clip", "alpha"),
            positive_unit_interval=("tau",),
            counts=("policy_delay",),
        )


@dataclass(frozen=True)
class TD3BCStats:
    """Statistics of one TD3+BC gradient step."""

    critic_loss: float
    """Mean squared TD error, summed over the two critics."""
    actor_loss: float
    """``-lambda * mean Q_1(s, pi(s)) + mean (pi(s) - a)^2`` of the latest actor update."""
    bc_loss: float
    """Mean squared error ``(pi(s) - a)^2`` of the latest actor update (per action dimension)."""
    lmbda: float
    """lambda of eq. 4 in the latest actor update."""
    q_mean: float
    """Mean Q_1(s, a) of the dataset actions."""


def td3bc_actor_loss(
    q_pi_B: torch.Tensor, pi_BA: torch.Tensor, act_BA: torch.Tensor, alpha: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, bc_loss, lmbda)``: ``loss = -lmbda * mean_B Q(s, pi(s)) + mean_{B,A} (pi(s) - a)^2``
    with ``lmbda = alpha / mean_B |Q(s, pi(s))|`` not differentiated (Fujimoto & Gu 2021, eq. 3-4).

    Args:
        q_pi_B: ``Q_1(s, pi(s))`` ``[B]``, differentiable in ``pi``.
        pi_BA: the policy's actions ``[B, A]``.
        act_BA: the dataset's actions ``[B, A]``.
        alpha: the paper's alpha.
    """
    lmbda = alpha / q_pi_B.abs().mean().detach()
    bc_loss = F.mse_loss(pi_BA, act_BA)
    return -lmbda * q_pi_B.mean() + bc_loss, bc_loss, lmbda


class TD3BC(DeterministicActorCritic):
    """TD3+BC for bounded continuous actions, trained on a fixed dataset.

    Constructor arguments: those of :class:`~rlcore.algos.deterministic.DeterministicActorCritic`,
    with the twin critics (K = 2).
    """

    N_CRITICS = 2
    CONFIG = TD3BCConfig
    config: TD3BCConfig

    def __post_init__(self) -> None:
        super().__post_init__()
        self.obs_fitted = False
        self._last = {"actor_loss": 0.0, "bc_loss": 0.0, "lmbda": 0.0}

    def fit_obs(self, obs: Any) -> None:
        """Fix the observation normaliser to the statistics of the dataset's observations
        ``[T, *O]`` (or a dict of such; copied once), eq. 5; later batches no longer move it. No-op
        without ``normalize_obs``."""
        normalizer = self.encoder.normalizer
        if normalizer is None:
            return
        with torch.no_grad():
            normalizer.mean.zero_()
            normalizer.var.fill_(1.0)
            normalizer.count.zero_()
        obs = {k: np.array(v) for k, v in obs.items()} if isinstance(obs, Mapping) else np.array(obs)
        self.encoder.update(obs_to_torch(obs, self.device))
        self.obs_fitted = True

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        """Actions float32 ``[N, A]``: ``pi(s)`` (``deterministic`` is ignored: no exploration offline)."""
        return self.policy_action(obs)

    def update(self, batch: TransitionBatch) -> TD3BCStats:
        """One critic step; every ``policy_delay`` steps also an actor step (eq. 3-4) and a target
        update."""
        c = self.config
        batch = as_torch(batch, self.device)
        if not self.obs_fitted:
            self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)

        # Target: y = r_n + discount * min_k Q'_k(s', clip(pi'(s') + clip(eps))), as TD3.
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            smoothing = (c.target_policy_noise, c.target_noise_clip)
            act_next_BA = target_action(self.actor_target, obs_next_BO, smoothing, self.torch_rng)
            q_next_B = self.critic_target(obs_next_BO, act_next_BA).min(0).values
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B)

        # Critic step on both critics.
        q_KB = self.critic(obs_BO, act_BA)
        critic_loss = ((q_KB - y_B) ** 2).sum(0).mean()
        gradient_step(self.critic_optimizer, critic_loss, self._critic_params, None)
        self.grad_steps += 1

        # Delayed actor step: maximise lambda Q(s, pi(s)) - (pi(s) - a)^2, eq. 3, lambda from eq. 4.
        last: dict[str, torch.Tensor] = {}
        if self.grad_steps % c.policy_delay == 0:
            pi_BA = self.actor(obs_BO)
            with no_param_grad(self._critic_params):
                q_pi_B = self.critic(obs_BO, pi_BA)[0]
            actor_loss, bc_loss, lmbda = td3bc_actor_loss(q_pi_B, pi_BA, act_BA, c.alpha)
            gradient_step(self.actor_optimizer, actor_loss, self._actor_params, None)
            for target in self._targets:
                target.update(c.tau)
            last = {"actor_loss": actor_loss.detach(), "bc_loss": bc_loss.detach(), "lmbda": lmbda}

        # One tensor-to-float conversion for the statistics.
        out = torch.stack([critic_loss.detach(), q_KB[0].detach().mean(), *last.values()]).tolist()
        self._last.update(zip(last, out[2:], strict=True))
        return TD3BCStats(
            critic_loss=out[0],
            actor_loss=self._last["actor_loss"],
            bc_loss=self._last["bc_loss"],
            lmbda=self._last["lmbda"],
            q_mean=out[1],
        )

    def state_dict(self) -> dict[str, Any]:
        """:meth:`DeterministicActorCritic.state_dict` (networks with the encoder's normaliser,
        targets, optimizers, counters, generators) and the latest actor stats."""
        return {**super().state_dict(), "obs_fitted": self.obs_fitted, "last": dict(self._last)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        super().load_state_dict(state)
        self.obs_fitted = bool(state["obs_fitted"])
        self._last = dict(state["last"])
