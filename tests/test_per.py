"""Prioritized replay: weights against the numpy formula, sampling frequencies (chi-square), tree
drift, beta, bad priority updates, n-step and prioritized HER."""

from __future__ import annotations

import numpy as np
import pytest
import rlcore
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reference import RefBuffer, chi2_critical, chi2_stat, per_weights
from reference_stream import Stream, check_against_reference, index_rows
from rlcore.errors import DTypeError, InvalidValueError, RlcoreError, SaveFileError, ShapeError

F32 = np.float32


def _per(capacity=64, num_envs=2, steps=20, alpha=0.6, beta=0.4, eps=1e-6, seed=0, done_every=7):
    buf = rlcore.PrioritizedReplayBuffer(
        capacity, num_envs=num_envs, alpha=alpha, beta=beta, eps=eps, seed=seed
    )
    ref = RefBuffer(capacity, num_envs)
    stream = Stream(buf, ref, num_envs, seed=seed)
    for k in range(steps):
        stream.step(["term" if (k + e) % done_every == done_every - 1 else "step" for e in range(num_envs)])
    return buf, ref, stream


def _transitions(buf):
    rows = np.arange(buf.capacity)
    return rows[buf.is_transition(rows)]


def test_new_transitions_get_running_max_priority_and_updates_apply_alpha():
    buf, _, stream = _per(alpha=0.5, eps=1e-6, steps=3)
    rows = _transitions(buf)
    np.testing.assert_array_equal(buf.priorities(rows), 1.0)
    buf.update_priorities(rows[:2], np.array([4.0, 0.25]))
    np.testing.assert_allclose(
        buf.priorities(rows[:2]), [(4 + 1e-6) ** 0.5, (0.25 + 1e-6) ** 0.5], rtol=1e-12
    )
    stream.step(["step", "step"])
    new = np.setdiff1d(_transitions(buf), rows)
    np.testing.assert_allclose(buf.priorities(new), (4 + 1e-6) ** 0.5, rtol=1e-12)
    # non-transition rows (terminal rows, the open rows, unwritten rows) have priority 0
    other = np.setdiff1d(np.arange(buf.capacity), _transitions(buf))
    np.testing.assert_array_equal(buf.priorities(other), 0.0)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_weights_match_numpy_reference(beta):
    buf, _, _ = _per(capacity=80, num_envs=2, steps=30, beta=beta)
    rng = np.random.default_rng(1)
    rows = _transitions(buf)
    buf.update_priorities(rows, rng.exponential(size=len(rows)) * 10 ** rng.uniform(-3, 3, size=len(rows)))
    for _ in range(5):
        b = buf.sample(64)
        assert b.weights.dtype == np.float32 and b.weights.shape == (64,)
        want = per_weights(buf.priorities(np.arange(buf.capacity)), buf.priorities(b.indices), beta)
        np.testing.assert_allclose(b.weights, want, rtol=1e-5)
        assert b.weights.max() <= 1.0 + 1e-6
    if beta == 0.0:
        np.testing.assert_array_equal(b.weights, 1.0)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_sampling_frequencies_follow_priorities_chi_square(alpha):
    buf, _, _ = _per(capacity=40, num_envs=1, steps=30, alpha=alpha, eps=1e-9, done_every=8)
    rows = _transitions(buf)
    raw = np.arange(1, len(rows) + 1, dtype=np.float64)
    buf.update_priorities(rows, raw)
    leaves = buf.priorities(np.arange(buf.capacity))
    counts = np.zeros(buf.capacity)
    for _ in range(200):
        np.add.at(counts, index_rows(buf.sample(256).indices), 1)
    total = counts.sum()
    assert counts[leaves == 0].sum() == 0, "a zero-priority row was sampled"
    expected = total * leaves[rows] / leaves.sum()
    stat = chi2_stat(counts[rows], expected)
    assert stat < chi2_critical(len(rows) - 1), (stat, chi2_critical(len(rows) - 1))
    # the spread matters: with alpha = 1 the top row is drawn ~len(rows) times as often as the first
    if alpha == 1.0:
        ratio = counts[rows[-1]] / counts[rows[0]]
        assert 0.6 * len(rows) < ratio < 1.6 * len(rows)


