"""Networks for the off-policy algorithms: MLPs, actor heads, Q-networks and observation encoders.

Every network takes flat float32 observations ``obs_BO``; dict observations (goal environments) are
flattened, and optionally normalised, by an :class:`ObsEncoder` that the algorithm applies once per
forward pass and shares between actor and critic (and their target copies, so a target network never
carries stale normaliser statistics).

Image observations (uint8 ``[C, H, W]``, e.g. Atari frame stacks) are not flattened: a
:class:`PixelObs` encoder passes them through as uint8, and the :class:`NatureCNN` of the
Q-network casts and scales them on the device the network lives on (so a replay batch travels to
the GPU as uint8, a quarter of float32's bytes).

Dimension letters: B batch, O flat observation size, A action size, K ensemble members (critics),
C channels (stacked frames), H and W image height and width.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlcore.errors import DTypeError

__all__ = [
    "DeterministicActor",
    "DiscreteQNetwork",
    "EnsembleLinear",
    "EnsembleQNetwork",
    "ImageQNetwork",
    "NatureCNN",
    "ObsEncoder",
    "PixelObs",
    "RunningMeanStd",
    "SquashedGaussianActor",
    "is_image_space",
    "mlp",
]


def mlp(
    in_dim: int, out_dim: int, hidden: Sequence[int] = (256, 256), activation: type[nn.Module] = nn.ReLU
) -> nn.Sequential:
    """A plain multilayer perceptron ``in_dim -> hidden... -> out_dim`` with no output activation.

    Args:
        in_dim: input features.
        out_dim: output features.
        hidden: widths of the hidden layers (may be empty: a single linear layer).
        activation: activation class placed after every hidden layer.
    """
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), activation()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class RunningMeanStd(nn.Module):
    """Running mean and variance of a stream of vectors (parallel Welford / Chan et al. 1979).

    The statistics are registered buffers, so they move with ``.to(device)`` and are part of
    ``state_dict()``. Used to normalise observations as in the HER paper's implementation
    (Andrychowicz et al. 2017, appendix A: "normalise ... with running mean and std, clip to [-5, 5]").

    Args:
        dim: size O of the vectors.
        clip: normalised values are clipped to ``[-clip, clip]``.
        eps: added to the variance before the square root.
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, dim: int, *, clip: float = 5.0, eps: float = 1e-2) -> None:
        super().__init__()
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x_BO: torch.Tensor) -> None:
        """Fold a batch ``[B, O]`` into the statistics."""
        x = x_BO.detach().to(torch.float64)
        n = float(x.shape[0])
        if n == 0:
            return
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * (n / total)
        self.var.copy_((self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total)
        self.count.copy_(total)

    def forward(self, x_BO: torch.Tensor) -> torch.Tensor:
        """Return ``clip((x - mean) / sqrt(var + eps))`` as float32 ``[B, O]``."""
        mean = self.mean.to(x_BO.dtype)
        std = torch.sqrt(self.var + self.eps).to(x_BO.dtype)
        return ((x_BO - mean) / std).clamp(-self.clip, self.clip)


class ObsEncoder(nn.Module):
    """Turn a batch of observations (array or dict of arrays) into a flat float32 tensor ``[B, O]``.

    Dict observations are concatenated in the order of ``keys`` (for goal environments
    ``("observation", "achieved_goal", "desired_goal")`` by default, the keys of the space otherwise).
    With ``normalize=True`` the flat vector goes through a :class:`RunningMeanStd`; call
    :meth:`update` with training observations to move its statistics (the algorithms do this in
    ``update(batch)`` with the sampled, possibly HER-relabeled, observations).

    Args:
        observation_space: a ``Box`` or a ``Dict`` of ``Box`` spaces (single-env space, no N dim).
        normalize: keep running statistics and normalise.
        clip: clip range of normalised values.

    Raises:
        ValueError: unsupported space (Discrete observations, nested dicts).
    """

    def __init__(self, observation_space: gym.Space, *, normalize: bool = False, clip: float = 5.0) -> None:
        super().__init__()
        if isinstance(observation_space, gym.spaces.Dict):
            names = list(observation_space.spaces.keys())
            goal = ("observation", "achieved_goal", "desired_goal")
            self.keys: tuple[str, ...] | None = goal if set(goal) <= set(names) else tuple(names)
            dims = []
            for k in self.keys:
                sub = observation_space.spaces[k]
                if not isinstance(sub, gym.spaces.Box):
                    raise ValueError(f"ObsEncoder supports Dict of Box spaces; key {k!r} is {sub}")
                dims.append(int(np.prod(sub.shape)))
            self.dim = int(sum(dims))
        elif isinstance(observation_space, gym.spaces.Box):
            self.keys = None
            self.dim = int(np.prod(observation_space.shape))
        else:
            raise ValueError(f"ObsEncoder supports Box or Dict observation spaces, got {observation_space}")
        self.normalizer = RunningMeanStd(self.dim, clip=clip) if normalize else None

    def flatten(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Concatenate (dict) observations into float32 ``[B, O]`` without normalising."""
        if self.keys is not None:
            if not isinstance(obs, Mapping):
                raise TypeError(
                    f"expected a dict observation with keys {self.keys}, got {type(obs).__name__}"
                )
            parts = [obs[k].reshape(obs[k].shape[0], -1) for k in self.keys]
            return torch.cat(parts, dim=-1).float()
        assert isinstance(obs, torch.Tensor)
        return obs.reshape(obs.shape[0], -1).float()

    def update(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> None:
        """Update the normaliser statistics with a batch (no-op without normalisation)."""
        if self.normalizer is not None:
            self.normalizer.update(self.flatten(obs))

    def forward(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Return the flat, optionally normalised float32 tensor ``[B, O]``."""
        x_BO = self.flatten(obs)
        return self.normalizer(x_BO) if self.normalizer is not None else x_BO


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

    def _pre_squash(
        self, obs_BO: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(u_BA, mean_BA, log_std_BA)``: the Gaussian sample (or mean) before tanh, and its parameters."""
        mean_BA, log_std_BA = self.trunk(obs_BO).chunk(2, dim=-1)
        log_std_BA = torch.tanh(log_std_BA)
        log_std_BA = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std_BA + 1)
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
    """
    normal_BA = -0.5 * ((u_BA - mean_BA) / log_std_BA.exp()) ** 2 - log_std_BA - 0.5 * math.log(2 * math.pi)
    log_det_BA = 2.0 * (math.log(2.0) - u_BA - nn.functional.softplus(-2.0 * u_BA))
    return (normal_BA - log_det_BA - torch.log(action_scale_A)).sum(-1)


class EnsembleLinear(nn.Module):
    """K independent linear layers applied in one batched matmul: ``[K, B, in] -> [K, B, out]``.

    Each member is initialised like ``nn.Linear`` (uniform in ``±1/sqrt(in)``).
    """

    def __init__(self, k: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(k, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(k, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x_KBI: torch.Tensor) -> torch.Tensor:
        """Return ``x @ W + b`` of shape ``[K, B, out]``."""
        if self.weight.shape[0] == 1:  # a single member (DDPG): a plain addmm is faster than a batched one
            return torch.addmm(self.bias[0], x_KBI[0], self.weight[0]).unsqueeze(0)
        return torch.baddbmm(self.bias, x_KBI, self.weight)


class EnsembleQNetwork(nn.Module):
    """K independent critics ``Q_k(o, a)`` evaluated together (twin critics for TD3/SAC, K=1 for DDPG).

    Args:
        obs_dim: flat observation size O.
        act_dim: action size A.
        hidden: hidden layer widths (shared shape, independent weights).
        n_critics: K.
    """

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
        """
        x_BI = torch.cat([obs_BO, act_BA], dim=-1)
        if x_BI.device.type == "cuda":
            x_KBI = x_BI.unsqueeze(0).expand(self.n_critics, *x_BI.shape)
            return self.net(x_KBI).squeeze(-1)
        # unbind (not indexing): its backward stacks the K gradients once, where K index ops would
        # each scatter into a zero-filled [K, in, out] tensor.
        members = [(layer.weight.unbind(0), layer.bias.unbind(0), relu) for layer, relu in self._layers]
        q_B = []
        for k in range(self.n_critics):
            x = x_BI
            for w_K, b_K, relu in members:
                x = torch.addmm(b_K[k], x, w_K[k])
                if relu:
                    x = torch.relu(x)
            q_B.append(x.squeeze(-1))
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


def is_image_space(space: gym.Space) -> bool:
    """Whether ``space`` holds images for a CNN: a uint8 ``Box`` of 3 dims ``[C, H, W]`` (channels
    first, as gymnasium's ``FrameStackObservation`` of grayscale frames gives)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


class PixelObs(nn.Module):
    """The observation encoder for image spaces (:func:`is_image_space`): passes the uint8 batch
    ``[B, C, H, W]`` through unchanged, so that it reaches the CNN as uint8 (:class:`NatureCNN`
    scales it). Same surface as :class:`ObsEncoder` (``update`` is a no-op; no normalisation).

    Args:
        observation_space: a uint8 ``Box`` ``[C, H, W]``.

    Raises:
        ValueError: ``observation_space`` is not an image space.
    """

    def __init__(self, observation_space: gym.Space) -> None:
        super().__init__()
        if not is_image_space(observation_space):
            raise ValueError(f"PixelObs needs a uint8 Box of shape [C, H, W], got {observation_space}")
        assert isinstance(observation_space, gym.spaces.Box)
        self.shape: tuple[int, ...] = tuple(int(d) for d in observation_space.shape)
        self.normalizer = None

    def update(self, obs: torch.Tensor) -> None:
        """No-op (images are scaled by a fixed 1/255, not by running statistics)."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Return ``obs`` itself, uint8 ``[B, C, H, W]``."""
        return obs


class NatureCNN(nn.Module):
    """The convolutional torso of DQN (Mnih et al. 2015, "Methods: model architecture"): conv 32
    filters 8x8 stride 4, conv 64 4x4 stride 2, conv 64 3x3 stride 1, each with ReLU, then a fully
    connected layer of ``features`` (512) units with ReLU.

    The input is uint8 pixels; ``forward`` casts them to float32 and multiplies by 1/255 on the
    device of the input (keep the batch uint8 until here: the host-to-GPU copy moves 1 byte per
    pixel).

    Args:
        in_shape: ``(C, H, W)`` of one observation (``(4, 84, 84)`` for stacked Atari frames; any
            ``H, W >= 36`` works, the flattened size is computed from it).
        features: width of the fully connected layer.

    Raises:
        ValueError: ``in_shape`` is not 3 positive dims or too small for the three convolutions.
    """

    def __init__(self, in_shape: Sequence[int], *, features: int = 512) -> None:
        super().__init__()
        if len(in_shape) != 3 or min(in_shape) < 1:
            raise ValueError(f"NatureCNN needs in_shape (C, H, W), got {tuple(in_shape)}")
        c, h, w = (int(d) for d in in_shape)
        if min(h, w) < 36:
            raise ValueError(f"NatureCNN needs H, W >= 36 pixels, got {h} x {w}")
        self.in_shape = (c, h, w)
        self.convs = nn.Sequential(
            nn.Conv2d(c, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, c, h, w)).shape[1])  # 3136 = 64 * 7 * 7 for 84 x 84
        self.fc = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.dim = features

    def forward(self, obs_BCHW: torch.Tensor) -> torch.Tensor:
        """Return features float32 ``[B, features]`` of uint8 pixels ``[B, C, H, W]``.

        Raises:
            DTypeError: the pixels are not uint8 (float input was probably scaled already).
        """
        if obs_BCHW.dtype != torch.uint8:
            raise DTypeError(f"NatureCNN takes uint8 pixels [B, C, H, W], got {obs_BCHW.dtype}")
        x = obs_BCHW.to(torch.float32).mul_(1.0 / 255.0)
        return self.fc(self.convs(x))


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
