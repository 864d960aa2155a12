"""Networks of the off-policy and offline algorithms: deterministic, squashed-Gaussian and Gaussian
actors (DDPG, TD3, SAC, BC, TD3+BC, CQL; IQL), ensembles of Q critics, the Q-networks of DQN (MLP or
Nature CNN, optionally dueling) and R2D2's recurrent Q-network.

Dimension letters: B batch, O flat observation size, A action size, K ensemble members (critics),
C channels (stacked frames), H and W image height and width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlcore.nets.layers import EnsembleLinear, NatureCNN, mlp

__all__ = [
    "DeterministicActor",
    "DiscreteQNetwork",
    "EnsembleQNetwork",
    "GaussianActor",
    "ImageQNetwork",
    "RecurrentQNetwork",
    "SquashedGaussianActor",
    "squashed_gaussian_log_prob",
]


def _action_affine(action_space: gym.spaces.Box) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(action_space, gym.spaces.Box):
        raise ValueError(f"continuous actors need a Box action space, got {action_space}")
    low = np.asarray(action_space.low, dtype=np.float32).reshape(-1)
    high = np.asarray(action_space.high, dtype=np.float32).reshape(-1)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError("continuous actors need a bounded Box action space (finite low and high)")
    return torch.from_numpy((high - low) / 2.0), torch.from_numpy((high + low) / 2.0)


class DeterministicActor(nn.Module):
    """``mu(o) = scale * tanh(MLP(o)) + bias``, an action inside the Box bounds (DDPG, TD3).

    Args:
        obs_dim: flat observation size O.
        action_space: bounded ``Box`` of shape ``(A,)``.
        hidden: hidden layer widths.
    """

    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def __init__(
        self, obs_dim: int, action_space: gym.spaces.Box, hidden: Sequence[int] = (256, 256)
    ) -> None:
        super().__init__()
        scale, bias = _action_affine(action_space)
        self.net = mlp(obs_dim, scale.shape[0], hidden)
        self.register_buffer("action_scale", scale)
        self.register_buffer("action_bias", bias)

    def forward(self, obs_BO: torch.Tensor) -> torch.Tensor:
        """Return actions ``[B, A]`` (float32) inside the action bounds."""
        return torch.tanh(self.net(obs_BO)) * self.action_scale + self.action_bias


class SquashedGaussianActor(nn.Module):
    """A tanh-squashed diagonal Gaussian policy (SAC; Haarnoja et al. 2018, appendix C).

    ``log_std`` is bounded smoothly into ``[log_std_min, log_std_max]`` as in CleanRL's
    ``sac_continuous_action.py``.

    Args:
        obs_dim: flat observation size O.
        action_space: bounded ``Box`` of shape ``(A,)``.
        hidden: hidden layer widths.
        log_std_min: lower bound of the log standard deviation.
        log_std_max: upper bound of the log standard deviation.
    """

    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.spaces.Box,
        hidden: Sequence[int] = (256, 256),
        *,
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        scale, bias = _action_affine(action_space)
        act_dim = scale.shape[0]
        self.trunk = mlp(obs_dim, 2 * act_dim, hidden)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        self.register_buffer("action_scale", scale)
        self.register_buffer("action_bias", bias)

    def forward(
        self, obs_BO: torch.Tensor, *, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample (or take the mean of) the policy; the Gaussian noise comes from ``generator``
        (``None``: torch's global generator).

        Returns:
            ``act_BA`` inside the action bounds and ``log_prob_B``, the log-density of ``act_BA``
            including the tanh and affine change of variables (Haarnoja et al. 2018, eq. 21).
        """
        u_BA, mean_BA, log_std_BA = self._pre_squash(obs_BO, deterministic, generator)
        log_prob_B = squashed_gaussian_log_prob(u_BA, mean_BA, log_std_BA, self.action_scale)
        return torch.tanh(u_BA) * self.action_scale + self.action_bias, log_prob_B

    def action(
        self, obs_BO: torch.Tensor, *, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """The actions of :meth:`forward` (same random draw) without the log-density, for acting."""
        u_BA, _, _ = self._pre_squash(obs_BO, deterministic, generator)
        return torch.tanh(u_BA) * self.action_scale + self.action_bias

    def sample_n(
        self, obs_BO: torch.Tensor, n: int, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` policy samples per state: ``act_BNA`` (float32 ``[B, N, A]``) and their log-densities
        ``log_prob_BN`` (``[B, N]``), as :meth:`forward` gives them.

        The trunk runs once per state and the N draws share its mean and standard deviation, so this
        equals ``forward(obs_BO.repeat_interleave(n, dim=0))`` reshaped to ``[B, N, ...]``, the same
        noise from ``generator`` included, at 1/N of the network's cost.
        """
        mean_BA, log_std_BA = self._gaussian(obs_BO)
        mean_B1A, log_std_B1A = mean_BA.unsqueeze(1), log_std_BA.unsqueeze(1)
        shape = (mean_BA.shape[0], n, mean_BA.shape[1])
        eps_BNA = torch.randn(shape, generator=generator, device=mean_BA.device, dtype=mean_BA.dtype)
        u_BNA = mean_B1A + log_std_B1A.exp() * eps_BNA
        log_prob_BN = squashed_gaussian_log_prob(u_BNA, mean_B1A, log_std_B1A, self.action_scale)
        return torch.tanh(u_BNA) * self.action_scale + self.action_bias, log_prob_BN

    def _gaussian(self, obs_BO: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean_BA, log_std_BA)`` of the Gaussian before tanh, ``log_std`` bounded."""
        mean_BA, log_std_BA = self.trunk(obs_BO).chunk(2, dim=-1)
        log_std_BA = torch.tanh(log_std_BA)
        return mean_BA, self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std_BA + 1)

    def _pre_squash(
        self, obs_BO: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(u_BA, mean_BA, log_std_BA)``: the Gaussian sample (or mean) before tanh, and its parameters."""
        mean_BA, log_std_BA = self._gaussian(obs_BO)
        if deterministic:
            return mean_BA, mean_BA, log_std_BA
        eps_BA = torch.randn(mean_BA.shape, generator=generator, device=mean_BA.device, dtype=mean_BA.dtype)
        return mean_BA + log_std_BA.exp() * eps_BA, mean_BA, log_std_BA


def squashed_gaussian_log_prob(
    u_BA: torch.Tensor, mean_BA: torch.Tensor, log_std_BA: torch.Tensor, action_scale_A: torch.Tensor
) -> torch.Tensor:
    """Log-density ``[B]`` of ``a = scale * tanh(u) + bias`` for ``u ~ N(mean, exp(log_std)^2)``.

    ``log p(a) = sum_i [log N(u_i) - log(scale_i) - log(1 - tanh(u_i)^2)]`` (Haarnoja et al. 2018,
    eq. 21), with ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` for numerical stability.
    Leading dimensions broadcast: ``[B, N, A]`` samples of ``[B, 1, A]`` parameters give ``[B, N]``.
    """
    normal_BA = -0.5 * ((u_BA - mean_BA) / log_std_BA.exp()) ** 2 - log_std_BA - 0.5 * math.log(2 * math.pi)
    log_det_BA = 2.0 * (math.log(2.0) - u_BA - nn.functional.softplus(-2.0 * u_BA))
    return (normal_BA - log_det_BA - torch.log(action_scale_A)).sum(-1)


class EnsembleQNetwork(nn.Module):
    """K independent critics ``Q_k(o, a)`` evaluated together (twin critics for TD3/SAC, K=1 for DDPG).

    Args:
        obs_dim: flat observation size O.
        act_dim: action size A.
        hidden: hidden layer widths (shared shape, independent weights).
        n_critics: K.
    """

    CPU_BLOCK_ROWS: int = 512
    """Rows per block of the CPU path (:meth:`forward`); an instance may set its own."""

    def __init__(
        self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256), n_critics: int = 2
    ) -> None:
        super().__init__()
        self.n_critics = n_critics
        layers: list[nn.Module] = []
        last = obs_dim + act_dim
        for width in hidden:
            layers += [EnsembleLinear(n_critics, last, width), nn.ReLU()]
            last = width
        layers.append(EnsembleLinear(n_critics, last, 1))
        self.net = nn.Sequential(*layers)
        # (layer, followed by ReLU) for the member-by-member CPU path; a plain list, not submodules.
        self._layers = [
            (m, i + 1 < len(layers)) for i, m in enumerate(layers) if isinstance(m, EnsembleLinear)
        ]

    def forward(self, obs_BO: torch.Tensor, act_BA: torch.Tensor) -> torch.Tensor:
        """Return ``q_KB``, float32 ``[K, B]``.

        On CUDA the K members run as batched matmuls (one kernel per layer). On CPU each member runs
        its own 2-D matmuls (``addmm``) and the K outputs are stacked at the end: CPU BLAS batched
        matmuls are slow for the narrow shapes of the first and last layers (``[B, 1]`` outputs,
        outer-product gradients), which made the batched form ~13 % slower for a 2 x 256 x 256
        critic step plus actor step (measured with torch 2.15 / MKL, one thread).

        The CPU path also runs the rows in blocks of :attr:`CPU_BLOCK_ROWS` (a batch of up to that
        many rows is one block, as before). CQL's 3N sampled actions per state make 7680 rows, whose
        ``[7680, 256]`` activations (7.5 MiB each) go through main memory between every matmul,
        elementwise op and backward op, and whose ~45 MiB per step glibc hands back to the system
        and page-faults in again the next step; a 512-row block's (0.5 MiB) stay in the core's
        cache and its freed memory is reused. One CQL step with Hopper's shapes (B = 256, N = 10,
        one thread, AMD EPYC with 1 MiB of L2 a core): 130 -> 101 ms of CPU, system time 15-19 ->
        2-3 ms and ~9,000 -> ~1,100 minor page faults a step (256 to 1024 rows did about as well,
        2048 rows 106 ms). Each row's Q is computed as without blocks; a weight's gradient is summed
        block by block, which changes float rounding only.
        """
        x_BI = torch.cat([obs_BO, act_BA], dim=-1)
        if x_BI.device.type == "cuda":
            x_KBI = x_BI.unsqueeze(0).expand(self.n_critics, *x_BI.shape)
            return self.net(x_KBI).squeeze(-1)
        # unbind (not indexing): its backward stacks the K gradients once, where K index ops would
        # each scatter into a zero-filled [K, in, out] tensor.
        members = [(layer.weight.unbind(0), layer.bias.unbind(0), relu) for layer, relu in self._layers]
        blocks = x_BI.split(self.CPU_BLOCK_ROWS)
        q_B = []
        for k in range(self.n_critics):
            q_blocks = []
            for x in blocks:
                for w_K, b_K, relu in members:
                    x = torch.addmm(b_K[k], x, w_K[k])
                    if relu:
                        # in place: addmm's backward needs its inputs, not its output, and relu's
                        # needs only its result, so one [rows, width] tensor a layer instead of two
                        x = torch.relu_(x)
                q_blocks.append(x.squeeze(-1))
            q_B.append(q_blocks[0] if len(q_blocks) == 1 else torch.cat(q_blocks))
        return torch.stack(q_B)


class DiscreteQNetwork(nn.Module):
    """``Q(o, ·)`` for a discrete action space, optionally with a dueling head (Wang et al. 2016, eq. 9).

    Dueling: ``Q(o, a) = V(o) + A(o, a) - mean_a' A(o, a')``.

    Args:
        obs_dim: flat observation size O.
        n_actions: number of discrete actions.
        hidden: hidden layer widths (the last one is the shared feature size).
        dueling: use separate value and advantage streams.
    """

    def __init__(
        self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (256, 256), *, dueling: bool = False
    ) -> None:
        super().__init__()
        self.dueling = dueling
        if dueling:
            if len(hidden) == 0:
                raise ValueError("a dueling head needs at least one hidden layer")
            self.trunk = nn.Sequential(mlp(obs_dim, hidden[-1], hidden[:-1]), nn.ReLU())
            self.value = nn.Linear(hidden[-1], 1)
            self.advantage = nn.Linear(hidden[-1], n_actions)
        else:
            self.net = mlp(obs_dim, n_actions, hidden)

    def forward(self, obs_BO: torch.Tensor) -> torch.Tensor:
        """Return ``q_BA``, float32 ``[B, n_actions]``."""
        if not self.dueling:
            return self.net(obs_BO)
        h = self.trunk(obs_BO)
        adv = self.advantage(h)
        return self.value(h) + adv - adv.mean(-1, keepdim=True)


class ImageQNetwork(nn.Module):
    """``Q(o, ·)`` of image observations: :class:`NatureCNN` then a linear layer to the actions
    (DQN's network, Mnih et al. 2015), or with ``dueling=True`` value and advantage streams on the
    512 features (Wang et al. 2016, eq. 9; the streams share the CNN's fully connected layer).

    Args:
        in_shape: ``(C, H, W)`` of one observation.
        n_actions: number of discrete actions.
        dueling: use a dueling head.
    """

    def __init__(self, in_shape: Sequence[int], n_actions: int, *, dueling: bool = False) -> None:
        super().__init__()
        self.cnn = NatureCNN(in_shape)
        self.head = DiscreteQNetwork(self.cnn.dim, n_actions, (self.cnn.dim,) if dueling else (), dueling=dueling)

    def forward(self, obs_BCHW: torch.Tensor) -> torch.Tensor:
        """Return ``q_BA``, float32 ``[B, n_actions]``, of uint8 pixels ``[B, C, H, W]``."""
        return self.head(self.cnn(obs_BCHW))


class GaussianActor(nn.Module):
    """``pi(a|s) = N(scale * tanh(MLP(s)) + bias, (scale * exp(log_std))^2)``, diagonal, with a
    state-independent ``log_std`` parameter clamped to ``[log_std_min, log_std_max]`` (IQL's policy).

    Args:
        obs_dim: flat observation size O.
        action_space: bounded ``Box`` of shape ``(A,)``.
        hidden: hidden layer widths.
    """

    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.spaces.Box,
        hidden: Sequence[int] = (256, 256),
        *,
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        scale, bias = _action_affine(action_space)
        self.net = mlp(obs_dim, scale.shape[0], hidden)
        self.log_std = nn.Parameter(torch.zeros(scale.shape[0]))
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.register_buffer("action_scale", scale)
        self.register_buffer("action_bias", bias)

    def forward(self, obs_BO: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean_BA, std_A)`` in action units."""
        mean_BA = torch.tanh(self.net(obs_BO)) * self.action_scale + self.action_bias
        std_A = self.log_std.clamp(self.log_std_min, self.log_std_max).exp() * self.action_scale
        return mean_BA, std_A

    def log_prob(self, obs_BO: torch.Tensor, act_BA: torch.Tensor) -> torch.Tensor:
        """``log pi(a|s)`` ``[B]`` of the actions ``act_BA``."""
        mean_BA, std_A = self(obs_BO)
        z_BA = (act_BA - mean_BA) / std_A
        return (-0.5 * z_BA**2 - torch.log(std_A) - 0.5 * math.log(2 * math.pi)).sum(-1)


class RecurrentQNetwork(nn.Module):
    """``obs [B, T, O]``, state ``[B, H]`` -> ``(q [B, T, A], state [B, H])``: an MLP, a GRU, a
    linear Q head."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int], recurrent_size: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.mlp = nn.Sequential(*layers)
        self.gru = nn.GRU(width, recurrent_size, batch_first=True)
        self.head = nn.Linear(recurrent_size, n_actions)
        self.obs_dim = obs_dim
        self.recurrent_size = recurrent_size

    def forward(self, obs_BTO: torch.Tensor, h_BH: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Unroll over T steps from state ``h_BH``."""
        x_BTF = self.mlp(obs_BTO)
        out_BTH, h_1BH = self.gru(x_BTF, h_BH.unsqueeze(0).contiguous())
        return self.head(out_BTH), h_1BH.squeeze(0)