def test_tree_drift_million_updates_never_return_zero_priority_or_terminal_row():
    buf = rlcore.PrioritizedReplayBuffer(1000, num_envs=4, alpha=1.0, beta=0.6, eps=1e-300, seed=3)
    stream = Stream(buf, RefBuffer(1000, 4), 4, seed=3)
    rng = np.random.default_rng(3)

    def add_steps(k):
        for _ in range(k):  # short episodes: many terminal rows; wraps the 250-row segments
            stream.step(list(rng.choice(["step", "step", "term", "trunc"], size=4)))

    add_steps(400)
    n_updates = 0
    for _ in range(10):
        rows = _transitions(buf)
        idx = rng.choice(rows, size=100_000)
        kind = rng.integers(0, 5, size=idx.size)
        u = rng.random(idx.size)
        p = np.select([kind == 0, kind == 1, kind == 2], [0.0, 1e-290 * u, 1e30 * u], default=u)
        assert buf.update_priorities(idx, p) == 0
        n_updates += idx.size
        add_steps(20)  # overwrites rows, turning some into terminal/open rows
    assert n_updates == 1_000_000
    all_rows = np.arange(buf.capacity)
    is_t = buf.is_transition(all_rows)
    leaves = buf.priorities(all_rows)
    assert np.all(leaves[~is_t] == 0.0), "a non-transition row kept a priority"
    assert np.all(leaves[is_t] > 0.0)
    for _ in range(400):
        b = buf.sample(256)
        assert buf.is_transition(b.indices).all(), "sampled a row that holds no transition"
        assert np.all(buf.priorities(b.indices) > 0)
        assert np.all(np.isfinite(b.weights)) and np.all((b.weights >= 0) & (b.weights <= 1))
    want = per_weights(leaves, buf.priorities(b.indices), 0.6).astype(F32)  # tiny weights underflow to 0
    np.testing.assert_allclose(b.weights, want, rtol=1e-5, atol=1e-37)
    # stratified draws from the drifted tree still follow the leaves
    counts = np.zeros(buf.capacity)
    big = leaves > 1e-6 * leaves.max()
    for _ in range(100):
        np.add.at(counts, index_rows(buf.sample(256).indices), 1)
    assert counts[~big].sum() <= 5, "rows with negligible priority were drawn far too often"


def _clone(buf, **kwargs):
    twin = type(buf)._from_config(buf._config(), **kwargs)
    twin.load_state_dict(buf.state_dict())
    if isinstance(buf, rlcore.HERReplayBuffer):
        twin._compute_reward = buf._compute_reward
    return twin


def test_changing_beta_changes_weights_on_vector_buffer():
    buf, _, _ = _per(capacity=60, num_envs=3, steps=25, beta=0.4)
    rows = _transitions(buf)
    buf.update_priorities(rows, np.linspace(0.01, 10, len(rows)))
    twin = _clone(buf)
    twin.beta = 1.0
    assert twin.beta == 1.0 and buf.beta == 0.4
    a, b = buf.sample(64), twin.sample(64)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.allclose(a.weights, b.weights)
    # w(β2) = w(β1) ** (β2 / β1)
    np.testing.assert_allclose(b.weights, a.weights.astype(np.float64) ** (1.0 / 0.4), rtol=1e-5)
    # annealing with LinearSchedule reaches the weights of every call
    sched = rlcore.LinearSchedule(0.4, 1.0, 10)
    last = None
    for step in range(0, 11, 2):
        buf.beta = sched(step)
        s = buf.sample(64)
        np.testing.assert_allclose(
            s.weights,
            per_weights(buf.priorities(np.arange(buf.capacity)), buf.priorities(s.indices), sched(step)),
            rtol=1e-5,
        )
        if last is not None:
            assert not np.allclose(np.sort(s.weights), np.sort(last)) or np.all(s.weights == 1)
        last = s.weights
    assert buf.beta == pytest.approx(1.0)


def _her_per(beta=0.4, seed=0):
    buf = rlcore.HERReplayBuffer(
        60, num_envs=2, seed=seed, distance_threshold=0.05, prioritized=True, alpha=0.8, beta=beta, future_k=4
    )
    rng = np.random.default_rng(seed)
    for t in range(20):
        ag = rng.normal(size=(2, 3)).astype(F32)
        obs = {
            "observation": rng.normal(size=(2, 4)).astype(F32),
            "achieved_goal": ag,
            "desired_goal": np.zeros((2, 3), F32),
        }
        nxt = {
            "observation": rng.normal(size=(2, 4)).astype(F32),
            "achieved_goal": rng.normal(size=(2, 3)).astype(F32),
            "desired_goal": np.zeros((2, 3), F32),
        }
        done = np.array([t % 5 == 4, t % 6 == 5])
        buf.add(obs, rng.normal(size=(2, 2)).astype(F32), -np.ones(2, F32), np.zeros(2, bool), done, nxt)
    return buf


