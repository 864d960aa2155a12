"""Vanilla policy gradient (REINFORCE), with an optional learned value baseline.

Sources: Williams 1992, "Simple Statistical Gradient-Following Algorithms" (REINFORCE); the
reward-to-go and baseline form of OpenAI Spinning Up's VPG (Achiam 2018: one policy step per
rollout on ``-mean(log pi(a|o) * A)``, then ``value_iters`` value regression steps on the
returns). With ``baseline=True`` the advantages are GAE (Schulman et al. 2016, eq. 16), computed in
Rust by :func:`rlcore.compute_gae`; without, they are the Monte-Carlo rewards-to-go (the same call
with values 0 and lambda 1; a rollout cut mid-episode then bootstraps from 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.actor_critic import (
    ActorCriticAlgorithm,
    anneal_learning_rate,
    default_policy,
    explained_variance,
    flatten_valid,
    normalize_advantages,
    value_loss,
)
from rlcore.algos.common import adam, check_fields, gradient_step, resolve_device
from rlcore.batch import Rollout
from rlcore.nets import ActorCritic

__all__ = ["VPG", "VPGConfig", "VPGStats"]


@dataclass(frozen=True, kw_only=True)
class VPGConfig:
    """Hyperparameters of :class:`VPG` (defaults close to Spinning Up's VPG)."""

    hidden: Sequence[int] = (64, 64)
    """Hidden widths of the policy and value MLPs (tanh, separate networks)."""
    baseline: bool = True
    """Learn a value function and use GAE advantages; ``False``: plain REINFORCE on rewards-to-go."""
    policy_lr: float = 3e-3
    """Adam learning rate of the policy."""
    value_lr: float = 1e-3
    """Adam learning rate of the value function."""
    lr_anneal_env_steps: int | None = None
    """Decay the policy learning rate linearly to 0 over this many env steps (``None``: constant)."""
    value_iters: int = 40
    """Full-batch value regression steps per rollout (with ``baseline``)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.97
    """GAE lambda of the baseline advantages (ignored without ``baseline``: Monte-Carlo returns)."""
    ent_coef: float = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm of each step (``None``: no clipping)."""
    normalize_advantages: bool = True
    """Standardise the advantages of each rollout."""
    normalize_obs: bool = False
    """Normalise observations with running mean/std (updated after each update, clipped to ±10)."""
    normalize_returns: bool = False
    """Scale rewards by the running std of the discounted return."""
    init_log_std: float = -0.5
    """Initial log standard deviation of the Gaussian policy (continuous actions)."""
    seed: int | None = None
    """Seed of the action-sampling generators (``None``: drawn from torch's global generator when
    the algorithm is built)."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            positive=("policy_lr", "value_lr", "max_grad_norm"),
            counts=("lr_anneal_env_steps",),
            counts_from_zero=("value_iters",),
            unit_interval=("gamma", "gae_lambda"),
            non_negative=("ent_coef",),
            finite=("init_log_std",),
        )


@dataclass(frozen=True)
class VPGStats:
    """Statistics of one VPG update (one rollout)."""

    policy_loss: float
    """``-mean(log pi(a|o) * A)``."""
    value_loss: float
    """``0.5 * mean((V - ret)^2)`` after the value steps (0 without a baseline)."""
    entropy: float
    """Mean policy entropy in nats."""
    explained_variance: float
    """``1 - Var(ret - V_old) / Var(ret)`` of the sampling critic (NaN without a baseline)."""
    learning_rate: float
    """Policy learning rate used in this update."""


class VPG(ActorCriticAlgorithm):
    """REINFORCE / VPG for ``Discrete`` and ``Box`` action spaces.

    ``act``, ``act_value``, ``value``, ``state_dict`` and ``load_state_dict`` are
    :class:`~rlcore.algos.actor_critic.ActorCriticAlgorithm`'s.

    Args:
        policy: actor (and critic when ``config.baseline``).
        policy_optimizer: optimises the actor's parameters (incl. the Gaussian log-std).
        value_optimizer: optimises the critic; ``None`` without a baseline.
        num_envs: N of the rollouts (for the return normaliser).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).

    Raises:
        ValueError: ``baseline`` and the presence of a critic / value optimizer disagree.
    """

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("policy_optimizer", "value_optimizer")
    config: VPGConfig

    def __init__(
        self,
        *,
        policy: ActorCritic,
        policy_optimizer: torch.optim.Optimizer,
        value_optimizer: torch.optim.Optimizer | None,
        num_envs: int,
        config: VPGConfig,
        device: str | torch.device | None = None,
    ) -> None:
        if config.baseline != (policy.critic is not None) or config.baseline != (value_optimizer is not None):
            raise ValueError(
                "VPG: baseline=True needs a critic and a value optimizer; baseline=False neither"
            )
        super().__init__(policy=policy, num_envs=num_envs, config=config, device=device)
        self.policy_optimizer = policy_optimizer
        self.value_optimizer = value_optimizer

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: VPGConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device | None = None,
    ) -> VPG:
        """Build the default actor (and critic) MLPs with one Adam optimizer each."""
        config = config or VPGConfig()
        dev = resolve_device(device)
        policy = default_policy(
            observation_space, action_space, config, fused=False, with_critic=config.baseline, device=dev
        )
        actor_params = list(policy.actor.parameters()) + (
            [policy.log_std] if policy.log_std is not None else []
        )
        value_optimizer = None
        if policy.critic is not None:
            value_optimizer = adam(policy.critic.parameters(), lr=config.value_lr)
        return cls(
            policy=policy,
            policy_optimizer=adam(actor_params, lr=config.policy_lr),
            value_optimizer=value_optimizer,
            num_envs=num_envs,
            config=config,
            device=dev,
        )

    def update(self, rollout: Rollout) -> VPGStats:
        """One policy gradient step, then ``value_iters`` value steps; then the normaliser update."""
        c = self.config
        lr = anneal_learning_rate(self.policy_optimizer, c.policy_lr, self.env_steps, c.lr_anneal_env_steps)

        # Advantages: GAE with the baseline, rewards-to-go without (both in Rust).
        rew_TN = self.return_normalizer(rollout) if self.return_normalizer is not None else rollout.rew
        if c.baseline:
            adv_TN, ret_TN = rollout.advantages(c.gamma, c.gae_lambda, rew=rew_TN)
        else:
            adv_TN, ret_TN = rollout.advantages(c.gamma, 1.0, rew=rew_TN, value=np.zeros_like(rollout.value))
        b = flatten_valid(rollout, self.device, adv=adv_TN, ret=ret_TN)
        adv_B = normalize_advantages(b["adv"]) if c.normalize_advantages else b["adv"]
        x_BO = self.policy.features(b["obs"])

        # Policy step: ascend mean(log pi(a|o) * A) (+ entropy bonus).
        log_prob_B, entropy_B, _ = self.policy.evaluate(x_BO, b["act"], with_value=False)
        assert entropy_B is not None
        pg_loss = -(log_prob_B * adv_B).mean()
        entropy = entropy_B.mean()
        policy_params = self.policy_optimizer.param_groups[0]["params"]
        gradient_step(self.policy_optimizer, pg_loss - c.ent_coef * entropy, policy_params, c.max_grad_norm)
        self.grad_steps += 1

        # Value steps: regress V(o) on the returns.
        v_loss = torch.zeros((), device=self.device)
        if self.value_optimizer is not None:
            value_params = self.value_optimizer.param_groups[0]["params"]
            for _ in range(c.value_iters):
                v_loss = value_loss(self.policy.value(x_BO), b["ret"])
                gradient_step(self.value_optimizer, v_loss, value_params, c.max_grad_norm)

        self.policy.update_obs_stats(b["obs"])
        self.env_steps += int(adv_B.shape[0])
        ev = (
            explained_variance(b["value"].cpu().numpy(), b["ret"].cpu().numpy())
            if c.baseline
            else float("nan")
        )
        return VPGStats(
            policy_loss=pg_loss.item(),
            value_loss=v_loss.item(),
            entropy=entropy.item(),
            explained_variance=ev,
            learning_rate=lr,
        )
