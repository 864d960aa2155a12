"""Math and helpers shared by the off-policy algorithms.

Free functions, no state: polyak averaging, TD targets, importance-weighted losses, and the small
conversions between NumPy observations and torch tensors. Also the :class:`OffPolicyAlgorithm`
protocol that the trainer relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from rlcore.batch import TransitionBatch
from rlcore.nets import squashed_gaussian_log_prob

__all__ = [
    "OffPolicyAlgorithm",
    "TargetNetwork",
    "adam",
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


def adam(params: Iterable[torch.Tensor], *, lr: float) -> torch.optim.Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1; torch's defaults betas (0.9, 0.999), eps 1e-8) with the
    fused kernel on CPU and CUDA: one pass over each parameter's data, gradient and moments per step
    instead of about ten elementwise passes (the default single-tensor path on CPU). Other devices get
    the default implementation.
    """
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, fused=fused or None)


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


class TargetNetwork:
    """A frozen target copy of an online network, with both parameter lists gathered once.

    :meth:`update` is :func:`polyak_update` without walking the modules on every gradient step
    (the lists hold the modules' own tensors, so ``load_state_dict`` and ``.to()`` show through).

    Args:
        target: the target module (e.g. ``freeze(copy.deepcopy(online))``).
        source: the online module it tracks.

    Raises:
        ValueError: the modules' parameter or buffer lists differ in length or shapes.
    """

    def __init__(self, target: nn.Module, source: nn.Module) -> None:
        self.target_params: list[torch.Tensor] = list(target.parameters())
        self.source_params: list[torch.Tensor] = list(source.parameters())
        self.target_buffers: list[torch.Tensor] = list(target.buffers())
        self.source_buffers: list[torch.Tensor] = list(source.buffers())
        pairs = [
            *zip(self.target_params, self.source_params, strict=False),
            *zip(self.target_buffers, self.source_buffers, strict=False),
        ]
        if (
            len(self.target_params) != len(self.source_params)
            or len(self.target_buffers) != len(self.source_buffers)
            or any(t.shape != s.shape for t, s in pairs)
        ):
            raise ValueError("polyak_update: target and source have different parameter lists")

    @torch.no_grad()
    def update(self, tau: float) -> None:
        """``theta' <- (1 - tau) theta' + tau theta`` (one foreach lerp); buffers copied exactly."""
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {tau}")
        torch._foreach_lerp_(self.target_params, self.source_params, tau)
        for tb, sb in zip(self.target_buffers, self.source_buffers, strict=True):
            tb.copy_(sb)


def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Soft target update ``theta' <- (1 - tau) theta' + tau theta`` over parameters.

    Lillicrap et al. 2016 (DDPG), sec. 3. Buffers (e.g. action scales) are copied exactly. ``tau=1``
    is a hard copy. In a training loop, build a :class:`TargetNetwork` once instead.

    Raises:
        ValueError: ``tau`` outside ``[0, 1]`` or the modules' parameters do not match.
    """
    TargetNetwork(target, source).update(tau)


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
def no_param_grad(module: nn.Module | Sequence[torch.Tensor]) -> Iterator[None]:
    """Inside the block, the parameters of ``module`` (a module or a list of its parameters) get no
    gradient; gradients still flow through it.

    Used for the actor step: backpropagating ``-Q(o, mu(o))`` through the critic must reach the
    actor, but computing the critic's own weight gradients would be wasted work.
    """
    params = [
        p for p in (module.parameters() if isinstance(module, nn.Module) else module) if p.requires_grad
    ]
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
    return float(nn.utils.clip_grad_norm_(list(params), max_norm, foreach=True))
