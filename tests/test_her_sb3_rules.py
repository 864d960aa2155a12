"""Stable-Baselines3's sampling rules on HERReplayBuffer (``finished_only``, ``exact_ratio``) and
``sample_at`` (the batch of given rows and goals), against the reference."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import rlcore
from her_stream import F32, HER_KINDS, HERStream, check_her_batch, her_buffer, single_episode
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import RefBuffer, chi2_critical, chi2_stat
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError


def _finished_whole(stream: HERStream) -> set[int]:
    """Physical rows of the transitions of episodes that have ended and whose first row is
    still stored (the reference's view of what finished_only may draw)."""
    out = set()
    for e, env in enumerate(stream.ref.envs):
        for a in env.sampleable():
            ep = env.rows[a].ep
            if ep in env.ep_end and env.ep_start[ep] >= env.alive_lo:
                out.add(stream.ref.phys(e, a))
    return out


@settings(max_examples=40, deadline=None)
@given(
    num_envs=st.integers(1, 2),
    seg=st.integers(3, 14),
    strategy=st.sampled_from(["future", "final", "episode"]),
    future_k=st.sampled_from([0, 1, 4, 7.5]),
    batch=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_finished_only_and_exact_ratio_draw_whole_ended_episodes_and_relabel_the_last_share(
    num_envs, seg, strategy, future_k, batch, seed, data
):
    steps = data.draw(
        st.lists(
            st.lists(st.sampled_from(HER_KINDS), min_size=num_envs, max_size=num_envs),
            min_size=1,
            max_size=30,
        )
    )
    buf = her_buffer(
        seg * num_envs,
        num_envs,
        seed=seed,
        strategy=strategy,
        future_k=future_k,
        finished_only=True,
        exact_ratio=True,
    )
    stream = HERStream(buf, RefBuffer(seg * num_envs, num_envs), num_envs, seed=seed)
    for kinds in steps:
        stream.step(kinds)
    allowed = _finished_whole(stream)
    if not allowed:
        with pytest.raises(ApiUsageError, match="finished episodes"):
            buf.sample(batch)
        assert isinstance(ApiUsageError("x"), RuntimeError)  # what SB3 raises
        return
    b = buf.sample(batch)
    assert set(b.indices.tolist()) <= allowed
    relabeled, _ = check_her_batch(b, stream, strategy, 1, 0.99)
    n_relabeled = int((1 - 1 / (future_k + 1)) * batch)  # SB3's int(her_ratio * batch_size)
    assert relabeled == [False] * (batch - n_relabeled) + [True] * n_relabeled
    # every allowed transition is drawn (uniformly: a 2000-draw batch misses one of <= 28
    # rows with probability < 28 * (27/28)^2000 ~ 1e-30)
    assert set(buf.sample(2000).indices.tolist()) == allowed


def test_finished_only_draws_every_whole_ended_transition_uniformly():
    """Chi-square over the drawn rows of 3 ended episodes plus a running one, 2 envs."""
    buf = her_buffer(80, 2, seed=5, finished_only=True)
    stream = HERStream(buf, RefBuffer(80, 2), 2)
    for t in range(23):
        stream.step(["trunc" if t % 7 == 6 else "step", "term" if t % 5 == 4 else "step"])
    allowed = sorted(_finished_whole(stream))
    draws = np.concatenate([buf.sample(1000).indices for _ in range(40)])
    counts = np.array([(draws == r).sum() for r in allowed])
    assert counts.sum() == draws.size
    expected = np.full(len(allowed), draws.size / len(allowed))
    assert chi2_stat(counts, expected) < chi2_critical(len(allowed) - 1)


def test_finished_only_cannot_be_combined_with_prioritized_replay():
    with pytest.raises(InvalidValueError, match="prioritized"):
        her_buffer(32, finished_only=True, prioritized=True)


# ---------------------------------------------------------------------------------------------
# sample_at


def test_sample_at_gives_the_batch_of_the_rows_and_goals_it_is_given():
    """sample_at(indices of a draw, goal rows) equals that draw's batch, for every field; the
    buffer's generator is not used (the next sample is as if sample_at never ran)."""
    buf, stream = single_episode(length=10, future_k=4)
    twin, _ = single_episode(length=10, future_k=4)
    b = buf.sample(64)
    tw = twin.sample(64)
    # the goal row of a relabeled sample: the stored achieved-goal id names the row after t'
    ids = buf.column("obs")["achieved_goal"][:, 1]
    goal_rows = np.array(
        [-1 if g[0] < 0 else int(np.flatnonzero(ids == g[1])[0]) - 1 for g in b.obs["desired_goal"]]
    )
    again = buf.sample_at(b.indices, goal_rows)
    for field in ("obs", "obs_next"):
        for k in b.obs:
            np.testing.assert_array_equal(getattr(again, field)[k], getattr(b, field)[k])
    for field in ("act", "rew", "terminated", "truncated", "discount", "indices"):
        np.testing.assert_array_equal(getattr(again, field), getattr(b, field))
    nxt, twin_nxt = buf.sample(64), twin.sample(64)
    np.testing.assert_array_equal(nxt.indices, twin_nxt.indices)
    np.testing.assert_array_equal(tw.indices, b.indices)
    check_her_batch(buf.sample_at(b.indices), stream, "future", 1, 0.99)  # no goals: none relabeled
    assert (buf.sample_at(b.indices).obs["desired_goal"][:, 0] < 0).all()


@pytest.mark.parametrize(
    "indices, goal_indices, match",
    [
        ([10], None, "does not hold a transition"),  # the terminal row of the 10-step episode
        ([64], None, "out of range"),
        ([-1], None, "out of range"),
        ([], None, "indices is empty"),
        ([0, 1], [3], "goal_indices has 1 entries"),
        ([2], [12], "not a transition of that sample's episode"),
    ],
)
def test_sample_at_refuses_rows_without_transitions_and_foreign_goals(indices, goal_indices, match):
    buf, _ = single_episode(length=10)
    HERStream(buf, RefBuffer(64, 1), 1).step(["step"])  # a second, running episode at rows 11..12
    state = pickle.dumps(buf.state_dict())
    with pytest.raises(InvalidValueError, match=match):
        buf.sample_at(np.array(indices, dtype=np.int64), goal_indices)
    assert pickle.dumps(buf.state_dict()) == state


def test_sample_at_of_a_plain_buffer_equals_sample_and_refuses_float_indices():
    buf = rlcore.ReplayBuffer(64, seed=3)
    for t in range(20):
        buf.add(np.array([t], F32), np.zeros(1, F32), F32(t), t % 6 == 5, False, np.array([t + 1], F32))
    b = buf.sample(32, n_step=3, gamma=0.9)
    again = buf.sample_at(b.indices, n_step=3, gamma=0.9)
    for field in ("obs", "obs_next", "act", "rew", "terminated", "truncated", "discount", "indices"):
        np.testing.assert_array_equal(getattr(again, field), getattr(b, field))
    with pytest.raises(DTypeError):
        buf.sample_at(b.indices.astype(np.float64))
