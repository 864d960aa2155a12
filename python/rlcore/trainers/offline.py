"""``OfflineTrainer``: gradient steps on a fixed dataset (behaviour cloning), evaluated on envs.

The loop, evaluation, stats, ``run`` and checkpoints are :mod:`rlcore.trainers.loop`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rlcore.buffers.draws import DatasetDraws
from rlcore.errors import CheckpointError, InvalidValueError
from rlcore.stats import EpochStats, mean_stats
from rlcore.trainers import checkpoint
from rlcore.trainers.loop import IterationClock, OwnState, Trainer, at_least

__all__ = ["OfflineTrainer", "OfflineTrainerConfig"]


@dataclass(frozen=True, kw_only=True)
class OfflineTrainerConfig:
    """Schedule of an :class:`OfflineTrainer`.

    Raises:
        InvalidValueError: a field out of range (a ``ValueError``).
    """

    max_grad_steps: int | None = None
    """Stop iterating after this many gradient steps (``None``: never stop)."""
    grad_steps_per_iteration: int = 1_000
    """Gradient steps per ``next()``."""
    batch_size: int = 256
    """Transitions per gradient step."""
    eval_every: int | None = None
    """Evaluate every this many iterations (and at the last one); ``None``: never."""
    eval_episodes: int = 10
    """Episodes per evaluation, spread over the eval envs."""
    seed: int = 0
    """Eval envs are reset with ``seed + 10_000 + 1_000 * i`` for an evaluation after iteration i."""
    checkpoint_every: int | None = None
    """With ``run(checkpoint_dir=...)``: write a checkpoint whenever the gradient steps pass a multiple
    of this (besides the one at the end and on SIGINT/SIGTERM); ``None``: only those."""

    def __post_init__(self) -> None:
        at_least("max_grad_steps", self.max_grad_steps, 1, optional=True)
        at_least("grad_steps_per_iteration", self.grad_steps_per_iteration, 1)
        at_least("batch_size", self.batch_size, 1)
        at_least("eval_every", self.eval_every, 1, optional=True)
        at_least("eval_episodes", self.eval_episodes, 1)
        at_least("checkpoint_every", self.checkpoint_every, 1, optional=True)


class OfflineTrainer(Trainer):
    """Learning from a fixed buffer as an iterator of :class:`~rlcore.stats.EpochStats`.

    Same contract as the other trainers: each ``next()`` runs ``grad_steps_per_iteration``
    gradient steps on uniform samples of ``buffer`` (fewer at the end, to stop exactly at
    ``max_grad_steps``), drawn with the trainer's own generator seeded from ``config.seed``
    (:class:`~rlcore.buffers.draws.DatasetDraws`), evaluates every ``eval_every`` iterations and at the last one, and returns
    frozen stats (``env_steps`` stays 0: no env is stepped for training; ``train`` holds the mean of
    the algorithm's stats, e.g. :class:`~rlcore.algos.bc.BCStats`). ``iter()`` returns the trainer
    and never resets; trainers can be advanced side by side with ``zip``. A checkpoint holds the
    algorithm, the counters and the RNGs (the draws' included); the dataset is not copied (it lives
    at its own path).

    Args:
        algorithm: ``update(batch) -> stats``, ``act(obs, *, deterministic)``, ``state_dict()``,
            ``load_state_dict()`` (e.g. :class:`~rlcore.algos.bc.BC`).
        buffer: the dataset (``sample(B)``, ``__len__``), e.g. ``rlcore.ReplayBuffer.load(path)``.
        config: the schedule.
        eval_envs: vector env for deterministic evaluation (``None``: none).

    Raises:
        InvalidValueError: ``eval_every`` without ``eval_envs``, or an empty buffer (a ``ValueError``).
    """

    checkpoint_kind = "offline"
    horizon = "max_grad_steps"
    progress = "grad_steps"

    def __init__(
        self,
        algorithm: Any,
        buffer: Any,
        *,
        config: OfflineTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
    ) -> None:
        super().__init__(algorithm, config, eval_envs, clip_eval_actions=True)
        if len(buffer) == 0:
            raise InvalidValueError("OfflineTrainer needs a non-empty buffer")
        self.buffer = buffer
        self.draws = DatasetDraws(buffer, (config.seed, 4))
        """Where the batches come from: uniform draws with the trainer's own (checkpointed) generator."""

    @property
    def env_steps(self) -> int:  # type: ignore[override]
        """0: no env is stepped for training."""
        return 0

    @property
    def episodes(self) -> int:  # type: ignore[override]
        """0: no env is stepped for training."""
        return 0

    @property
    def done(self) -> bool:
        """True once ``max_grad_steps`` is reached."""
        return self.config.max_grad_steps is not None and self.grad_steps >= self.config.max_grad_steps

    def __next__(self) -> EpochStats:
        c = self.config
        if self.done:
            raise StopIteration
        clock = IterationClock()

        # Update.
        n = c.grad_steps_per_iteration
        if c.max_grad_steps is not None:
            n = min(n, c.max_grad_steps - self.grad_steps)
        stats = [self.algorithm.update(self.draws.sample(c.batch_size)) for _ in range(n)]
        self.grad_steps += n
        clock.updated()

        # Evaluate.
        self.iteration += 1
        eval_stats = self._evaluate_if_due(last=self.done)
        return self._epoch_stats(clock, None, train=mean_stats(stats), eval_stats=eval_stats)

    def _own_state(self) -> OwnState:
        """The draws' generator (the dataset lives at its own path)."""
        return OwnState(parts={"draws": self.draws.state_dict()})

    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        """The draws' generator (an offline checkpoint has no env snapshot).

        Raises:
            CheckpointError: the checkpoint was taken on a dataset of another size.
        """
        try:
            self.draws.load_state_dict(ckpt.part("draws"))
        except InvalidValueError as e:
            raise CheckpointError(f"{ckpt.path}: {e}") from e
