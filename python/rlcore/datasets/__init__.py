"""Offline datasets into rlcore buffers: D4RL-format HDF5 files (:mod:`~rlcore.datasets.d4rl`),
Minari datasets (:mod:`~rlcore.datasets.minari`) and rlcore's own saves, each into any buffer kind,
and D4RL's normalised score (:mod:`~rlcore.datasets.scores`).

Semantics (``docs/offline.md``): ``terminated`` ends an episode without bootstrap, ``truncated``
(D4RL's ``timeouts``) with; final observations come from the data where it has them, and the steps
it has none for are handled by :func:`rlcore.buffers.offline.complete_steps`. The buffer's episode
index then gives episodes, n-step windows and final observations exactly as if the steps had been
added one by one.

Example::

    import rlcore
    from rlcore.datasets import load_d4rl

    buffer = load_d4rl("hopper-medium-v2.hdf5", make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=0))
    batch = buffer.sample(256, n_step=3, gamma=0.99)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlcore.buffers import persist
from rlcore.buffers.offline import OfflineSteps, complete_steps, offline_capacity
from rlcore.buffers.replay import ReplayBuffer
from rlcore.datasets.d4rl import read_d4rl, write_d4rl
from rlcore.datasets.minari import minari_reference_returns, open_minari, read_minari
from rlcore.datasets.scores import D4RL_REFERENCE_RETURNS, normalized_score
from rlcore.errors import ApiUsageError

__all__ = [
    "D4RL_REFERENCE_RETURNS",
    "OfflineSteps",
    "complete_steps",
    "load_d4rl",
    "load_dataset",
    "load_minari",
    "minari_reference_returns",
    "normalized_score",
    "open_minari",
    "read_d4rl",
    "read_minari",
    "to_buffer",
    "write_d4rl",
]

B = TypeVar("B", bound=ReplayBuffer)

CHUNK_STEPS = 1 << 17
"""Steps per ``extend`` call when :func:`to_buffer` shows progress."""


def to_buffer(
    steps: OfflineSteps,
    *,
    make_buffer: Callable[[int], B] = ReplayBuffer,  # type: ignore[assignment]
    progress: bool | None = None,
) -> B:
    """A single-env buffer holding ``steps`` in time order, of the rows they need (T plus one per
    episode or continuity cut).

    Args:
        steps: the stream (:func:`~rlcore.datasets.d4rl.read_d4rl`, :func:`read_minari`, ...).
        make_buffer: ``capacity -> empty single-env buffer`` of any rlcore kind, e.g.
            ``lambda rows: rlcore.PrioritizedReplayBuffer(rows, alpha=0.6, seed=0)`` or an
            ``HERReplayBuffer`` for goal data (default: ``ReplayBuffer(rows)``, seeded by the OS).
        progress: a tqdm progress bar over the steps written (``None``: for at least 1M steps).

    Raises:
        ApiUsageError: ``make_buffer`` returned a buffer that is not empty or has several envs.
        ShapeError, DTypeError, InvalidValueError: as :meth:`rlcore.ReplayBuffer.extend`.
    """
    _, capacity = offline_capacity(
        steps.obs, steps.rew, steps.terminated, steps.truncated, steps.obs_next, None
    )
    buffer = make_buffer(capacity)
    if buffer.num_envs != 1 or len(buffer) != 0:
        raise ApiUsageError(
            f"make_buffer must return an empty single-env buffer, got num_envs={buffer.num_envs} with {len(buffer)} "
            "transitions"
        )
    t_len = len(steps)
    show = t_len >= 1_000_000 if progress is None else progress
    step = CHUNK_STEPS if show else max(t_len, 1)
    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=t_len, unit="step", unit_scale=True, desc="filling the buffer")
    try:
        for a in range(0, t_len, step):
            b = min(a + step, t_len)
            buffer.extend(
                _rows(steps.obs, a, b),
                steps.act[a:b],
                steps.rew[a:b],
                steps.terminated[a:b],
                steps.truncated[a:b],
                _rows(steps.obs_next, a, b),
                **{k: v[a:b] for k, v in steps.extras.items()},
            )
            if bar is not None:
                bar.update(b - a)
    finally:
        if bar is not None:
            bar.close()
    return buffer


def _rows(x: Any, a: int, b: int) -> Any:
    return {k: v[a:b] for k, v in x.items()} if isinstance(x, dict) else x[a:b]


def load_d4rl(
    path: str | Path,
    *,
    make_buffer: Callable[[int], B] = ReplayBuffer,  # type: ignore[assignment]
    infos: bool | Sequence[str] = False,
    progress: bool | None = None,
) -> B:
    """A D4RL-format HDF5 file in a buffer: :func:`~rlcore.datasets.d4rl.read_d4rl` then
    :func:`to_buffer` (their arguments and errors)."""
    return to_buffer(
        read_d4rl(path, infos=infos, progress=progress), make_buffer=make_buffer, progress=progress
    )


def load_minari(
    dataset: str | Any,
    *,
    make_buffer: Callable[[int], B] = ReplayBuffer,  # type: ignore[assignment]
    progress: bool | None = None,
) -> B:
    """A Minari dataset (local id or ``MinariDataset``) in a buffer: :func:`read_minari` then
    :func:`to_buffer` (their arguments and errors)."""
    return to_buffer(read_minari(dataset, progress=progress), make_buffer=make_buffer, progress=progress)


def is_hdf5(path: Path) -> bool:
    """Whether ``path`` is a file that starts with the HDF5 signature."""
    try:
        with path.open("rb") as f:
            return f.read(8) == b"\x89HDF\r\n\x1a\n"
    except OSError:
        return False


def load_dataset(
    source: str | Path,
    *,
    make_buffer: Callable[[int], B] = ReplayBuffer,  # type: ignore[assignment]
    progress: bool | None = None,
) -> ReplayBuffer:
    """Whatever ``source`` names, in a buffer: a directory saved by :meth:`rlcore.ReplayBuffer.save`
    (loaded as saved, of its own kind and size; ``make_buffer`` is not used), a D4RL-format HDF5
    file (:func:`load_d4rl`), or else a local Minari dataset id (:func:`load_minari`).

    Raises:
        SaveFileError: a damaged save, a malformed D4RL file, or no such Minari dataset.
        FileNotFoundError: ``source`` names a path that does not exist and is no Minari id.
        ImportError: h5py or minari is needed and not installed.
    """
    path = Path(source)
    if path.is_dir() and (path / persist.MANIFEST).is_file():
        return ReplayBuffer.load(path)
    if path.is_file() or path.suffix in (".hdf5", ".h5"):
        return load_d4rl(path, make_buffer=make_buffer, progress=progress)
    return load_minari(str(source), make_buffer=make_buffer, progress=progress)
