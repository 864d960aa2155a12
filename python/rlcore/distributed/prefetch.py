"""Prefetching from a sharded buffer: one sample request in flight while the learner updates."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rlcore.batch import TransitionBatch
from rlcore.errors import InvalidValueError

if TYPE_CHECKING:
    from rlcore.distributed.sharded_buffer import PendingSample, ShardedReplayBuffer


class PrefetchingSampler:
    """Keeps one sample request in flight: ``next()`` waits for the pending batch, sends the next
    request, and returns the batch, so the shards sample while the learner updates.

    With ``batches_per_request = k`` each request asks every shard for k batches in one Ray call,
    which divides the per-call cost (submission, transfer, deserialisation in the learner's
    process) by k.

    The batch a learner gets was drawn before the priority updates of the previous 1 to 2k - 1
    batches reached the shards (priority staleness, as in Ape-X, Horgan et al. 2018, sec. 3).
    """

    def __init__(
        self,
        buffer: ShardedReplayBuffer,
        batch_size: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        batches_per_request: int = 1,
    ) -> None:
        if batches_per_request < 1:
            raise InvalidValueError(f"batches_per_request must be >= 1, got {batches_per_request}")
        self.buffer = buffer
        self.batch_size, self.n_step, self.gamma = int(batch_size), int(n_step), float(gamma)
        self.batches_per_request = int(batches_per_request)
        self._pending: PendingSample | None = None
        self._ready: collections.deque[TransitionBatch] = collections.deque()

    def __iter__(self) -> Iterator[TransitionBatch]:
        return self

    def __next__(self) -> TransitionBatch:
        if not self._ready:
            pending = self._pending or self._request()
            self._ready.extend(pending.results())
            self._pending = self._request()
        return self._ready.popleft()

    def _request(self) -> PendingSample:
        return self.buffer.sample_async(
            self.batch_size, n_step=self.n_step, gamma=self.gamma, num_batches=self.batches_per_request
        )

    def discard(self) -> None:
        """Drop the request in flight and the batches not yet handed out."""
        self._pending = None
        self._ready.clear()
