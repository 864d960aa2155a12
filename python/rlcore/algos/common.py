"""Math and helpers shared by the algorithms.

Free functions, no state: one Adam, gradient clipping and the gradient step, polyak averaging, TD
targets, importance-weighted losses, PER priorities, the small conversions between NumPy
observations and torch tensors, and the range checks of the config dataclasses. Also the
:class:`OffPolicyAlgorithm` protocol that the off-policy trainers rely on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from torch import nn

from rlcore.batch import TransitionBatch
from rlcore.errors import InvalidValueError
from rlcore.nets import squashed_gaussian_log_prob

__all__ = [
    "OffPolicyAlgorithm",
    "TargetNetwork",
    "adam",
    "as_torch",
    "clip_grad",
    "freeze",
    "gradient_step",
    "no_param_grad",
    "obs_to_torch",
    "polyak_update",
    "require_choice",
    "require_count",
    "require_finite",
    "require_interval",
    "require_non_negative",
    "require_positive",
    "require_unit_interval",
    "require_widths",
    "resolve_device",
    "squashed_gaussian_log_prob",
    "td_priorities",
    "td_target",
    "weighted_mean",
]


ModuleT = TypeVar("ModuleT", bound=nn.Module)


@runtime_checkable
class OffPolicyAlgorithm(Protocol):
    """What a trainer needs from an off-policy algorithm (DQN, DDPG, TD3, SAC implement it).

    ``update(batch)`` returns the algorithm's frozen stats dataclass. Its field ``priorities`` holds
    the new PER priorities, float32 NumPy ``[B]`` (``|TD error|`` of each sample), when the batch
    carried importance weights, and ``None`` otherwise; it is declared with
    :func:`rlcore.stats.not_logged`, so it is neither logged nor averaged. The trainer hands it back::

        stats = algorithm.update(batch)
        if batch.weights is not None and stats.priorities is not None:
            buffer.update_priorities(batch.indices, stats.priorities)

    The algorithm itself keeps no priorities.
    """

    device: torch.device

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray: ...

    def update(self, batch: TransitionBatch) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def adam(params: Iterable[torch.Tensor], *, lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1; betas (0.9, 0.999), epsilon ``eps``) with the fused
    kernel on CPU and CUDA: one pass over each parameter's data, gradient and moments per step instead
    of about ten elementwise passes (the default single-tensor path on CPU). Other devices get the
    default implementation. Every algorithm's Adam is built here.
    """
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, eps=eps, fused=fused or None)


def clip_grad(params: Iterable[torch.Tensor], max_norm: float | None) -> float:
    """Clip the global gradient norm when ``max_norm`` is set (foreach kernels); return the norm
    before clipping (0 if unset)."""
    if max_norm is None:
        return 0.0
    return float(nn.utils.clip_grad_norm_(list(params), max_norm, foreach=True))


def gradient_step(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    params: Iterable[torch.Tensor],
    max_grad_norm: float | None,
) -> float:
    """One optimizer step on ``loss``: clear the gradients, backpropagate, clip the global norm of
    ``params`` to ``max_grad_norm`` (``None``: no clipping), step. Returns the norm before clipping
    (0 when clipping is off)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clip_grad(params, max_grad_norm)
    optimizer.step()
    return grad_norm


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` or ``"auto"`` picks ``cuda`` when available, else ``cpu``; anything else is passed to torch."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def as_torch(batch: TransitionBatch, device: torch.device) -> TransitionBatch:
    """The batch as tensors on ``device`` (unchanged when it already holds tensors)."""
    return batch if isinstance(batch.rew, torch.Tensor) else batch.to_torch(device)


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


def td_target(
    rew_B: torch.Tensor,
    discount_B: torch.Tensor,
    q_next_B: torch.Tensor,
    *,
    clip: tuple[float, float] | None = None,
) -> torch.Tensor:
    """The (n-step) TD target ``y = rew + discount * q_next`` ``[B]``, without gradient.

    ``rew`` is the buffer's n-step return and ``discount = gamma**m * (1 - terminated)``
    (DESIGN.md "n-step"; Sutton & Barto 2018, eq. 7.1), so termination and window length are
    already folded in: never multiply by gamma again here. ``clip=(low, high)`` clamps the targets
    to the range of possible returns (Andrychowicz et al. 2017, appendix A).

    Raises:
        ValueError: the three tensors do not all have shape ``[B]``.
    """
    if not (rew_B.dim() == 1 and rew_B.shape == discount_B.shape == q_next_B.shape):
        raise ValueError(
            f"td_target expects three [B] tensors, got rew {tuple(rew_B.shape)}, "
            f"discount {tuple(discount_B.shape)}, q_next {tuple(q_next_B.shape)}"
        )
    y_B = (rew_B + discount_B * q_next_B).detach()
    return y_B if clip is None else y_B.clamp(*clip)


def td_priorities(td_abs_B: torch.Tensor, weights_B: torch.Tensor | None) -> np.ndarray | None:
    """New PER priorities: ``|TD error|`` as float32 NumPy ``[B]`` when the batch carried importance
    weights (it came from a prioritized buffer), else ``None`` (Schaul et al. 2016, Algorithm 1,
    line 11: ``p_j <- |delta_j|``; the buffer adds its epsilon and exponent alpha)."""
    if weights_B is None:
        return None
    return td_abs_B.detach().float().cpu().numpy()


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


def freeze(module: ModuleT) -> ModuleT:
    """Turn off gradients of all parameters (target networks) and return the module."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module


