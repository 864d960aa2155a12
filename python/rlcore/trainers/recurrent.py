"""``RecurrentTrainer``: the off-policy loop (:class:`~rlcore.trainers.off_policy.OffPolicyTrainer`)
for a recurrent agent (:class:`~rlcore.algos.r2d2.R2D2`) that learns on sequences.

What differs from the off-policy trainer, and nothing else:

* **Collection** acts through a :class:`~rlcore.collect.recurrent.RecurrentActor`: the policy's
  state is carried across steps, restarted at every episode start, and the state each action was
  chosen from is stored with the row in the extra column ``state_key`` (``"h"``), R2D2's stored
  state. The warm-up (``warmup_env_steps``: no gradient step yet) acts with the algorithm's
  exploring policy too (R2D2's epsilon starts at 1), so that every stored row has its state.
* **A gradient step** samples ``batch_size`` sequences of ``burn_in + seq_len`` steps (the
  algorithm's config) with ``buffer.sample_sequences(..., n_step, gamma, state=state_key)`` and, on a
  prioritized buffer, hands back ``update_sequence_priorities`` with the algorithm's
  ``priority_eta``.
* **Evaluation** runs a fresh greedy actor (zero state at each episode start).
* **Checkpoints** also store the actor's per-env states; they are restored when the envs continue
  exactly (trusted env snapshot) and restarted with the envs otherwise.

Schedule, evaluation seeds, stats, ``run()``, checkpoints and resume are the shared loop's
(:mod:`rlcore.trainers.loop`, :mod:`rlcore.trainers.off_policy`). Iterations are
``collect_env_steps`` env steps; ``utd_ratio = 1 / 8`` is one gradient step per 8 env steps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlcore.algos.r2d2 import R2D2, R2D2Stats
from rlcore.collect.recurrent import RecurrentActor
from rlcore.trainers import checkpoint
from rlcore.trainers.loop import OwnState
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig
from rlcore.types import Policy, RewardFn, StatefulPolicy

__all__ = ["RecurrentTrainer"]


class RecurrentTrainer(OffPolicyTrainer):
    """Recurrent off-policy training (module docstring) as an iterator of
    :class:`~rlcore.stats.EpochStats`.

    Args:
        algorithm: the learner: ``initial_state``, ``act(obs, state)``, ``update(SequenceBatch)``
            and ``config.burn_in``, ``config.seq_len``, ``config.priority_eta``.
        buffer: a ``ReplayBuffer`` or ``PrioritizedReplayBuffer`` with ``num_envs`` = the envs' count.
        envs: training vector env (lock-step or asynchronous).
        config: the schedule (:class:`~rlcore.trainers.off_policy.OffPolicyTrainerConfig`;
            ``batch_size`` counts sequences).
        eval_envs: vector env for evaluation (``None``: no evaluation).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` for the stored rewards.
        state_key: the extra column that holds the stored state.

    Raises:
        InvalidValueError: ``config.eval_every`` without ``eval_envs``.
    """

    checkpoint_kind = "recurrent"

    def __init__(
        self,
        algorithm: R2D2,
        buffer: Any,
        envs: gym.vector.VectorEnv,
        *,
        config: OffPolicyTrainerConfig,
        eval_envs: gym.vector.VectorEnv | None = None,
        reward_fn: RewardFn | None = None,
        state_key: str = "h",
    ) -> None:
        super().__init__(algorithm, buffer, envs, config=config, eval_envs=eval_envs, reward_fn=reward_fn)
        self.state_key = state_key
        self.actor = RecurrentActor(algorithm, state_key=state_key)

    def _collect_policy(self, warm: bool) -> Policy | StatefulPolicy | None:
        return self.actor

    def _eval_policy(self) -> Policy | StatefulPolicy:
        return RecurrentActor(self.algorithm, deterministic=True, state_key=None)

    def _reset_envs(self) -> None:
        super()._reset_envs()
        self.actor.reset(self.collector.num_envs)

    def _gradient_step(self) -> R2D2Stats:
        c, algo, buf = self.config, self.algorithm, self.buffer
        batch = buf.sample_sequences(
            c.batch_size, algo.config.seq_len, burn_in=algo.config.burn_in, n_step=c.n_step, gamma=c.gamma,
            state=self.state_key,
        )
        stats = algo.update(batch)
        if getattr(buf, "prioritized", False):
            buf.update_sequence_priorities(batch.start_indices, stats.td_abs, mask=stats.td_mask,
                                           eta=algo.config.priority_eta)
        return stats

    # ------------------------------------------------------------------ checkpoints

    def _own_state(self) -> OwnState:
        own = super()._own_state()
        return OwnState(
            parts={**own.parts, "actor": self.actor.state_dict()},
            counters=own.counters,
            buffer=own.buffer,
            env_state=own.env_state,
            info=own.info,
        )

    def _load_own_state(self, ckpt: checkpoint.Checkpoint, iteration: int) -> None:
        ckpt.part("actor")  # present before anything changes (CheckpointError otherwise)
        super()._load_own_state(ckpt, iteration)

    def _envs_restored(self, ckpt: checkpoint.Checkpoint, exact: bool) -> None:
        saved = ckpt.part("actor")
        if exact and saved["state"] is not None:
            self.actor.load_state_dict(saved)
        else:  # the envs were reset: every episode starts over
            self.actor.reset(self.collector.num_envs)
