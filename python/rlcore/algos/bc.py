"""Behaviour cloning: supervised regression of the expert's action on its observation.

Source: Pomerleau 1991, "Efficient Training of Artificial Neural Networks for Autonomous
Navigation" (ALVINN); the loss is the maximum-likelihood objective of Ross & Bagnell 2010, "Efficient
Reductions for Imitation Learning", section 2: ``min_pi E_{(s, a) ~ D_expert} [ l(pi(s), a) ]`` with

* ``Discrete`` actions: cross-entropy of a categorical policy, ``l = -log pi(a | s)``;
* ``Box`` actions: mean squared error of a deterministic policy
  ``mu(s) = scale * tanh(MLP(s)) + bias`` (inside the action bounds), ``l = ||mu(s) - a||^2 / A``.

The algorithm never touches an env: it learns from :class:`~rlcore.batch.TransitionBatch` samples of
an expert buffer (``rlcore collect-expert`` writes one) and is driven by
:class:`rlcore.imitation.OfflineTrainer`.

Dimension letters: B batch, O flat observation, A action, K discrete actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlcore.algos.common import adam, check_fields, gradient_step, obs_to_torch, resolve_device
from rlcore.batch import TransitionBatch
from rlcore.nets import DeterministicActor, ObsEncoder, mlp

__all__ = ["BC", "BCConfig", "BCStats"]


@dataclass(frozen=True, kw_only=True)
class BCConfig:
    """Hyperparameters of :class:`BC`."""

    hidden: Sequence[int] = (256, 256)
    """Hidden widths of the policy MLP (ReLU)."""
    lr: float = 1e-3
    """Adam learning rate."""
    weight_decay: float = 0.0
    """Adam (L2) weight decay."""
    normalize_obs: bool = True
    """Normalise observations with running statistics of the expert's observations."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(self, positive=("lr",), non_negative=("weight_decay",))


@dataclass(frozen=True)
class BCStats:
    """Statistics of one behaviour-cloning gradient step."""

    loss: float
    """Cross-entropy (nats, ``Discrete``) or mean squared action error (``Box``) of the batch."""
    accuracy: float
    """Share of the batch where the greedy action equals the expert's (``Discrete``; NaN for ``Box``)."""
    grad_steps: int = 1
    """Gradient steps taken (1 per update)."""


class BCPolicy(nn.Module):
    """Observation encoder and a categorical (``Discrete``) or deterministic (``Box``) head.

    Args:
        observation_space: single-env ``Box`` (or ``Dict`` of ``Box``) space.
        action_space: ``Discrete(K)`` or bounded ``Box((A,))``.
        hidden: hidden widths.
        normalize_obs: running observation normalisation.

    Raises:
        ValueError: another action space.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int],
        *,
        normalize_obs: bool,
    ) -> None:
        super().__init__()
        self.encoder = ObsEncoder(observation_space, normalize=normalize_obs)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.head: nn.Module
        if isinstance(action_space, gym.spaces.Discrete):
            self.head = mlp(self.encoder.dim, int(action_space.n), hidden)
        elif isinstance(action_space, gym.spaces.Box):
            self.head = DeterministicActor(self.encoder.dim, action_space, hidden)
        else:
            raise ValueError(f"BC supports Discrete or Box action spaces, got {action_space}")

    def forward(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits float32 ``[B, K]`` (``Discrete``) or actions float32 ``[B, A]`` (``Box``)."""
        return self.head(self.encoder(obs))


class BC:
    """Behaviour cloning for ``Discrete`` and ``Box`` action spaces.

    Args:
        policy: the network to train.
        optimizer: optimises ``policy``'s parameters.
        config: hyperparameters.
        device: where the policy lives (``None``/``"auto"``: cuda when available).
    """

    def __init__(
        self,
        *,
        policy: BCPolicy,
        optimizer: torch.optim.Optimizer,
        config: BCConfig,
        device: str | torch.device | None = None,
    ) -> None:
        self.config = config
        self.device = resolve_device(device)
        self.policy = policy.to(self.device)
        self.optimizer = optimizer
        self.grad_steps = 0

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: BCConfig | None = None,
        *,
        device: str | torch.device | None = None,
    ) -> BC:
        """Build the default MLP policy and its Adam optimizer.

        Raises:
            ValueError: an unsupported observation or action space.
        """
        config = config or BCConfig()
        dev = resolve_device(device)
        policy = BCPolicy(observation_space, action_space, config.hidden, normalize_obs=config.normalize_obs)
        policy = policy.to(dev)
        optimizer = adam(policy.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        return cls(policy=policy, optimizer=optimizer, config=config, device=dev)

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        """Actions for N observations: int64 ``[N]`` (argmax, or a sample of the categorical when not
        ``deterministic``) or float32 ``[N, A]`` (the regressed action; ``deterministic`` is ignored)."""
        out = self.policy(obs_to_torch(obs, self.device))
        if self.policy.discrete:
            if deterministic:
                return out.argmax(-1).cpu().numpy()
            return torch.distributions.Categorical(logits=out).sample().cpu().numpy()
        return out.cpu().numpy()

    def update(self, batch: TransitionBatch) -> BCStats:
        """One gradient step on a batch of expert (obs ``[B, *O]``, act ``[B]`` int / ``[B, A]`` float).

        The observation normaliser is updated with the batch first (expert data only, so its
        statistics are the expert's state distribution).
        """
        obs = obs_to_torch(batch.obs, self.device)
        act = torch.as_tensor(np.asarray(batch.act), device=self.device)
        self.policy.encoder.update(obs)
        out = self.policy(obs)
        if self.policy.discrete:
            act_B = act.reshape(-1).long()
            loss = F.cross_entropy(out, act_B)
            accuracy = (out.argmax(-1) == act_B).float().mean().item()
        else:
            act_BA = act.reshape(out.shape).float()
            loss = F.mse_loss(out, act_BA)
            accuracy = float("nan")
        gradient_step(self.optimizer, loss, self.policy.parameters(), None)
        self.grad_steps += 1
        return BCStats(loss=loss.item(), accuracy=accuracy)

    def state_dict(self) -> dict[str, Any]:
        """Policy (incl. normaliser), optimizer and counter."""
        return {
            "config": asdict(self.config),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "grad_steps": self.grad_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.grad_steps = int(state["grad_steps"])
