"""The parts that SAC and CQL share: :class:`SquashedGaussianActorCritic`, a declared dataclass of
their networks, frozen target critics, optimizers, entropy temperature and generator, with
``from_spaces`` and the policy's action. Each algorithm's ``update`` and state dict stay in its own
module, in the order of its paper.

Both are built from an observation encoder, a tanh-squashed Gaussian actor
(:class:`~rlcore.nets.SquashedGaussianActor`) and twin Q critics
(:class:`~rlcore.nets.EnsembleQNetwork`, K = 2) with a frozen target copy, one optimizer each for
actor and critics, and a learned temperature ``alpha = exp(log_alpha)`` with its own Adam
(Haarnoja et al. 2018b, sec. 5, "automating entropy adjustment").

Dimension letters: N envs, A action.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import (
    TargetNetwork,
    adam,
    freeze,
    obs_to_torch,
    resolve_device,
    seeded_init,
    torch_generator,
)
from rlcore.nets import EnsembleQNetwork, ObsEncoder, SquashedGaussianActor

__all__ = ["SquashedGaussianActorCritic"]


@dataclass(eq=False, repr=False, kw_only=True)
class SquashedGaussianActorCritic:
    """What SAC and CQL hold: the given networks and optimizers on ``device``, a frozen target copy
    of the critics (polyak-averaged through ``_critic_target``), the parameter lists that gradient
    steps clip, the target entropy (``config.target_entropy``, default ``-act_dim``), the
    temperature ``log_alpha`` (from ``config.init_alpha``) with its Adam at ``config.alpha_lr``, the
    generator ``torch_rng`` of the policy's samples (seeded with ``config.seed``) and the
    gradient-step counter. A subclass sets :attr:`CONFIG` and adds ``update`` and its state dict.

    Args:
        encoder: flattens/normalises observations; shared by all networks and the target critics.
        actor: squashed-Gaussian policy returning ``(act_BA, log_prob_B)``.
        critic: ``(obs_BO, act_BA) -> q_KB`` (K = 2 twin critics).
        actor_optimizer: optimises the actor.
        critic_optimizer: optimises the critics.
        act_dim: action dimension A (for the default target entropy).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available); the resolved
            ``torch.device`` after construction.
    """

    CONFIG: ClassVar[type[Any]]
    """The config class (its defaults serve ``from_spaces(config=None)``)."""
    DETERMINISTIC_ACT: ClassVar[bool] = False
    """``act``'s default: a policy sample (online) or the squashed mean (offline)."""

    encoder: ObsEncoder
    actor: SquashedGaussianActor
    critic: EnsembleQNetwork
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    act_dim: int
    config: Any
    device: Any = None
    critic_target: EnsembleQNetwork = field(init=False)
    target_entropy: float = field(init=False)
    log_alpha: torch.Tensor = field(init=False)
    alpha_optimizer: torch.optim.Optimizer = field(init=False)
    torch_rng: torch.Generator = field(init=False)
    grad_steps: int = field(init=False, default=0)
    _critic_target: TargetNetwork = field(init=False)
    _critic_params: list[torch.nn.Parameter] = field(init=False)
    _actor_params: list[torch.nn.Parameter] = field(init=False)

    def __post_init__(self) -> None:
        c = self.config
        self.device = resolve_device(self.device)
        self.encoder = self.encoder.to(self.device)
        self.actor = self.actor.to(self.device)
        self.critic = self.critic.to(self.device)
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self._critic_target = TargetNetwork(self.critic_target, self.critic)
        self._critic_params = list(self.critic.parameters())
        self._actor_params = list(self.actor.parameters())
        self.target_entropy = float(-self.act_dim if c.target_entropy is None else c.target_entropy)
        self.log_alpha = torch.tensor(math.log(c.init_alpha), device=self.device, requires_grad=True)
        self.alpha_optimizer = adam([self.log_alpha], lr=c.alpha_lr)
        self.torch_rng = torch_generator(c.seed, self.device)

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.spaces.Box,
        config: Any = None,
        *,
        device: str | torch.device | None = None,
    ) -> Self:
        """Build the default MLP actor and twin critics (widths ``config.hidden``, initial weights
        under ``config.seed``) with Adam optimizers at ``config.actor_lr`` / ``config.critic_lr``
        for single-env spaces (``config=None``: :attr:`CONFIG`'s defaults)."""
        config = cls.CONFIG() if config is None else config
        dev = resolve_device(device)
        act_dim = int(np.prod(action_space.shape))
        with seeded_init(config.seed):
            encoder = ObsEncoder(observation_space, normalize=config.normalize_obs)
            actor = SquashedGaussianActor(encoder.dim, action_space, config.hidden).to(dev)
            critic = EnsembleQNetwork(encoder.dim, act_dim, config.hidden, n_critics=2).to(dev)
        return cls(
            encoder=encoder,
            actor=actor,
            critic=critic,
            actor_optimizer=adam(actor.parameters(), lr=config.actor_lr),
            critic_optimizer=adam(critic.parameters(), lr=config.critic_lr),
            act_dim=act_dim,
            config=config,
            device=dev,
        )

    @property
    def alpha(self) -> float:
        """The current entropy temperature."""
        return float(self.log_alpha.detach().exp())

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool | None = None) -> np.ndarray:
        """Actions float32 ``[N, A]``: a policy sample (drawn from ``torch_rng``), or the squashed
        mean when ``deterministic`` (``None``: :attr:`DETERMINISTIC_ACT`)."""
        if deterministic is None:
            deterministic = self.DETERMINISTIC_ACT
        obs_NO = self.encoder(obs_to_torch(obs, self.device))
        return self.actor.action(obs_NO, deterministic=deterministic, generator=self.torch_rng).cpu().numpy()
