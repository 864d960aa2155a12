"""The distributed learner loop: one collect call in flight per collector, dead collectors
restarted, one sample request in flight while the update runs (Ape-X shape). Evaluation, stats,
``run`` and checkpoints are :mod:`rlcore.trainers.loop`'s, as for every trainer."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlcore.batch import TransitionBatch
from rlcore.distributed.ray_setup import _ray, _remote
from rlcore.distributed.shard import BufferFactory
from rlcore.distributed.sharded_buffer import ShardedReplayBuffer
from rlcore.distributed.workers import CollectorWorker, WeightStore, policy_weights
from rlcore.envs.robotics import register_robotics
from rlcore.errors import ApiUsageError, InvalidValueError
from rlcore.stats import CollectStats, EpochStats, mean_stats
from rlcore.trainers import checkpoint
from rlcore.trainers.loop import IterationClock, OwnState, Trainer, at_least
from rlcore.trainers.off_policy import UpdateBudget, hand_back_priorities


@dataclass(frozen=True, kw_only=True)
class DistributedConfig:
    """Topology and schedule of a :class:`DistributedTrainer` (the training schedule itself is an
    :class:`~rlcore.trainers.off_policy.OffPolicyTrainerConfig`).

    Raises:
        InvalidValueError: a field out of range (a ``ValueError``).
    """

    num_collectors: int = 2
    """K collector actors, each with its own vector env."""
    collect_env_steps: int = 200
    """Env steps (transitions) per collect call of one collector."""
    weight_sync_every: int = 100
    """Publish the learner's weights every this many gradient steps; collectors pull them before
    their next collect call."""
    prefetch: bool = True
    """Keep one sample request in flight while the update runs."""
    batches_per_request: int = 4
    """Batches per prefetched sample request: one Ray call per shard serves this many gradient
    steps (on 2 loaded cores, 4 cut the wait per step from 1.4-3.2 ms to 0.5-1.0 ms for 1-4
    shards; docs/distributed.md), at the price of priorities up to 2k - 1 batches stale."""
    chunk_rows: int = 256
    """Rows per chunk a collector sends to the shards."""
    max_collector_restarts: int = 10
    """How often Ray restarts a dead collector actor (-1: always)."""
    eval_every_env_steps: int | None = None
    """Evaluate whenever the env steps pass a multiple of this (and at the end) instead of every
    ``config.eval_every`` iterations (an iteration takes one or more collect calls)."""

    def __post_init__(self) -> None:
        at_least("num_collectors", self.num_collectors, 1)
        at_least("collect_env_steps", self.collect_env_steps, 1)
        at_least("weight_sync_every", self.weight_sync_every, 1)
        at_least("batches_per_request", self.batches_per_request, 1)
        at_least("chunk_rows", self.chunk_rows, 1)
        at_least("max_collector_restarts", self.max_collector_restarts, -1)
        at_least("eval_every_env_steps", self.eval_every_env_steps, 1, optional=True)


def _merged(parts: list[CollectStats]) -> CollectStats:
    """The collect calls that finished in one iteration, as one :class:`CollectStats`."""
    return CollectStats(
        env_steps=sum(p.env_steps for p in parts),
        vector_steps=sum(p.vector_steps for p in parts),
        episode_returns=tuple(r for p in parts for r in p.episode_returns),
        episode_lengths=tuple(n for p in parts for n in p.episode_lengths),
        episode_successes=tuple(s for p in parts for s in p.episode_successes),
        duration_s=sum(p.duration_s for p in parts),
    )


class DistributedTrainer(Trainer):
    """Off-policy training with remote collectors and a sharded buffer, as an iterator of
    :class:`~rlcore.stats.EpochStats` (same contract as :class:`~rlcore.trainers.OffPolicyTrainer`).

    Each ``next()``: wait until at least one collect call has finished, hand those collectors their
    next call at once (so they step while the learner updates; they are at most one call ahead),
    run ``utd_ratio`` gradient steps per env step collected after the warm-up (prefetching the next
    batch during each update), send the new priorities back, publish the weights every
    ``weight_sync_every`` gradient steps, and evaluate every ``eval_every`` iterations (or every
    ``dist.eval_every_env_steps`` env steps) and at the end.

    A collector actor that dies is restarted by Ray (``max_collector_restarts``); its call in
    flight is lost and its env steps are asked for again (``collector_failures`` counts lost calls,
    ``collector_restarts`` restarted actors that reported back), and rows it had already stored
    stay in the shards. The restarted actor starts fresh episodes (new seed) and pulls the newest
    weights. A collector still restarting is asked again after 0.5 s, without blocking the learner.

    Raises (from ``next()``):
        ray.exceptions.RayActorError: a collector died more than ``max_collector_restarts`` times.

    Args:
        algorithm: the learner (``update``, ``act``, ``priorities``).
        buffer: the :class:`ShardedReplayBuffer` (``num_envs`` = K times the envs per collector).
        make_envs: builds one collector's vector env (called inside each collector actor).
        make_policy: builds a CPU copy of the algorithm (called inside each collector actor).
        config: the schedule (``collect_env_steps`` of it is ignored; see ``dist``).
        dist: topology.
        eval_envs: local vector env for deterministic evaluation.

    Raises:
        InvalidValueError: ``config.eval_every`` without ``eval_envs``, or ``buffer.num_envs`` not a
            multiple of ``dist.num_collectors`` (a ``ValueError``).
    """

    checkpoint_kind = "distributed"

    def __init__(
        self,
        algorithm: Any,
        buffer: ShardedReplayBuffer,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        *,
        config: Any,
        dist: DistributedConfig,
        eval_envs: Any | None = None,
    ) -> None:
        ray = _ray()
        super().__init__(algorithm, config, eval_envs)
        if buffer.num_envs % dist.num_collectors:
            raise InvalidValueError(
                f"buffer.num_envs={buffer.num_envs} must be num_collectors={dist.num_collectors} times "
                "the envs per collector"
            )
        self.buffer = buffer
        self.dist = dist
        self.weights = _remote(WeightStore).options(num_cpus=0).remote()
        per = buffer.num_envs // dist.num_collectors
        actor = _remote(CollectorWorker).options(
            num_cpus=0, max_restarts=dist.max_collector_restarts, max_task_retries=0
        )
        self.collectors = [
            actor.remote(
                make_envs,
                make_policy,
                buffer.writer(k * per, per, chunk_rows=dist.chunk_rows),
                self.weights,
                config.seed + 100 * k,
            )
            for k in range(dist.num_collectors)
        ]
        self.env_steps = 0
        self.episodes = 0
        self.collector_restarts = 0
        self.collector_failures = 0
        self._failures_K = [0] * dist.num_collectors
        self._retry_at: dict[int, float] = {}
        self._submitted = 0
        self.budget = UpdateBudget(config, buffer)
        self._inflight: dict[Any, tuple[int, int]] = {}
        self._started = False
        self._sampler = (
            buffer.prefetch(
                config.batch_size,
                n_step=config.n_step,
                gamma=config.gamma,
                batches_per_request=dist.batches_per_request,
            )
            if dist.prefetch
            else None
        )
        self._ray = ray
        self._publish()

    @property
    def done(self) -> bool:
        """True once ``max_env_steps`` were collected."""
        return self.config.max_env_steps is not None and self.env_steps >= self.config.max_env_steps

    def _publish(self) -> None:
        ray = _ray()
        ray.get(
            self.weights.put.remote(self.grad_steps, ray.put(policy_weights(self.algorithm)), self.env_steps)
        )

    def _submit(self, k: int) -> None:
        c = self.config
        n = self.dist.collect_env_steps
        if c.max_env_steps is not None:
            n = min(n, c.max_env_steps - self._submitted)
            if n <= 0:
                return
        random = self._submitted < c.warmup_env_steps
        self._submitted += n
        ref = self.collectors[k].collect.remote(n, random=random)
        self._inflight[ref] = (k, n)

    def _next_batch(self) -> TransitionBatch:
        c = self.config
        if self._sampler is not None:
            return next(self._sampler)
        return self.buffer.sample(c.batch_size, n_step=c.n_step, gamma=c.gamma)

    def _finished_calls(self) -> list[CollectStats]:
        """Wait for at least one collect call in flight (but not past the next retry of a
        restarting collector), take every finished one, and hand its collector the next call."""
        ray = self._ray
        now = time.monotonic()
        timeout = max(0.0, min(self._retry_at.values()) - now) if self._retry_at else None
        ready: list[Any] = []
        if self._inflight:
            ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=timeout)
            rest = [r for r in self._inflight if r not in ready]
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0] if rest else []
        elif timeout:
            time.sleep(timeout)
        finished: list[CollectStats] = []
        for ref in ready:
            k, n = self._inflight.pop(ref)
            try:
                stats, _, restarted = ray.get(ref)
            except ray.exceptions.ActorUnavailableError:
                # restarting (or unreachable for a moment): ask again shortly; not another death
                self._submitted -= n
                self._retry_at[k] = time.monotonic() + 0.5
                continue
            except ray.exceptions.RayActorError:
                # The actor died mid-call: Ray restarts it; this call's steps are lost and owed again.
                self._submitted -= n
                self.collector_failures += 1
                self._failures_K[k] += 1
                limit = self.dist.max_collector_restarts
                if 0 <= limit < self._failures_K[k]:
                    raise
            else:
                self.collector_restarts += restarted
                finished.append(stats)
            self._submit(k)
        return finished

    def _eval_due_after(self, collected: int) -> bool:
        """Every ``dist.eval_every_env_steps`` env steps (when set; else every ``config.eval_every``
        iterations) and at the last iteration, when there are eval envs."""
        last = self.done and not self._inflight
        every = self.dist.eval_every_env_steps
        if self.eval_envs is None:
            return False
        if every is None:
            return self._eval_due(last=last)
        return self.env_steps // every > (self.env_steps - collected) // every or last

    def __next__(self) -> EpochStats:
        if self.done and not self._inflight and not self._retry_at:
            raise StopIteration
        clock = IterationClock()
        if not self._started:  # the first next(), also of a resumed trainer
            self._started = True
            for k in range(len(self.collectors)):
                self._submit(k)
        now = time.monotonic()
        for k, at in list(self._retry_at.items()):
            if at <= now:
                del self._retry_at[k]
                self._submit(k)
        if not self._inflight and not self._retry_at:
            raise StopIteration

        # Collect: the calls that finished (their collectors already have their next call).
        collected = _merged(self._finished_calls())
        self.env_steps += collected.env_steps
        self.episodes += len(collected.episode_returns)
        clock.collected()

        # Update.
        algo_stats: list[Any] = []
        for _ in range(self.budget.grad_steps(collected.env_steps, self.env_steps)):
            batch = self._next_batch()
            stats = self.algorithm.update(batch)
            hand_back_priorities(self.buffer, batch, stats)
            algo_stats.append(stats)
            self.grad_steps += 1
            if self.grad_steps % self.dist.weight_sync_every == 0:
                self._publish()
        self.budget.anneal_beta(self.env_steps)
        clock.updated()

        # Evaluate.
        self.iteration += 1
        eval_stats = self.evaluate() if self._eval_due_after(collected.env_steps) else None
        return self._epoch_stats(clock, collected, train=mean_stats(algo_stats), eval_stats=eval_stats)

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint into the directory ``path`` (:meth:`rlcore.trainers.loop.Trainer.save_checkpoint`):
        algorithm and RNG states in ``trainer.pt``, counters in ``counters.json``, every shard with
        :meth:`ShardedReplayBuffer.save` (the collectors' envs live in their actors and are not
        saved). Collect calls still in flight keep writing while the shards save, so the saved
        shards can hold rows that ``env_steps`` does not count yet (as after a collector restart);
        :meth:`close` first for shards exactly as of the last ``next()``. Returns ``path``.

        Raises:
            CheckpointError: the algorithm's state holds something a checkpoint cannot store.
            OSError: the directory cannot be written (a previous checkpoint there stays intact).
        """
        return super().save_checkpoint(path)

    def load_checkpoint(self, path: str | Path, *, trust_env_state: bool = False) -> None:
        """Restore :meth:`save_checkpoint` into this freshly built trainer
        (:meth:`rlcore.trainers.loop.Trainer.load_checkpoint`): algorithm, shards, counters and RNGs;
        the new weights are published, and every collector resets its envs with
        ``rlcore.trainers.checkpoint.resume_seed(config.seed, iteration) + 100 * k`` (fresh episodes:
        the envs ran in actors and have no snapshot). Nothing from the files runs as code.

        Args:
            trust_env_state: accepted for the common trainer signature (there is no env snapshot).

        Raises:
            FileNotFoundError: ``path`` holds no checkpoint.
            CheckpointError: a damaged checkpoint, a ``trainer.pt`` that holds more than data, or a
                checkpoint of another trainer.
            SaveFileError: a shard's save is corrupt or does not fit.
            ApiUsageError: the trainer has already started iterating.
        """
        if self._started:
            raise ApiUsageError("load_checkpoint needs a freshly built DistributedTrainer (before next())")
        super().load_checkpoint(path, trust_env_state=trust_env_state)
        self._publish()

    def _own_state(self) -> OwnState:
        """Env steps and episodes (the collectors count them for the learner), the gradient-step
        credit, the PER ``beta`` and the shards."""
        return OwnState(
            counters={"env_steps": self.env_steps, "episodes": self.episodes, **self.budget.counters()},
            buffer=self.buffer,
            info={"dist": dataclasses.asdict(self.dist), "shard_capacity": self.buffer.shard_capacity},
        )

    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        env_steps, episodes = int(ckpt.counter("env_steps")), int(ckpt.counter("episodes"))
        grad_credit, beta = float(ckpt.counter("grad_credit")), ckpt.counter("buffer_beta")
        ckpt.restore_buffer(self.buffer)
        self.env_steps, self.episodes = env_steps, episodes
        self.budget.restore(grad_credit, beta)
        self._submitted = env_steps
        seed = checkpoint.resume_seed(self.config.seed, iteration)
        self._ray.get([c.reset.remote(seed + 100 * k) for k, c in enumerate(self.collectors)])

    @classmethod
    def resume(
        cls,
        path: str | Path,
        algorithm: Any,
        buffer: ShardedReplayBuffer,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        *,
        config: Any,
        dist: DistributedConfig,
        eval_envs: Any | None = None,
        trust_env_state: bool = False,
    ) -> DistributedTrainer:
        """Build a trainer from fresh objects and load the checkpoint at ``path`` into it
        (:meth:`load_checkpoint`)."""
        trainer = cls(
            algorithm, buffer, make_envs, make_policy, config=config, dist=dist, eval_envs=eval_envs
        )
        trainer.load_checkpoint(path, trust_env_state=trust_env_state)
        return trainer

    def close(self, timeout_s: float = 30.0) -> None:
        """Kill the collector and weight-store actors (the buffer's shards stay) and wait, up to
        ``timeout_s`` seconds, until every collector is gone: ``ray.kill`` returns before the actor
        dies, and a dying collector can still finish the write it is in; a write it sent before
        it died can still be queued at a shard, so ``close`` then makes one call to every shard,
        which each shard runs after those (a shard runs its calls in arrival order). Only then
        do the shards no longer change (a save right after ``close`` saves what stays)."""
        ray = self._ray
        for a in self.collectors:
            ray.kill(a, no_restart=True)
        ray.kill(self.weights)
        deadline = time.monotonic() + timeout_s
        for a in self.collectors:
            while time.monotonic() < deadline:
                try:
                    ray.get(a.pid.remote(), timeout=max(0.1, deadline - time.monotonic()))
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    break
                time.sleep(0.05)
        self.collectors = []
        self._inflight.clear()
        self.buffer.shard_sizes()  # the barrier: queued collector writes land before it returns


