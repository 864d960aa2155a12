"""Twin Delayed DDPG.

Source: Fujimoto et al. 2018 (Algorithm 1): clipped double-Q targets (eq. 10), target policy
smoothing (eq. 14), delayed actor and target updates. Reads in the order of CleanRL's
``td3_continuous_action.py``; importance weights multiply every loss (Schaul et al. 2016).

n-step returns and termination come from the buffer: ``batch.rew`` is the n-step return and
``batch.discount = gamma**m * (1 - terminated)``. The networks, the exploration noise, the target
policy and the state-dict layout are shared with DDPG (:mod:`rlcore.algos.deterministic`).
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
    no_param_grad,
    td_priorities,
    td_target,
    weighted_mean,
)
from rlcore.algos.deterministic import DeterministicActorCritic, exploration_action, target_action
from rlcore.batch import TransitionBatch
from rlcore.stats import not_logged

__all__ = ["TD3", "TD3Config", "TD3Stats"]


@dataclass(frozen=True, kw_only=True)
class TD3Config:
    """Hyperparameters of :class:`TD3` (defaults: Fujimoto et al. 2018 / CleanRL)."""

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
    exploration_noise: float = 0.1
    """Std of the Gaussian action noise, as a fraction of the action half-range."""
    target_policy_noise: float = 0.2
    """Std of the smoothing noise on target actions, as a fraction of the action half-range."""
    target_noise_clip: float = 0.5
    """Clip of the smoothing noise, as a fraction of the action half-range."""
    q_target_clip: tuple[float, float] | None = None
    """Clip TD targets to ``[low, high]`` (``None``: no clipping)."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm of each network (``None``: no clipping)."""
    normalize_obs: bool = False
    """Normalise observations with running statistics (used by ``from_spaces``)."""
    seed: int | None = None
    """Seed of the exploration-noise and target-smoothing generators and, in ``from_spaces``, of
    the initial weights; ``None``: drawn from the global generators."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=(
                "actor_lr",
                "critic_lr",
                "exploration_noise",
                "target_policy_noise",
                "target_noise_clip",
            ),
            positive=("max_grad_norm",),
            positive_unit_interval=("tau",),
            counts=("policy_delay",),
            intervals=("q_target_clip",),
        )


@dataclass(frozen=True)
class TD3Stats:
    """Statistics of one TD3 gradient step."""

    critic_loss: float
    """Importance-weighted mean squared TD error, summed over the two critics."""
    actor_loss: float
    """Importance-weighted ``-Q_1(o, mu(o))`` of the latest actor update."""
    q_mean: float
    """Mean Q_1(o, a) of the sampled actions."""
    td_abs_mean: float
    """Mean absolute TD error of the first critic."""
    priorities: np.ndarray | None = not_logged()
    """New PER priorities ``|Q_1 - y|`` float32 ``[B]`` when the batch carried weights, else ``None``
    (not logged; the trainer hands them to ``buffer.update_priorities``)."""


class TD3(DeterministicActorCritic):
    """TD3 for bounded continuous actions.

    Constructor arguments: those of :class:`~rlcore.algos.deterministic.DeterministicActorCritic`,
    with the twin critics (K = 2).
    """

    N_CRITICS = 2
    CONFIG = TD3Config
    config: TD3Config

    def __post_init__(self) -> None:
        super().__post_init__()
        self.last_actor_loss = 0.0

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions float32 ``[N, A]``; exploration adds Gaussian noise and clips to the bounds."""
        act_NA = self.policy_action(obs)
        if deterministic:
            return act_NA
        return exploration_action(
            act_NA, self.rng, self.config.exploration_noise, self._scale_A, self._bias_A
        )

    def update(self, batch: TransitionBatch) -> TD3Stats:
        """One critic step; every ``policy_delay`` steps also an actor step and a target update.

        The stats carry new priorities when ``batch.weights`` is set."""
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        weights_B = batch.weights.float() if batch.weights is not None else None

        # Target: y = r_n + discount * min_k Q'_k(o', clip(mu'(o') + clip(eps))), eq. 10 and 14.
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            smoothing = (c.target_policy_noise, c.target_noise_clip)
            act_next_BA = target_action(self.actor_target, obs_next_BO, smoothing, self.torch_rng)
            q_next_B = self.critic_target(obs_next_BO, act_next_BA).min(0).values
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B, clip=c.q_target_clip)

        # Critic step on both critics.
        q_KB = self.critic(obs_BO, act_BA)
        critic_loss = weighted_mean(((q_KB - y_B) ** 2).sum(0), weights_B)
        gradient_step(self.critic_optimizer, critic_loss, self._critic_params, c.max_grad_norm)
        self.grad_steps += 1

        # Delayed actor step and target update.
        if self.grad_steps % c.policy_delay == 0:
            with no_param_grad(self._critic_params):
                q_pi_B = self.critic(obs_BO, self.actor(obs_BO))[0]
            actor_loss = weighted_mean(-q_pi_B, weights_B)
            gradient_step(self.actor_optimizer, actor_loss, self._actor_params, c.max_grad_norm)
            self.last_actor_loss = actor_loss.item()
            for target in self._targets:
                target.update(c.tau)

        q_B = q_KB[0].detach()
        td_abs_B = (q_B - y_B).abs()
        # One tensor-to-float conversion for the statistics (float32 values, as .item() gives them).
        critic_l, q_mean, td_abs_mean = torch.stack(
            [critic_loss.detach(), q_B.mean(), td_abs_B.mean()]
        ).tolist()
        return TD3Stats(
            critic_loss=critic_l,
            actor_loss=self.last_actor_loss,
            q_mean=q_mean,
            td_abs_mean=td_abs_mean,
            priorities=td_priorities(td_abs_B, weights_B),
        )

    def state_dict(self) -> dict[str, Any]:
        """:meth:`DeterministicActorCritic.state_dict` (networks, targets, optimizers, counters,
        generators) and the latest actor loss."""
        return {**super().state_dict(), "last_actor_loss": self.last_actor_loss}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        super().load_state_dict(state)
        self.last_actor_loss = float(state["last_actor_loss"])
