"""Math and helpers shared by the off-policy algorithms.

Free functions, no state: polyak averaging, TD targets, importance-weighted losses, and the small
conversions between NumPy observations and torch tensors. Also the :class:`OffPolicyAlgorithm`
protocol that the trainer relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from rlcore.batch import TransitionBatch
from rlcore.nets import squashed_gaussian_log_prob

__all__ = [
    "OffPolicyAlgorithm",
    "obs_to_torch",
    "polyak_update",
    "resolve_device",
    "squashed_gaussian_log_prob",
    "td_target",
    "weighted_mean",
]


@runtime_checkable
class OffPolicyAlgorithm(Protocol):
    """What a trainer needs from an algorithm (DQN, DDPG, TD3, SAC implement it).

    ``update`` sets ``priorities`` to the new PER priorities ``[B]`` (float64 NumPy, ``|TD error|``)
    when the batch carried importance weights, and to ``None`` otherwise; the trainer hands them to
    ``buffer.update_priorities(batch.indices, priorities)``.
    """

    device: torch.device
    priorities: np.ndarray | None

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray: ...

    def update(self, batch: TransitionBatch) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` or ``"auto"`` picks ``cuda`` when available, else ``cpu``; anything else is passed to torch."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def obs_to_torch(obs: Any, device: torch.device) -> Any:
    """Convert a NumPy observation batch (array or dict of arrays) to tensors on ``device``."""
    if isinstance(obs, Mapping):
        return {k: obs_to_torch(v, device) for k, v in obs.items()}
    if isinstance(obs, torch.Tensor):
        return obs.to(device)
    return torch.as_tensor(np.asarray(obs), device=device)


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Soft target update ``theta' <- (1 - tau) theta' + tau theta`` over parameters.

    Lillicrap et al. 2016 (DDPG), sec. 3. Buffers (e.g. action scales) are copied exactly. ``tau=1``
    is a hard copy.

    Raises:
        ValueError: ``tau`` outside ``[0, 1]`` or the modules' parameters do not match.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    tgt: list[torch.Tensor] = list(target.parameters())
    src: list[torch.Tensor] = list(source.parameters())
    if len(tgt) != len(src):
        raise ValueError("polyak_update: target and source have different parameter lists")
    torch._foreach_lerp_(tgt, src, tau)
    for tb, sb in zip(target.buffers(), source.buffers(), strict=True):
        tb.copy_(sb)


def td_target(rew_B: torch.Tensor, discount_B: torch.Tensor, q_next_B: torch.Tensor) -> torch.Tensor:
    """The (n-step) TD target ``y = rew + discount * q_next`` ``[B]``, without gradient.

    ``rew`` is the buffer's n-step return and ``discount = gamma**m * (1 - terminated)``
    (DESIGN.md "n-step"; Sutton & Barto 2018, eq. 7.1), so termination and window length are
    already folded in: never multiply by gamma again here.

    Raises:
        ValueError: the three tensors do not all have shape ``[B]``.
    """
    if not (rew_B.dim() == 1 and rew_B.shape == discount_B.shape == q_next_B.shape):
        raise ValueError(
            f"td_target expects three [B] tensors, got rew {tuple(rew_B.shape)}, "
            f"discount {tuple(discount_B.shape)}, q_next {tuple(q_next_B.shape)}"
        )
    return (rew_B + discount_B * q_next_B).detach()


def weighted_mean(loss_B: torch.Tensor, weights_B: torch.Tensor | None) -> torch.Tensor:
    """Mean of a per-sample loss ``[B]`` (or ``[K, B]``), weighted by PER importance weights when given.

    Schaul et al. 2016, Algorithm 1, line 12: the gradient of sample j is scaled by ``w_j``.
    """
    if weights_B is None:
        return loss_B.mean()
    return (loss_B * weights_B).mean()


@contextmanager
def no_param_grad(module: nn.Module) -> Iterator[None]:
    """Inside the block, ``module``'s parameters get no gradient; gradients still flow through it.

    Used for the actor step: backpropagating ``-Q(o, mu(o))`` through the critic must reach the
    actor, but computing the critic's own weight gradients would be wasted work.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def freeze(module: nn.Module) -> nn.Module:
    """Turn off gradients of all parameters (target networks) and return the module."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def clip_grad(params: Iterable[torch.Tensor], max_norm: float | None) -> float:
    """Clip the global gradient norm when ``max_norm`` is set; return the norm before clipping (0 if unset)."""
    if max_norm is None:
        return 0.0
    return float(nn.utils.clip_grad_norm_(list(params), max_norm))