# -- config checks -------------------------------------------------------------------------------
# Each raises InvalidValueError (a ValueError) naming the config class and field; ``None`` passes
# (an option that is switched off).


def _fail(config: object, name: str, rule: str, value: Any) -> InvalidValueError:
    return InvalidValueError(f"{type(config).__name__}.{name} must be {rule}, got {value!r}")


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def require_positive(config: object, *names: str) -> None:
    """Each named field is a finite number ``> 0`` (learning rates, clip ranges, norms) or ``None``."""
    for name in names:
        v = getattr(config, name)
        if v is not None and not (_real(v) and 0 < v < math.inf):
            raise _fail(config, name, "a finite number > 0", v)


def require_non_negative(config: object, *names: str) -> None:
    """Each named field is a finite number ``>= 0`` (loss weights, noise scales) or ``None``."""
    for name in names:
        v = getattr(config, name)
        if v is not None and not (_real(v) and 0 <= v < math.inf):
            raise _fail(config, name, "a finite number >= 0", v)


def require_finite(config: object, *names: str) -> None:
    """Each named field is a finite number (of any sign) or ``None``."""
    for name in names:
        v = getattr(config, name)
        if v is not None and not (_real(v) and math.isfinite(v)):
            raise _fail(config, name, "a finite number", v)


def require_unit_interval(config: object, *names: str, open_low: bool = False) -> None:
    """Each named field is in ``[0, 1]`` (``(0, 1]`` with ``open_low``: e.g. polyak ``tau``)."""
    for name in names:
        v = getattr(config, name)
        if not (_real(v) and (0 < v if open_low else 0 <= v) and v <= 1):
            raise _fail(config, name, "in (0, 1]" if open_low else "in [0, 1]", v)


def require_count(config: object, *names: str, minimum: int = 1) -> None:
    """Each named field is a whole number ``>= minimum`` (steps, intervals, sizes) or ``None``."""
    for name in names:
        v = getattr(config, name)
        if v is not None and not (_real(v) and math.isfinite(v) and float(v).is_integer() and v >= minimum):
            raise _fail(config, name, f"a whole number >= {minimum}", v)


def require_interval(config: object, name: str) -> None:
    """The named field is ``(low, high)`` with finite ``low <= high``, or ``None``."""
    v = getattr(config, name)
    if v is None:
        return
    ok = isinstance(v, Sequence) and len(v) == 2 and all(_real(x) and math.isfinite(x) for x in v)
    if not (ok and v[0] <= v[1]):
        raise _fail(config, name, "(low, high) with low <= high", v)


def require_choice(config: object, name: str, choices: Sequence[str]) -> None:
    """The named field is one of ``choices``."""
    v = getattr(config, name)
    if v not in choices:
        raise _fail(config, name, f"one of {tuple(choices)}", v)


def require_widths(config: object, name: str = "hidden") -> None:
    """The named field is a sequence of layer widths, each a whole number ``>= 1``."""
    v = getattr(config, name)
    ok = isinstance(v, Sequence) and not isinstance(v, str)
    if not (ok and all(_real(w) and float(w).is_integer() and w >= 1 for w in v)):
        raise _fail(config, name, "a sequence of layer widths >= 1", v)
