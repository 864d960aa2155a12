"""The network of the on-policy algorithms (VPG, A2C, PPO, GAIL's policy): :class:`ActorCritic`,
an observation normaliser, a policy head (categorical for ``Discrete``, diagonal Gaussian with a
state-independent log-std for ``Box``) and an optional value network, with separate MLPs and
orthogonal initialisation as in CleanRL's ``ppo.py`` / ``ppo_continuous_action.py``.
Log-probabilities and entropies are computed directly (no ``torch.distributions`` objects on the
hot path).

Dimension letters: B batch, O flat observation, A action, H hidden width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlcore.nets.layers import EnsembleLinear, ObsEncoder, RunningMeanStd

__all__ = ["ActorCritic", "TwinTrunk", "gaussian_log_prob"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _layer(in_dim: int, out_dim: int, std: float) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(in_dim: int, out_dim: int, hidden: Sequence[int], out_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [_layer(last, width, math.sqrt(2)), nn.Tanh()]
        last = width
    layers.append(_layer(last, out_dim, out_std))
    return nn.Sequential(*layers)


class TwinTrunk(nn.Module):
    """The hidden layers of the actor and the critic as one two-member ensemble: each layer is one
    batched matmul ``[2, B, in] @ [2, in, out]`` instead of two (half the kernels per step). Member 0
    is the actor's trunk, member 1 the critic's; they share no weights."""

    def __init__(self, in_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        last = in_dim
        for width in hidden:
            layer = EnsembleLinear(2, last, width)
            with torch.no_grad():
                for k in range(2):  # orthogonal init per member, as for the separate networks
                    w = torch.empty(width, last)
                    nn.init.orthogonal_(w, math.sqrt(2))
                    layer.weight[k].copy_(w.T)
                layer.bias.zero_()
            self.layers.append(layer)
            last = width
        self.out_dim = last

    def forward(self, x_BO: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h_2BH = x_BO.unsqueeze(0).expand(2, *x_BO.shape)
        for layer in self.layers:
            h_2BH = torch.tanh(layer(h_2BH))
        return h_2BH[0], h_2BH[1]


class ActorCritic(nn.Module):
    """Policy and (optional) value network over a shared observation normaliser.

    The two networks are separate MLPs of the same shape (no shared weights). With ``fused=True``
    their hidden layers run as one two-member ensemble (:class:`~rlcore.nets.EnsembleLinear`), which
    computes the same functions with half the kernel launches; the actor's and critic's weights then
    live in the same tensors, so use ``fused=False`` when they need separate optimizers (VPG).

    Args:
        observation_space: single-env ``Box`` observation space.
        action_space: ``Discrete`` or ``Box`` single-env action space.
        hidden: hidden widths of both MLPs (tanh; CleanRL uses 64, 64).
        with_critic: build the value network (``False``: REINFORCE without a baseline).
        fused: run the actor's and critic's hidden layers as one ensemble (needs ``with_critic``).
        normalize_obs: normalise observations with running mean/std (clipped to ±``obs_clip``).
        obs_clip: clip range of normalised observations.
        init_log_std: initial log standard deviation of the Gaussian head.

    Raises:
        ValueError: unsupported spaces, or ``fused`` without a critic.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (64, 64),
        *,
        with_critic: bool = True,
        fused: bool = False,
        normalize_obs: bool = False,
        obs_clip: float = 10.0,
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        if fused and not with_critic:
            raise ValueError("ActorCritic(fused=True) needs with_critic=True")
        self.encoder = ObsEncoder(observation_space, normalize=False)
        self.obs_rms = RunningMeanStd(self.encoder.dim, clip=obs_clip, eps=1e-8) if normalize_obs else None
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if isinstance(action_space, gym.spaces.Discrete):
            self.act_dim = int(action_space.n)
            self.log_std: nn.Parameter | None = None
        elif isinstance(action_space, gym.spaces.Box):
            self.act_dim = int(np.prod(action_space.shape))
            self.log_std = nn.Parameter(torch.full((self.act_dim,), float(init_log_std)))
        else:
            raise ValueError(f"ActorCritic supports Discrete or Box action spaces, got {action_space}")
        self.with_critic = with_critic
        self.trunk: TwinTrunk | None = None
        if fused:
            self.trunk = TwinTrunk(self.encoder.dim, hidden)
            self.actor: nn.Module = _layer(self.trunk.out_dim, self.act_dim, 0.01)
            self.critic: nn.Module | None = _layer(self.trunk.out_dim, 1, 1.0)
        else:
            self.actor = _mlp(self.encoder.dim, self.act_dim, hidden, 0.01)
            self.critic = _mlp(self.encoder.dim, 1, hidden, 1.0) if with_critic else None

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Flat float32 ``[B, O]``, normalised when ``normalize_obs``."""
        x_BO = self.encoder.flatten(obs)
        return self.obs_rms(x_BO) if self.obs_rms is not None else x_BO

    def update_obs_stats(self, obs: torch.Tensor) -> None:
        """Fold a batch of raw observations into the normaliser (no-op without one)."""
        if self.obs_rms is not None:
            self.obs_rms.update(self.encoder.flatten(obs))

    def forward(self, x_BO: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out_BK, value_B)`` from features: logits ``[B, n]`` or Gaussian means ``[B, A]``, and
        ``V(o)`` (zeros without a critic)."""
        if self.trunk is not None:
            assert self.critic is not None
            h_actor, h_critic = self.trunk(x_BO)
            return self.actor(h_actor), self.critic(h_critic).squeeze(-1)
        return self.actor(x_BO), self.value(x_BO)

    def value(self, x_BO: torch.Tensor) -> torch.Tensor:
        """``V(o)`` float32 ``[B]`` from features; zeros without a critic."""
        if self.critic is None:
            return x_BO.new_zeros(x_BO.shape[0])
        if self.trunk is not None:
            return self.forward(x_BO)[1]
        return self.critic(x_BO).squeeze(-1)

    def _policy_out(self, x_BO: torch.Tensor) -> torch.Tensor:
        return self.forward(x_BO)[0] if self.trunk is not None else self.actor(x_BO)

    def sample(
        self,
        x_BO: torch.Tensor,
        *,
        deterministic: bool = False,
        out_BK: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample (or take the mode of) the policy: ``(act, log_prob_B)``, drawing from
        ``generator`` (``None``: torch's global generator).

        ``act`` is int64 ``[B]`` for Discrete, float32 ``[B, A]`` (unclipped) for Box. ``out_BK``:
        the policy head's output when the caller already has it (from :meth:`forward`).
        """
        out = self._policy_out(x_BO) if out_BK is None else out_BK
        if self.discrete:
            logp_BK = torch.log_softmax(out, dim=-1)
            if deterministic:
                act_B = logp_BK.argmax(-1)
            else:
                act_B = torch.multinomial(logp_BK.exp(), 1, generator=generator).squeeze(-1)
            return act_B, logp_BK.gather(-1, act_B.unsqueeze(-1)).squeeze(-1)
        assert self.log_std is not None
        log_std_A = self.log_std
        if deterministic:
            act_BA = out
        else:
            eps_BA = torch.randn(out.shape, generator=generator, device=out.device, dtype=out.dtype)
            act_BA = out + log_std_A.exp() * eps_BA
        return act_BA, gaussian_log_prob(act_BA, out, log_std_A)

    def evaluate(
        self, x_BO: torch.Tensor, act: torch.Tensor, *, with_value: bool = True, with_entropy: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """``(log_prob_B, entropy_B, value_B)`` of given actions under the current policy
        (``entropy_B``/``value_B`` are ``None`` when not asked for: fewer ops in the graph)."""
        if with_value:
            out, value_B = self.forward(x_BO)
        else:
            out, value_B = self._policy_out(x_BO), None
        if self.discrete:
            logp_BK = torch.log_softmax(out, dim=-1)
            log_prob_B = logp_BK.gather(-1, act.long().reshape(-1, 1)).squeeze(-1)
            entropy_B = -(logp_BK.exp() * logp_BK).sum(-1) if with_entropy else None
            return log_prob_B, entropy_B, value_B
        assert self.log_std is not None
        act_BA = act.float().reshape(out.shape)
        log_prob_B = gaussian_log_prob(act_BA, out, self.log_std)
        entropy_B = (0.5 + _LOG_SQRT_2PI + self.log_std).sum().expand(out.shape[0]) if with_entropy else None
        return log_prob_B, entropy_B, value_B


def gaussian_log_prob(act_BA: torch.Tensor, mean_BA: torch.Tensor, log_std_A: torch.Tensor) -> torch.Tensor:
    """Log-density ``[B]`` of a diagonal Gaussian, summed over the A action dimensions."""
    z_BA = (act_BA - mean_BA) * torch.exp(-log_std_A)
    return (-0.5 * z_BA.square() - log_std_A - _LOG_SQRT_2PI).sum(-1)
