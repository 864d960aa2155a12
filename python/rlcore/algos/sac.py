"""Soft Actor-Critic with a learned entropy temperature.

Sources: Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications" (Algorithm 1; soft
Q target eq. 3, policy loss eq. 7, temperature loss eq. 18); Schaul et al. 2016 for importance
weights, which multiply every loss. :meth:`SAC.update` reads line for line in the order of CleanRL's
``sac_continuous_action.py`` and does what it does:

1. soft target ``y = r + discount * (min_k Q'_k(o', a') - alpha * log pi(a'|o'))``, ``a' ~ pi(.|o')``;
2. one step on both critics;
3. every ``policy_frequency``-th call, ``policy_frequency`` actor steps in a row on the same batch
   (the delayed policy update with CleanRL's compensation: as many actor steps as critic steps), each
   followed by a temperature step; each actor step uses the latest temperature;
4. every ``target_update_interval``-th call, polyak averaging of the target critics.

One difference in the math: the temperature step's ``log pi(a|o)`` is that of the actor step's own
sample ``a ~ pi(.|o)``, drawn before that actor step and detached (as Stable-Baselines3 does),
where CleanRL recomputes it, without gradient, on a fresh sample of the *updated* actor. Both
estimate eq. 18's expectation, one actor step apart; the fresh sample costs one more actor forward
pass per update, 5 % of a 256x256 SAC update with batch 256 on one CPU core (0.87 of 17.0 ms,
median of 30 rounds).

Other differences from that script, on purpose: ``batch.rew`` is the buffer's n-step return and
``batch.discount = gamma**m * (1 - terminated)`` (CleanRL: one step, ``gamma * (1 - done)``); PER
importance weights multiply every loss and the stats carry the new priorities; the intervals count
gradient steps (CleanRL: env steps, the same with one update per env step); alpha has its own
learning rate ``alpha_lr`` (CleanRL uses the critics' ``q_lr``); optional target clipping, gradient
clipping and observation normalisation; and the defaults are Stable-Baselines3's (learning rates
3e-4, ``policy_frequency=1``; CleanRL: ``q_lr=1e-3``, ``policy_frequency=2``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlcore.algos.common import (
    as_torch,
    check_fields,
    gradient_step,
    learner_state,
    load_learner_state,
    no_param_grad,
    td_priorities,
    td_target,
    weighted_mean,
)
from rlcore.algos.squashed import SquashedGaussianActorCritic
from rlcore.batch import TransitionBatch
from rlcore.stats import not_logged

__all__ = ["SAC", "SACConfig", "SACStats"]


@dataclass(frozen=True, kw_only=True)
class SACConfig:
    """Hyperparameters of :class:`SAC` (defaults: Stable-Baselines3's SAC)."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor and critics (used by ``from_spaces``)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor (used by ``from_spaces``)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics (used by ``from_spaces``)."""
    alpha_lr: float = 3e-4
    """Adam learning rate of ``log(alpha)``."""
    tau: float = 0.005
    """Polyak coefficient of the target critics, applied every ``target_update_interval`` steps."""
    target_update_interval: int = 1
    """Gradient steps between target-critic updates."""
    policy_frequency: int = 1
    """k: every k-th update is followed by k actor (and alpha) steps on the same batch, so actor and
    critics take as many steps (CleanRL's delayed policy update); 1: one of each per update."""
    init_alpha: float = 1.0
    """Initial entropy temperature."""
    autotune_alpha: bool = True
    """Learn alpha to keep the policy entropy near ``target_entropy`` (eq. 18); else alpha is fixed."""
    target_entropy: float | None = None
    """Target entropy in nats; ``None`` means ``-A`` (minus the action dimension)."""
    q_target_clip: tuple[float, float] | None = None
    """Clip TD targets to ``[low, high]`` (``None``: no clipping)."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm of each network (``None``: no clipping)."""
    normalize_obs: bool = False
    """Normalise observations with running statistics (used by ``from_spaces``)."""
    seed: int | None = None
    """Seed of the policy's sampling generator (acting and updates) and, in ``from_spaces``, of the
    initial weights; ``None``: both drawn from torch's global generator."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("actor_lr", "critic_lr", "alpha_lr"),  # 0 freezes a network
            positive=("init_alpha", "max_grad_norm"),
            positive_unit_interval=("tau",),
            counts=("target_update_interval", "policy_frequency"),
            intervals=("q_target_clip",),
            finite=("target_entropy",),
        )


@dataclass(frozen=True)
class SACStats:
    """Statistics of one SAC gradient step."""

    critic_loss: float
    """Importance-weighted mean squared soft TD error, summed over the two critics."""
    actor_loss: float
    """Importance-weighted ``alpha * log pi(a|o) - min_k Q_k(o, a)`` of the latest actor update."""
    alpha_loss: float
    """Temperature loss of the latest actor update (0 when alpha is fixed)."""
    alpha: float
    """Entropy temperature used in this step."""
    entropy: float
    """Mean ``-log pi(a|o)`` of the latest actor update's actions, in nats."""
    q_mean: float
    """Mean Q_1(o, a) of the sampled actions."""
    td_abs_mean: float
    """Mean absolute soft TD error of the first critic."""
    priorities: np.ndarray | None = not_logged()
    """New PER priorities ``|Q_1 - y|`` float32 ``[B]`` when the batch carried weights, else ``None``
    (not logged; the trainer hands them to ``buffer.update_priorities``)."""


_STATE = {
    "modules": ("encoder", "actor", "critic", "critic_target"),
    "optimizers": ("actor_optimizer", "critic_optimizer", "alpha_optimizer"),
    "tensors": ("log_alpha",),
}
"""The state-dict layout of :class:`SAC` (:func:`~rlcore.algos.common.learner_state`)."""


class SAC(SquashedGaussianActorCritic):
    """SAC for bounded continuous actions.

    Constructor arguments: those of :class:`~rlcore.algos.squashed.SquashedGaussianActorCritic`,
    with the twin critics (K = 2).
    """

    CONFIG = SACConfig
    config: SACConfig

    def __post_init__(self) -> None:
        super().__post_init__()
        self._last = {"actor_loss": 0.0, "alpha_loss": 0.0, "entropy": 0.0}

    def update(self, batch: TransitionBatch) -> SACStats:
        """One critic step; every ``policy_frequency``-th call ``policy_frequency`` actor and temperature
        steps; every ``target_update_interval``-th call a target update (module docstring, steps 1-4).

        The statistics are read out of the graph once, at the end (one tensor-to-float conversion);
        they carry new priorities when ``batch.weights`` is set.
        """
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        weights_B = batch.weights.float() if batch.weights is not None else None
        alpha = self.log_alpha.detach().exp()

        # Soft target: y = r_n + discount * (min_k Q'_k(o', a') - alpha * log pi(a'|o')), eq. 3.
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            act_next_BA, log_prob_next_B = self.actor(obs_next_BO, generator=self.torch_rng)
            q_next_B = self.critic_target(obs_next_BO, act_next_BA).min(0).values - alpha * log_prob_next_B
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B, clip=c.q_target_clip)

        # Twin critic step.
        q_KB = self.critic(obs_BO, act_BA)
        critic_loss = weighted_mean(((q_KB - y_B) ** 2).sum(0), weights_B)
        gradient_step(self.critic_optimizer, critic_loss, self._critic_params, c.max_grad_norm)
        self.grad_steps += 1

        last: dict[str, torch.Tensor] = {}
        if self.grad_steps % c.policy_frequency == 0:
            for _ in range(c.policy_frequency):  # k actor steps every k critic steps (CleanRL)
                # Actor step: minimise alpha * log pi(a|o) - min_k Q_k(o, a), eq. 7.
                alpha_pi = self.log_alpha.detach().exp()  # the latest temperature
                pi_BA, log_prob_B = self.actor(obs_BO, generator=self.torch_rng)
                with no_param_grad(self._critic_params):
                    q_pi_B = self.critic(obs_BO, pi_BA).min(0).values
                actor_loss = weighted_mean(alpha_pi * log_prob_B - q_pi_B, weights_B)
                gradient_step(self.actor_optimizer, actor_loss, self._actor_params, c.max_grad_norm)
                last["actor_loss"] = actor_loss.detach()
                last["entropy"] = -log_prob_B.detach().mean()

                # Temperature step: minimise -alpha * (log pi(a|o) + target_entropy), eq. 18, on the
                # actor step's sample (CleanRL draws a fresh one: module docstring).
                if c.autotune_alpha:
                    alpha_loss = weighted_mean(
                        -self.log_alpha.exp() * (log_prob_B.detach() + self.target_entropy), weights_B
                    )
                    gradient_step(self.alpha_optimizer, alpha_loss, [self.log_alpha], None)
                    last["alpha_loss"] = alpha_loss.detach()

        if self.grad_steps % c.target_update_interval == 0:
            self._critic_target.update(c.tau)

        q_B = q_KB[0].detach()
        td_abs_B = (q_B - y_B).abs()
        fresh = list(last)  # the actor-step statistics computed in this call, still tensors
        values = [critic_loss.detach(), alpha, q_B.mean(), td_abs_B.mean(), *last.values()]
        out = torch.stack(values).tolist()  # float32 scalars, as .item() would give them
        self._last.update(zip(fresh, out[4:], strict=True))
        return SACStats(
            critic_loss=out[0],
            actor_loss=self._last["actor_loss"],
            alpha_loss=self._last["alpha_loss"],
            alpha=out[1],
            entropy=self._last["entropy"],
            q_mean=out[2],
            td_abs_mean=out[3],
            priorities=td_priorities(td_abs_B, weights_B),
        )

    def state_dict(self) -> dict[str, Any]:
        """Networks, target critics, optimizers, temperature, sampling generator and counters
        (:func:`~rlcore.algos.common.learner_state`), and the latest actor stats."""
        return {**learner_state(self, **_STATE), "last": dict(self._last)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        load_learner_state(self, state, **_STATE)
        self._last = dict(state["last"])
