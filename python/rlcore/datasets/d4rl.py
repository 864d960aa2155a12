"""D4RL-format HDF5 files (Fu et al. 2020, "D4RL: Datasets for Deep Data-Driven Reinforcement
Learning"): read them as a stream of steps, write them from arrays.

The layout, one HDF5 dataset per key, all with the same leading length T, episodes one after the
other in time order:

=====================  ==============  ====================================================
key                    shape           meaning
=====================  ==============  ====================================================
``observations``       ``[T, *O]``     o_t
``actions``            ``[T, *A]``     a_t
``rewards``            ``[T]``         r_t (``[T, 1]`` is accepted)
``terminals``          ``[T]``         the episode ended in a terminal state at step t
``timeouts``           ``[T]``         the episode was cut after step t (time limit)
``next_observations``  ``[T, *O]``     optional: the observation after step t
``infos/NAME``         ``[T, ...]``    optional per-step information (``qpos``, ``qvel``...)
=====================  ==============  ====================================================

``timeouts`` become ``truncated`` (bootstrapped), ``terminals`` ``terminated`` (not). Where the
file has ``next_observations``, every final observation is the file's own (a truncated episode
bootstraps from its true last observation, and consecutive steps whose observations do not
continue are split into episodes by the buffer's continuity check). Without it the last step of an
episode has no next observation: :func:`rlcore.buffers.offline.complete_steps` says what happens
(a terminated step keeps a placeholder no target reads; a timed-out step and the file's unfinished
last step are left out, as D4RL's own ``qlearning_dataset`` leaves out timed-out steps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlcore.buffers.offline import OfflineSteps, complete_steps
from rlcore.errors import SaveFileError, ShapeError

__all__ = ["D4RL_KEYS", "read_d4rl", "write_d4rl"]

D4RL_KEYS = ("observations", "actions", "rewards", "terminals", "timeouts")
"""The keys every D4RL-format file has."""

PROGRESS_BYTES = 256 * 2**20
"""With ``progress=None``, files of at least this many bytes to read show a progress bar."""

_CHUNK_BYTES = 64 * 2**20


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - the extra is installed in the test environment
        raise ImportError(f"reading D4RL files needs h5py: pip install -e '.[minari]' or h5py ({e})") from e
    return h5py


def read_d4rl(
    path: str | Path,
    *,
    infos: bool | Sequence[str] = False,
    progress: bool | None = None,
) -> OfflineSteps:
    """Read a D4RL-format HDF5 file (module docstring) as a stream of steps.

    Args:
        path: the ``.hdf5`` file.
        infos: also read ``infos/*`` as extra columns named ``infos/NAME``: ``True`` all of them,
            a sequence of names (``["qpos", "qvel"]``) those; ``False``: none.
        progress: show a tqdm progress bar of the bytes read (``None``: for files of at least
            :data:`PROGRESS_BYTES`).

    Returns:
        The steps with ``terminated`` from ``terminals``, ``truncated`` from ``timeouts`` and
        ``obs_next`` from ``next_observations`` or, without it, from
        :func:`~rlcore.buffers.offline.complete_steps` (``dropped`` counts the steps left out).
        Arrays keep the file's dtypes (flags as bool, rewards ``[T]``).

    Raises:
        FileNotFoundError: no file at ``path``.
        SaveFileError: not an HDF5 file, a missing key, keys of different lengths, a key of the
            wrong rank or dtype (e.g. non-numeric, or flags that are not 0/1), ``next_observations``
            of another shape than ``observations``, or an unknown ``infos`` name.
        ImportError: h5py is not installed.
    """
    h5py = _h5py()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such D4RL file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise SaveFileError(f"{path} is not a readable HDF5 file ({e})") from e
    with f:
        keys = _check_layout(path, f, infos)
        data = _read_arrays(path, f, keys, progress)
    rew = data["rewards"]
    if rew.ndim == 2 and rew.shape[1] == 1:
        rew = rew[:, 0]
    term = _flags(path, "terminals", data["terminals"])
    trunc = _flags(path, "timeouts", data["timeouts"])
    extras = {k: v for k, v in data.items() if k.startswith("infos/")}
    if "next_observations" in data:
        return OfflineSteps(
            obs=data["observations"],
            act=data["actions"],
            rew=rew,
            terminated=term,
            truncated=trunc,
            obs_next=data["next_observations"],
            extras=extras,
        )
    return complete_steps(data["observations"], data["actions"], rew, term, trunc, extras=extras)


def _check_layout(path: Path, f: Any, infos: bool | Sequence[str]) -> list[str]:
    """The keys to read, after checking names, lengths, ranks and dtypes (no data read yet)."""
    h5py = _h5py()

    def dataset(key: str) -> Any:
        node = f.get(key)
        if not isinstance(node, h5py.Dataset):
            what = "missing" if node is None else "a group, not a dataset"
            raise SaveFileError(
                f"{path} is not a D4RL file: '{key}' is {what} (a D4RL file has "
                f"{', '.join(D4RL_KEYS)} and optionally next_observations and infos/*)"
            )
        return node

    keys = list(D4RL_KEYS) + (["next_observations"] if "next_observations" in f else [])
    group = f.get("infos")
    available = sorted(group.keys()) if isinstance(group, h5py.Group) else []
    if infos is True:
        keys += [f"infos/{k}" for k in available if isinstance(group[k], h5py.Dataset)]
    elif infos:
        unknown = [k for k in infos if k not in available]
        if unknown:
            raise SaveFileError(f"{path}: no infos/{unknown[0]} in the file (it has infos/{available})")
        keys += [f"infos/{k}" for k in infos]
    nodes = {k: dataset(k) for k in keys}
    t_len = nodes["observations"].shape[0] if nodes["observations"].shape else 0
    for key, node in nodes.items():
        if node.dtype.kind not in "biuf":
            raise SaveFileError(f"{path}: '{key}' has dtype {node.dtype}; a D4RL file stores numbers")
        if len(node.shape) == 0 or node.shape[0] != t_len:
            raise SaveFileError(
                f"{path}: '{key}' has shape {node.shape}, expected {t_len} rows like 'observations' "
                "(every key holds one row per step)"
            )
    for key in ("terminals", "timeouts"):
        if len(nodes[key].shape) != 1:
            raise SaveFileError(f"{path}: '{key}' has shape {nodes[key].shape}, expected [{t_len}]")
    rew_shape = nodes["rewards"].shape
    if not (len(rew_shape) == 1 or (len(rew_shape) == 2 and rew_shape[1] == 1)):
        raise SaveFileError(f"{path}: 'rewards' has shape {rew_shape}, expected [{t_len}]")
    if "next_observations" in nodes and nodes["next_observations"].shape != nodes["observations"].shape:
        raise SaveFileError(
            f"{path}: 'next_observations' has shape {nodes['next_observations'].shape}, "
            f"'observations' {nodes['observations'].shape}; they must match"
        )
    return keys


def _read_arrays(path: Path, f: Any, keys: list[str], progress: bool | None) -> dict[str, np.ndarray]:
    """Each key read into a fresh array, in chunks of about 64 MiB so a progress bar can follow."""
    total = sum(int(f[k].size) * f[k].dtype.itemsize for k in keys)
    show = total >= PROGRESS_BYTES if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"reading {path.name}")
    out: dict[str, np.ndarray] = {}
    try:
        for key in keys:
            node = f[key]
            arr = np.empty(node.shape, node.dtype)
            row_bytes = max(1, arr.itemsize * (arr.size // max(1, arr.shape[0])))
            step = max(1, _CHUNK_BYTES // row_bytes)
            for a in range(0, arr.shape[0], step):
                b = min(a + step, arr.shape[0])
                if b > a:
                    node.read_direct(arr, np.s_[a:b], np.s_[a:b])
                if bar is not None:
                    bar.update((b - a) * row_bytes)
            out[key] = arr
    except OSError as e:
        raise SaveFileError(f"{path}: '{key}' cannot be read ({e})") from e
    finally:
        if bar is not None:
            bar.close()
    return out


def _flags(path: Path, key: str, a: np.ndarray) -> np.ndarray:
    """0/1 flags as bool."""
    if a.dtype == np.bool_:
        return a
    if a.size and not np.isin(a, (0, 1)).all():
        raise SaveFileError(f"{path}: '{key}' holds values other than 0 and 1 (it must be flags)")
    return a.astype(bool)


def write_d4rl(
    path: str | Path,
    *,
    obs: np.ndarray,
    act: np.ndarray,
    rew: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    obs_next: np.ndarray | None = None,
    infos: Mapping[str, np.ndarray] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write T steps as a D4RL-format HDF5 file (module docstring): ``observations`` ``[T, *O]``,
    ``actions``, ``rewards`` (float32), ``terminals`` and ``timeouts`` (bool), optionally
    ``next_observations`` and ``infos/NAME``; ``metadata`` goes to ``metadata/KEY`` (strings and
    numbers). Overwrites ``path``.

    Raises:
        ImportError: h5py is not installed.
        ShapeError: the arrays have different lengths.
    """
    h5py = _h5py()
    path = Path(path)
    columns: dict[str, np.ndarray] = {
        "observations": np.asarray(obs),
        "actions": np.asarray(act),
        "rewards": np.asarray(rew, dtype=np.float32),
        "terminals": np.asarray(terminated, dtype=bool),
        "timeouts": np.asarray(truncated, dtype=bool),
    }
    if obs_next is not None:
        columns["next_observations"] = np.asarray(obs_next)
    columns.update({f"infos/{k}": np.asarray(v) for k, v in (infos or {}).items()})
    lengths = {k: v.shape[0] if v.ndim else 0 for k, v in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ShapeError(f"write_d4rl: every array needs the same length T, got {lengths}")
    with h5py.File(path, "w") as f:
        for key, value in columns.items():
            f.create_dataset(key, data=value)
        for key, value in (metadata or {}).items():
            f.create_dataset(f"metadata/{key}", data=value)
    return path
