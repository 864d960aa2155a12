"""Proximal Policy Optimization with the clipped surrogate objective.

Sources: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (clipped objective eq. 7,
combined loss eq. 9, Algorithm 1); GAE from Schulman et al. 2016, eq. 16, computed in Rust by
:func:`rlcore.compute_gae`; the implementation details of Huang et al. 2022, "The 37 Implementation
Details of PPO" (orthogonal init, Adam eps 1e-5, advantage normalisation per minibatch, value
clipping, global gradient clipping, learning-rate annealing, observation and return normalisation).
Reads in the order of CleanRL's ``ppo.py`` update: (reward scaling), GAE, flatten, epochs of
shuffled minibatches (ratio, approximate KL, clipped policy loss, value loss, entropy bonus), KL
early stop, explained variance.

Truncation is handled by the rollout: a truncated step bootstraps from the value of its true final
observation, a rollout cut mid-episode from the value of the next observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.actor_critic import (
    ActorCriticAlgorithm,
    anneal_learning_rate,
    approx_kl,
    clip_fraction,
    default_policy,
    explained_variance,
    flatten_valid,
    normalize_advantages,
    ppo_policy_loss,
    value_loss,
)
from rlcore.algos.common import adam, check_fields, gradient_step, resolve_device
from rlcore.batch import Rollout
from rlcore.nets import ActorCritic

__all__ = ["PPO", "PPOConfig", "PPOStats"]


@dataclass(frozen=True, kw_only=True)
class PPOConfig:
    """Hyperparameters of :class:`PPO` (defaults: SB3's / CleanRL's PPO)."""

    hidden: Sequence[int] = (64, 64)
    """Hidden widths of the policy and value MLPs (tanh, separate networks)."""
    lr: float = 3e-4
    """Adam learning rate."""
    lr_anneal_env_steps: int | None = None
    """Decay the learning rate linearly to 0 over this many env steps (``None``: constant)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    n_epochs: int = 10
    """Passes over each rollout."""
    minibatch_size: int = 64
    """Transitions per gradient step (the last minibatch of an epoch may be smaller)."""
    clip_coef: float = 0.2
    """Clip range epsilon of the probability ratio."""
    clip_anneal_env_steps: int | None = None
    """Decay ``clip_coef`` linearly to 0 over this many env steps, as SB3's ``clip_range`` schedules
    (``None``: constant)."""
    value_clip_coef: float | None = None
    """Clip range of the value change around the sampling value (``None``: unclipped value loss)."""
    ent_coef: float = 0.0
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm (``None``: no clipping)."""
    normalize_advantages: bool = True
    """Standardise advantages within each minibatch."""
    target_kl: float | None = None
    """Stop the epochs once a minibatch's approximate KL exceeds ``1.5 * target_kl`` (``None``: never)."""
    normalize_obs: bool = False
    """Normalise observations with running mean/std (updated after each update, clipped to ±10)."""
    normalize_returns: bool = False
    """Scale rewards by the running std of the discounted return."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions)."""
    seed: int = 0
    """Seed of the minibatch shuffling."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            positive=("lr", "adam_eps", "clip_coef", "value_clip_coef", "max_grad_norm", "target_kl"),
            counts=("n_epochs", "minibatch_size", "lr_anneal_env_steps", "clip_anneal_env_steps"),
            unit_interval=("gamma", "gae_lambda"),
            non_negative=("ent_coef", "vf_coef"),
            finite=("init_log_std",),
        )


@dataclass(frozen=True)
class PPOStats:
    """Statistics of one PPO update (one rollout), averaged over its gradient steps."""

    policy_loss: float
    """Clipped surrogate loss (negated objective)."""
    value_loss: float
    """``0.5 * (V - ret)^2`` (clipped variant when enabled)."""
    entropy: float
    """Mean entropy (nats) of the updated policy on the rollout's observations."""
    approx_kl: float
    """Approximate KL(old || new) (k3 estimator) at each sample's minibatch step, averaged over epochs."""
    clip_fraction: float
    """Share of samples whose ratio left ``[1 - eps, 1 + eps]`` at their minibatch step."""
    explained_variance: float
    """``1 - Var(ret - V_old) / Var(ret)`` of the sampling critic."""
    grad_steps: int
    """Gradient steps taken in this update."""
    epochs: float
    """Epochs run (fewer than ``n_epochs`` after a KL early stop; fractional when stopped mid-epoch)."""
    learning_rate: float
    """Learning rate used in this update."""


