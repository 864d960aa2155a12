"""Advantage Actor-Critic (synchronous A3C).

Sources: Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning" (Algorithm S3,
n-step advantages, entropy regularisation), run synchronously over N envs as in OpenAI baselines'
``a2c`` and SB3's ``A2C``; advantages by GAE (Schulman et al. 2016, eq. 16; ``gae_lambda=1`` gives
A3C's n-step returns) computed in Rust by :func:`rlcore.compute_gae`. One gradient step per rollout
on ``policy_loss - ent_coef * entropy + vf_coef * value_loss`` with RMSprop (SB3's defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
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
    seed: int | None = None
    """Seed of the action-sampling generators (``None``: drawn from torch's global generator when
    the algorithm is built)."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            positive=("lr", "max_grad_norm"),
            counts=("lr_anneal_env_steps",),
            unit_interval=("gamma", "gae_lambda"),
            non_negative=("ent_coef", "vf_coef"),
            finite=("init_log_std",),
        )


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


class A2C(ActorCriticAlgorithm):
    """A2C for ``Discrete`` and ``Box`` action spaces.

    ``act``, ``act_value``, ``value``, ``state_dict`` and ``load_state_dict`` are
    :class:`~rlcore.algos.actor_critic.ActorCriticAlgorithm`'s.

    Args:
        policy: actor-critic networks (with a critic).
        optimizer: optimises all of ``policy``'s parameters.
        num_envs: N of the rollouts (for the return normaliser).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).

    Raises:
        ValueError: the policy has no critic.
    """

    config: A2CConfig

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
        super().__init__(policy=policy, num_envs=num_envs, config=config, device=device)
        self.optimizer = optimizer

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
        policy = default_policy(observation_space, action_space, config, fused=True, device=dev)
        optimizer: torch.optim.Optimizer
        if config.rmsprop:
            optimizer = torch.optim.RMSprop(policy.parameters(), lr=config.lr, alpha=0.99, eps=1e-5)
        else:
            optimizer = adam(policy.parameters(), lr=config.lr, eps=1e-5)
        return cls(policy=policy, optimizer=optimizer, num_envs=num_envs, config=config, device=dev)

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
        grad_norm = gradient_step(self.optimizer, loss, self.policy.parameters(), c.max_grad_norm)
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
