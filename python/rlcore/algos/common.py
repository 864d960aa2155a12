"""Math and helpers shared by the algorithms.

Free functions, no state, except one Adam (torch's, with a shorter step), gradient clipping and the gradient step, polyak averaging, TD
targets and R2D2's value rescaling, importance-weighted losses, PER priorities, the small conversions between NumPy
observations and torch tensors, and :func:`check_fields`, the range checks of every config. Also the
:class:`OffPolicyAlgorithm` protocol that the off-policy trainers rely on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
import torch.optim.optimizer as torch_optimizer
from torch import nn

from rlcore.batch import TransitionBatch
from rlcore.errors import InvalidValueError
from rlcore.nets import squashed_gaussian_log_prob

__all__ = [
    "OffPolicyAlgorithm",
    "TargetNetwork",
    "adam",
    "anneal_learning_rate",
    "as_torch",
    "check_fields",
    "clip_grad",
    "freeze",
    "generator_state",
    "gradient_step",
    "learner_state",
    "load_learner_state",
    "no_param_grad",
    "obs_to_torch",
    "polyak_update",
    "resolve_device",
    "seeded_init",
    "set_generator_state",
    "squashed_gaussian_log_prob",
    "td_priorities",
    "torch_generator",
    "td_target",
    "value_rescale",
    "value_rescale_inverse",
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


def adam(
    params: Iterable[torch.Tensor], *, lr: float, eps: float = 1e-8, weight_decay: float = 0.0
) -> torch.optim.Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1; betas (0.9, 0.999), epsilon ``eps``, L2 penalty
    ``weight_decay`` added to the gradient) with the fused kernel on CPU and CUDA: one pass over each
    parameter's data, gradient and moments per step instead of about ten elementwise passes (the
    default single-tensor path on CPU). Other devices get the default implementation. Every
    algorithm's Adam is built here.

    The optimizer is a :class:`torch.optim.Adam` (its state dict, param groups and learning-rate
    changes are torch's) whose steps after the first call the fused kernel directly when nothing
    but the kernel has work to do (see :class:`_FusedAdam`): the same update, bit for bit, without
    the ~0.1 ms of per-step bookkeeping that dominates the step of a small network on CPU.
    """
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    if fused and hasattr(torch, "_fused_adam_"):
        return _FusedAdam(params, lr=lr, eps=eps, weight_decay=weight_decay, fused=True)
    return torch.optim.Adam(params, lr=lr, eps=eps, weight_decay=weight_decay, fused=fused or None)


