"""Implicit Q-Learning: offline RL without querying the Q function on actions outside the dataset.

Source: Kostrikov, Nair & Levine 2022, "Offline Reinforcement Learning with Implicit Q-Learning".
:meth:`IQL.update` reads in the order of the authors' ``learner.py`` (``update_v``, ``awr_update_actor``,
``update_q``, ``target_update``):

1. value step: expectile regression of ``V(s)`` on the target critics' ``min_k Q'_k(s, a)`` over
   dataset pairs, ``L_V = E[L2_tau(Q'(s, a) - V(s))]`` with ``L2_tau(u) = |tau - 1(u < 0)| u^2``
   (eq. 5);
2. actor step: advantage-weighted regression, ``L_pi = -E[exp(beta (Q'(s, a) - V(s))) log pi(a|s)]``
   with the weight clipped at 100 (eq. 7), using the value just updated;
3. critic step: ``L_Q = E[(r + gamma (1 - d) V(s') - Q_k(s, a))^2]`` for both critics (eq. 6);
4. polyak update of the target critics.

Defaults are the paper's for the MuJoCo locomotion tasks (Appendix B): lr 3e-4 for all networks, the
actor's cosine-decayed over the run (``actor_lr_decay_grad_steps``), batch 256, 256x256 networks,
tau 0.005, expectile 0.7, inverse temperature beta 3.0, and rewards scaled by
``1000 / (max episode return - min episode return)`` of the dataset (:func:`iql_reward_scale`, set
as ``reward_scale``). The policy is the authors': a Gaussian whose mean is ``tanh`` of an MLP (scaled
to the action bounds) and whose log standard deviation is a state-independent parameter in [-5, 2].

Difference, on purpose: ``batch.rew`` / ``batch.discount`` are the buffer's (n-step) return and
``gamma**m * (1 - terminated)``, so time-limit ends bootstrap.

Dimension letters: B batch, N envs, O flat observation, A action, K critics.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlcore.algos.common import (
    TargetNetwork,
    adam,
    as_torch,
    check_fields,
    freeze,
    gradient_step,
    learner_state,
    load_learner_state,
    obs_to_torch,
    resolve_device,
    seeded_init,
    td_target,
    torch_generator,
)
from rlcore.batch import TransitionBatch
from rlcore.errors import InvalidValueError
from rlcore.nets import EnsembleQNetwork, GaussianActor, ObsEncoder, mlp

__all__ = [
    "IQL",
    "IQLConfig",
    "IQLStats",
    "awr_weights",
    "expectile_loss",
    "iql_reward_scale",
]


@dataclass(frozen=True, kw_only=True)
class IQLConfig:
    """Hyperparameters of :class:`IQL` (defaults: Kostrikov et al. 2022, Appendix B, MuJoCo)."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor, value and critics (used by ``from_spaces``)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor at the start of the run (used by ``from_spaces``)."""
    value_lr: float = 3e-4
    """Adam learning rate of the value network (used by ``from_spaces``)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics (used by ``from_spaces``)."""
    actor_lr_decay_grad_steps: int | None = None
    """Cosine-decay the actor's learning rate from ``actor_lr`` to 0 over this many gradient steps
    (the paper's schedule over its 1M steps; pass the run's length); ``None``: constant."""
    tau: float = 0.005
    """Polyak coefficient of the target critics, applied every gradient step."""
    expectile: float = 0.7
    """tau of the expectile loss (eq. 5): 0.5 is the mean, towards 1 the maximum over actions."""
    beta: float = 3.0
    """Inverse temperature of the advantage weights (eq. 7)."""
    max_weight: float = 100.0
    """Clip of the advantage weights ``exp(beta * A)``."""
    reward_scale: float = 1.0
    """Multiplies the rewards (the paper: ``1000 / (max return - min return)``, :func:`iql_reward_scale`)."""
    normalize_obs: bool = False
    """Normalise observations with running statistics (the paper does not)."""
    seed: int | None = None
    """Seed of the acting generator and, in ``from_spaces``, of the initial weights; ``None``: drawn
    from torch's global generator."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("actor_lr", "value_lr", "critic_lr", "beta"),
            positive=("max_weight", "reward_scale"),
            positive_unit_interval=("tau",),
            counts=("actor_lr_decay_grad_steps",),
        )
        if not 0.0 < self.expectile < 1.0:
            raise InvalidValueError(f"IQLConfig.expectile must be in (0, 1), got {self.expectile!r}")


@dataclass(frozen=True)
class IQLStats:
    """Statistics of one IQL gradient step."""

    value_loss: float
    """Expectile loss of V (eq. 5)."""
    actor_loss: float
    """Advantage-weighted negative log-likelihood of the dataset actions (eq. 7)."""
    critic_loss: float
    """Mean squared TD error against ``r + discount * V(s')``, summed over the two critics (eq. 6)."""
    v_mean: float
    """Mean V(s) after the value step."""
    adv_mean: float
    """Mean advantage ``min_k Q'_k(s, a) - V(s)`` of the dataset actions."""
    weight_mean: float
    """Mean clipped advantage weight."""
    actor_lr: float
    """The actor's learning rate in this step."""


def expectile_loss(diff_B: torch.Tensor, expectile: float) -> torch.Tensor:
    """``mean(|tau - 1(u < 0)| * u^2)`` of ``u = diff_B`` ``[B]`` (Kostrikov et al. 2022, eq. 5)."""
    weight_B = torch.where(diff_B > 0, expectile, 1.0 - expectile)
    return (weight_B * diff_B**2).mean()


def awr_weights(adv_B: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    """``min(exp(beta * adv), max_weight)`` ``[B]``, without gradient: the weights of IQL's
    advantage-weighted regression (Kostrikov et al. 2022, eq. 7; the clip is the authors' 100)."""
    return torch.exp(beta * adv_B.detach()).clamp(max=max_weight)


def iql_reward_scale(episode_returns: Sequence[float] | np.ndarray) -> float:
    """``1000 / (max - min)`` of the dataset's episode returns, the reward scale of IQL's MuJoCo runs
    (the authors' ``train_offline.py``, ``normalize``).

    Raises:
        InvalidValueError: fewer than two distinct returns.
    """
    r = np.asarray(episode_returns, dtype=np.float64)
    if r.size < 2 or r.max() == r.min():
        raise InvalidValueError("iql_reward_scale needs episodes with at least two different returns")
    return float(1000.0 / (r.max() - r.min()))


_STATE = {
    "modules": ("encoder", "actor", "value", "critic", "critic_target"),
    "optimizers": ("actor_optimizer", "value_optimizer", "critic_optimizer"),
}
"""The state-dict layout of :class:`IQL` (:func:`~rlcore.algos.common.learner_state`)."""


class IQL:
    """Implicit Q-Learning for bounded continuous actions, trained on a fixed dataset.

    Args:
        encoder: flattens (and optionally normalises) observations; shared by every network.
        actor: the Gaussian policy (:class:`GaussianActor`).
        value: ``obs_BO -> [B, 1]``, the state value V.
        critic: ``(obs_BO, act_BA) -> q_KB`` with K = 2.
        actor_optimizer: optimises the actor.
        value_optimizer: optimises the value network.
        critic_optimizer: optimises the critics.
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).
    """

    def __init__(
        self,
        *,
        encoder: ObsEncoder,
        actor: GaussianActor,
        value: nn.Module,
        critic: EnsembleQNetwork,
        actor_optimizer: torch.optim.Optimizer,
        value_optimizer: torch.optim.Optimizer,
        critic_optimizer: torch.optim.Optimizer,
        config: IQLConfig,
        device: str | torch.device | None = None,
    ) -> None:
        self.config = config
        self.device = resolve_device(device)
        self.encoder = encoder.to(self.device)
        self.actor = actor.to(self.device)
        self.value = value.to(self.device)
        self.critic = critic.to(self.device)
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self._critic_target = TargetNetwork(self.critic_target, self.critic)
        self.actor_optimizer = actor_optimizer
        self.value_optimizer = value_optimizer
        self.critic_optimizer = critic_optimizer
        self._actor_lr0 = [g["lr"] for g in actor_optimizer.param_groups]
        self.torch_rng = torch_generator(config.seed, self.device)
        self.grad_steps = 0

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.spaces.Box,
        config: IQLConfig | None = None,
        *,
        device: str | torch.device | None = None,
    ) -> IQL:
        """Build the default MLP networks with Adam optimizers for single-env spaces."""
        config = config or IQLConfig()
        dev = resolve_device(device)
        act_dim = int(np.prod(action_space.shape))
        with seeded_init(config.seed):
            encoder = ObsEncoder(observation_space, normalize=config.normalize_obs)
            actor = GaussianActor(encoder.dim, action_space, config.hidden).to(dev)
            value = mlp(encoder.dim, 1, config.hidden).to(dev)
            critic = EnsembleQNetwork(encoder.dim, act_dim, config.hidden, n_critics=2).to(dev)
        return cls(
            encoder=encoder,
            actor=actor,
            value=value,
            critic=critic,
            actor_optimizer=adam(actor.parameters(), lr=config.actor_lr),
            value_optimizer=adam(value.parameters(), lr=config.value_lr),
            critic_optimizer=adam(critic.parameters(), lr=config.critic_lr),
            config=config,
            device=dev,
        )

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        """Actions float32 ``[N, A]``: the policy's mean, or a sample clipped to the bounds."""
        mean_NA, std_A = self.actor(self.encoder(obs_to_torch(obs, self.device)))
        if deterministic:
            return mean_NA.cpu().numpy()
        eps_NA = torch.randn(mean_NA.shape, generator=self.torch_rng, device=self.device)
        lo = self.actor.action_bias - self.actor.action_scale
        hi = self.actor.action_bias + self.actor.action_scale
        return torch.maximum(torch.minimum(mean_NA + std_A * eps_NA, hi), lo).cpu().numpy()

    def _actor_lr(self) -> float:
        """Cosine decay to 0 over ``actor_lr_decay_grad_steps`` (then 0); sets and returns the lr."""
        horizon = self.config.actor_lr_decay_grad_steps
        factor = 1.0
        if horizon is not None:
            factor = 0.5 * (1.0 + math.cos(math.pi * min(self.grad_steps, horizon) / horizon))
        for group, lr0 in zip(self.actor_optimizer.param_groups, self._actor_lr0, strict=True):
            group["lr"] = lr0 * factor
        return self._actor_lr0[0] * factor

    def update(self, batch: TransitionBatch) -> IQLStats:
        """One value, actor and critic step and a target update (module docstring, steps 1-4)."""
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        with torch.no_grad():
            q_target_B = self.critic_target(obs_BO, act_BA).min(0).values

        # Value step: expectile regression of V(s) on min_k Q'_k(s, a), eq. 5.
        v_B = self.value(obs_BO).squeeze(-1)
        value_loss = expectile_loss(q_target_B - v_B, c.expectile)
        gradient_step(self.value_optimizer, value_loss, self.value.parameters(), None)

        # Actor step: advantage-weighted regression with the updated V, eq. 7.
        with torch.no_grad():
            v_B = self.value(obs_BO).squeeze(-1)
            adv_B = q_target_B - v_B
            weight_B = awr_weights(adv_B, c.beta, c.max_weight)
        actor_lr = self._actor_lr()
        actor_loss = -(weight_B * self.actor.log_prob(obs_BO, act_BA)).mean()
        gradient_step(self.actor_optimizer, actor_loss, self.actor.parameters(), None)

        # Critic step: y = r * reward_scale + discount * V(s'), eq. 6.
        with torch.no_grad():
            v_next_B = self.value(self.encoder(batch.obs_next)).squeeze(-1)
            y_B = td_target(batch.rew.float() * c.reward_scale, batch.discount.float(), v_next_B)
        q_KB = self.critic(obs_BO, act_BA)
        critic_loss = ((q_KB - y_B) ** 2).sum(0).mean()
        gradient_step(self.critic_optimizer, critic_loss, self.critic.parameters(), None)

        # Target update.
        self._critic_target.update(c.tau)
        self.grad_steps += 1

        out = torch.stack(
            [
                value_loss.detach(),
                actor_loss.detach(),
                critic_loss.detach(),
                v_B.mean(),
                adv_B.mean(),
                weight_B.mean(),
            ]
        ).tolist()
        return IQLStats(
            value_loss=out[0],
            actor_loss=out[1],
            critic_loss=out[2],
            v_mean=out[3],
            adv_mean=out[4],
            weight_mean=out[5],
            actor_lr=actor_lr,
        )

    def state_dict(self) -> dict[str, Any]:
        """Networks, target critics, optimizers, the acting generator and the step counter
        (:func:`~rlcore.algos.common.learner_state`)."""
        return learner_state(self, **_STATE)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        load_learner_state(self, state, **_STATE)
