"""Deep Deterministic Policy Gradient, with the additions of the HER paper's implementation.

Sources: Lillicrap et al. 2016 (DDPG, Algorithm 1); Andrychowicz et al. 2017 (HER, appendix A:
observation normalisation, an L2 penalty on actions, random actions with probability 0.3, targets
clipped to the range of possible returns); Schaul et al. 2016 (importance weights). Reads in the
order of CleanRL's ``ddpg_continuous_action.py``: critic target, critic step, actor step, targets.

n-step returns and termination come from the buffer: ``batch.rew`` is the n-step return and
``batch.discount = gamma**m * (1 - terminated)``. The networks, the exploration noise, the target
policy and the state-dict layout are shared with TD3 (:mod:`rlcore.algos.deterministic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlcore.algos.common import (
    as_torch,
    check_fields,
    gradient_step,
    no_param_grad,
    td_priorities,
    td_target,
    weighted_mean,
)
from rlcore.algos.deterministic import DeterministicActorCritic, exploration_action, target_action
from rlcore.batch import TransitionBatch
from rlcore.stats import not_logged

__all__ = ["DDPG", "DDPGConfig", "DDPGStats"]


@dataclass(frozen=True, kw_only=True)
class DDPGConfig:
    """Hyperparameters of :class:`DDPG` (defaults: the HER paper's Fetch settings)."""

    hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden layer widths of actor and critic (used by ``from_spaces``)."""
    actor_lr: float = 1e-3
    """Adam learning rate of the actor (used by ``from_spaces``)."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critic (used by ``from_spaces``)."""
    tau: float = 0.05
    """Polyak coefficient of the target networks, applied after every gradient step."""
    exploration_noise: float = 0.2
    """Std of the Gaussian action noise, as a fraction of the action half-range."""
    random_action_prob: float = 0.3
    """Probability of replacing the noisy action by a uniformly random one (HER paper: 0.3)."""
    action_l2: float = 1.0
    """Weight of the penalty ``mean((mu(o) / scale)^2)`` added to the actor loss (HER paper: 1.0)."""
    q_target_clip: tuple[float, float] | None = None
    """Clip TD targets to ``[low, high]``; for rewards in [-1, 0], ``(-1 / (1 - gamma), 0)``."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm of each network (``None``: no clipping)."""
    normalize_obs: bool = True
    """Normalise observations with running statistics, clipped to [-5, 5] (used by ``from_spaces``)."""
    seed: int | None = None
    """Seed of the exploration-noise generator and, in ``from_spaces``, of the initial
    weights; ``None``: drawn from the global generators."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("actor_lr", "critic_lr", "exploration_noise", "action_l2"),  # lr 0 freezes
            positive=("max_grad_norm",),
            positive_unit_interval=("tau",),
            unit_interval=("random_action_prob",),
            intervals=("q_target_clip",),
        )


@dataclass(frozen=True)
class DDPGStats:
    """Statistics of one DDPG gradient step."""

    critic_loss: float
    """Importance-weighted mean squared TD error."""
    actor_loss: float
    """Importance-weighted ``-Q(o, mu(o))`` plus the action penalty."""
    q_mean: float
    """Mean Q(o, a) of the sampled actions."""
    td_abs_mean: float
    """Mean absolute TD error."""
    priorities: np.ndarray | None = not_logged()
    """New PER priorities ``|Q - y|`` float32 ``[B]`` when the batch carried weights, else ``None``
    (not logged; the trainer hands them to ``buffer.update_priorities``)."""


class DDPG(DeterministicActorCritic):
    """DDPG for bounded continuous actions.

    Constructor arguments: those of :class:`~rlcore.algos.deterministic.DeterministicActorCritic`,
    with one critic (K = 1).
    """

    N_CRITICS = 1
    CONFIG = DDPGConfig
    config: DDPGConfig

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions float32 ``[N, A]`` for a NumPy batch of N observations.

        Exploration: ``mu(o) + N(0, (noise * scale)^2)`` clipped to the bounds, replaced by a uniform
        random action with probability ``random_action_prob``.
        """
        act_NA = self.policy_action(obs)
        if deterministic:
            return act_NA
        c = self.config
        act_NA = exploration_action(act_NA, self.rng, c.exploration_noise, self._scale_A, self._bias_A)
        random_NA = self.rng.uniform(
            self._bias_A - self._scale_A, self._bias_A + self._scale_A, size=act_NA.shape
        )
        use_random_N1 = self.rng.random((act_NA.shape[0], 1)) < c.random_action_prob
        return np.where(use_random_N1, random_NA, act_NA).astype(np.float32)

    def update(self, batch: TransitionBatch) -> DDPGStats:
        """One critic and one actor gradient step, then polyak-average the targets.

        The stats carry new priorities when ``batch.weights`` is set."""
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        weights_B = batch.weights.float() if batch.weights is not None else None

        # Critic target: y = r_n + discount * Q'(o', mu'(o')).
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            act_next_BA = target_action(self.actor_target, obs_next_BO)
            q_next_B = self.critic_target(obs_next_BO, act_next_BA)[0]
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B, clip=c.q_target_clip)

        # Critic step.
        q_B = self.critic(obs_BO, act_BA)[0]
        critic_loss = weighted_mean((q_B - y_B) ** 2, weights_B)
        gradient_step(self.critic_optimizer, critic_loss, self._critic_params, c.max_grad_norm)

        # Actor step: maximise Q(o, mu(o)), penalise large actions.
        pi_BA = self.actor(obs_BO)
        with no_param_grad(self._critic_params):
            actor_loss_B = -self.critic(obs_BO, pi_BA)[0]
        if c.action_l2 != 0.0:
            actor_loss_B = actor_loss_B + c.action_l2 * (
                (pi_BA - self.actor.action_bias) / self.actor.action_scale
            ).pow(2).mean(-1)
        actor_loss = weighted_mean(actor_loss_B, weights_B)
        gradient_step(self.actor_optimizer, actor_loss, self._actor_params, c.max_grad_norm)

        for target in self._targets:
            target.update(c.tau)
        self.grad_steps += 1

        td_abs_B = (q_B.detach() - y_B).abs()
        # One tensor-to-float conversion for all statistics (float32 values, as .item() gives them).
        stats = torch.stack([critic_loss.detach(), actor_loss.detach(), q_B.detach().mean(), td_abs_B.mean()])
        critic_l, actor_l, q_mean, td_abs_mean = stats.tolist()
        return DDPGStats(
            critic_loss=critic_l,
            actor_loss=actor_l,
            q_mean=q_mean,
            td_abs_mean=td_abs_mean,
            priorities=td_priorities(td_abs_B, weights_B),
        )
