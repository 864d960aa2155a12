"""rlcore.compat.tianshou with ``stack_num > 1`` against Tianshou 2.0's own buffers: the same
streams go into both; every stored row's stacked ``obs``/``obs_next`` (the episode's first step
repeated where it has fewer steps), the rows ``sample_avail`` may draw, uniform sampling over
them, and typed errors for what is refused."""

from __future__ import annotations

import numpy as np
import pytest

ts = pytest.importorskip("tianshou")

import rlcore.errors  # noqa: E402
import tianshou.data as tsd  # noqa: E402
from rlcore.compat import tianshou as compat  # noqa: E402
from test_compat_tianshou import fill  # noqa: E402


def last_frame_key(stacked_obs: np.ndarray) -> bytes:
    """Rows are matched between the buffers by their own (unique) observation: the stack's last frame."""
    return stacked_obs[-1].tobytes()


def rows_by_obs(buf, idx) -> dict[bytes, int]:
    batch = buf[idx]
    return {last_frame_key(o): int(i) for o, i in zip(batch.obs, idx, strict=True)}


def history_in(key: bytes, k: int, *stores: dict[bytes, int]) -> bool:
    """The steps max(0, t - k + 1) .. t of the row's episode are stored in every buffer."""
    env, ep, t, _ = np.frombuffer(key, np.float32)
    need = [np.array([env, ep, s, 0], np.float32).tobytes() for s in range(max(0, int(t) - k + 1), int(t) + 1)]
    return all(n in store for store in stores for n in need)


CASES = [
    (lambda k, **kw: compat.ReplayBuffer(300, stack_num=k, **kw), lambda k, **kw: tsd.ReplayBuffer(300, stack_num=k, **kw), 1),
    (
        lambda k, **kw: compat.VectorReplayBuffer(1200, 4, stack_num=k, **kw),
        lambda k, **kw: tsd.VectorReplayBuffer(1200, 4, stack_num=k, **kw),
        4,
    ),
]


@pytest.mark.parametrize("stack_num", [2, 4])
@pytest.mark.parametrize(("ours_of", "theirs_of", "n_envs"), CASES)
def test_stacked_obs_and_obs_next_equal_tianshous_at_every_row(ours_of, theirs_of, n_envs, stack_num):
    ours, theirs = ours_of(stack_num), theirs_of(stack_num)
    fill(ours, theirs, n_envs, 150 if n_envs > 1 else 400, subsets=n_envs > 1)  # the single buffer wraps
    mo = rows_by_obs(ours, ours.sample_indices(0))
    mt = rows_by_obs(theirs, theirs.sample_indices(0))
    if n_envs > 1:
        assert mo.keys() == mt.keys()
    # After the single buffer's ring wraps the two keep different oldest rows (rlcore's size
    # counts final-observation rows too): compare the rows whose whole stack history is in both.
    keys = [key for key in mo if key in mt and history_in(key, stack_num, mo, mt)]
    assert len(keys) > 100
    io, it = np.array([mo[k] for k in keys]), np.array([mt[k] for k in keys])
    a, b = ours[io], theirs[it]
    assert a.obs.shape == (len(keys), stack_num, 4)
    np.testing.assert_array_equal(a.obs, b.obs)
    np.testing.assert_array_equal(a.obs_next, b.obs_next)
    for key in ("act", "terminated", "truncated", "done"):
        np.testing.assert_array_equal(a[key], b[key])
    # the stacks really do repeat the first step at episode starts, and hold k steps elsewhere
    steps = a.obs[:, :, 2]  # obs = [env, episode, step, 0]
    np.testing.assert_array_equal(steps[:, -1] - steps[:, 0], np.minimum(steps[:, -1], stack_num - 1))
    # a sampled batch is stacked the same way
    batch, idx = ours.sample(64)
    np.testing.assert_array_equal(batch.obs, ours[idx].obs)
    assert batch.obs.shape == (64, stack_num, 4)


@pytest.mark.parametrize(("ours_of", "theirs_of", "n_envs"), CASES)
def test_sample_avail_draws_the_rows_tianshou_allows_uniformly(ours_of, theirs_of, n_envs):
    k = 3
    ours, theirs = ours_of(k, sample_avail=True), theirs_of(k, sample_avail=True)
    fill(ours, theirs, n_envs, 150 if n_envs > 1 else 400, subsets=n_envs > 1)
    allowed_o = set(rows_by_obs(ours, ours.sample_indices(0)))
    allowed_t = set(rows_by_obs(theirs, theirs.sample_indices(0)))
    both_o, both_t = rows_by_obs(ours, ours.sample_indices(0)), rows_by_obs(theirs, theirs.sample_indices(0))
    if n_envs > 1:
        assert allowed_o == allowed_t
    else:  # the ring wrapped: the same verdict wherever both hold the rows before
        full_o = {key: int(i) for key, i in rows_by_obs(ours, ours._all_indices()).items()}
        full_t = {key: int(i) for key, i in rows_by_obs(theirs, np.arange(len(theirs))).items()}
        common = [key for key in full_o if key in full_t and history_in(key, k, full_o, full_t)]
        assert len(common) > 100
        assert {key for key in common if key in both_o} == {key for key in common if key in both_t}
    assert len(allowed_o) < len(ours)  # episode starts are excluded
    counts: dict[bytes, int] = {}
    for _ in range(40):
        batch, idx = ours.sample(256)
        assert idx.dtype == np.int64
        np.testing.assert_array_equal(batch.obs, ours[idx].obs)
        for o in batch.obs:
            key = last_frame_key(o)
            assert key in allowed_o
            counts[key] = counts.get(key, 0) + 1
            assert len({f.tobytes() for f in o}) == k  # k distinct steps: no repeated frame
    c = np.array([counts.get(key, 0) for key in allowed_o], float)
    expected = c.sum() / len(c)
    chi2 = float(((c - expected) ** 2 / expected).sum())
    dof = len(c) - 1
    assert chi2 < dof + 4 * np.sqrt(2 * dof), (chi2, dof)


def test_prioritized_stacks_follow_the_sampled_rows():
    ours = compat.PrioritizedVectorReplayBuffer(600, 2, alpha=0.6, beta=0.4, stack_num=3)
    theirs = tsd.PrioritizedVectorReplayBuffer(600, 2, alpha=0.6, beta=0.4, stack_num=3)
    fill(ours, theirs, 2, 120)
    batch, idx = ours.sample(32)
    np.testing.assert_array_equal(batch.obs, ours[idx].obs)
    assert batch.obs.shape == (32, 3, 4) and batch.weight.shape == (32,)


def test_stack_options_refused_with_typed_errors():
    with pytest.raises(rlcore.errors.InvalidValueError, match="stack_num"):
        compat.ReplayBuffer(100, stack_num=0)
    with pytest.raises(rlcore.errors.DTypeError, match="stack_num"):
        compat.ReplayBuffer(100, stack_num=2.0)
    with pytest.raises(NotImplementedError, match="save_only_last_obs"):
        compat.VectorReplayBuffer(100, 2, stack_num=4, save_only_last_obs=True)
    with pytest.raises(NotImplementedError, match="stack_num"):
        compat.HERReplayBuffer(100, lambda a, d: np.zeros(len(a)), horizon=10, stack_num=2)
