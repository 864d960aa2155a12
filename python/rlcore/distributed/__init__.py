"""Replay across processes and machines on Ray (Ape-X shape): buffer shards, remote collectors and a
prefetching learner.

Pieces:

* :class:`BufferShard` — a Ray actor that owns one rlcore buffer (plain, HER or prioritized) and
  serves ``add_chunk``, ``sample``, ``update_priorities``, ``state_dict``/``load_state_dict`` and
  ``len``.
* :class:`ShardedReplayBuffer` — a client with the local buffer's Python API (``add``, ``sample``,
  ``update_priorities``, ``beta``, ``state_dict``/``load_state_dict``, ``len``). Rows are
  buffered into chunks of whole vector steps (``chunk_rows`` rows) and sent with one call per
  shard. Routing is *episode-sticky*: every episode of an env goes, whole, to one shard and the
  env's next episode to the next shard, so n-step windows and HER goals never cross shards and the
  shards fill evenly. ``sample`` draws each shard's share of the batch from a multinomial over the
  shards' transition counts (uniform replay) or priority masses (PER), so every stored transition
  has the same probability as in one local buffer holding them all.
* :class:`CollectorWorker` — a Ray actor running :class:`rlcore.collect.Collector` on its own
  vector env with a CPU copy of the policy; it pulls new weights from a :class:`WeightStore`.
* :class:`DistributedTrainer` — the learner loop: keeps one collect call in flight per collector,
  restarts dead collectors, and keeps one sample request in flight while the update runs
  (:class:`PrefetchingSampler`).

Ray is imported lazily: ``import rlcore`` and ``import rlcore.distributed`` work without it; using
any of the pieces raises an ``ImportError`` that names ``pip install -e '.[ray]'``.

Example::

    import functools, rlcore
    from rlcore.distributed import ShardedReplayBuffer, init_ray

    init_ray()  # local Ray listening on 127.0.0.1 only
    buf = ShardedReplayBuffer(
        functools.partial(rlcore.PrioritizedReplayBuffer, 100_000, alpha=0.6),
        num_shards=2, num_envs=8,
    )
    buf.add(obs, act, rew, terminated, truncated, obs_next)  # one vector step of 8 envs
    batch = buf.sample(256, n_step=3, gamma=0.99)
    buf.update_priorities(batch.indices, td_abs)"""

from rlcore.distributed.ray_setup import init_ray
from rlcore.distributed.shard import BufferShard
from rlcore.distributed.shard_files import save_shard_dirs
from rlcore.distributed.sharded_buffer import PrefetchingSampler, ShardedReplayBuffer
from rlcore.distributed.trainer import DistributedConfig, DistributedTrainer, shard_factory_like
from rlcore.distributed.workers import CollectorWorker, WeightStore, policy_weights
from rlcore.distributed.writer import ShardWriter

__all__ = [
    "BufferShard",
    "CollectorWorker",
    "DistributedConfig",
    "DistributedTrainer",
    "PrefetchingSampler",
    "ShardWriter",
    "ShardedReplayBuffer",
    "WeightStore",
    "init_ray",
    "policy_weights",
    "save_shard_dirs",
    "shard_factory_like",
]
