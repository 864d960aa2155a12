"""rlcore.distributed's sharded buffer on a loopback Ray (2 CPUs) samples like one local buffer:
uniform frequencies and n-step fields, HER goal sources, PER frequencies and weights, refused priority
updates that change no shard, and sequences (uniform and prioritized starts across shards). The
trainer, its collectors, checkpoints and shutdown: test_distributed_trainer.py.

One Ray session serves the whole module (starting Ray costs seconds; tests/local_ray.py).
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import numpy as np
import pytest
import rlcore

ray = pytest.importorskip("ray")

from local_ray import local_ray  # noqa: E402
from rlcore.distributed import (  # noqa: E402
    ShardedReplayBuffer,
)

F32 = np.float32
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module")
def ray_session():
    yield from local_ray(sys.modules[__name__])


def _fill(bufs, num_envs: int, steps: int, seed: int = 0) -> None:
    """The same episodes (random lengths, terminated or truncated) into every buffer. ``obs[0]`` is
    a unique id per stored observation, ``obs[1]`` its env."""
    rng = np.random.default_rng(seed)
    ids = iter(range(1, 10**9))
    obs = np.array([[next(ids), e, 0] for e in range(num_envs)], F32)
    for _ in range(steps):
        nxt = np.array([[next(ids), e, 0] for e in range(num_envs)], F32)
        done = rng.random(num_envs) < 0.15
        term = done & (rng.random(num_envs) < 0.5)
        trunc = done & ~term
        rew = rng.normal(size=num_envs).astype(F32)
        act = rng.normal(size=(num_envs, 1)).astype(F32)
        for b in bufs:
            b.add(obs, act, rew, term, trunc, nxt)
        fresh = np.array([[next(ids), e, 0] for e in range(num_envs)], F32)
        obs = np.where(done[:, None], fresh, nxt)


def _chi2_ok(counts: np.ndarray, probs: np.ndarray) -> bool:
    """Pearson chi-square below the 0.999 quantile (Wilson-Hilferty approximation)."""
    n = counts.sum()
    expected = n * probs
    stat = float(((counts - expected) ** 2 / expected).sum())
    k = len(counts) - 1
    z = 3.09
    crit = k * (1 - 2 / (9 * k) + z * np.sqrt(2 / (9 * k))) ** 3
    return stat < crit


def test_import_needs_no_ray(monkeypatch):
    out = subprocess.run(
        [sys.executable, "-c", "import rlcore, rlcore.distributed, sys; print('ray' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[ray\]'"):
        ShardedReplayBuffer(functools.partial(rlcore.ReplayBuffer, 100), num_shards=1)


def test_shard_priority_stats_are_the_cores_o1_stats_without_a_scan_of_its_rows(monkeypatch):
    """A PER shard's (transitions, mass, smallest priority) after adds and updates are the core's
    priority_stats: the sum and the minimum of its row priorities, got without reading them."""
    from rlcore.distributed.shard import BufferShard

    shard = BufferShard(functools.partial(rlcore.PrioritizedReplayBuffer, 64), num_envs=2, seed=0)
    buf = shard.buffer
    rng = np.random.default_rng(0)
    assert shard.stats() == (0, 0.0, float("inf"))

    def no_scan(*args, **kwargs):
        raise AssertionError("the shard read its rows' priorities")

    all_rows = np.arange(buf.capacity)
    for step in range(3):
        t, n = 5, 2
        obs = rng.standard_normal((t, n, 3)).astype(F32)
        done = np.zeros((t, n), bool)
        done[-1] = True
        with monkeypatch.context() as m:
            m.setattr(type(buf), "priorities", no_scan)
            shard.add_chunk(0, obs, np.zeros((t, n, 1), F32), np.ones((t, n), F32), done, done, obs + 1,
                            np.ones((t, n), bool), {})
            idx = buf.sample(8).indices
            shard.update_priorities(idx, rng.uniform(0.1, 5.0, idx.size) * (step + 1))
            n_trans, mass, pmin = shard.stats()
        p = buf.priorities(all_rows)
        assert n_trans == len(buf)
        assert mass == pytest.approx(p.sum(), rel=1e-12)
        assert pmin == p[p > 0].min()


def test_uniform_matches_local(ray_session):
    n_envs = 3
    local = rlcore.ReplayBuffer(3 * 400, num_envs=n_envs, seed=0)
    sharded = ShardedReplayBuffer(
        functools.partial(rlcore.ReplayBuffer, 400), num_shards=3, num_envs=n_envs, chunk_rows=32, seed=1
    )
    _fill([local, sharded], n_envs, 120)
    assert len(sharded) == len(local) == 3 * 120
    sizes = sharded.shard_sizes()
    assert sum(sizes) == len(local) and min(sizes) > 0  # episodes spread over every shard

    # n-step fields of each transition (keyed by its obs id) are exactly the local buffer's
    ref = {}
    for _ in range(40):
        b = local.sample(256, n_step=3, gamma=0.9)
        for i, r, d, on in zip(b.obs[:, 0], b.rew, b.discount, b.obs_next[:, 0], strict=True):
            ref[int(i)] = (r, d, on)
    assert len(ref) == len(local)
    counts: dict[int, int] = {}
    for _ in range(30):
        b = sharded.sample(512, n_step=3, gamma=0.9)
        assert b.indices.dtype == np.int64 and b.obs.shape == (512, 3)
        for i, r, d, on in zip(b.obs[:, 0], b.rew, b.discount, b.obs_next[:, 0], strict=True):
            assert ref[int(i)] == (r, d, on)
            counts[int(i)] = counts.get(int(i), 0) + 1
    # uniform over all stored transitions, across shards
    c = np.array([counts.get(i, 0) for i in ref], float)
    assert _chi2_ok(c, np.full(len(c), 1 / len(c)))
    # prefetched batches, several per request, are the same kind of batches
    sampler = sharded.prefetch(64, n_step=3, gamma=0.9, batches_per_request=3)
    for _ in range(7):
        b = next(sampler)
        assert b.obs.shape == (64, 3)
        for i, r, d, on in zip(b.obs[:, 0], b.rew, b.discount, b.obs_next[:, 0], strict=True):
            assert ref[int(i)] == (r, d, on)
    with pytest.raises(rlcore.errors.ApiUsageError):
        sharded.sample_async(8, num_batches=2).result()
    sharded.clear()
    assert len(sharded) == 0
    with pytest.raises(rlcore.errors.EmptyBufferError):
        sharded.sample(8)
    sharded.close()


def test_her_goal_sources_within_episode(ray_session):
    n_envs = 2
    k = 4

    def make(capacity, **kw):
        return rlcore.HERReplayBuffer(capacity, strategy="future", future_k=k, distance_threshold=0.01, **kw)

    local = make(2 * 600, num_envs=n_envs, seed=0)
    sharded = ShardedReplayBuffer(
        functools.partial(make, 600), num_shards=2, num_envs=n_envs, chunk_rows=16, seed=2
    )
    # achieved_goal = (episode id, step, 0): a relabeled goal names the episode and step it came from
    rng = np.random.default_rng(3)
    ep = np.arange(n_envs)
    t = np.zeros(n_envs, int)
    next_ep = n_envs
    lengths: dict[int, int] = {}
    cur = {
        "observation": rng.normal(size=(n_envs, 2)).astype(F32),
        "achieved_goal": np.stack([ep, t, np.zeros(n_envs)], 1).astype(F32),
        "desired_goal": np.full((n_envs, 3), -1.0, F32),
    }
    for _ in range(300):
        done = rng.random(n_envs) < 0.1
        nxt = {
            "observation": rng.normal(size=(n_envs, 2)).astype(F32),
            "achieved_goal": np.stack([ep, t + 1, np.zeros(n_envs)], 1).astype(F32),
            "desired_goal": np.full((n_envs, 3), -1.0, F32),
        }
        for b in (local, sharded):
            b.add(cur, np.zeros((n_envs, 1), F32), np.zeros(n_envs, F32), np.zeros(n_envs, bool), done, nxt)
        t = t + 1
        for e in np.flatnonzero(done):
            lengths[int(ep[e])] = int(t[e])
            ep[e] = next_ep
            next_ep += 1
            t[e] = 0
        fresh = {
            "observation": rng.normal(size=(n_envs, 2)).astype(F32),
            "achieved_goal": np.stack([ep, t, np.zeros(n_envs)], 1).astype(F32),
            "desired_goal": np.full((n_envs, 3), -1.0, F32),
        }
        cur = {key: np.where(done[:, None], fresh[key], nxt[key]) for key in nxt}
    for e in range(n_envs):  # running episodes: goals come from their stored part
        lengths[int(ep[e])] = int(t[e])
    assert len(sharded) == len(local) == 600

    def relabel_stats(buf):
        offsets, relabeled, n = [], 0, 0
        for _ in range(20):
            b = buf.sample(512)
            ag, g = b.obs["achieved_goal"], b.obs["desired_goal"]
            assert (b.obs_next["desired_goal"] == g).all()
            rel = g[:, 0] >= 0
            # a relabeled goal comes from the same episode, from a later step t' + 1 in [t + 1, e]
            assert (g[rel, 0] == ag[rel, 0]).all()
            step, goal_step = ag[rel, 1], g[rel, 1]
            assert (goal_step >= step + 1).all()
            assert all(gs <= lengths[int(e)] for e, gs in zip(g[rel, 0], goal_step, strict=True))
            offsets.append((goal_step - step) / np.array([lengths[int(e)] for e in g[rel, 0]]))
            relabeled += int(rel.sum())
            n += len(rel)
        return relabeled / n, np.concatenate(offsets)

    frac_local, off_local = relabel_stats(local)
    frac_sharded, off_sharded = relabel_stats(sharded)
    assert abs(frac_sharded - k / (k + 1)) < 0.02
    assert abs(frac_sharded - frac_local) < 0.03
    # same distribution of relabel offsets (relative to episode length) as the local buffer
    assert abs(off_sharded.mean() - off_local.mean()) < 0.03
    sharded.close()


def _per_pair(n_envs: int, alpha: float, beta: float):
    """A local PER buffer and a 2-shard one holding the same 60 vector steps."""
    local = rlcore.PrioritizedReplayBuffer(2 * 300, num_envs=n_envs, alpha=alpha, beta=beta, seed=0)
    sharded = ShardedReplayBuffer(
        functools.partial(rlcore.PrioritizedReplayBuffer, 300, alpha=alpha, beta=beta),
        num_shards=2,
        num_envs=n_envs,
        chunk_rows=16,
        seed=4,
    )
    _fill([local, sharded], n_envs, 60, seed=5)
    return local, sharded


def test_per_frequencies_and_weights(ray_session):
    n_envs, alpha, beta = 2, 0.7, 0.5
    local, sharded = _per_pair(n_envs, alpha, beta)
    assert len(sharded) == len(local) == 120

    # one priority per transition (keyed by obs id), set in both buffers
    rng = np.random.default_rng(6)
    prio: dict[int, float] = {}
    b = local.sample(4000)
    for i in np.unique(b.obs[:, 0]):
        prio[int(i)] = float(rng.uniform(0.05, 3.0))
    assert len(prio) == 120
    ids_l = local.sample(4000)
    local.update_priorities(ids_l.indices, [prio[int(i)] for i in ids_l.obs[:, 0]])
    seen: dict[int, int] = {}
    while len(seen) < 120:
        s = sharded.sample(512)
        for i, gi in zip(s.obs[:, 0], s.indices, strict=True):
            seen[int(i)] = int(gi)
    gidx = np.array(list(seen.values()))
    sharded.update_priorities(gidx, [prio[i] for i in seen], wait=True)

    p = {i: (v + 1e-6) ** alpha for i, v in prio.items()}
    total, pmin = sum(p.values()), min(p.values())
    counts: dict[int, int] = {}
    for _ in range(40):
        s = sharded.sample(500)
        for i, w in zip(s.obs[:, 0], s.weights, strict=True):
            i = int(i)
            counts[i] = counts.get(i, 0) + 1
            # the weight is the one-buffer weight (p_i / min_j p_j)^-beta
            assert w == pytest.approx((p[i] / pmin) ** -beta, rel=1e-5)
    ids = sorted(p)
    c = np.array([counts.get(i, 0) for i in ids], float)
    assert _chi2_ok(c, np.array([p[i] / total for i in ids]))
    # and the local buffer gives the same weights
    lb = local.sample(500)
    for i, w in zip(lb.obs[:, 0], lb.weights, strict=True):
        assert w == pytest.approx((p[int(i)] / pmin) ** -beta, rel=1e-5)
    # beta reaches every shard
    sharded.beta = 1.0
    s = sharded.sample(100)
    assert s.weights == pytest.approx([(p[int(i)] / pmin) ** -1.0 for i in s.obs[:, 0]], rel=1e-5)
    # state round trip keeps priorities
    state = sharded.state_dict()
    sharded.update_priorities(gidx, np.ones(len(gidx)), wait=True)
    sharded.load_state_dict(state)
    s = sharded.sample(100)
    assert s.weights == pytest.approx([(p[int(i)] / pmin) ** -1.0 for i in s.obs[:, 0]], rel=1e-5)
    sharded.close()


def test_a_refused_priority_update_changes_no_shard(ray_session):
    """The sharded updates are all or nothing, as the local buffer's: a bad priority (or TD error)
    in one shard's part is refused before any shard gets its part, at the call itself (not only
    with wait=True), and every shard keeps its priorities. Until 0.2 each shard got its part
    and only the shard with the bad value refused it, silently unless wait=True."""
    local, sharded = _per_pair(2, 0.7, 0.5)
    assert local.capacity == sharded.capacity  # so the same arguments are equally (in)valid
    b = sharded.sample(256)
    shard_of = sharded.shard_of(b.indices)[0]
    # one sample from each shard, the bad value in the part of the shard listed last
    i0, i1 = int(np.flatnonzero(shard_of == 0)[0]), int(np.flatnonzero(shard_of == 1)[0])
    idx = np.array([b.indices[i0], b.indices[i1]])
    sharded.update_priorities(idx, [2.0, 3.0], wait=True)

    def masses():
        return [m for _, m, _ in ray.get([s.stats.remote() for s in sharded.shards])]

    before = masses()
    for bad in (np.nan, -1.0, np.inf):
        with pytest.raises(rlcore.errors.InvalidValueError, match="priority"):
            sharded.update_priorities(idx, [5.0, bad])  # wait=False: refused at the call
        with pytest.raises(rlcore.errors.InvalidValueError, match="priority"):
            sharded.update_priorities(idx[::-1], [bad, 5.0], wait=True)
    # sequences: the second sequence (shard 1) has no valid step, or a non-finite TD error
    td, mask = np.ones((2, 3)), np.ones((2, 3), bool)
    mask[1] = False
    with pytest.raises(rlcore.errors.InvalidValueError, match="no valid step"):
        sharded.update_sequence_priorities(idx, td, mask=mask)
    td[1, 2] = np.nan
    with pytest.raises(rlcore.errors.InvalidValueError, match="finite"):
        sharded.update_sequence_priorities(idx, td)
    with pytest.raises(rlcore.errors.InvalidValueError, match="eta"):
        sharded.update_sequence_priorities(idx, np.ones((2, 3)), eta=1.5)
    with pytest.raises(rlcore.errors.ShapeError):
        sharded.update_sequence_priorities(idx, np.ones((2, 3)), mask=np.ones((2, 2), bool))
    with pytest.raises(rlcore.errors.DTypeError):
        sharded.update_sequence_priorities(idx, np.ones((2, 3), bool))
    # converted and refused as the local buffer does, with its exception and message
    i = int(idx[0])
    for args, kwargs in [
        (([i + 0.9], [5.0]), {}),  # float indices
        (([True], [5.0]), {}),
        (([str(i)], [5.0]), {}),
        (([i], [[5.0]]), {}),  # 2-d priorities
        (([i], [True]), {}),
        (([i], ["5"]), {}),
        (([i], [None]), {}),
        (([i, i], [5.0]), {}),
        (([i, 600], [5.0, 5.0]), {}),
        (([i, -1], [np.nan, 5.0]), {}),  # the first bad position is reported
    ]:
        with pytest.raises(rlcore.errors.RlcoreError) as got_local:
            local.update_priorities(*args, **kwargs)
        with pytest.raises(type(got_local.value), match=re.escape(str(got_local.value))):
            sharded.update_priorities(*args, **kwargs)
    # an empty update (an empty list is float64 to NumPy) is nothing to do, on both
    assert local.update_priorities([], []) == 0 and sharded.update_priorities([], [], wait=True) == 0
    for td, kwargs in [
        (np.ones((2, 3)), {"eta": "0.5"}),
        (np.ones((2, 3)), {"eta": True}),
        (np.ones((2, 3)), {"eta": None}),
        (np.ones((2, 3)), {"mask": np.ones((2, 3))}),  # a float mask
        (np.ones((1, 3)), {}),
        (np.ones(2), {}),
    ]:
        with pytest.raises(rlcore.errors.RlcoreError) as got_local:
            local.update_sequence_priorities(idx, td, **kwargs)
        with pytest.raises(type(got_local.value), match=re.escape(str(got_local.value))):
            sharded.update_sequence_priorities(idx, td, **kwargs)
    ray.get([s.len.remote() for s in sharded.shards])  # every queued call has run
    assert masses() == before
    # a valid sequence update still lands: p = eta * max + (1 - eta) * mean over the valid steps
    td = np.array([[1.0, -3.0, 2.0], [4.0, 0.0, 0.0]])
    mask = np.array([[True, True, False], [True, False, False]])
    assert sharded.update_sequence_priorities(idx, td, mask=mask, eta=0.5, wait=True) == 0
    p0, p1 = (0.5 * 3 + 0.5 * 2 + 1e-6) ** 0.7, (4.0 + 1e-6) ** 0.7
    after = masses()
    assert after[0] - before[0] == pytest.approx(p0 - (2.0 + 1e-6) ** 0.7, rel=1e-9)
    assert after[1] - before[1] == pytest.approx(p1 - (3.0 + 1e-6) ** 0.7, rel=1e-9)
    sharded.close()


def test_uniform_shards_refuse_priority_updates_at_the_call(ray_session):
    sharded = ShardedReplayBuffer(
        functools.partial(rlcore.ReplayBuffer, 300), num_shards=2, num_envs=2, chunk_rows=16, seed=4
    )
    _fill([sharded], 2, 20, seed=5)
    idx = sharded.sample(4).indices
    with pytest.raises(rlcore.errors.ApiUsageError, match="prioritized"):
        sharded.update_priorities(idx, np.ones(4))
    with pytest.raises(rlcore.errors.ApiUsageError, match="prioritized"):
        sharded.update_priorities(idx, np.ones(3))  # the usage error first, as a local buffer's
    with pytest.raises(rlcore.errors.ApiUsageError, match="prioritized"):
        sharded.update_sequence_priorities(idx, np.ones((4, 2)))
    sharded.close()


# ---------------------------------------------------------------------------------------------
# sequences


def _sequences_by_start(batches) -> dict[int, tuple]:
    """Each sequence keyed by the obs id of its first step: (obs ids, mask, rew, is_first)."""
    out = {}
    for b in batches:
        for k in range(b.batch_size):
            out[int(b.obs[k, 0, 0])] = (
                b.obs[k, :, 0].tolist(), b.mask[k].tolist(), b.rew[k].tolist(), b.is_first[k].tolist()
            )
    return out


def test_sharded_sequences_are_the_local_buffers_with_uniform_starts(ray_session):
    n_envs, seq_len, burn_in = 3, 4, 2
    local = rlcore.ReplayBuffer(3 * 400, num_envs=n_envs, seed=0)
    sharded = ShardedReplayBuffer(
        functools.partial(rlcore.ReplayBuffer, 400), num_shards=3, num_envs=n_envs, chunk_rows=32, seed=1
    )
    _fill([local, sharded], n_envs, 120)
    count, mass = local.sequence_start_mass(seq_len, burn_in=burn_in)
    assert count == mass > 0
    ref = _sequences_by_start(local.sample_sequences(256, seq_len, burn_in=burn_in, n_step=2, gamma=0.9)
                              for _ in range(60))
    assert len(ref) == count  # every eligible start seen locally
    counts: dict[int, int] = {}
    for _ in range(30):
        b = sharded.sample_sequences(256, seq_len, burn_in=burn_in, n_step=2, gamma=0.9)
        assert b.obs.shape == (256, 6, 3) and b.start_indices.dtype == np.int64
        # global indices: the start row is the first step's row, padding stays -1
        np.testing.assert_array_equal(b.indices[:, 0], b.start_indices)
        assert (b.indices[~b.mask] == -1).all() and (b.indices[b.mask] >= 0).all()
        assert b.start_indices.max() < sharded.capacity
        got = _sequences_by_start([b])
        for start, seq in got.items():
            assert ref[start] == seq
        for k in range(256):
            start = int(b.obs[k, 0, 0])
            counts[start] = counts.get(start, 0) + 1
    # uniform over the eligible starts of all shards together
    c = np.array([counts.get(i, 0) for i in ref], float)
    assert _chi2_ok(c, np.full(len(c), 1 / len(c)))
    with pytest.raises(rlcore.errors.InvalidValueError):
        sharded.sample_sequences(8, 0)
    with pytest.raises(rlcore.errors.EmptyBufferError):
        sharded.sample_sequences(8, 200, pad=False)
    sharded.close()


def test_shards_are_weighted_by_their_eligible_starts_not_their_transitions(ray_session):
    """Episodes of 40 and 2 steps alternate so that round-robin routing sends every long episode
    to shard 0 and every short one to shard 1: shard 1 holds 1/21 of the transitions but only
    1/38 of the starts of 4-step sequences (a short episode is one padded start)."""
    sharded = ShardedReplayBuffer(
        functools.partial(rlcore.ReplayBuffer, 2_000), num_shards=2, num_envs=2, chunk_rows=32, seed=3
    )
    ids = iter(range(1, 10**9))
    lengths = [[40, 2] * 5, [2, 40] * 5]  # env 0: long first (shard 0); env 1: short first (shard 1)
    for e, lens in enumerate(lengths):
        for n in lens:
            obs = np.array([[next(ids), e, 0]], F32)
            for t in range(n):
                nxt = np.array([[next(ids), e, 0]], F32)
                mask = np.array([e == 0, e == 1])
                two = lambda x, m=mask: np.repeat(x, 2, axis=0)  # noqa: E731 - both envs' rows, one masked
                sharded.add(two(obs), np.zeros((2, 1), F32), np.zeros(2, F32), np.full(2, t == n - 1),
                            np.zeros(2, bool), two(nxt), mask=mask)
                obs = nxt
    sizes = sharded.shard_sizes()
    assert sizes == [400, 20]
    short = 0
    draws = 40 * 256
    for _ in range(40):
        b = sharded.sample_sequences(256, 4)
        short += int((b.start_indices >= sharded.shard_capacity).sum())
    # 10 padded starts of 370 + 10 in all; by transitions it would be 20 / 420
    expected = draws * 10 / 380
    assert abs(short - expected) < 4 * np.sqrt(expected), (short, expected, draws * 20 / 420)
    sharded.close()


def test_sharded_prioritized_sequences_have_the_local_probabilities_and_weights(ray_session):
    n_envs, alpha, beta, seq_len = 2, 0.7, 0.5, 3
    local, sharded = _per_pair(n_envs, alpha, beta)
    # the same TD error per sequence start in both buffers (all steps valid: p = |delta|)
    rng = np.random.default_rng(6)
    starts = {}
    for buf in (local, sharded):
        for _ in range(30):
            b = buf.sample_sequences(64, seq_len)
            for k in range(64):
                starts.setdefault(int(b.obs[k, 0, 0]), float(rng.uniform(0.05, 3.0)))
    local_rows, sharded_rows = {}, {}
    for buf, rows in ((local, local_rows), (sharded, sharded_rows)):
        while len(rows) < len(starts):
            b = buf.sample_sequences(256, seq_len)
            for k in range(256):
                rows[int(b.obs[k, 0, 0])] = int(b.start_indices[k])
        ids = sorted(rows)
        td = np.array([[starts[i]] * seq_len for i in ids])
        kwargs = {"wait": True} if buf is sharded else {}
        buf.update_sequence_priorities(np.array([rows[i] for i in ids]), td, mask=np.ones_like(td, bool), **kwargs)
    count, mass = local.sequence_start_mass(seq_len)
    assert count == len(starts)
    p = {i: (v + 1e-6) ** alpha for i, v in starts.items()}
    assert mass == pytest.approx(sum(p.values()), rel=1e-9)
    local_w = {}
    for _ in range(10):
        b = local.sample_sequences(256, seq_len)
        for k in range(256):
            local_w[int(b.obs[k, 0, 0])] = float(b.weights[k])
    counts: dict[int, int] = {}
    for _ in range(40):
        b = sharded.sample_sequences(256, seq_len)
        for k in range(256):
            i = int(b.obs[k, 0, 0])
            counts[i] = counts.get(i, 0) + 1
            if i in local_w:  # the one-buffer weight, rescaled to the smallest priority of all shards
                assert b.weights[k] == pytest.approx(local_w[i], rel=1e-5)
    ids = sorted(p)
    c = np.array([counts.get(i, 0) for i in ids], float)
    assert _chi2_ok(c, np.array([p[i] for i in ids]) / sum(p.values()))
    with pytest.raises(rlcore.errors.ShapeError):
        sharded.update_sequence_priorities(np.array([0, 1]), np.ones((3, 2)))
    sharded.close()
