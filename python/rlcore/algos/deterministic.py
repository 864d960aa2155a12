"""The parts that DDPG and TD3 share, as free functions: their construction (networks, frozen
targets, optimizers, generator), their default networks, the exploring policy, the target policy,
and the layout of their state dict.

Both are built from an observation encoder, a deterministic actor ``mu(o)`` inside the action bounds
(:class:`~rlcore.nets.DeterministicActor`, with ``action_scale``/``action_bias`` buffers), an
ensemble of K Q critics (:class:`~rlcore.nets.EnsembleQNetwork`; K = 1 for DDPG, 2 for TD3), frozen
target copies of actor and critics, and one optimizer each for actor and critics. Each algorithm's
``update`` stays in its own module, in the order of its paper.

Dimension letters: B batch, N envs, O flat observation, A action.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.common import (
    TargetNetwork,
    adam,
    freeze,
    generator_state,
    resolve_device,
    seeded_init,
    set_generator_state,
    torch_generator,
)
from rlcore.nets import DeterministicActor, EnsembleQNetwork, ObsEncoder

__all__ = [
    "NETWORKS",
    "adam_optimizers",
    "default_networks",
    "set_up",
    "exploration_action",
    "load_state_dict_into",
    "state_dict_of",
    "target_action",
]

NETWORKS = ("encoder", "actor", "critic", "actor_target", "critic_target")
"""The modules of a DDPG or TD3 state dict, each under its attribute name."""


class DeterministicAlgorithm(Protocol):
    """The attributes of DDPG and TD3 that :func:`state_dict_of` and :func:`load_state_dict_into` use."""

    config: Any
    encoder: ObsEncoder
    actor: DeterministicActor
    critic: EnsembleQNetwork
    actor_target: DeterministicActor
    critic_target: EnsembleQNetwork
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    grad_steps: int
    rng: np.random.Generator
    torch_rng: torch.Generator


class NetworkConfig(Protocol):
    """The config fields of DDPG and TD3 that :func:`default_networks` reads."""

    @property
    def hidden(self) -> tuple[int, ...]: ...
    @property
    def normalize_obs(self) -> bool: ...
    @property
    def seed(self) -> int | None: ...


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


def set_up(
    algo: Any,
    *,
    encoder: ObsEncoder,
    actor: DeterministicActor,
    critic: EnsembleQNetwork,
    actor_optimizer: torch.optim.Optimizer,
    critic_optimizer: torch.optim.Optimizer,
    config: Any,
    device: str | torch.device | None,
) -> None:
    """What the constructors of DDPG and TD3 do: put the networks on the device (``None``/``"auto"``:
    cuda when available), make frozen target copies of actor and critic (soft-updated through
    ``algo._targets``), keep the optimizers, the parameter lists that gradient steps clip, the
    exploration generator (numpy) and the target-smoothing generator (torch) seeded with
    ``config.seed``, and the action bounds as NumPy arrays."""
    algo.config = config
    algo.device = resolve_device(device)
    algo.encoder = encoder.to(algo.device)
    algo.actor = actor.to(algo.device)
    algo.critic = critic.to(algo.device)
    algo.actor_target = freeze(copy.deepcopy(algo.actor))
    algo.critic_target = freeze(copy.deepcopy(algo.critic))
    algo._targets = (
        TargetNetwork(algo.critic_target, algo.critic),
        TargetNetwork(algo.actor_target, algo.actor),
    )
    algo._critic_params = list(algo.critic.parameters())
    algo._actor_params = list(algo.actor.parameters())
    algo.actor_optimizer = actor_optimizer
    algo.critic_optimizer = critic_optimizer
    algo.rng = np.random.default_rng(config.seed)
    algo.torch_rng = torch_generator(config.seed, algo.device)
    algo.grad_steps = 0
    algo._scale_A = algo.actor.action_scale.cpu().numpy()
    algo._bias_A = algo.actor.action_bias.cpu().numpy()


def adam_optimizers(
    observation_space: gym.Space,
    action_space: gym.spaces.Box,
    config: Any,
    *,
    n_critics: int,
    device: str | torch.device | None,
) -> dict[str, Any]:
    """The keyword arguments of a DDPG/TD3 constructor with the default networks
    (:func:`default_networks`) and Adam optimizers at ``config.actor_lr`` / ``config.critic_lr``."""
    dev = resolve_device(device)
    encoder, actor, critic = default_networks(
        observation_space, action_space, config, n_critics=n_critics, device=dev
    )
    return dict(
        encoder=encoder,
        actor=actor,
        critic=critic,
        actor_optimizer=adam(actor.parameters(), lr=config.actor_lr),
        critic_optimizer=adam(critic.parameters(), lr=config.critic_lr),
        config=config,
        device=dev,
    )


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


def state_dict_of(algo: DeterministicAlgorithm) -> dict[str, Any]:
    """Config, the :data:`NETWORKS`, both optimizers, the gradient-step counter and the two
    generators, each under its attribute name (``"rng"``: numpy exploration, ``"torch_rng"``: torch
    target smoothing)."""
    return {
        "config": asdict(algo.config),
        **{name: getattr(algo, name).state_dict() for name in NETWORKS},
        "actor_optimizer": algo.actor_optimizer.state_dict(),
        "critic_optimizer": algo.critic_optimizer.state_dict(),
        "grad_steps": algo.grad_steps,
        "rng": algo.rng.bit_generator.state,
        "torch_rng": generator_state(algo.torch_rng),
    }


def load_state_dict_into(algo: DeterministicAlgorithm, state: Mapping[str, Any]) -> None:
    """Restore what :func:`state_dict_of` returned, in place (the config is not read)."""
    for name in NETWORKS:
        getattr(algo, name).load_state_dict(state[name])
    algo.actor_optimizer.load_state_dict(state["actor_optimizer"])
    algo.critic_optimizer.load_state_dict(state["critic_optimizer"])
    algo.grad_steps = int(state["grad_steps"])
    algo.rng.bit_generator.state = state["rng"]
    set_generator_state(algo.torch_rng, state["torch_rng"])
