"""Tianshou 2.0 replay buffers backed by the rlcore core.

Swap one class, keep the Collector and the algorithm::

    from rlcore.compat.tianshou import VectorReplayBuffer

    buf = VectorReplayBuffer(20_000, buffer_num=len(train_envs))
    collector = Collector(algorithm, train_envs, buf, exploration_noise=True)

Each class subclasses the Tianshou class of the same name (the Collector's and algorithms'
``isinstance`` checks pass) and implements what the Collector, the trainers and the algorithms
call: ``add(batch, buffer_ids)`` returning ``(insertion_idx, ep_return, ep_len, ep_start_idx)``
(arrays [R], zeros for unfinished episodes), ``sample(B)`` -> ``(Batch, indices)``,
``sample_indices(B)`` (B > 0 random, B = 0 all in time order, B < 0 none), ``__getitem__``,
``prev``/``next`` (clamped at episode ends), ``unfinished_index``, ``get_buffer_indices``, the
whole-buffer arrays ``rew``/``terminated``/``truncated``/``done`` (length ``maxsize``, as
``compute_nstep_return`` reads them), ``update_weight``, ``set_beta``, ``hasnull``, ``reset``,
pickling and ``save_hdf5``/``load_hdf5``.

Indices are rows of the core's storage: each env owns a contiguous segment of
``maxsize // buffer_num`` rows (``subbuffer_edges``), an episode of L steps occupies L + 1 rows
(the extra row holds its final observation, so ``obs_next`` of every row is the observation of
the row after it and is never stored twice).

Differences from Tianshou's buffers (deliberate):

- ``maxsize`` counts rows: ``size`` transitions per env plus ``extra_rows`` (default
  ``size // 8 + 2``) rows for final observations.
- Only ``obs``, ``act``, ``rew``, ``terminated``, ``truncated`` (and ``obs_next``) are stored;
  ``info`` and ``policy`` come back as empty ``Batch()`` and extra keys are dropped, so
  algorithms that read stored ``info``/``policy`` entries are not supported; ``rew`` is float32.
- ``add`` checks every argument before it writes and refuses with a typed error what
  Tianshou would store silently or half-way: duplicate ``buffer_ids`` (Tianshou stores two
  successive steps of that env; here one step per env per add), negative ids (Tianshou wraps
  them around), non-integer ids, fields whose leading dimension is not the number of ids, and
  flags that are not bool or 0/1 integers. A refused add leaves the buffer as it was.
- ``stack_num > 1`` stacks ``obs`` and ``obs_next`` ``[B, stack_num, *O]`` exactly as Tianshou's
  ``get(index, key, stack_num)`` (the episode's first step repeated where it has fewer steps),
  from the core's ``prev``; with ``sample_avail`` a batch is one core call,
  ``sample_sequences(B, stack_num, pad=False)``, whose sequences end at the sampled rows (uniform
  over the rows with ``stack_num - 1`` earlier steps). HER buffers refuse it.
- ``save_only_last_obs``, ``update(buffer)``, ``set_batch`` and ``set_array_at_key`` (episode
  hooks that add keys) raise ``NotImplementedError``.
- Randomness: the core owns its generator (``random_seed``); HER's relabeling draws from a
  NumPy generator seeded with ``random_seed`` (Tianshou uses the global one).
- HER: Tianshou's semantics (per sampled batch, each episode is relabeled as a whole with
  probability ``1 - 1/future_k`` from the latest sampled step's future, within ``horizon``)
  are reproduced, but the relabeled goals and rewards live in an overlay (and a float32 copy of
  the reward column) that ``__getitem__``/``rew`` read until the next sample or add; the core's
  storage is never written.
- Prioritized: ``weight_norm=False`` returns Schaul et al.'s weights ``(p_i / p_min)^-beta``
  with ``p = (|delta| + eps)^alpha`` on both sides; Tianshou divides ``p_i`` by an un-powered
  minimum. With the default ``weight_norm=True`` both normalise by the batch maximum and agree."""

from __future__ import annotations

from rlcore.compat import _missing

try:
    import tianshou.data  # noqa: F401 - the peer must be importable before its subclasses are built
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise _missing("tianshou", "tianshou", _err) from _err

from rlcore.compat.tianshou.buffers import (
    PrioritizedReplayBuffer,
    PrioritizedVectorReplayBuffer,
    ReplayBuffer,
    VectorReplayBuffer,
)
from rlcore.compat.tianshou.her import HERReplayBuffer, HERVectorReplayBuffer
from rlcore.compat.tianshou.storage import BufferIdError

__all__ = [
    "BufferIdError",
    "HERReplayBuffer",
    "HERVectorReplayBuffer",
    "PrioritizedReplayBuffer",
    "PrioritizedVectorReplayBuffer",
    "ReplayBuffer",
    "VectorReplayBuffer",
]