def test_changing_beta_changes_weights_on_her_buffer():
    buf = _her_per(beta=0.4)
    rows = _transitions(buf)
    buf.update_priorities(rows, np.geomspace(0.01, 100, len(rows)))
    twin = _clone(buf)
    twin.beta = 0.9
    a, b = buf.sample(64, n_step=2), twin.sample(64, n_step=2)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.obs["desired_goal"], b.obs["desired_goal"])
    assert not np.allclose(a.weights, b.weights)
    for s, beta in ((a, 0.4), (b, 0.9)):
        np.testing.assert_allclose(
            s.weights,
            per_weights(buf.priorities(np.arange(buf.capacity)), buf.priorities(s.indices), beta),
            rtol=1e-5,
        )


# ---------------------------------------------------------------------------------------------
# update_priorities: bad input and skipped rows


def _prio_state(buf):
    return buf.priorities(np.arange(buf.capacity)).copy(), buf.state_dict()


def _assert_prio_unchanged(buf, before):
    p, state = before
    np.testing.assert_array_equal(buf.priorities(np.arange(buf.capacity)), p)
    now = buf.state_dict()["arrays"]
    for k, v in state["arrays"].items():
        np.testing.assert_array_equal(now[k], v, err_msg=k)


@pytest.mark.parametrize(
    "indices,priorities,err,builtin",
    [
        ([0, 1], [1.0, -0.5], InvalidValueError, ValueError),
        ([0, 1], [1.0, np.nan], InvalidValueError, ValueError),
        ([0, 1], [np.inf, 1.0], InvalidValueError, ValueError),
        ([0, 1], [1.0, -np.inf], InvalidValueError, ValueError),
        ([0, 64], [1.0, 1.0], InvalidValueError, ValueError),
        ([0, -1], [1.0, 1.0], InvalidValueError, ValueError),
        ([0, 1, 2], [1.0, 1.0], ShapeError, ValueError),
        ([0], [1.0, 1.0], ShapeError, ValueError),
        (np.zeros((2, 1), np.int64), [1.0, 1.0], ShapeError, ValueError),
        ([0, 1], np.ones((2, 1)), ShapeError, ValueError),
        (np.array([0.0, 1.0]), [1.0, 1.0], DTypeError, TypeError),
        ([0, 1], np.array(["a", "b"]), DTypeError, TypeError),
    ],
    ids=[
        "negative",
        "nan",
        "inf",
        "-inf",
        "past-end",
        "negative-index",
        "too-many-idx",
        "too-few-idx",
        "2-d-idx",
        "2-d-prio",
        "float-idx",
        "str-prio",
    ],
)
def test_update_priorities_bad_input_raises_and_leaves_priorities_unchanged(
    indices, priorities, err, builtin
):
    buf, _, _ = _per(capacity=64)
    rows = _transitions(buf)
    buf.update_priorities(rows, np.linspace(0.5, 3, len(rows)))
    before = _prio_state(buf)
    with pytest.raises(err) as info:
        buf.update_priorities(np.asarray(indices), np.asarray(priorities))
    assert isinstance(info.value, RlcoreError) and isinstance(info.value, builtin)
    _assert_prio_unchanged(buf, before)
    # the tree is consistent: sampling still follows the unchanged priorities
    b = buf.sample(128)
    assert buf.is_transition(b.indices).all()


def test_update_priorities_skips_non_transition_rows():
    buf, ref, _ = _per(capacity=64, num_envs=2, steps=10)
    terminal_or_open = np.setdiff1d(np.array(ref.alive_rows()), _transitions(buf))
    unwritten = np.setdiff1d(np.arange(64), np.array(ref.alive_rows()))
    assert len(terminal_or_open) and len(unwritten)
    before = _prio_state(buf)
    idx = np.concatenate([terminal_or_open, unwritten])
    skipped = buf.update_priorities(idx, np.full(idx.size, 5.0))
    assert skipped == idx.size
    _assert_prio_unchanged(buf, before)
    rows = _transitions(buf)
    mixed = np.concatenate([rows[:3], terminal_or_open[:1]])
    assert buf.update_priorities(mixed, np.full(4, 2.0)) == 1
    np.testing.assert_allclose(buf.priorities(rows[:3]), (2 + 1e-6) ** 0.6)


