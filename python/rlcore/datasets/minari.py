"""Minari datasets (Farama's successor of D4RL), read through the ``minari`` package's own API
(the optional ``minari`` extra): ``minari.load_dataset`` and ``MinariDataset.iterate_episodes``.

A Minari episode of L steps holds L + 1 observations (its first and every next one), so every final
observation is the dataset's own, truncated episodes included: nothing is dropped or made up.
Datasets are read from Minari's local store (``$MINARI_DATASETS_PATH``, default
``~/.minari/datasets``); nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlcore.buffers.offline import OfflineSteps
from rlcore.errors import ApiUsageError, SaveFileError

__all__ = ["minari_reference_returns", "open_minari", "read_minari"]


def open_minari(dataset: str | Any) -> Any:
    """The ``minari.MinariDataset`` of a local dataset id (``"namespace/name-v0"``), or ``dataset``
    itself when it already is one.

    Raises:
        ImportError: minari is not installed (``pip install -e '.[minari]'``).
        SaveFileError: no local dataset of that id, or one Minari cannot read.
    """
    if not isinstance(dataset, str):
        return dataset
    try:
        import minari
    except ImportError as e:
        raise ImportError(f"reading Minari datasets needs minari: pip install -e '.[minari]' ({e})") from e
    try:
        return minari.load_dataset(dataset, download=False)
    except FileNotFoundError as e:
        raise SaveFileError(f"no local Minari dataset {dataset!r} ({e})") from e
    except (OSError, ValueError, KeyError) as e:
        raise SaveFileError(f"Minari dataset {dataset!r} cannot be read ({e})") from e


def read_minari(dataset: str | Any, *, progress: bool | None = None) -> OfflineSteps:
    """Every episode of a Minari dataset, one after the other, as a stream of steps.

    Args:
        dataset: a local dataset id or a ``minari.MinariDataset``.
        progress: show a tqdm progress bar over the episodes (``None``: for at least 100k steps).

    Returns:
        ``obs`` ``[T, *O]`` (a dict of such for a ``Dict`` observation space), ``act``, ``rew``
        float32 ``[T]``, ``terminated``/``truncated`` bool ``[T]`` (Minari's ``terminations`` and
        ``truncations``), and ``obs_next`` from the episodes' own next observations.

    Raises:
        ImportError, SaveFileError: as :func:`open_minari`; SaveFileError also for an episode whose
            arrays do not fit each other (L + 1 observations for L actions, rewards and flags).
        ApiUsageError: nested ``Dict`` or ``Tuple`` observations (an rlcore buffer stores a ``Box``
            or a ``Dict`` of ``Box``).
    """
    ds = open_minari(dataset)
    total = int(ds.total_steps)
    show = total >= 100_000 if progress is None else progress
    episodes = ds.iterate_episodes()
    if show:
        from tqdm.auto import tqdm

        episodes = tqdm(episodes, total=int(ds.total_episodes), unit="episode", desc=f"reading {ds.id}")
    obs: Any = None
    obs_next: Any = None
    act = rew = term = trunc = None
    t = 0
    for ep in episodes:
        o = _obs_arrays(ds.id, ep.observations)
        length = int(np.asarray(ep.rewards).shape[0])
        first = next(iter(o.values()))
        if first.shape[0] != length + 1 or np.asarray(ep.actions).shape[0] != length or t + length > total:
            raise SaveFileError(
                f"Minari dataset {ds.id}: episode {ep.id} has {first.shape[0]} observations, "
                f"{np.asarray(ep.actions).shape[0]} actions and {length} rewards (L + 1, L and L expected)"
            )
        if obs is None:
            obs = {k: np.empty((total, *v.shape[1:]), v.dtype) for k, v in o.items()}
            obs_next = {k: np.empty_like(v) for k, v in obs.items()}
            a = np.asarray(ep.actions)
            act = np.empty((total, *a.shape[1:]), a.dtype)
            rew = np.empty(total, np.float32)
            term, trunc = np.empty(total, bool), np.empty(total, bool)
        for k, v in o.items():
            obs[k][t : t + length] = v[:-1]
            obs_next[k][t : t + length] = v[1:]
        act[t : t + length] = ep.actions
        rew[t : t + length] = ep.rewards
        term[t : t + length] = ep.terminations
        trunc[t : t + length] = ep.truncations
        t += length
    if obs is None or t != total:
        raise SaveFileError(f"Minari dataset {ds.id}: {t} steps in its episodes, its metadata says {total}")
    single = list(obs) == [""]
    return OfflineSteps(
        obs=obs[""] if single else obs,
        act=act,
        rew=rew,
        terminated=term,
        truncated=trunc,
        obs_next=obs_next[""] if single else obs_next,
    )


def _obs_arrays(dataset_id: str, observations: Any) -> dict[str, np.ndarray]:
    """``{"": array}`` for a Box observation, ``{key: array}`` for a Dict of arrays."""
    if isinstance(observations, Mapping):
        out = {}
        for k, v in observations.items():
            if isinstance(v, Mapping | tuple | list):
                raise ApiUsageError(
                    f"Minari dataset {dataset_id}: observation '{k}' is nested; rlcore buffers store a Box "
                    "or a Dict of Box observations"
                )
            out[str(k)] = np.asarray(v)
        return out
    if isinstance(observations, tuple | list):
        raise ApiUsageError(
            f"Minari dataset {dataset_id}: Tuple observations are not supported (Box or Dict of Box)"
        )
    return {"": np.asarray(observations)}


def minari_reference_returns(dataset: str | Any) -> tuple[float, float] | None:
    """``(ref_min_score, ref_max_score)`` from the dataset's metadata (the returns of a random and
    an expert policy that D4RL's normalised score uses), or ``None`` when it has none.

    Raises:
        ImportError, SaveFileError: as :func:`open_minari`.
    """
    meta = open_minari(dataset).storage.metadata
    low, high = meta.get("ref_min_score"), meta.get("ref_max_score")
    if low is None or high is None:
        return None
    return float(low), float(high)