class _FusedAdam(torch.optim.Adam):
    """``torch.optim.Adam(fused=True)`` whose :meth:`step` goes straight to the fused kernel
    (``torch._fused_adam_``, after the step counters' increment, exactly as torch's own fused path
    does) once every parameter has its state, when the step is plain: no closure, every parameter
    with a gradient, no amsgrad/maximize/capturable/differentiable. Anything else takes
    torch's ``step``. The state lists are cached between steps and dropped whenever the groups or
    the state can change (``load_state_dict``, ``add_param_group``). ``zero_grad()`` sets the
    gradients to None without torch's profiling scope."""

    _lean: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lean = None
        super().__init__(*args, **kwargs)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self._lean = None
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._lean = None
        super().load_state_dict(state_dict)

    def __setstate__(self, state: dict[str, Any]) -> None:  # copy, deepcopy and pickle
        super().__setstate__(state)
        self._lean = None  # (torch's state leaves it out: it would name the original's tensors)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As torch's (which also profiles the call); ``set_to_none=True`` drops the gradients
        in one loop."""
        if not set_to_none:
            super().zero_grad(set_to_none=False)
            return
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def _plain(self) -> bool:
        # (step hooks run in torch's wrapper around every optimizer's step, this one's included)
        return all(
            g.get("fused") and not (g["amsgrad"] or g["maximize"] or g["capturable"] or g["differentiable"])
            and not g.get("decoupled_weight_decay", False)
            for g in self.param_groups
        )

    def _lean_groups(self) -> list[tuple[list[torch.Tensor], ...]] | None:
        out = []
        for g in self.param_groups:
            params = list(g["params"])
            states = [self.state.get(p, {}) for p in params]
            if not all("step" in st and "exp_avg" in st and "exp_avg_sq" in st for st in states):
                return None
            out.append(
                (
                    params,
                    [st["exp_avg"] for st in states],
                    [st["exp_avg_sq"] for st in states],
                    [st["step"] for st in states],
                )
            )
        return out

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        # torch wraps every optimizer's step to run the step hooks inside a profiler scope; that
        # costs about as much as the kernel, so this step is not wrapped (``hooked`` below) and
        # takes the wrapped path itself only when a hook is registered
        if (
            self._optimizer_step_pre_hooks
            or self._optimizer_step_post_hooks
            or torch_optimizer._global_optimizer_pre_hooks
            or torch_optimizer._global_optimizer_post_hooks
        ):
            return torch.optim.Optimizer.profile_hook_step(_FusedAdam._step)(self, closure)
        return self._step(closure)

    @torch.no_grad()  # type: ignore[misc]
    def _step(self, closure: Callable[[], float] | None = None) -> float | None:
        # (the groups' flags are read at every step, as torch reads them: a user may change them)
        lean = self._lean if closure is None and self._plain() else None
        grads = None if lean is None else [[p.grad for p in ps] for ps, *_ in lean]
        if lean is None or grads is None or any(x is None for gs in grads for x in gs):
            loss = super().step.__wrapped__(self, closure)  # torch's step, without its hook wrapper
            self._lean = self._lean_groups()
            return loss
        for g, (params, exp_avgs, exp_avg_sqs, steps), gs in zip(self.param_groups, lean, grads, strict=True):
            beta1, beta2 = g["betas"]
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(
                params, gs, exp_avgs, exp_avg_sqs, [], steps,
                lr=g["lr"], beta1=beta1, beta2=beta2, weight_decay=g["weight_decay"], eps=g["eps"],
                amsgrad=False, maximize=False,
            )  # fmt: skip
        return None

    step.hooked = True  # type: ignore[attr-defined]  # torch's Optimizer: "already wrapped"


def anneal_learning_rate(
    optimizer: torch.optim.Optimizer, lr: float, env_steps: int, anneal_env_steps: int | None
) -> float:
    """Set ``lr * max(0, 1 - env_steps / anneal_env_steps)`` on every param group; return it.

    ``anneal_env_steps=None`` keeps ``lr`` (CleanRL's ``anneal_lr`` with the horizon in env steps).
    """
    if anneal_env_steps is not None:
        lr = lr * max(0.0, 1.0 - env_steps / anneal_env_steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def clip_grad(params: Iterable[torch.Tensor], max_norm: float | None) -> float:
    """Clip the global gradient norm when ``max_norm`` is set; return the norm before clipping (0
    if unset). Exactly ``nn.utils.clip_grad_norm_(params, max_norm, foreach=True)`` (L2 norm of the
    per-tensor norms; gradients scaled by ``min(1, max_norm / (norm + 1e-6))``), with its two
    foreach kernels called directly when every gradient is on one device with one dtype (torch's
    grouping costs more than the kernels for a small network)."""
    if max_norm is None:
        return 0.0
    params = list(params)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    dev, dtype = grads[0].get_device(), grads[0].dtype  # (get_device: an int, no device object)
    if any(g.get_device() != dev or g.dtype is not dtype or g.is_sparse for g in grads):
        return float(nn.utils.clip_grad_norm_(params, max_norm, foreach=True))
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp_(max=1.0))
    return float(norm)


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


def torch_generator(seed: int | None, device: torch.device, stream: int = 0) -> torch.Generator:
    """A torch generator of an algorithm's own on ``device``, so that several algorithms in one
    process never draw from each other's stream (``zip`` of trainers, a sweep in one process).

    Args:
        seed: the algorithm's seed; ``None`` draws one from torch's global generator (so
            ``torch.manual_seed`` before construction decides, as for the network weights).
        stream: tells apart several generators of one algorithm seeded alike.
    """
    if seed is None:
        seed = int(torch.randint(0, 2**62, ()).item())
    words = np.random.SeedSequence([int(seed) % 2**64, int(stream), 0x544F5243]).generate_state(2, np.uint32)
    generator = torch.Generator(device=device)
    generator.manual_seed(int(words[0]) << 31 | int(words[1]) >> 1)
    return generator


def generator_state(generator: torch.Generator) -> torch.Tensor:
    """The state of ``generator`` as a CPU uint8 tensor (for a ``state_dict``)."""
    return generator.get_state().cpu()


def set_generator_state(generator: torch.Generator, state: torch.Tensor) -> None:
    """Restore :func:`generator_state` into ``generator``."""
    generator.set_state(state.cpu())


def learner_state(
    algo: Any, *, modules: Sequence[str], optimizers: Sequence[str], tensors: Sequence[str] = ()
) -> dict[str, Any]:
    """The state-dict layout of SAC, CQL and IQL: ``config`` (as a dict), each of ``modules`` and
    ``optimizers`` under its attribute name (their ``state_dict()``), each of ``tensors`` (a
    detached copy), ``grad_steps`` and ``torch_rng`` (:func:`generator_state`)."""
    return {
        "config": asdict(algo.config),
        **{name: getattr(algo, name).state_dict() for name in (*modules, *optimizers)},
        **{name: getattr(algo, name).detach().clone() for name in tensors},
        "grad_steps": algo.grad_steps,
        "torch_rng": generator_state(algo.torch_rng),
    }


def load_learner_state(
    algo: Any,
    state: Mapping[str, Any],
    *,
    modules: Sequence[str],
    optimizers: Sequence[str],
    tensors: Sequence[str] = (),
) -> None:
    """Restore what :func:`learner_state` returned into ``algo``, in place (the config is not read)."""
    for name in (*modules, *optimizers):
        getattr(algo, name).load_state_dict(state[name])
    with torch.no_grad():
        for name in tensors:
            getattr(algo, name).copy_(state[name])
    algo.grad_steps = int(state["grad_steps"])
    set_generator_state(algo.torch_rng, state["torch_rng"])


@contextmanager
def seeded_init(seed: int | None) -> Iterator[None]:
    """Build networks under ``with seeded_init(config.seed):``: with a seed, their initial weights
    depend on that seed alone (torch's global generator is forked, seeded, and left as it was);
    with ``None``, torch's global generator draws them as usual."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) % 2**63)
        yield


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
    (docs/n-step.md; Sutton & Barto 2018, eq. 7.1), so termination and window length are
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


VALUE_RESCALE_EPS = 1e-3
"""epsilon of :func:`value_rescale` (Kapturowski et al. 2019, sec. 2.3; Pohlen et al. 2018)."""


def value_rescale(x: torch.Tensor, eps: float = VALUE_RESCALE_EPS) -> torch.Tensor:
    """R2D2's invertible value rescaling ``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x``, elementwise.

    Any shape, any floating dtype (the result has ``x``'s). ``h`` is odd and strictly increasing
    (so it keeps the argmax of Q), ``h(0) = 0``, and it grows like ``sqrt(|x|)``: a learner
    regresses ``h(Q)`` instead of ``Q`` and meets targets of a smaller range. Source: Pohlen et al.
    2018 ("Observe and Look Further", the transformed Bellman operator and its function h), used by
    Kapturowski et al. 2019 (R2D2, sec. 2.3) with ``eps = 1e-3``; the inverse is
    :func:`value_rescale_inverse`.

    Raises:
        InvalidValueError: ``eps`` is not positive.
    """
    if not eps > 0:
        raise InvalidValueError(f"value_rescale needs eps > 0, got {eps}")
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def value_rescale_inverse(x: torch.Tensor, eps: float = VALUE_RESCALE_EPS) -> torch.Tensor:
    """The closed-form inverse of :func:`value_rescale`, elementwise (any shape, ``x``'s dtype):

    ``h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)``

    (Pohlen et al. 2018, appendix A; Kapturowski et al. 2019, sec. 2.3). The bracket is
    computed as ``2 (|x| + 1 + eps) / (sqrt(1 + 4 eps (|x| + 1 + eps)) + 1)``, the same value
    without the cancellation of ``sqrt(1 + small) - 1`` (in float32 the textbook form loses about
    three digits to it).

    Raises:
        InvalidValueError: ``eps`` is not positive.
    """
    if not eps > 0:
        raise InvalidValueError(f"value_rescale_inverse needs eps > 0, got {eps}")
    u = x.abs() + 1.0 + eps
    root = 2.0 * u / (torch.sqrt(1.0 + 4.0 * eps * u) + 1.0)
    return torch.sign(x) * (root * root - 1.0)


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


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value: Any, minimum: int) -> bool:
    return _real(value) and math.isfinite(value) and float(value).is_integer() and value >= minimum


def _widths(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and all(_whole(w, 1) for w in value)


def _interval(value: Any) -> bool:
    ok = isinstance(value, Sequence) and len(value) == 2 and all(_real(x) and math.isfinite(x) for x in value)
    return ok and value[0] <= value[1]


_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "widths": ("a sequence of layer widths >= 1", _widths),
    "positive": ("a finite number > 0", lambda v: _real(v) and 0 < v < math.inf),
    "non_negative": ("a finite number >= 0", lambda v: _real(v) and 0 <= v < math.inf),
    "finite": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
    "unit_interval": ("in [0, 1]", lambda v: _real(v) and 0 <= v <= 1),
    "positive_unit_interval": ("in (0, 1]", lambda v: _real(v) and 0 < v <= 1),
    "counts": ("a whole number >= 1", lambda v: _whole(v, 1)),
    "counts_from_zero": ("a whole number >= 0", lambda v: _whole(v, 0)),
    "intervals": ("(low, high) with finite low <= high", _interval),
}


def check_fields(
    config: object,
    *,
    widths: Sequence[str] = ("hidden",),
    positive: Sequence[str] = (),
    non_negative: Sequence[str] = (),
    finite: Sequence[str] = (),
    unit_interval: Sequence[str] = (),
    positive_unit_interval: Sequence[str] = (),
    counts: Sequence[str] = (),
    counts_from_zero: Sequence[str] = (),
    intervals: Sequence[str] = (),
    choices: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Range checks of a config dataclass's fields, grouped by kind (each argument names fields):

    ``widths`` sequences of layer widths, whole numbers ``>= 1``; ``positive`` finite ``> 0``
    (learning rates, clip ranges, norms); ``non_negative`` finite ``>= 0`` (loss weights, noise
    scales); ``finite`` any finite number; ``unit_interval`` in ``[0, 1]`` (discounts,
    probabilities); ``positive_unit_interval`` in ``(0, 1]`` (polyak ``tau``); ``counts`` whole
    numbers ``>= 1`` (steps, intervals, sizes); ``counts_from_zero`` whole numbers ``>= 0``;
    ``intervals`` pairs ``(low, high)`` with finite ``low <= high``; ``choices`` maps a field to its
    allowed names. A field that is ``None`` (an option switched off) passes every kind but
    ``widths``, ``unit_interval``, ``positive_unit_interval`` and ``choices``. NaN fails every kind.

    Raises:
        InvalidValueError: the first field that breaks its rule, as
            ``"<Config>.<field> must be <rule>, got <value>"`` (also a ``ValueError``).
    """
    groups = {
        "widths": widths,
        "positive": positive,
        "non_negative": non_negative,
        "finite": finite,
        "unit_interval": unit_interval,
        "positive_unit_interval": positive_unit_interval,
        "counts": counts,
        "counts_from_zero": counts_from_zero,
        "intervals": intervals,
    }
    cls = type(config).__name__
    for kind, names in groups.items():
        rule, ok = _KINDS[kind]
        optional = kind not in ("widths", "unit_interval", "positive_unit_interval")
        for name in names:
            v = getattr(config, name)
            if not ((optional and v is None) or ok(v)):
                raise InvalidValueError(f"{cls}.{name} must be {rule}, got {v!r}")
    for name, allowed in (choices or {}).items():
        v = getattr(config, name)
        if v not in allowed:
            raise InvalidValueError(f"{cls}.{name} must be one of {tuple(allowed)}, got {v!r}")
