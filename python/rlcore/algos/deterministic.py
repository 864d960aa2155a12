"""The parts that DDPG, TD3 and TD3+BC share: :class:`DeterministicActorCritic`, a declared dataclass
of their networks, frozen targets, optimizers and generators with ``from_spaces``, the deterministic
actor's action and the state-dict layout; and the free functions of their math: the exploring policy
and the target policy.

All three are built from an observation encoder, a deterministic actor ``mu(o)`` inside the action
bounds (:class:`~rlcore.nets.DeterministicActor`, with ``action_scale``/``action_bias`` buffers), an
ensemble of K Q critics (:class:`~rlcore.nets.EnsembleQNetwork`; K = 1 for DDPG, 2 for TD3 and
TD3+BC), frozen target copies of actor and critics, and one optimizer each for actor and critics.
Each algorithm's ``update`` stays in its own module, in the order of its paper.

Dimension letters: B batch, N envs, O flat observation, A action.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, Self

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import (
    TargetNetwork,
    adam,
    freeze,
    generator_state,
    obs_to_torch,
    resolve_device,
    seeded_init,
    set_generator_state,
    torch_generator,
)
from rlcore.nets import DeterministicActor, EnsembleQNetwork, ObsEncoder

__all__ = [
    "NETWORKS",
    "DeterministicActorCritic",
    "default_networks",
    "exploration_action",
    "target_action",
]

NETWORKS = ("encoder", "actor", "critic", "actor_target", "critic_target")
"""The modules of a DDPG, TD3 or TD3+BC state dict, each under its attribute name."""


class NetworkConfig(Protocol):
    """The config fields of DDPG, TD3 and TD3+BC that :func:`default_networks` and
    :meth:`DeterministicActorCritic.from_spaces` read."""

    @property
    def hidden(self) -> tuple[int, ...]: ...
    @property
    def normalize_obs(self) -> bool: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def actor_lr(self) -> float: ...
    @property
    def critic_lr(self) -> float: ...


def default_networks(
    observation_space: gym.Space,
    action_space: gym.spaces.Box,
    config: NetworkConfig,
    *,
    n_critics: int,
    device: torch.device,
) -> tuple[ObsEncoder, DeterministicActor, EnsembleQNetwork]:
    """The default MLP networks ``(encoder, actor, critic)`` for single-env spaces: hidden widths
    ``config.hidden``, actor and critic on ``device``.

    ``critic`` maps ``(obs_BO, act_BA)`` to ``q_KB`` with K = ``n_critics``; the encoder (moved by
    the algorithm) normalises observations with running statistics when ``config.normalize_obs``.
    """
    with seeded_init(config.seed):
        encoder = ObsEncoder(observation_space, normalize=config.normalize_obs)
        actor = DeterministicActor(encoder.dim, action_space, config.hidden).to(device)
        act_dim = int(np.prod(action_space.shape))
        critic = EnsembleQNetwork(encoder.dim, act_dim, config.hidden, n_critics=n_critics).to(device)
    return encoder, actor, critic


@dataclass(eq=False, repr=False, kw_only=True)
class DeterministicActorCritic:
    """What DDPG, TD3 and TD3+BC hold: the given networks and optimizers on ``device``, frozen
    target copies of actor and critic (polyak-averaged through ``_targets``), the parameter lists
    that gradient steps clip, the exploration generator ``rng`` (numpy) and the target-smoothing
    generator ``torch_rng`` (torch) seeded with ``config.seed``, the action bounds as NumPy arrays
    and the gradient-step counter. A subclass sets :attr:`N_CRITICS` and :attr:`CONFIG` and adds
    ``act`` and ``update``.

    Args:
        encoder: flattens/normalises observations; shared by all networks and their targets.
        actor: ``obs_BO -> act_BA`` inside the action bounds, with ``action_scale``/``action_bias`` buffers.
        critic: ``(obs_BO, act_BA) -> q_KB`` with K = :attr:`N_CRITICS`.
        actor_optimizer: optimises the actor.
        critic_optimizer: optimises the critic(s).
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available); the resolved
            ``torch.device`` after construction.
    """

    N_CRITICS: ClassVar[int]
    """K, the critics of ``from_spaces``' default networks."""
    CONFIG: ClassVar[type[Any]]
    """The config class (its defaults serve ``from_spaces(config=None)``)."""

    encoder: ObsEncoder
    actor: DeterministicActor
    critic: EnsembleQNetwork
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    config: Any
    device: Any = None
    actor_target: DeterministicActor = field(init=False)
    critic_target: EnsembleQNetwork = field(init=False)
    rng: np.random.Generator = field(init=False)
    torch_rng: torch.Generator = field(init=False)
    grad_steps: int = field(init=False, default=0)
    _targets: tuple[TargetNetwork, TargetNetwork] = field(init=False)
    _critic_params: list[torch.nn.Parameter] = field(init=False)
    _actor_params: list[torch.nn.Parameter] = field(init=False)
    _scale_A: np.ndarray = field(init=False)
    _bias_A: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        self.encoder = self.encoder.to(self.device)
        self.actor = self.actor.to(self.device)
        self.critic = self.critic.to(self.device)
        self.actor_target = freeze(copy.deepcopy(self.actor))
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self._targets = (
            TargetNetwork(self.critic_target, self.critic),
            TargetNetwork(self.actor_target, self.actor),
        )
        self._critic_params = list(self.critic.parameters())
        self._actor_params = list(self.actor.parameters())
        self.rng = np.random.default_rng(self.config.seed)
        self.torch_rng = torch_generator(self.config.seed, self.device)
        self._scale_A = self.actor.action_scale.cpu().numpy()
        self._bias_A = self.actor.action_bias.cpu().numpy()

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.spaces.Box,
        config: Any = None,
        *,
        device: str | torch.device | None = None,
    ) -> Self:
        """Build the default MLP actor and :attr:`N_CRITICS` critics (:func:`default_networks`)
        with Adam optimizers at ``config.actor_lr`` / ``config.critic_lr`` for single-env spaces
        (``config=None``: :attr:`CONFIG`'s defaults)."""
        config = cls.CONFIG() if config is None else config
        dev = resolve_device(device)
        encoder, actor, critic = default_networks(
            observation_space, action_space, config, n_critics=cls.N_CRITICS, device=dev
        )
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
    def policy_action(self, obs: Any) -> np.ndarray:
        """``mu(o)`` float32 ``[N, A]`` for a NumPy batch of N observations (no exploration)."""
        return self.actor(self.encoder(obs_to_torch(obs, self.device))).cpu().numpy()

    def state_dict(self) -> dict[str, Any]:
        """Config, the :data:`NETWORKS`, both optimizers, the gradient-step counter and the two
        generators, each under its attribute name (``"rng"``: numpy exploration, ``"torch_rng"``:
        torch target smoothing)."""
        return {
            "config": asdict(self.config),
            **{name: getattr(self, name).state_dict() for name in NETWORKS},
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "grad_steps": self.grad_steps,
            "rng": self.rng.bit_generator.state,
            "torch_rng": generator_state(self.torch_rng),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned, in place (the config is not read)."""
        for name in NETWORKS:
            getattr(self, name).load_state_dict(state[name])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.grad_steps = int(state["grad_steps"])
        self.rng.bit_generator.state = state["rng"]
        set_generator_state(self.torch_rng, state["torch_rng"])


def exploration_action(
    act_NA: np.ndarray, rng: np.random.Generator, noise: float, scale_A: np.ndarray, bias_A: np.ndarray
) -> np.ndarray:
    """Gaussian exploration around ``mu(o)`` (Lillicrap et al. 2016, sec. 3; Fujimoto et al. 2018,
    Algorithm 1): ``clip(mu(o) + N(0, (noise * scale)^2), low, high)`` float32 ``[N, A]``.

    ``noise`` is a fraction of the action half-range ``scale_A``; the bounds are
    ``bias_A -+ scale_A``. One ``rng.standard_normal`` draw of shape ``[N, A]``.
    """
    act_NA = act_NA + noise * scale_A * rng.standard_normal(act_NA.shape)
    return np.clip(act_NA, bias_A - scale_A, bias_A + scale_A).astype(np.float32)


def target_action(
    actor_target: DeterministicActor,
    obs_next_BO: torch.Tensor,
    smoothing: tuple[float, float] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The target policy's action ``mu'(o')`` float32 ``[B, A]`` (for the TD target: call it under
    ``torch.no_grad()``).

    With ``smoothing=(noise, noise_clip)``, TD3's target policy smoothing (Fujimoto et al. 2018,
    eq. 14): ``clip(mu'(o') + clip(eps, -noise_clip, noise_clip) * scale, low, high)`` with
    ``eps ~ N(0, noise^2)``, both as fractions of the action half-range (one ``torch.randn``
    draw of shape ``[B, A]`` from ``generator``; ``None``: torch's global one). ``smoothing=None``:
    DDPG's plain ``mu'(o')``.
    """
    act_next_BA = actor_target(obs_next_BO)
    if smoothing is None:
        return act_next_BA
    noise, noise_clip = smoothing
    scale_A, bias_A = actor_target.action_scale, actor_target.action_bias
    eps_BA = torch.randn(act_next_BA.shape, generator=generator, device=act_next_BA.device, dtype=act_next_BA.dtype)
    noise_BA = (eps_BA * noise).clamp(-noise_clip, noise_clip)
    act_next_BA = act_next_BA + noise_BA * scale_A
    return torch.maximum(torch.minimum(act_next_BA, bias_A + scale_A), bias_A - scale_A)