def _add1(buf, t, *, term=False):
    """One step of a single-env stream whose observation is its step count."""
    return buf.add(np.array([t], F32), np.zeros(1, F32), 0.0, term, False, np.array([t + 1], F32))


def test_index_returned_by_add_takes_its_priority_after_the_row_was_sampled_and_overwritten():
    buf = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, eps=1e-9, seed=0)
    for t in range(7):
        _add1(buf, t)
    buf.sample(64)  # hands out every row 0..6
    for t in range(7, 20):  # the ring wraps: every sampled row now holds a newer transition
        res = _add1(buf, t)
    assert buf.update_priorities(res.indices, np.array([50.0])) == 0
    np.testing.assert_allclose(buf.priorities(res.indices), 50.0 + 1e-9, rtol=1e-12)
    b = buf.sample(4096)
    assert (b.indices == res.indices[0]).mean() > 0.5  # 50 of a total mass of 56


def test_ape_x_initial_priorities_from_add_indices_land_after_wrap_around():
    # actors compute initial priorities for the steps they add and set them from add's indices,
    # while a learner samples (handing rows out) in between; the ring wraps many times
    n = 4
    buf = rlcore.PrioritizedReplayBuffer(40, num_envs=n, alpha=0.7, eps=1e-6, seed=1)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(n, 3)).astype(F32)
    for t in range(200):
        nxt = rng.normal(size=(n, 3)).astype(F32)
        done = rng.random(n) < 0.15
        mask = rng.random(n) > 0.1
        res = buf.add(obs, np.zeros((n, 1), F32), np.ones(n, F32), done, np.zeros(n, bool), nxt, mask=mask)
        obs = np.where(done[:, None], rng.normal(size=(n, 3)).astype(F32), nxt)
        rows = res.indices[res.indices >= 0]
        prio = rng.exponential(size=rows.size) * 10.0
        assert buf.update_priorities(rows, prio) == 0, f"step {t}: an add's index was skipped"
        np.testing.assert_allclose(buf.priorities(rows), (prio + 1e-6) ** 0.7, rtol=1e-12)
        if t % 3 == 0:
            buf.sample(32)


@pytest.mark.parametrize("becomes", ["open row", "terminal row"])
def test_sampled_index_is_skipped_only_while_its_row_holds_no_transition(becomes):
    # capacity 8, one env: the step written at t sits in row t % 8
    buf = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, eps=1e-9, seed=0)
    for t in range(7):
        _add1(buf, t)
    row = 3
    b = buf.sample(256)
    assert row in index_rows(b.indices)  # handed out by sample for the transition of step 3
    # steps 7..10 overwrite rows 7, 0, 1, 2; with "terminal row", step 10 ends the episode and
    # its final observation takes row 3, else row 3 is the open row holding obs 11
    for t in range(7, 11):
        _add1(buf, t, term=becomes == "terminal row" and t == 10)
    assert not buf.is_transition(np.array([row]))[0]
    before = buf.priorities(np.arange(8)).copy()
    assert buf.update_priorities(np.array([row]), np.array([9.0])) == 1
    np.testing.assert_array_equal(buf.priorities(np.arange(8)), before)
    # adds go on (a new episode after the terminal row) until one writes a transition into row 3
    # and hands it out: from then on the index names that transition
    t = 11 if becomes == "open row" else 100
    for _ in range(9):
        res = _add1(buf, t)
        t += 1
        if index_rows(res.indices)[0] == row:
            break
        assert buf.update_priorities(np.array([row]), np.array([9.0])) == 1
    assert index_rows(res.indices).tolist() == [row]
    assert buf.update_priorities(np.array([row]), np.array([9.0])) == 0
    np.testing.assert_allclose(buf.priorities(np.array([row])), 9.0 + 1e-9, rtol=1e-12)


def test_huge_priorities_that_overflow_the_tree_total_are_rejected_or_sampled_correctly():
    buf = rlcore.PrioritizedReplayBuffer(16, alpha=1.0, eps=1e-6, seed=0)
    for t in range(6):
        buf.add(np.array([t], F32), np.zeros(1, F32), 1.0, False, False, np.array([t + 1], F32))
    try:
        buf.update_priorities(np.array([0, 1]), np.array([1e308, 1e308]))
    except InvalidValueError:
        return
    idx = index_rows(buf.sample(64).indices)
    assert set(idx.tolist()) <= {0, 1}, idx


