"""Acting on the CPU without torch: the forward pass of a fused actor-critic in numpy.

An on-policy sampler calls its policy once per vector-env step on a few rows (8 at SB3's
CartPole defaults). At that size torch's per-op dispatch is the cost, not the arithmetic: the
fused :class:`~rlcore.nets.on_policy.ActorCritic`'s forward plus a categorical draw is about
15 torch ops, ~190 µs per call on this project's CPU machine, against ~60 µs for the same
arithmetic in numpy. :class:`NumpyActor` computes that forward (observation normaliser, the
two-member tanh trunk, the policy and value heads) on zero-copy numpy views of the policy's own
parameters and buffers, so the optimizer's in-place steps, ``load_state_dict``'s copies and the
normaliser's updates show through without a copy; the views are rebuilt when a tensor's storage
moves (a replaced parameter).

Same function, own random stream: the outputs equal torch's forward up to float32 rounding (the
matmuls are numpy's BLAS, not torch's; ``tests/test_numpy_acting.py`` bounds the difference). The
draws come from a numpy generator the algorithm owns and saves with its state:

* ``Discrete``: inverse CDF, one uniform ``u`` in ``(0, 1]`` per row; the action is the number of
  cumulative probabilities ``c_j < u * c_last`` (an action of probability 0 is never drawn);
* ``Box``: ``mean + exp(log_std) * eps``, ``eps`` standard normal, log-density of the diagonal
  Gaussian as :func:`~rlcore.nets.on_policy.gaussian_log_prob`.

Only the CPU and plain observation arrays take this path (:func:`numpy_actor_for` decides); the
update always runs in torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlcore.errors import InvalidValueError, ShapeError

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def obs_batch(obs: Any, dim: int) -> np.ndarray:
    """``obs`` as an array ``[N, *obs_shape]`` of ``dim`` values per row (what both acting paths
    take).

    Raises:
        ShapeError: not a batch, or rows of another size.
    """
    x = np.asarray(obs)
    if x.ndim < 1 or (x.shape[0] and x[0].size != dim):
        raise ShapeError(f"observations must be a batch [N, *obs_shape] of {dim} values each, got shape {x.shape}")
    return x


class NumpyActor:
    """``act_value`` / ``act`` / ``value`` of a fused actor-critic, computed in numpy.

    Args:
        policy: an :class:`~rlcore.nets.on_policy.ActorCritic` with a fused trunk (``trunk``
            holding :class:`~rlcore.nets.EnsembleLinear` layers of weight ``[2, in, out]`` and bias
            ``[2, 1, out]``, tanh after each), ``actor``/``critic`` ``nn.Linear`` heads, optional
            ``obs_rms`` and, for ``Box`` actions, ``log_std``; on the CPU.
        rng: the generator the actions are drawn from.
    """

    def __init__(self, policy: Any, rng: np.random.Generator) -> None:
        self.policy = policy
        self.rng = rng
        self.discrete = bool(policy.discrete)
        self._tensors: list[torch.Tensor] = []
        self._ptrs: tuple[int, ...] = ()
        self._views: list[np.ndarray] = []
        self._rows = np.arange(0)

    def _current_tensors(self) -> list[torch.Tensor]:
        # the modules' own dicts, not attribute access: nn.Module.__getattr__ costs ~1 µs a name
        p = self.policy
        mods, ts = p._modules, []
        for layer in mods["trunk"]._modules["layers"]._modules.values():
            ts += [layer._parameters["weight"], layer._parameters["bias"]]
        for head in (mods["actor"], mods["critic"]):
            ts += [head._parameters["weight"], head._parameters["bias"]]
        if p._parameters.get("log_std") is not None:
            ts.append(p._parameters["log_std"])
        rms = mods.get("obs_rms")
        if rms is not None:
            ts += [rms._buffers["mean"], rms._buffers["var"]]
        return ts

    def ready(self) -> bool:
        """Refresh the views if a tensor was replaced or its storage moved (``.to()``,
        ``.double()``, an assigned parameter); whether they are usable: every tensor on the CPU,
        parameters float32 (else the algorithm takes torch's path)."""
        ts = self._current_tensors()
        ptrs = tuple(t.data_ptr() for t in ts)
        if ptrs != self._ptrs or any(a is not b for a, b in zip(ts, self._tensors, strict=False)):
            n_buffers = 2 if self.policy.obs_rms is not None else 0
            params = ts[: len(ts) - n_buffers]
            if any(t.device.type != "cpu" for t in ts) or any(t.dtype != torch.float32 for t in params):
                self._ptrs = ()
                return False
            self._views = [t.detach().numpy() for t in ts]
            self._tensors, self._ptrs = ts, ptrs
        return True

    def forward(self, obs: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(out [N, K] float32, value [N] float32)``: logits (``Discrete``) or Gaussian means
        (``Box``), and ``V(o)``, for observations ``[N, *obs_shape]`` of any real dtype.

        Raises:
            ShapeError: not a batch of observations of the policy's size.
        """
        v = self._views
        p = self.policy
        dim = p.encoder.dim
        x = obs_batch(obs, dim)
        x = x.reshape(x.shape[0], dim).astype(np.float32, copy=False)
        if p.obs_rms is not None:
            mean, var = v[-2], v[-1]
            std = np.sqrt(var + p.obs_rms.eps).astype(np.float32)
            x = np.clip((x - mean.astype(np.float32)) / std, -p.obs_rms.clip, p.obs_rms.clip)
        h = np.broadcast_to(x, (2, *x.shape))  # [2, N, O]: the actor's and the critic's input
        n_layers = len(p.trunk.layers)
        for i in range(n_layers):
            h = np.tanh(np.matmul(h, v[2 * i]) + v[2 * i + 1])  # [2, N, out]
        wa, ba, wc, bc = v[2 * n_layers : 2 * n_layers + 4]
        out = h[0] @ wa.T + ba
        value = (h[1] @ wc.T + bc)[:, 0]
        return out, value

    def _log_std(self) -> np.ndarray:
        return self._views[2 * len(self.policy.trunk.layers) + 4]

    def sample(self, out: np.ndarray, *, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(act, log_prob [N] float32)`` from the head's output ``out`` (see the module docs):
        int64 ``[N]`` actions for ``Discrete``, float32 ``[N, A]`` (unclipped) for ``Box``.

        Raises:
            InvalidValueError: a draw from ``Discrete`` logits that are not finite (torch's
                ``multinomial`` raises too; the deterministic mode, like torch's argmax, does not).
        """
        n = out.shape[0]
        if self.discrete:
            z = out - out.max(-1, keepdims=True)
            e = np.exp(z)
            cdf = np.cumsum(e, -1)  # unnormalised: the last column is the partition sum
            log_sum = np.log(cdf[:, -1])
            if deterministic:
                act = z.argmax(-1)
            else:
                if not np.isfinite(log_sum).all():
                    bad = int(np.flatnonzero(~np.isfinite(log_sum))[0])
                    raise InvalidValueError(
                        f"the policy's logits of row {bad} are not finite ({out[bad].tolist()}): a NaN "
                        "or inf observation, or diverged weights; no action was drawn"
                    )
                u = (1.0 - self.rng.random((n, 1), dtype=np.float32)) * cdf[:, -1:]
                act = np.minimum((cdf < u).sum(-1), out.shape[1] - 1)
            if self._rows.shape[0] != n:
                self._rows = np.arange(n)
            return act.astype(np.int64, copy=False), z[self._rows, act] - log_sum
        log_std = self._log_std()
        if deterministic:
            act_f = out
        else:
            eps = self.rng.standard_normal(out.shape, dtype=np.float32)
            act_f = out + np.exp(log_std) * eps
        zs = (act_f - out) * np.exp(-log_std)
        log_prob = (-0.5 * zs * zs - log_std - np.float32(_LOG_SQRT_2PI)).sum(-1, dtype=np.float32)
        return act_f, log_prob

    def act_value(self, obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(act, log_prob float32 [N], value float32 [N])``, as the algorithm's ``act_value``."""
        out, value = self.forward(obs)
        act, log_prob = self.sample(out)
        return act, log_prob.astype(np.float32, copy=False), value.astype(np.float32, copy=False)

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions for N observations, as the algorithm's ``act``."""
        return self.sample(self.forward(obs)[0], deterministic=deterministic)[0]

    def value(self, obs: Any) -> np.ndarray:
        """``V(o)`` float32 ``[N]``."""
        return self.forward(obs)[1].astype(np.float32, copy=False)
