"""Advantage Actor-Critic (synchronous A3C).

Sources: Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning" (Algorithm S3,
n-step advantages, entropy regularisation), run synchronously over N envs as in OpenAI baselines'
``a2c`` and SB3's ``A2C``; advantages by GAE (Schulman et al. 2016, eq. 16; ``gae_lambda=1`` gives
A3C's n-step returns) computed in Rust by :func:`rlcore.compute_gae`. One gradient step per rollout
on ``policy_loss - ent_coef * entropy + vf_coef * value_loss`` with RMSprop (SB3's defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.actor_critic import (
    ActorCritic,
    ReturnNormalizer,
    anneal_learning_rate,
    clip_grad_norm,
    explained_variance,
    flatten_valid,
    make_adam,
    normalize_advantages,
    policy_act,
    policy_act_value,
    policy_value,
    value_loss,
)
from rlcore.algos.common import resolve_device
from rlcore.batch import Rollout

__all__ = ["A2C", "A2CConfig", "A2CStats"]


@dataclass(frozen=True, kw_only=True)
class A2CConfig:
    """Hyperparameters of :class:`A2C` (defaults: SB3's A2C)."""

    hidden: Sequence[int] = (64, 64)
    """Hidden widths of the policy and value MLPs (tanh, separate networks)."""
    lr: float = 7e-4
    """Learning rate."""
    lr_anneal_env_steps: int | None = None
    """Decay the learning rate linearly to 0 over this many env steps (``None``: constant)."""
    rmsprop: bool = True
    """RMSprop (alpha 0.99, eps 1e-5) as in the paper and SB3; ``False``: Adam (eps 1e-5)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda (1.0: the paper's n-step returns)."""
    ent_coef: float = 0.0
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm (``None``: no clipping)."""
    normalize_advantages: bool = False
    """Standardise the advantages of each rollout."""
    normalize_obs: bool = False
    """Normalise observations with running mean/std (updated after each update, clipped to ±10)."""
    normalize_returns: bool = False
    """Scale rewards by the running std of the discounted return."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions)."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.gae_lambda <= 1.0):
            raise ValueError(f"gamma and gae_lambda must be in [0, 1], got {self.gamma}, {self.gae_lambda}")
        if self.lr <= 0 or (self.lr_anneal_env_steps is not None and self.lr_anneal_env_steps < 1):
            raise ValueError("lr must be > 0 and lr_anneal_env_steps >= 1 or None")


@dataclass(frozen=True)
class A2CStats:
    """Statistics of one A2C update (one rollout, one gradient step)."""

    policy_loss: float
    """``-mean(log pi(a|o) * A)``."""
    value_loss: float
    """``0.5 * mean((V - ret)^2)``."""
    entropy: float
    """Mean policy entropy in nats."""
    explained_variance: float
    """``1 - Var(ret - V_old) / Var(ret)`` of the sampling critic."""
    grad_norm: float
    """Global gradient norm before clipping (0 when clipping is off)."""
    learning_rate: float
    """Learning rate used in this update."""


class A2C:
    """A2C for ``Discrete`` and ``Box`` action spaces.

    Args:
        policy: actor-critic networks (with a critic).
        optimizer: optimises all of ``policy``'s parameters.
        num_envs: N of the rollouts (for the return normaliser).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).

    Raises:
        ValueError: the policy has no critic.
    """

    def __init__(
        self,
        *,
        policy: ActorCritic,
        optimizer: torch.optim.Optimizer,
        num_envs: int,
        config: A2CConfig,
        device: str | torch.device | None = None,
    ) -> None:
        if policy.critic is None:
            raise ValueError("A2C needs an ActorCritic with a critic (with_critic=True)")
        self.config = config
        self.device = resolve_device(device)
        self.policy = policy.to(self.device)
        self.optimizer = optimizer
        self.return_normalizer = (
            ReturnNormalizer(num_envs, config.gamma) if config.normalize_returns else None
        )
        self.env_steps = 0
        self.grad_steps = 0

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: A2CConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device | None = None,
    ) -> A2C:
        """Build the default actor-critic (64x64 tanh MLPs) and its RMSprop (or Adam) optimizer."""
        config = config or A2CConfig()
        dev = resolve_device(device)
        policy = ActorCritic(
            observation_space,
            action_space,
            config.hidden,
            fused=True,
            normalize_obs=config.normalize_obs,
            init_log_std=config.init_log_std,
        ).to(dev)
        optimizer: torch.optim.Optimizer
        if config.rmsprop:
            optimizer = torch.optim.RMSprop(policy.parameters(), lr=config.lr, alpha=0.99, eps=1e-5)
        else:
            optimizer = make_adam(policy.parameters(), lr=config.lr, eps=1e-5)
        return cls(policy=policy, optimizer=optimizer, num_envs=num_envs, config=config, device=dev)

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions for N observations: a sample, or the mode when ``deterministic`` (unclipped)."""
        return policy_act(self.policy, obs, self.device, deterministic=deterministic)

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(act, log_prob [N], value [N])`` for the sampler."""
        return policy_act_value(self.policy, obs, self.device)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """``V(o)`` float32 ``[N]``."""
        return policy_value(self.policy, obs, self.device)

    def update(self, rollout: Rollout) -> A2CStats:
        """One gradient step on the whole rollout; then fold its observations into the normaliser."""
        c = self.config
        lr = anneal_learning_rate(self.optimizer, c.lr, self.env_steps, c.lr_anneal_env_steps)

        # Advantages: GAE (Rust) on the (optionally scaled) rewards.
        rew_TN = self.return_normalizer(rollout) if self.return_normalizer is not None else rollout.rew
        adv_TN, ret_TN = rollout.advantages(c.gamma, c.gae_lambda, rew=rew_TN)
        b = flatten_valid(rollout, self.device, adv=adv_TN, ret=ret_TN)
        adv_B = normalize_advantages(b["adv"]) if c.normalize_advantages else b["adv"]

        # Policy gradient, value regression and entropy bonus in one step.
        x_BO = self.policy.features(b["obs"])
        log_prob_B, entropy_B, value_B = self.policy.evaluate(x_BO, b["act"])
        assert value_B is not None and entropy_B is not None
        pg_loss = -(log_prob_B * adv_B).mean()
        v_loss = value_loss(value_B, b["ret"])
        entropy = entropy_B.mean()
        loss = pg_loss - c.ent_coef * entropy + c.vf_coef * v_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clip_grad_norm(self.policy.parameters(), c.max_grad_norm)
        self.optimizer.step()
        self.grad_steps += 1

        self.policy.update_obs_stats(b["obs"])
        self.env_steps += int(adv_B.shape[0])
        return A2CStats(
            policy_loss=pg_loss.item(),
            value_loss=v_loss.item(),
            entropy=entropy.item(),
            explained_variance=explained_variance(b["value"].cpu().numpy(), b["ret"].cpu().numpy()),
            grad_norm=grad_norm,
            learning_rate=lr,
        )

    def state_dict(self) -> dict[str, Any]:
        """Networks (incl. observation normaliser), optimizer, return normaliser and counters."""
        return {
            "config": asdict(self.config),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "return_normalizer": None
            if self.return_normalizer is None
            else self.return_normalizer.state_dict(),
            "env_steps": self.env_steps,
            "grad_steps": self.grad_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.return_normalizer is not None:
            self.return_normalizer.load_state_dict(state["return_normalizer"])
        self.env_steps = int(state["env_steps"])
        self.grad_steps = int(state["grad_steps"])
