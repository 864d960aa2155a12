"""Deep Deterministic Policy Gradient, with the additions of the HER paper's implementation.

Sources: Lillicrap et al. 2016 (DDPG, Algorithm 1); Andrychowicz et al. 2017 (HER, appendix A:
observation normalisation, an L2 penalty on actions, random actions with probability 0.3, targets
clipped to the range of possible returns); Schaul et al. 2016 (importance weights). Reads in the
order of CleanRL's ``ddpg_continuous_action.py``: critic target, critic step, actor step, targets.

n-step returns and termination come from the buffer: ``batch.rew`` is the n-step return and
``batch.discount = gamma**m * (1 - terminated)``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import (
    TargetNetwork,
    adam,
    clip_grad,
    freeze,
    no_param_grad,
    obs_to_torch,
    resolve_device,
    td_target,
    weighted_mean,
)
from rlcore.batch import TransitionBatch
from rlcore.nets import DeterministicActor, EnsembleQNetwork, ObsEncoder

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
    """Seed of the exploration-noise generator."""

    def __post_init__(self) -> None:
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if self.exploration_noise < 0 or not 0.0 <= self.random_action_prob <= 1.0:
            raise ValueError("exploration_noise must be >= 0 and random_action_prob in [0, 1]")
        if self.q_target_clip is not None and self.q_target_clip[0] > self.q_target_clip[1]:
            raise ValueError(f"q_target_clip must be (low, high) with low <= high, got {self.q_target_clip}")


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


class DDPG:
    """DDPG for bounded continuous actions.

    Args:
        encoder: flattens/normalises observations; shared by all networks and their targets.
        actor: ``obs_BO -> act_BA`` inside the action bounds, with ``action_scale``/``action_bias`` buffers.
        critic: ``(obs_BO, act_BA) -> q_KB`` with K = 1.
        actor_optimizer: optimises the actor.
        critic_optimizer: optimises the critic.
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).
    """

    def __init__(
        self,
        *,
        encoder: ObsEncoder,
        actor: DeterministicActor,
        critic: EnsembleQNetwork,
        actor_optimizer: torch.optim.Optimizer,
        critic_optimizer: torch.optim.Optimizer,
        config: DDPGConfig,
        device: str | torch.device | None = None,
    ) -> None:
        self.config = config
        self.device = resolve_device(device)
        self.encoder = encoder.to(self.device)
        self.actor = actor.to(self.device)
        self.critic = critic.to(self.device)
        self.actor_target = freeze(copy.deepcopy(self.actor))
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self._targets = (
            TargetNetwork(self.critic_target, self.critic),
            TargetNetwork(self.actor_target, self.actor),
        )
        self._critic_params = list(self.critic.parameters())
        self._actor_params = list(self.actor.parameters())
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.rng = np.random.default_rng(config.seed)
        self.grad_steps = 0
        self.priorities: np.ndarray | None = None
        self._scale_A = self.actor.action_scale.cpu().numpy()
        self._bias_A = self.actor.action_bias.cpu().numpy()

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.spaces.Box,
        config: DDPGConfig | None = None,
        *,
        device: str | torch.device | None = None,
    ) -> DDPG:
        """Build the default MLP actor and critic with Adam optimizers for single-env spaces."""
        config = config or DDPGConfig()
        dev = resolve_device(device)
        encoder = ObsEncoder(observation_space, normalize=config.normalize_obs)
        actor = DeterministicActor(encoder.dim, action_space, config.hidden).to(dev)
        critic = EnsembleQNetwork(
            encoder.dim, int(np.prod(action_space.shape)), config.hidden, n_critics=1
        ).to(dev)
        return cls(
            encoder=encoder,
            actor=actor,
            critic=critic,
            actor_optimizer=adam(actor.parameters(), lr=config.actor_lr),
            critic_optimizer=adam(critic.parameters(), lr=config.critic_lr),
            config=config,
            device=dev,
        )

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions float32 ``[N, A]`` for a NumPy batch of N observations.

        Exploration: ``mu(o) + N(0, (noise * scale)^2)`` clipped to the bounds, replaced by a uniform
        random action with probability ``random_action_prob``.
        """
        act_NA = self.actor(self.encoder(obs_to_torch(obs, self.device))).cpu().numpy()
        if deterministic:
            return act_NA
        c = self.config
        low_A, high_A = self._bias_A - self._scale_A, self._bias_A + self._scale_A
        act_NA = act_NA + c.exploration_noise * self._scale_A * self.rng.standard_normal(act_NA.shape)
        act_NA = np.clip(act_NA, low_A, high_A)
        random_NA = self.rng.uniform(low_A, high_A, size=act_NA.shape)
        use_random_N1 = self.rng.random((act_NA.shape[0], 1)) < c.random_action_prob
        return np.where(use_random_N1, random_NA, act_NA).astype(np.float32)

    def update(self, batch: TransitionBatch) -> DDPGStats:
        """One critic and one actor gradient step, then polyak-average the targets."""
        c = self.config
        if not isinstance(batch.rew, torch.Tensor):
            batch = batch.to_torch(self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        weights_B = batch.weights.float() if batch.weights is not None else None

        # Critic target: y = r_n + discount * Q'(o', mu'(o')).
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            q_next_B = self.critic_target(obs_next_BO, self.actor_target(obs_next_BO))[0]
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B)
            if c.q_target_clip is not None:
                y_B = y_B.clamp(*c.q_target_clip)

        # Critic step.
        q_B = self.critic(obs_BO, act_BA)[0]
        critic_loss = weighted_mean((q_B - y_B) ** 2, weights_B)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        clip_grad(self._critic_params, c.max_grad_norm)
        self.critic_optimizer.step()

        # Actor step: maximise Q(o, mu(o)), penalise large actions.
        pi_BA = self.actor(obs_BO)
        with no_param_grad(self._critic_params):
            actor_loss_B = -self.critic(obs_BO, pi_BA)[0]
        if c.action_l2 != 0.0:
            actor_loss_B = actor_loss_B + c.action_l2 * (
                (pi_BA - self.actor.action_bias) / self.actor.action_scale
            ).pow(2).mean(-1)
        actor_loss = weighted_mean(actor_loss_B, weights_B)
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        clip_grad(self._actor_params, c.max_grad_norm)
        self.actor_optimizer.step()

        for target in self._targets:
            target.update(c.tau)
        self.grad_steps += 1

        td_abs_B = (q_B.detach() - y_B).abs()
        self.priorities = td_abs_B.double().cpu().numpy() if weights_B is not None else None
        # One tensor-to-float conversion for all statistics (float32 values, as .item() gives them).
        stats = torch.stack([critic_loss.detach(), actor_loss.detach(), q_B.detach().mean(), td_abs_B.mean()])
        critic_l, actor_l, q_mean, td_abs_mean = stats.tolist()
        return DDPGStats(critic_loss=critic_l, actor_loss=actor_l, q_mean=q_mean, td_abs_mean=td_abs_mean)

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, optimizers, counters and the exploration generator."""
        return {
            "config": asdict(self.config),
            "encoder": self.encoder.state_dict(),
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "grad_steps": self.grad_steps,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        for name in ("encoder", "actor", "critic", "actor_target", "critic_target"):
            getattr(self, name).load_state_dict(state[name])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.grad_steps = int(state["grad_steps"])
        self.rng.bit_generator.state = state["rng"]