MAX_P = 1e280  # PrioritizedReplayBuffer.MAX_PRIORITY, the documented bound


def test_huge_priority_is_refused_so_later_adds_cannot_push_the_total_to_inf():
    # the sequence: alpha = 1, one update of 1e308, then three adds at the running max
    buf = rlcore.PrioritizedReplayBuffer(8, alpha=1.0, eps=1e-6, seed=0)
    for t in range(4):
        _add1(buf, t)
    before = _prio_state(buf)
    with pytest.raises(InvalidValueError, match="largest storable priority"):
        buf.update_priorities(np.array([1]), np.array([1e308]))
    _assert_prio_unchanged(buf, before)
    for t in range(4, 7):
        _add1(buf, t)
    total, pmin, pmax = buf.priority_stats()
    assert np.isfinite(total) and pmax == 1.0
    b = buf.sample(8)
    assert len(set(b.indices.tolist())) > 1
    assert np.all(np.isfinite(b.weights)) and np.all((b.weights > 0) & (b.weights <= 1))
    assert buf.update_priorities(b.indices, np.full(8, 2.0)) == 0


def test_every_row_at_the_priority_bound_keeps_the_total_finite():
    assert rlcore.PrioritizedReplayBuffer.MAX_PRIORITY == MAX_P == rlcore._core.MAX_PRIORITY
    buf = rlcore.PrioritizedReplayBuffer(64, num_envs=2, alpha=1.0, eps=1e-6, seed=0)
    for t in range(10):
        buf.add(
            np.full((2, 1), t, F32),
            np.zeros((2, 1), F32),
            np.ones(2),
            np.zeros(2, bool),
            np.zeros(2, bool),
            np.full((2, 1), t + 1, F32),
        )
    rows = _transitions(buf)
    before = _prio_state(buf)
    with pytest.raises(InvalidValueError):
        buf.update_priorities(rows[:1], np.array([np.nextafter(MAX_P, np.inf)]))
    _assert_prio_unchanged(buf, before)
    assert buf.update_priorities(rows, np.full(rows.size, MAX_P)) == 0
    for t in range(10, 60):  # wrap: every new row gets the running max, the bound itself
        buf.add(
            np.full((2, 1), t, F32),
            np.zeros((2, 1), F32),
            np.ones(2),
            np.zeros(2, bool),
            np.zeros(2, bool),
            np.full((2, 1), t + 1, F32),
        )
    total, pmin, pmax = buf.priority_stats()
    assert pmin == pmax == MAX_P
    assert np.isfinite(total) and total == pytest.approx(len(buf) * MAX_P, rel=1e-12)
    b = buf.sample(64)
    np.testing.assert_array_equal(b.weights, 1.0)


def _weights_reference(buf, sampled, beta):
    """per_weights in float32, with the documented floor 2**-126 (float32's smallest normal)."""
    w = per_weights(buf.priorities(np.arange(buf.capacity)), sampled, beta).astype(F32)
    return np.maximum(w, np.finfo(F32).tiny)


@pytest.mark.parametrize("beta", [0.001, 0.4, 1.0])
def test_weights_are_positive_and_finite_for_priorities_hundreds_of_decades_apart(beta):
    # alpha = 2, eps = 1e-160: a zero TD error stores 1e-320 (subnormal), 1e139 stores 1e278;
    # their ratio 1e598 overflows float64
    buf = rlcore.PrioritizedReplayBuffer(16, alpha=2.0, beta=beta, eps=1e-160, seed=0)
    for t in range(8):
        _add1(buf, t)
    rows = _transitions(buf)
    assert buf.update_priorities(rows, np.where(np.arange(rows.size) % 2 == 0, 0.0, 1e139)) == 0
    leaves = buf.priorities(rows)
    assert leaves.min() < 1e-300 and leaves.max() > 1e270
    for _ in range(5):
        b = buf.sample(64)
        assert np.all(np.isfinite(b.weights)) and np.all((b.weights > 0) & (b.weights <= 1))
        np.testing.assert_allclose(
            b.weights, _weights_reference(buf, buf.priorities(b.indices), beta), rtol=1e-5
        )
    # the subnormal rows are drawn too (each has a probability of ~1e-598, so none is expected)
    assert set(index_rows(buf.sample(256).indices).tolist()) <= set(rows[1::2].tolist())


