"""rlcore.collect.recurrent.RecurrentActor through the one collector and evaluate: the state each
action was chosen from is stored with its row, and it restarts exactly where an episode starts,
in every autoreset mode and with asynchronous envs (subsets of envs per step, any order)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from gymnasium.vector import AutoresetMode
from rlcore.collect import Collector, evaluate
from rlcore.collect.recurrent import RecurrentActor
from rlcore.errors import ApiUsageError
from test_backends import CountEnv, ScriptedAsyncBackend


class CountingPolicy:
    """A recurrent policy whose state counts the actions since the state was restarted; its action
    is a function of the state, so a wrong state shows in the actions too."""

    def initial_state(self, n: int) -> np.ndarray:
        return np.zeros((n, 1), np.float32)

    def act(self, obs: Any, state: np.ndarray, *, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
        assert len(obs) == len(state)
        act = (np.tanh(state) * (0.5 if deterministic else 0.25)).astype(np.float32)
        return act, state + 1


class RecordingBuffer:
    def __init__(self) -> None:
        self.rows: list[tuple[int, np.ndarray, np.ndarray, float, np.ndarray]] = []

    def add(self, obs, act, rew, terminated, truncated, obs_next, *, mask=None, env_ids=None, **extras):
        ids = np.arange(len(rew)) if env_ids is None else env_ids
        for k, i in enumerate(ids):
            if mask is None or mask[k]:
                self.rows.append((int(i), obs[k], act[k], float(rew[k]), extras["h"][k]))


def vec_count_envs(mode: AutoresetMode) -> gym.vector.VectorEnv:
    fns = [lambda i=i: CountEnv(length=3 + i) for i in range(3)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


def check_rows(rows: list, n_envs: int) -> None:
    """Every stored row's state is the number of steps since its episode started (obs[1] of
    CountEnv is that step), and its action is the one the policy chose from that state."""
    assert {r[0] for r in rows} == set(range(n_envs))
    for _, obs, act, _, h in rows:
        assert h[0] == obs[1], (h, obs)
        np.testing.assert_allclose(act, np.tanh(h) * 0.25, rtol=1e-6)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_stored_state_restarts_exactly_at_episode_starts_in_every_autoreset_mode(mode: AutoresetMode) -> None:
    buf = RecordingBuffer()
    col = Collector(vec_count_envs(mode), buf)
    col.reset(seed=0)
    actor = RecurrentActor(CountingPolicy())
    actor.reset(col.num_envs)
    col.collect(90, policy=actor)
    check_rows(buf.rows, 3)
    assert max(r[4][0] for r in buf.rows) == 4  # env 2's episodes: steps 0..4, never more


def test_stored_state_follows_each_env_with_asynchronous_partial_batches() -> None:
    backend = ScriptedAsyncBackend(4, 2, [1, 2, 3, 5])
    buf = RecordingBuffer()
    col = Collector(backend, buf)
    col.reset(seed=0)
    actor = RecurrentActor(CountingPolicy())
    actor.reset(4)
    col.collect(200, policy=actor)
    assert any(ids != sorted(ids) for ids in backend.recv_ids)
    check_rows(buf.rows, 4)


def test_a_real_buffer_gets_the_state_column_and_sequences_return_it() -> None:
    buf = rlcore.ReplayBuffer(500, num_envs=3, seed=0)
    col = Collector(vec_count_envs(AutoresetMode.NEXT_STEP), buf)
    col.reset(seed=0)
    actor = RecurrentActor(CountingPolicy())
    actor.reset(3)
    col.collect(120, policy=actor)
    batch = buf.sample_sequences(16, 2, burn_in=1, state="h")
    # the state before a sequence's first step is that step's index in its episode
    np.testing.assert_array_equal(batch.state["h"][:, 0], batch.obs[:, 0, 1])


def test_evaluate_runs_a_stateful_policy_from_a_fresh_state_each_episode() -> None:
    seen: list[tuple[float, float]] = []

    class Greedy(RecurrentActor):
        def act(self, obs: Any, env_ids: np.ndarray) -> np.ndarray:
            assert self.state is not None
            seen.extend(zip(obs[:, 1].tolist(), self.state[env_ids, 0].tolist(), strict=True))
            return super().act(obs, env_ids)

    actor = Greedy(CountingPolicy(), deterministic=True, state_key=None)
    stats = evaluate(actor, vec_count_envs(AutoresetMode.NEXT_STEP), 6, seed=1)
    assert stats.episodes == 6
    # every step of an episode acts from the state that counts its steps; the only other rows are
    # NEXT_STEP reset rows (the final observation, the state already restarted, the action ignored)
    other = [(t, s) for t, s in seen if t != s]
    assert all(s == 0 and t >= 3 for t, s in other) and len(seen) - len(other) > 20


def test_actor_used_before_reset_is_a_typed_error() -> None:
    actor = RecurrentActor(CountingPolicy())
    with pytest.raises(ApiUsageError, match="reset"):
        actor.act(np.zeros((1, 2), np.float32), np.array([0]))
