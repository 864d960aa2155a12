"""A buffer shard: a Ray actor that owns one rlcore buffer and serves chunked adds, samples,
priority updates and its state."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlcore.distributed.shard_files import _read_tree, _write_tree

BufferFactory = Callable[..., Any]
"""``make_buffer(num_envs=int, seed=int | None) -> ReplayBuffer``: builds one shard's buffer inside
its actor (e.g. ``functools.partial(rlcore.ReplayBuffer, 100_000)``). It is pickled with
cloudpickle, so it may close over anything picklable; build unpicklable things (a MuJoCo env for
``compute_reward``) inside it."""



def _stack(steps: list[Any]) -> Any:
    if isinstance(steps[0], Mapping):
        return {k: np.stack([s[k] for s in steps]) for k in steps[0]}
    return np.stack(steps)


def _take(x: Any, sel: np.ndarray | int) -> Any:
    if isinstance(x, Mapping):
        return {k: v[sel] for k, v in x.items()}
    return x[sel]


def _copy(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: np.array(v) for k, v in x.items()}
    return np.array(x)


def _pad(x: Any, first: int, total: int) -> Any:
    """``[T, n, ...]`` -> ``[T, total, ...]`` with ``x`` at columns ``first:first + n``, zeros elsewhere."""
    if isinstance(x, Mapping):
        return {k: _pad(v, first, total) for k, v in x.items()}
    x = np.asarray(x)
    if x.shape[1] == total:
        return x
    out = np.zeros((x.shape[0], total, *x.shape[2:]), dtype=x.dtype)
    out[:, first : first + x.shape[1]] = x
    return out


class BufferShard:
    """One rlcore buffer in a Ray actor (created by :class:`ShardedReplayBuffer`, not directly).

    Args:
        make_buffer: ``make_buffer(num_envs=num_envs, seed=seed)`` builds the buffer.
        num_envs: env streams of the whole sharded buffer; every shard has a segment per stream.
        seed: seed of this shard's buffer.

    Under PER the shard reports its total priority mass and its smallest positive priority from
    the core's ``priority_stats()`` (O(1): the roots of its sum and min trees), never from a scan
    of its rows.
    """

    def __init__(self, make_buffer: BufferFactory, num_envs: int, seed: int | None) -> None:
        self.buffer = make_buffer(num_envs=num_envs, seed=seed)
        self.num_envs = int(num_envs)

    def info(self) -> dict[str, Any]:
        """Kind, capacity, num_envs and PER parameters of the buffer."""
        b = self.buffer
        return {
            "kind": b._kind,
            "capacity": int(b.capacity),
            "num_envs": int(b.num_envs),
            "prioritized": bool(b.prioritized),
            "alpha": b.alpha,
            "beta": b.beta,
            "eps": b.eps,
        }

    def stats(self) -> tuple[int, float, float]:
        """``(transitions, priority mass, smallest positive priority)``; mass = transitions and
        min = 1 for a uniform buffer; the smallest priority is ``inf`` while no row has one. O(1)."""
        n = len(self.buffer)
        stats = self.buffer.priority_stats()
        if stats is None:
            return n, float(n), 1.0
        mass, pmin, _ = stats
        return n, float(mass), float(pmin)

    def add_chunk(
        self,
        first_env: int,
        obs: Any,
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: Any,
        mask: np.ndarray,
        extras: Mapping[str, np.ndarray],
    ) -> int:
        """Add T vector steps of env streams ``first_env .. first_env + n - 1``: every array is
        ``[T, n, ...]``, ``mask`` bool ``[T, n]`` (False: not a row of this shard). Returns the
        number of rows written.

        Raises:
            ShapeError, DTypeError, InvalidValueError: as ``ReplayBuffer.add`` (steps before the
                bad one are kept).
        """
        total = self.num_envs
        obs, obs_next = _pad(obs, first_env, total), _pad(obs_next, first_env, total)
        act, rew = _pad(act, first_env, total), _pad(rew, first_env, total)
        terminated, truncated = _pad(terminated, first_env, total), _pad(truncated, first_env, total)
        mask = _pad(np.asarray(mask, dtype=bool), first_env, total)
        extras = {k: _pad(v, first_env, total) for k, v in extras.items()}
        add = self.buffer.add
        for t in range(mask.shape[0]):
            m = mask[t]
            add(
                _take(obs, t),
                act[t],
                rew[t],
                terminated[t],
                truncated[t],
                _take(obs_next, t),
                mask=None if m.all() else m,
                **{k: v[t] for k, v in extras.items()},
            )
        return int(mask.sum())

    def sample(
        self, sizes: list[int], n_step: int, gamma: float
    ) -> tuple[list[tuple[Any, ...] | None], tuple[int, float, float]]:
        """One batch per entry of ``sizes``: ``([batch fields, or None for size 0], stats())``."""
        sample = self.buffer.sample
        fields = [tuple(sample(b, n_step=n_step, gamma=gamma)) if b > 0 else None for b in sizes]
        return fields, self.stats()

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> int:
        """As ``PrioritizedReplayBuffer.update_priorities``."""
        return self.buffer.update_priorities(indices, priorities)

    def sequence_stats(self, seq_len: int, burn_in: int, pad: bool) -> tuple[int, float, float]:
        """``(eligible starts, their sampling mass, smallest positive priority)`` for sequences of
        ``burn_in + seq_len`` steps (``ReplayBuffer.sequence_start_mass``; the minimum is 1 for a
        uniform buffer, ``inf`` while no row has a priority)."""
        count, mass = self.buffer.sequence_start_mass(seq_len, burn_in=burn_in, pad=pad)
        return int(count), float(mass), self.stats()[2]

    def sample_sequences(
        self,
        size: int,
        seq_len: int,
        burn_in: int,
        n_step: int,
        gamma: float,
        pad: bool,
        state: tuple[str, ...],
    ) -> tuple[tuple[Any, ...] | None, tuple[int, float, float]]:
        """``size`` sequences (``ReplayBuffer.sample_sequences``; ``None`` for size 0) and the
        shard's :meth:`sequence_stats` after them."""
        fields = None
        if size > 0:
            batch = self.buffer.sample_sequences(
                size, seq_len, burn_in=burn_in, n_step=n_step, gamma=gamma, pad=pad, state=state
            )
            fields = tuple(batch)
        return fields, self.sequence_stats(seq_len, burn_in, pad)

    def set_beta(self, beta: float) -> None:
        self.buffer.beta = beta

    def len(self) -> int:
        return len(self.buffer)

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.buffer.load_state_dict(state)

    def save_files(self) -> dict[str, bytes]:
        """The files of ``buffer.save`` (written to a temporary folder on this actor's node) as
        ``{relative path: bytes}``, so the driver can write them where it saves."""
        with tempfile.TemporaryDirectory(prefix="rlcore-shard-") as tmp:
            self.buffer.save(Path(tmp) / "save")
            return _read_tree(Path(tmp) / "save")

    def restore_files(self, files: Mapping[str, bytes]) -> None:
        """Write the files of a save (as :meth:`save_files` returns them) to a temporary folder
        and ``buffer.restore`` it: nothing changes unless the whole save is valid.

        Raises:
            SaveFileError: a path leaves the folder, or the save is corrupt or does not fit.
        """
        with tempfile.TemporaryDirectory(prefix="rlcore-shard-") as tmp:
            root = Path(tmp) / "save"
            _write_tree(root, files)
            self.buffer.restore(root)

    def clear(self) -> None:
        self.buffer.clear()