@pytest.mark.parametrize(
    "alpha,eps",
    [(2.0, 1e-200), (1.0, 1e300), (2.0**63, 1e-6), (0.5, 1e-320)],
    ids=["underflows-to-0", "above-bound", "huge-alpha", "subnormal-ok"],
)
def test_eps_whose_smallest_priority_underflows_or_exceeds_the_bound_raises_invalid_value(alpha, eps):
    with np.errstate(over="ignore", under="ignore"):
        floor = np.float64(eps) ** alpha
    if 0 < floor <= MAX_P:
        buf = rlcore.PrioritizedReplayBuffer(8, alpha=alpha, eps=eps, seed=0)
        _add1(buf, 0)
        assert buf.update_priorities(np.array([0]), np.array([0.0])) == 0
        assert buf.priorities(np.array([0]))[0] == floor
        return
    with pytest.raises(InvalidValueError, match="eps"):
        rlcore.PrioritizedReplayBuffer(8, alpha=alpha, eps=eps, seed=0)


EXTREME = [
    0.0,
    5e-324,
    1e-310,
    2.2250738585072014e-308,
    1e-300,
    1e-12,
    0.5,
    3.0,
    1e12,
    1e139,
    1e280,
    1e300,
    1e308,
]


@settings(max_examples=150, deadline=None)
@given(
    alpha=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    eps=st.sampled_from([1e-6, 1e-140, 1e-300]),
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.sampled_from(["step", "step", "term", "trunc", "mask"])),
            st.tuples(
                st.just("update"),
                st.lists(st.tuples(st.integers(0, 15), st.sampled_from(EXTREME)), min_size=1, max_size=6),
            ),
            st.tuples(st.just("sample"), st.integers(1, 40)),
            st.tuples(st.just("clear"), st.none()),
        ),
        max_size=60,
    ),
)
def test_random_adds_updates_clears_and_samples_keep_priorities_finite_and_weights_in_unit_interval(
    alpha, eps, ops
):
    assume(0 < np.float64(eps) ** alpha <= MAX_P)
    buf = rlcore.PrioritizedReplayBuffer(16, num_envs=2, alpha=alpha, beta=0.6, eps=eps, seed=0)
    stream = Stream(buf, RefBuffer(16, 2), 2, seed=0)
    for op, arg in ops:
        if op == "add":
            stream.step([arg, "step"])
        elif op == "clear":
            buf.clear()
            stream.ref, stream.last_next = RefBuffer(16, 2), [None, None]
        elif op == "update":
            idx = np.array([i for i, _ in arg])
            p = np.array([v for _, v in arg])
            before = _prio_state(buf)
            with np.errstate(over="ignore"):
                too_big = np.any((p + eps) ** alpha > MAX_P)
            if too_big:
                with pytest.raises(InvalidValueError):
                    buf.update_priorities(idx, p)
                _assert_prio_unchanged(buf, before)
            else:
                skipped = buf.update_priorities(idx, p)
                assert skipped == int((~buf.is_transition(idx)).sum())
        elif len(buf):
            b = buf.sample(arg)
            assert buf.is_transition(b.indices).all(), "sampled a row that holds no transition"
            assert np.all(buf.priorities(b.indices) > 0), "sampled a zero-priority row"
            assert np.all(np.isfinite(b.weights)) and np.all((b.weights > 0) & (b.weights <= 1))
            np.testing.assert_allclose(
                b.weights, _weights_reference(buf, buf.priorities(b.indices), 0.6), rtol=1e-5
            )
        total, pmin, pmax = buf.priority_stats()
        leaves = buf.priorities(np.arange(16))
        assert np.isfinite(total) and 0 < pmax <= MAX_P
        assert np.all(leaves <= MAX_P) and total == pytest.approx(leaves.sum(), rel=1e-9)


def test_load_state_dict_with_a_priority_above_the_bound_raises_save_file_error():
    buf, _, _ = _per(capacity=32, num_envs=2, steps=6)
    state = buf.state_dict()
    pr = state["arrays"]["per.priorities"]
    state["arrays"]["per.priorities"] = np.where(pr > 0, 1e300, 0.0)
    state["arrays"]["per.max_p"] = np.full_like(state["arrays"]["per.max_p"], 1e300)
    dst = rlcore.PrioritizedReplayBuffer(32, num_envs=2, seed=0)
    with pytest.raises(SaveFileError, match="largest storable priority"):
        dst.load_state_dict(state)
    assert len(dst) == 0


