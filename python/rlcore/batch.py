"""The sampled batch handed to a learner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["TransitionBatch"]

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
            ``rew + discount * Q'(obs_next)`` (DESIGN.md "n-step"; Sutton & Barto 2018, eq. 7.1).
        indices: ``[B]`` int64 rows in the buffer's storage (``buffer.column(name)[indices]``);
            pass them back to ``update_priorities``.
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

        def desc(x: Any) -> str:
            if x is None:
                return "None"
            if isinstance(x, dict):
                return "{" + ", ".join(f"{k!r}: {desc(v)}" for k, v in x.items()) + "}"
            return f"{type(x).__name__}{list(x.shape)} {x.dtype}"

        fields = ", ".join(f"{name}={desc(getattr(self, name))}" for name in self._fields)
        return f"TransitionBatch({fields})"

    def to_torch(self, device: str | torch.device = "cpu", *, non_blocking: bool = True) -> TransitionBatch:
        """Return the same batch as torch tensors on ``device``.

        On CPU this is zero-copy (``torch.from_numpy``): the tensors share memory with the arrays.
        On a CUDA device the copy is asynchronous when the arrays live in pinned memory (pass
        pinned arrays through ``sample(..., out=...)``). ``terminated``/``truncated`` stay bool;
        ``indices`` stay int64.

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
            if dev.type != "cpu":
                t = t.to(dev, non_blocking=non_blocking)
            return t

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
