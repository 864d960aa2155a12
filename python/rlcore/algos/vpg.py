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

    def __post_init__(self) -> None:
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.gae_lambda <= 1.0):
            raise ValueError(f"gamma and gae_lambda must be in [0, 1], got {self.gamma}, {self.gae_lambda}")
        if self.value_iters < 0:
            raise ValueError(f"value_iters must be >= 0, got {self.value_iters}")
        if self.policy_lr <= 0 or self.value_lr <= 0:
            raise ValueError("learning rates must be > 0")


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


class VPG:
    """REINFORCE / VPG for ``Discrete`` and ``Box`` action spaces.

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
        self.config = config
        self.device = resolve_device(device)
        self.policy = policy.to(self.device)
        self.policy_optimizer = policy_optimizer
        self.value_optimizer = value_optimizer
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
        config: VPGConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device | None = None,
    ) -> VPG:
        """Build the default actor (and critic) MLPs with one Adam optimizer each."""
        config = config or VPGConfig()
        dev = resolve_device(device)
        policy = ActorCritic(
            observation_space,
            action_space,
            config.hidden,
            with_critic=config.baseline,
            normalize_obs=config.normalize_obs,
            init_log_std=config.init_log_std,
        ).to(dev)
        actor_params = list(policy.actor.parameters()) + (
            [policy.log_std] if policy.log_std is not None else []
        )
        value_optimizer = None
        if policy.critic is not None:
            value_optimizer = make_adam(policy.critic.parameters(), lr=config.value_lr, eps=1e-8)
        return cls(
            policy=policy,
            policy_optimizer=make_adam(actor_params, lr=config.policy_lr, eps=1e-8),
            value_optimizer=value_optimizer,
            num_envs=num_envs,
            config=config,
            device=dev,
        )

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions for N observations: a sample, or the mode when ``deterministic`` (unclipped)."""
        return policy_act(self.policy, obs, self.device, deterministic=deterministic)

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(act, log_prob [N], value [N])`` for the sampler (value 0 without a baseline)."""
        return policy_act_value(self.policy, obs, self.device)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """``V(o)`` float32 ``[N]`` (zeros without a baseline)."""
        return policy_value(self.policy, obs, self.device)

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
        self.policy_optimizer.zero_grad(set_to_none=True)
        (pg_loss - c.ent_coef * entropy).backward()
        clip_grad_norm(self.policy_optimizer.param_groups[0]["params"], c.max_grad_norm)
        self.policy_optimizer.step()
        self.grad_steps += 1

        # Value steps: regress V(o) on the returns.
        v_loss = torch.zeros((), device=self.device)
        if self.value_optimizer is not None:
            for _ in range(c.value_iters):
                v_loss = value_loss(self.policy.value(x_BO), b["ret"])
                self.value_optimizer.zero_grad(set_to_none=True)
                v_loss.backward()
                clip_grad_norm(self.value_optimizer.param_groups[0]["params"], c.max_grad_norm)
                self.value_optimizer.step()

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

    def state_dict(self) -> dict[str, Any]:
        """Networks (incl. observation normaliser), optimizers, return normaliser and counters."""
        return {
            "config": asdict(self.config),
            "policy": self.policy.state_dict(),
            "policy_optimizer": self.policy_optimizer.state_dict(),
            "value_optimizer": None if self.value_optimizer is None else self.value_optimizer.state_dict(),
            "return_normalizer": None
            if self.return_normalizer is None
            else self.return_normalizer.state_dict(),
            "env_steps": self.env_steps,
            "grad_steps": self.grad_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.policy.load_state_dict(state["policy"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        if self.value_optimizer is not None:
            self.value_optimizer.load_state_dict(state["value_optimizer"])
        if self.return_normalizer is not None:
            self.return_normalizer.load_state_dict(state["return_normalizer"])
        self.env_steps = int(state["env_steps"])
        self.grad_steps = int(state["grad_steps"])