# ---------------------------------------------------------------------------------------------
# with n-step and HER


@pytest.mark.parametrize("n_step", [1, 3])
def test_prioritized_nstep_samples_match_reference(n_step):
    buf, ref, stream = _per(capacity=30, num_envs=3, steps=25, done_every=6)
    rng = np.random.default_rng(0)
    for _k in range(15):
        stream.step(list(rng.choice(["step", "step", "term", "trunc", "cut"], size=3)))
        rows = _transitions(buf)
        buf.update_priorities(rows, rng.exponential(size=len(rows)))
    check_against_reference(buf, ref, n_step, 0.9)
    b = buf.sample(64, n_step=n_step, gamma=0.9)
    np.testing.assert_allclose(
        b.weights,
        per_weights(buf.priorities(np.arange(buf.capacity)), buf.priorities(b.indices), 0.4),
        rtol=1e-5,
    )


def test_prioritized_her_follows_priorities_and_relabels():
    buf = _her_per()
    rows = _transitions(buf)
    prio = np.zeros(buf.capacity)
    prio[rows[: len(rows) // 2]] = 1e-3
    prio[rows[len(rows) // 2 :]] = 1.0
    buf.update_priorities(rows, prio[rows])
    leaves = buf.priorities(np.arange(buf.capacity))
    counts = np.zeros(buf.capacity)
    relabeled = 0
    n = 0
    for _ in range(100):
        b = buf.sample(128)
        np.add.at(counts, index_rows(b.indices), 1)
        relabeled += int((np.abs(b.obs["desired_goal"]).sum(axis=1) > 0).sum())
        n += 128
        assert b.weights is not None and np.all(b.weights <= 1.0 + 1e-6)
    stat = chi2_stat(counts[rows], n * leaves[rows] / leaves.sum())
    assert stat < chi2_critical(len(rows) - 1)
    # about k/(k+1) = 80 % relabeled (stored desired goals are all zero)
    assert abs(relabeled / n - 0.8) < 5 * np.sqrt(0.8 * 0.2 / n)


def test_linear_schedule_is_linear_then_constant():
    sched = rlcore.LinearSchedule(0.4, 1.0, 10)
    assert [sched(s) for s in (-3, 0, 5, 10, 11, 10_000)] == pytest.approx([0.4, 0.4, 0.7, 1.0, 1.0, 1.0])
    down = rlcore.LinearSchedule(1.0, 0.0, 4)
    assert [down(s) for s in range(6)] == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0, 0.0])


def test_clear_resets_priorities_and_running_max():
    buf, _, stream = _per(capacity=32, num_envs=2, steps=6, alpha=1.0, eps=1e-9)
    rows = _transitions(buf)
    buf.update_priorities(rows, np.full(len(rows), 50.0))
    buf.clear()
    np.testing.assert_array_equal(buf.priorities(np.arange(buf.capacity)), 0.0)
    stream.last_next = [None, None]
    stream.ref = RefBuffer(32, 2)
    stream.step(["step", "step"])
    np.testing.assert_allclose(buf.priorities(_transitions(buf)), 1.0)
    b = buf.sample(16)
    assert buf.is_transition(b.indices).all()
    np.testing.assert_array_equal(b.weights, 1.0)


def test_priority_stats_match_the_stored_priorities():
    buf = rlcore.PrioritizedReplayBuffer(64, num_envs=2, alpha=0.7, seed=0)
    assert buf.priority_stats() == (0.0, float("inf"), 1.0)
    obs = np.zeros((2, 3), np.float32)
    for t in range(20):
        buf.add(
            obs + t,
            np.zeros((2, 1), np.float32),
            np.ones(2),
            np.zeros(2, bool),
            np.full(2, t % 5 == 4),
            obs + t + 1,
        )
    batch = buf.sample(16)
    buf.update_priorities(batch.indices, np.linspace(0.1, 3.0, 16))
    prios = buf.priorities(np.arange(buf.capacity))
    total, pmin, pmax = buf.priority_stats()
    assert total == pytest.approx(prios.sum(), rel=1e-12)
    assert pmin == prios[prios > 0].min()
    assert pmax == pytest.approx(max(1.0, (3.0 + buf.eps) ** 0.7))
    assert rlcore.ReplayBuffer(10).priority_stats() is None