class PPO(ActorCriticAlgorithm):
    """PPO for ``Discrete`` and ``Box`` action spaces.

    ``act``, ``act_value``, ``value``, ``state_dict`` and ``load_state_dict`` are
    :class:`~rlcore.algos.actor_critic.ActorCriticAlgorithm`'s (the state includes the shuffling
    generator ``rng``).

    Args:
        policy: actor-critic networks (with a critic).
        optimizer: optimises all of ``policy``'s parameters.
        num_envs: N of the rollouts (the return normaliser keeps one running return per env).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available).

    Raises:
        ValueError: the policy has no critic.
    """

    config: PPOConfig
    rng: np.random.Generator

    def __init__(
        self,
        *,
        policy: ActorCritic,
        optimizer: torch.optim.Optimizer,
        num_envs: int,
        config: PPOConfig,
        device: str | torch.device | None = None,
    ) -> None:
        if policy.critic is None:
            raise ValueError("PPO needs an ActorCritic with a critic (with_critic=True)")
        super().__init__(policy=policy, num_envs=num_envs, config=config, device=device)
        self.optimizer = optimizer
        self.rng = np.random.default_rng(config.seed)

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: PPOConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device | None = None,
    ) -> PPO:
        """Build the default actor-critic (CleanRL's 64x64 tanh MLPs) and its Adam optimizer."""
        config = config or PPOConfig()
        dev = resolve_device(device)
        policy = default_policy(observation_space, action_space, config, fused=True, device=dev)
        optimizer = adam(policy.parameters(), lr=config.lr, eps=config.adam_eps)
        return cls(policy=policy, optimizer=optimizer, num_envs=num_envs, config=config, device=dev)

    def update(self, rollout: Rollout) -> PPOStats:
        """Epochs of clipped-objective minibatch steps on one rollout; then fold its observations
        into the normaliser (after the update, so ratios compare policies on the same features)."""
        c = self.config
        lr = anneal_learning_rate(self.optimizer, c.lr, self.env_steps, c.lr_anneal_env_steps)
        clip_coef = c.clip_coef
        if c.clip_anneal_env_steps is not None:
            clip_coef *= max(1e-8, 1.0 - self.env_steps / c.clip_anneal_env_steps)

        # Advantages: GAE (Rust) on the (optionally scaled) rewards.
        rew_TN = self.return_normalizer(rollout) if self.return_normalizer is not None else rollout.rew
        adv_TN, ret_TN = rollout.advantages(c.gamma, c.gae_lambda, rew=rew_TN)
        b = flatten_valid(rollout, self.device, adv=adv_TN, ret=ret_TN)
        x_BO = self.policy.features(b["obs"])
        act_B = b["act"]
        aux_4B = torch.stack([b["log_prob"], b["value"], b["adv"], b["ret"]])
        batch_size = int(aux_4B.shape[1])

        # Epochs of shuffled minibatches (each epoch gathers the permuted batch once; minibatches are views).
        params = list(self.policy.parameters())
        log_ratio_P = torch.zeros(batch_size, device=self.device)
        losses: list[torch.Tensor] = []
        kl_sum = clip_sum = torch.zeros((), device=self.device)
        rows_seen = 0
        epochs = 0.0
        for _ in range(c.n_epochs):
            perm = torch.from_numpy(self.rng.permutation(batch_size)).to(self.device)
            x_PO, act_P = x_BO[perm], act_B[perm]
            old_log_prob_P, old_value_P, adv_P, ret_P = aux_4B[:, perm].unbind(0)
            rows = batch_size
            for start in range(0, batch_size, c.minibatch_size):
                mb = slice(start, start + c.minibatch_size)
                x_MO = x_PO[mb]
                log_prob_M, entropy_M, value_M = self.policy.evaluate(
                    x_MO, act_P[mb], with_entropy=c.ent_coef != 0.0
                )
                assert value_M is not None
                adv_M = normalize_advantages(adv_P[mb]) if c.normalize_advantages else adv_P[mb]
                pg_loss, log_ratio_M = ppo_policy_loss(log_prob_M, old_log_prob_P[mb], adv_M, clip_coef)
                if c.target_kl is not None and approx_kl(log_ratio_M) > 1.5 * c.target_kl:
                    rows = start  # KL early stop (SB3): this minibatch takes no step
                    break
                v_loss = value_loss(value_M, ret_P[mb], old_value_P[mb], c.value_clip_coef)
                loss = pg_loss + c.vf_coef * v_loss
                if entropy_M is not None:
                    loss = loss - c.ent_coef * entropy_M.mean()

                gradient_step(self.optimizer, loss, params, c.max_grad_norm)
                log_ratio_P[mb] = log_ratio_M
                losses += (pg_loss.detach(), v_loss.detach())
            if rows > 0:  # ratio statistics of the epoch, over the minibatches that took a step
                kl_sum = kl_sum + approx_kl(log_ratio_P[:rows]) * rows
                clip_sum = clip_sum + clip_fraction(log_ratio_P[:rows], clip_coef) * rows
                rows_seen += rows
            if rows < batch_size:
                epochs += rows / batch_size
                break
            epochs += 1.0
        n_mb = len(losses) // 2
        self.grad_steps += n_mb

        # Bookkeeping: entropy of the updated policy, normaliser statistics, env-step counter.
        with torch.no_grad():
            _, entropy_B, _ = self.policy.evaluate(x_BO, act_B, with_value=False)
        assert entropy_B is not None
        self.policy.update_obs_stats(b["obs"])
        self.env_steps += batch_size
        loss_means = torch.stack(losses).view(-1, 2).mean(0).tolist() if losses else [float("nan")] * 2
        return PPOStats(
            policy_loss=loss_means[0],
            value_loss=loss_means[1],
            entropy=entropy_B.mean().item(),
            approx_kl=(kl_sum / max(rows_seen, 1)).item(),
            clip_fraction=(clip_sum / max(rows_seen, 1)).item(),
            explained_variance=explained_variance(b["value"].cpu().numpy(), b["ret"].cpu().numpy()),
            grad_steps=n_mb,
            epochs=epochs,
            learning_rate=lr,
        )
