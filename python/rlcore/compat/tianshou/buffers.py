"""Tianshou's uniform and prioritized buffers (single and vector) on the rlcore core."""


from __future__ import annotations

from typing import Any

import numpy as np
import tianshou.data as _ts
from tianshou.data import to_numpy

from rlcore.compat.tianshou.storage import (
    _CoreStorage,
)


class ReplayBuffer(_CoreStorage, _ts.ReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``ReplayBuffer`` (one env) backed by the rlcore core (see the module docstring).

    Args:
        size: transitions to keep.
        stack_num: frames per ``obs``/``obs_next`` stack, >= 1 (Tianshou's ``get``, see the
            module docstring).
        ignore_obs_next: accepted; every observation is stored once anyway.
        save_only_last_obs: must be False.
        sample_avail: with ``stack_num > 1`` sample only rows with ``stack_num - 1`` earlier
            steps in their episode (uniform buffers; prioritized ones ignore it, as Tianshou's);
            otherwise every stored transition is sampleable.
        random_seed: seed of the core's generator.
        extra_rows: rows for episodes' final observations (default ``size // 8 + 2``).

    Raises:
        NotImplementedError: save_only_last_obs.
        InvalidValueError: stack_num < 1 (DTypeError: not an int).
    """

    def __init__(
        self,
        size: int,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        self._init_storage(
            size,
            1,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
        )


class VectorReplayBuffer(_CoreStorage, _ts.VectorReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``VectorReplayBuffer`` backed by the rlcore core: ``buffer_num`` envs, each
    with ``ceil(total_size / buffer_num)`` transitions (plus ``extra_rows``) of its own.

    Raises:
        NotImplementedError: save_only_last_obs.
        InvalidValueError: stack_num < 1 (DTypeError: not an int).
        ValueError: buffer_num < 1.
    """

    _vector = True

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if buffer_num < 1:
            raise ValueError(f"buffer_num must be >= 1, got {buffer_num}")
        self._init_storage(
            int(np.ceil(total_size / buffer_num)),
            buffer_num,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
        )


class _PrioritizedMixin:
    """Prioritized replay (Schaul et al. 2016): ``update_weight``, ``set_beta``, ``get_weight``."""

    _prioritized = True
    _core: Any

    def update_weight(self, index: np.ndarray, new_weight: Any) -> None:
        """Set the priorities of rows ``index`` to ``(|new_weight| + eps)^alpha``
        (eps = float32 machine epsilon, as Tianshou). Each row sampled by this buffer names the
        transition its latest ``sample`` drew there: a row the ring has overwritten since is
        skipped (and counted by the core), never given the newer transition's priority."""
        rows = np.asarray(index).reshape(-1)
        if rows.dtype.kind in "iu":
            rows = self._sampled_indices(rows.astype(np.int64))  # type: ignore[attr-defined]
        self._core.update_priorities(rows, np.abs(to_numpy(new_weight)).reshape(-1))

    def set_beta(self, beta: float) -> None:
        """Set the importance-sampling exponent beta (>= 0)."""
        self._core.beta = beta

    def get_weight(self, index: int | np.ndarray) -> Any:
        """Importance-sampling weights of rows ``index`` (see the module docstring)."""
        return self._weights_at(np.atleast_1d(np.asarray(index)))  # type: ignore[attr-defined]


class PrioritizedReplayBuffer(_PrioritizedMixin, _CoreStorage, _ts.PrioritizedReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``PrioritizedReplayBuffer`` backed by the core's sum tree; ``sample`` adds
    ``weight`` [B] float32 to the batch.

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        alpha: priority exponent (> 0).
        beta: importance-sampling exponent (>= 0).
        weight_norm: divide the weights by the batch maximum (Tianshou's default).

    Raises:
        ValueError: alpha <= 0 or beta < 0.
    """

    def __init__(
        self,
        size: int,
        alpha: float,
        beta: float,
        weight_norm: bool = True,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if alpha <= 0 or beta < 0:
            raise ValueError(f"need alpha > 0 and beta >= 0, got alpha={alpha}, beta={beta}")
        self._init_storage(
            size,
            1,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
            alpha=alpha,
            beta=beta,
            weight_norm=weight_norm,
        )


class PrioritizedVectorReplayBuffer(_PrioritizedMixin, _CoreStorage, _ts.PrioritizedVectorReplayBuffer):  # type: ignore[misc,override]  # last_index is derived
    """Tianshou's ``PrioritizedVectorReplayBuffer`` backed by one core sum tree over all envs
    (arguments as :class:`PrioritizedReplayBuffer` and :class:`VectorReplayBuffer`)."""

    _vector = True

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        alpha: float,
        beta: float,
        weight_norm: bool = True,
        stack_num: int = 1,
        ignore_obs_next: bool = False,
        save_only_last_obs: bool = False,
        sample_avail: bool = False,
        random_seed: int = 42,
        *,
        extra_rows: int | None = None,
    ) -> None:
        if alpha <= 0 or beta < 0 or buffer_num < 1:
            raise ValueError(f"need alpha > 0, beta >= 0, buffer_num >= 1; got {alpha}, {beta}, {buffer_num}")
        self._init_storage(
            int(np.ceil(total_size / buffer_num)),
            buffer_num,
            stack_num=stack_num,
            save_only_last_obs=save_only_last_obs,
            ignore_obs_next=ignore_obs_next,
            sample_avail=sample_avail,
            random_seed=random_seed,
            extra_rows=extra_rows,
            alpha=alpha,
            beta=beta,
            weight_norm=weight_norm,
        )
