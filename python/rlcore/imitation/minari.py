"""Export recorded expert episodes as a Minari dataset (the optional ``minari`` extra)."""


from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def export_minari(
    dataset_id: str,
    env_id: str,
    arrays: Mapping[str, np.ndarray],
    *,
    seeds: Sequence[int] | None = None,
    algorithm_name: str | None = None,
    description: str | None = None,
) -> Any:
    """Write time-ordered complete episodes as a Minari dataset (``minari.create_dataset_from_buffers``).

    The dataset goes to Minari's local store (``$MINARI_DATASETS_PATH``, default
    ``~/.minari/datasets``) in its HDF5 format and is read back with ``minari.load_dataset(dataset_id)``.
    Nothing is downloaded or uploaded.

    Args:
        dataset_id: Minari id ``[namespace/]name-vN``, e.g. ``"rlcore/hopper-expert-v0"``.
        env_id: gymnasium id of the env that produced the data (stored as the dataset's env spec).
        arrays: ``obs`` ``[T, O]``, ``act`` ``[T, *A]``, ``rew``, ``term``, ``trunc`` ``[T]``,
            ``obs_next`` ``[T, O]``, episodes one after the other, each ending with a step that is
            terminated or truncated (what :func:`collect_expert` records). Minari's episode k holds
            ``L + 1`` observations (the first ``obs`` and every ``obs_next``) for its ``L`` steps.
        seeds: reset seed of each episode (stored per episode), or ``None``.
        algorithm_name: stored as the dataset's ``algorithm_name``.
        description: stored as the dataset's description.

    Returns:
        The ``minari.MinariDataset``.

    Raises:
        ImportError: minari (with h5py) is not installed (``pip install -e '.[minari]'``).
        ValueError: the data does not end with a finished episode, ``seeds`` has the wrong length, or
            the dataset id already exists (Minari's error).
    """
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ImportError as e:
        raise ImportError(f"the Minari export needs minari: pip install -e '.[minari]' ({e})") from e
    done = np.logical_or(arrays["term"], arrays["trunc"])
    if len(done) == 0 or not done[-1]:
        raise ValueError("the data must end with a terminated or truncated step (complete episodes)")
    ends = np.flatnonzero(done) + 1
    starts = np.concatenate([[0], ends[:-1]])
    if seeds is not None and len(seeds) != len(ends):
        raise ValueError(f"{len(ends)} episodes but {len(seeds)} seeds")
    episodes = []
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        obs = np.concatenate([arrays["obs"][a : a + 1], arrays["obs_next"][a:b]])
        episodes.append(
            EpisodeBuffer(
                id=k,
                seed=None if seeds is None else int(seeds[k]),
                observations=obs,
                actions=np.asarray(arrays["act"][a:b]),
                rewards=[float(r) for r in arrays["rew"][a:b]],
                terminations=[bool(t) for t in arrays["term"][a:b]],
                truncations=[bool(t) for t in arrays["trunc"][a:b]],
                infos={},
            )
        )
    # Minari 0.5.4 joins a relative $MINARI_DATASETS_PATH with itself (a file-not-found error after
    # it created the dataset's directory): hand it the absolute path for the call.
    root = os.environ.get("MINARI_DATASETS_PATH")
    if root is not None:
        os.environ["MINARI_DATASETS_PATH"] = str(Path(root).absolute())
    try:
        return _create_minari(minari, dataset_id, env_id, episodes, algorithm_name, description)
    finally:
        if root is not None:
            os.environ["MINARI_DATASETS_PATH"] = root


def _create_minari(
    minari: Any,
    dataset_id: str,
    env_id: str,
    episodes: list[Any],
    algorithm_name: str | None,
    description: str | None,
) -> Any:
    with warnings.catch_warnings():
        # Minari nags about metadata it cannot have here (an e-mail address); nothing else is silenced.
        warnings.filterwarnings("ignore", message="`author_email` is set to None", category=UserWarning)
        return minari.create_dataset_from_buffers(
            dataset_id,
            episodes,
            env=env_id,
            eval_env=env_id,
            algorithm_name=algorithm_name,
            author="rlcore collect-expert",
            code_permalink="https://github.com/rlcore/rlcore (python/rlcore/imitation/)",
            description=description or f"rlcore collect-expert: {len(episodes)} episodes of {env_id}",
            data_format="hdf5",
        )
