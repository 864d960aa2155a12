"""Uniform draws from a fixed dataset with a generator of the caller's own, so the draws belong to
the caller's (checkpointed) random stream rather than the buffer's: an offline trainer and GAIL's
expert data resume exactly, and two learners sharing one dataset never change each other's draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlcore.batch import TransitionBatch
from rlcore.errors import InvalidValueError

__all__ = ["DatasetDraws"]


class DatasetDraws:
    """Draw transitions of ``buffer`` uniformly with replacement, by index (``buffer.sample_at``),
    from a numpy generator of this object's own.

    The buffer's transition rows are listed once, here: the buffer must not change afterwards
    (a dataset, expert data). The batches are those of ``buffer.sample_at`` (one-step
    transitions; importance weights of a prioritized buffer are ignored by a uniform learner).

    Args:
        buffer: an rlcore buffer (``capacity``, ``is_transition``, ``sample_at``).
        seed: seed of the generator: an int, a ``(seed, stream)`` pair (numpy's SeedSequence
            entropy: one run seed, an independent stream per user of it, e.g. an offline trainer's
            ``(config.seed, 4)``), or ``None`` (fresh entropy).

    Raises:
        InvalidValueError: the buffer holds no transition (a ``ValueError``).
    """

    def __init__(self, buffer: Any, seed: int | tuple[int, int] | None) -> None:
        self.buffer = buffer
        self.rows = np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity))))
        if self.rows.size == 0:
            raise InvalidValueError("the dataset holds no transition to draw")
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int) -> TransitionBatch:
        """``batch_size`` transitions drawn uniformly with replacement (int64 row indices from
        :attr:`rng`, then one ``sample_at``)."""
        return self.buffer.sample_at(self.rows[self.rng.integers(0, self.rows.size, size=batch_size)])

    def state_dict(self) -> dict[str, Any]:
        """The generator's state (the rows are the buffer's)."""
        return {"rng": self.rng.bit_generator.state, "rows": int(self.rows.size)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            InvalidValueError: the state was taken on a dataset with another number of transitions.
        """
        if int(state["rows"]) != self.rows.size:
            raise InvalidValueError(
                f"the draws were saved on a dataset of {int(state['rows'])} transitions, this one has {self.rows.size}"
            )
        self.rng.bit_generator.state = state["rng"]
