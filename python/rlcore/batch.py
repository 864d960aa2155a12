"""What a learner is handed: a sampled :class:`TransitionBatch` (off-policy) or a ``[T, N]``
:class:`Rollout` (on-policy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rlcore.returns import compute_gae

if TYPE_CHECKING:
    import torch

__all__ = ["Rollout", "TransitionBatch"]

Obs = "np.ndarray | dict[str, np.ndarray]"


class TransitionBatch(NamedTuple):
    """A frozen batch of B transitions, gathered by the Rust core.

    Shapes use B for the batch size; ``O`` is the observation shape (or, for dict observations,
    a dict of arrays keyed like the observation space) and ``A`` the action shape.

    Attributes:
        obs: ``[B, *O]`` observation o_t, dtype as stored (dict of arrays for dict observations).
        act: ``[B, *A]`` action a_t, dtype as stored.
        rew: ``[B]`` float32, the n-step return ``sum_{k<m} gamma^k r_{t+k}`` (the plain reward
            when ``n_step == 1``; the recomputed reward for HER-relabeled samples).
        obs_next: ``[B, *O]`` observation ``o_{t+m}`` to bootstrap from (the true final observation
            of a terminated or truncated episode, never a reset observation).
        terminated: ``[B]`` bool, ``terminated`` of the window's last step t+m-1.
        truncated: ``[B]`` bool, ``truncated`` of the window's last step t+m-1.
        discount: ``[B]`` float32, ``gamma**m * (1 - terminated)``; the TD target is
            ``rew + discount * Q'(obs_next)`` (Sutton & Barto 2018, eq. 7.1).
        indices: ``[B]`` int64: rows in the buffer's storage (``buffer.column(name)[indices]``);
            on a prioritized buffer each names its transition, ``row | generation << 40``
            (``buffer.rows_of(indices)`` gives the rows), so that ``update_priorities`` skips
            and counts an index whose row the ring has rewritten since.
        weights: ``[B]`` float32 importance-sampling weights for prioritized buffers
            (Schaul et al. 2016, sec. 3.4), ``None`` otherwise.
        extras: extra per-step columns (``add(..., name=array)``), each ``[B, *shape]`` at step t.
    """

    obs: Any
    act: Any
    rew: Any
    obs_next: Any
    terminated: Any
    truncated: Any
    discount: Any
    indices: Any
    weights: Any = None
    extras: dict[str, Any] = {}  # noqa: RUF012 - NamedTuple default is never mutated

    @property
    def batch_size(self) -> int:
        """B, the number of transitions."""
        return int(self.indices.shape[0])

    def __repr__(self) -> str:
        """Field shapes and dtypes, not the values (a batch holds thousands of numbers)."""

        return describe_fields("TransitionBatch", self)

    def to_torch(self, device: str | torch.device = "cpu", *, non_blocking: bool = True) -> TransitionBatch:
        """Return the same batch as torch tensors on ``device``.

        On CPU this is zero-copy (``torch.from_numpy``): the tensors share memory with the arrays.
        On a CUDA device the copy is asynchronous when the arrays live in pinned memory (pass
        pinned arrays through ``sample(..., out=...)``). ``terminated``/``truncated`` stay bool;
        ``indices`` stay int64.

        Raises:
            ModuleNotFoundError: torch is not installed.
        """
        conv = torch_converter(device, non_blocking=non_blocking)
        return TransitionBatch(
            obs=conv(self.obs),
            act=conv(self.act),
            rew=conv(self.rew),
            obs_next=conv(self.obs_next),
            terminated=conv(self.terminated),
            truncated=conv(self.truncated),
            discount=conv(self.discount),
            indices=conv(self.indices),
            weights=conv(self.weights),
            extras={k: conv(v) for k, v in self.extras.items()},
        )


@dataclass(frozen=True)
class Rollout:
    """``T`` vector steps of ``N`` envs, time-major. Arrays are owned by the rollout (not reused).

    ``act`` holds the policy's raw sample (before clipping to a ``Box`` action space), so its
    ``log_prob`` is exact; the env received the clipped action.
    """

    obs: np.ndarray
    """``[T, N, *O]`` observation at each step (NEXT_STEP reset rows: the final observation o_L)."""
    act: np.ndarray
    """``[T, N, *A]`` sampled actions (int64 for Discrete, float32 for Box)."""
    rew: np.ndarray
    """float32 ``[T, N]`` rewards to learn from (``reward_fn``'s output when one is given); 0 on invalid rows."""
    terminated: np.ndarray
    """bool ``[T, N]``: the episode ended in a terminal state at this step (no bootstrap)."""
    truncated: np.ndarray
    """bool ``[T, N]``: the episode was cut at this step (time limit); bootstraps from ``final_value``."""
    valid: np.ndarray
    """bool ``[T, N]``: the row is a transition (False only for NEXT_STEP reset rows)."""
    log_prob: np.ndarray
    """float32 ``[T, N]`` log pi(act | obs) under the sampling policy."""
    value: np.ndarray
    """float32 ``[T, N]`` V(obs) under the sampling critic."""
    final_value: np.ndarray
    """float32 ``[T, N]`` V(final observation) where ``truncated``; 0 elsewhere."""
    last_value: np.ndarray
    """float32 ``[N]`` V of the observation after the last step (bootstrap of rollouts cut mid-episode)."""
    env_rew: np.ndarray
    """float32 ``[T, N]`` the env's own rewards (episode statistics; equal to ``rew`` without ``reward_fn``)."""

    @property
    def num_steps(self) -> int:
        """T, vector steps."""
        return int(self.rew.shape[0])

    @property
    def num_envs(self) -> int:
        """N, envs."""
        return int(self.rew.shape[1])

    @property
    def num_transitions(self) -> int:
        """Valid rows (env steps)."""
        return int(self.valid.sum())

    def next_value(self) -> np.ndarray:
        """float32 ``[T, N]`` value of the observation after each step.

        ``value[t + 1]`` inside the rollout, ``last_value`` after the last step, and
        ``final_value`` where the step was truncated (the true final observation, not the reset one).
        Terminated rows carry a value here too; GAE ignores it.
        """
        next_TN = np.empty_like(self.value)
        next_TN[:-1] = self.value[1:]
        next_TN[-1] = self.last_value
        return np.where(self.truncated, self.final_value, next_TN).astype(np.float32)

    def advantages(
        self,
        gamma: float,
        gae_lambda: float,
        *,
        rew: np.ndarray | None = None,
        value: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """GAE advantages and returns ``(adv [T, N], ret [T, N])`` from the Rust :func:`rlcore.compute_gae`.

        Schulman et al. 2016, eq. 16: ``delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)``,
        ``A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}``, ``ret = A + V``; ``V(s_{t+1})`` is
        :meth:`next_value`. Invalid rows get whatever the recursion gives and must be masked by the
        caller (they never leak into valid rows: the row before a reset row is a done row).

        Args:
            gamma: discount; gae_lambda: lambda (1.0: Monte-Carlo returns minus the baseline).
            rew: rewards to use instead of ``self.rew`` (e.g. scaled by a return normaliser).
            value: values to use instead of ``self.value``/``final_value``/``last_value``; pass zeros
                (``np.zeros_like(self.value)``) for a baseline-free REINFORCE: then every bootstrap is 0.
        """
        rew_TN = self.rew if rew is None else rew
        if value is None:
            value_TN, next_TN = self.value, self.next_value()
        else:
            value_TN, next_TN = value, np.zeros_like(value)
        return compute_gae(rew_TN, value_TN, next_TN, self.terminated, self.truncated, gamma, gae_lambda)


def describe_fields(kind: str, batch: Any) -> str:
    """``Kind(field=ndarray[B, ...] dtype, ...)`` of a NamedTuple batch: shapes and dtypes, not values."""

    def desc(x: Any) -> str:
        if x is None:
            return "None"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {desc(v)}" for k, v in x.items()) + "}"
        return f"{type(x).__name__}{list(x.shape)} {x.dtype}"

    fields = ", ".join(f"{name}={desc(getattr(batch, name))}" for name in batch._fields)
    return f"{kind}({fields})"


def torch_converter(device: Any, *, non_blocking: bool) -> Any:
    """``conv(x)``: an array (or a dict of them, or ``None``) as torch tensors on ``device``,
    zero-copy on CPU (``torch.from_numpy``), dtypes kept.

    Raises:
        ModuleNotFoundError: torch is not installed.
    """
    import torch

    dev = torch.device(device)

    def conv(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.to(dev, non_blocking=non_blocking)
        t = torch.from_numpy(np.asarray(x))
        return t if dev.type == "cpu" else t.to(dev, non_blocking=non_blocking)

    return conv
