"""The building blocks of rlcore's networks: MLPs, ensembles of linear layers, running
normalisers, observation encoders (flat, dict and image observations) and the Nature CNN.

Every network takes flat float32 observations ``obs_BO``; dict observations (goal environments) are
flattened, and optionally normalised, by an :class:`ObsEncoder` that the algorithm applies once per
forward pass and shares between actor and critic (and their target copies, so a target network never
carries stale normaliser statistics).

Image observations (uint8 ``[C, H, W]``, e.g. Atari frame stacks) are not flattened: a
:class:`PixelObs` encoder passes them through as uint8, and the :class:`NatureCNN` of the
Q-network casts and scales them on the device the network lives on (so a replay batch travels to
the GPU as uint8, a quarter of float32's bytes).

Dimension letters: B batch, O flat observation size, K ensemble members, C channels (stacked
frames), H and W image height and width.
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
    "EnsembleLinear",
    "NatureCNN",
    "ObsEncoder",
    "PixelObs",
    "RunningMeanStd",
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