def _shard_buffer(
    env_id: str | None, capacity: int, cfg: Mapping[str, Any], *, num_envs: int, seed: int | None
) -> Any:
    """A shard of the local buffer's kind with every parameter of ``cfg`` (its ``_config()``, read
    back by the kind's ``_from_config``: frame stacking, PER and HER settings); a HER buffer's
    Python ``compute_reward`` is rebuilt from ``env_id`` inside the shard (env methods such as
    MuJoCo's do not pickle)."""
    from rlcore import buffers

    kinds = {"replay": buffers.ReplayBuffer, "prioritized": buffers.PrioritizedReplayBuffer, "her": buffers.HERReplayBuffer}
    compute_reward = None
    if cfg["kind"] == "her" and cfg["distance_threshold"] is None:
        import gymnasium as gym

        if env_id is None:
            raise ApiUsageError("a HER shard with a Python compute_reward needs env_id to rebuild it")
        if env_id not in gym.registry:
            register_robotics()
        compute_reward = getattr(gym.make(env_id).unwrapped, "compute_reward")  # noqa: B009
    config = {**cfg, "capacity": capacity, "num_envs": num_envs}
    return kinds[cfg["kind"]]._from_config(config, compute_reward=compute_reward, seed=seed)


def shard_factory_like(
    buffer: Any,
    *,
    num_shards: int,
    num_envs: int,
    env_id: str | None = None,
    shard_capacity: int | None = None,
) -> BufferFactory:
    """A picklable ``make_buffer`` for shards of the same kind and parameters as the local
    ``buffer``, together holding its capacity plus 1,000 rows per env stream (terminal rows and
    uneven episode routing), split over ``num_shards`` (or ``shard_capacity`` rows each: the shards
    of a run being resumed).

    Raises:
        ApiUsageError: a HER buffer with a Python ``compute_reward`` and no ``env_id`` to rebuild
            it from.
    """
    cfg = buffer._config()
    capacity = -(-(cfg["capacity"] + 1_000 * num_envs) // num_shards)
    capacity = -(-capacity // num_envs) * num_envs if shard_capacity is None else int(shard_capacity)
    if cfg["kind"] == "her" and cfg["distance_threshold"] is None and env_id is None:
        raise ApiUsageError("a HER buffer with a Python compute_reward needs env_id to rebuild it in the shards")
    return functools.partial(_shard_buffer, env_id, capacity, cfg)
