"""rlcore.compat.tianshou against Tianshou 2.0's own buffers: identical streams go into both
(with env subsets, as an async Collector adds them); add's return values, stored steps,
prev/next, unfinished episodes, Tianshou's own n-step return code and PER weights are compared;
then Tianshou's DQN, Collector and trainer run on CartPole-v1 with the rlcore buffer."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

ts = pytest.importorskip("tianshou")
torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402
import rlcore.errors  # noqa: E402
import tianshou.data as tsd  # noqa: E402
from rlcore.compat import tianshou as compat  # noqa: E402
from tianshou.algorithm.algorithm_base import Algorithm  # noqa: E402
from tianshou.data import Batch  # noqa: E402

torch.set_num_threads(1)
F32 = np.float32


def stream(n_envs: int, steps: int, seed: int = 0, subsets: bool = True):
    """Batches for ``add(batch, buffer_ids)``: each vector step a random subset of envs steps.
    Env e, episode k, step t observes ``[e, k, t, 0]``; episodes end by termination or
    truncation at random; ``obs_next`` at an end is the true final observation."""
    rng = np.random.default_rng(seed)
    k = np.zeros(n_envs, int)
    t = np.zeros(n_envs, int)
    for _ in range(steps):
        ids = np.flatnonzero(rng.random(n_envs) < 0.7) if subsets else np.arange(n_envs)
        if len(ids) == 0:
            continue
        obs = np.stack([[e, k[e], t[e], 0] for e in ids]).astype(F32)
        nxt = obs.copy()
        nxt[:, 2] += 1
        end = rng.random(len(ids)) < 0.15
        term = end & (rng.random(len(ids)) < 0.5)
        trunc = end & ~term
        rew = rng.normal(size=len(ids))
        act = rng.integers(0, 3, len(ids))
        yield Batch(obs=obs, act=act, rew=rew, terminated=term, truncated=trunc, obs_next=nxt, info={}), ids
        for j, e in enumerate(ids):
            if end[j]:
                k[e] += 1
                t[e] = 0
            else:
                t[e] += 1


def fill(ours, theirs, n_envs, steps, seed=0, subsets=True):
    """Add the same stream to both; compare add's return values step by step."""
    for batch, ids in stream(n_envs, steps, seed, subsets):
        a = ours.add(batch, buffer_ids=ids)
        b = theirs.add(batch, buffer_ids=ids)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-5)  # episode returns (float32 here)
        np.testing.assert_array_equal(a[2], b[2])  # episode lengths
        np.testing.assert_array_equal(ours[a[0]].obs, theirs[b[0]].obs)  # the written rows
        np.testing.assert_array_equal(ours[a[3]].obs, theirs[b[3]].obs)  # episode start rows


def by_obs(buf, idx):
    return {buf[int(i)].obs.tobytes(): int(i) for i in idx}


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (compat.ReplayBuffer, tsd.ReplayBuffer),
        (compat.VectorReplayBuffer, tsd.VectorReplayBuffer),
        (compat.PrioritizedReplayBuffer, tsd.PrioritizedReplayBuffer),
        (compat.PrioritizedVectorReplayBuffer, tsd.PrioritizedVectorReplayBuffer),
    ],
)
def test_classes_subclass_tianshou_classes(ours, theirs):
    assert issubclass(ours, theirs)


def test_vector_buffer_matches_tianshou_step_by_step():
    ours, theirs = compat.VectorReplayBuffer(4000, 4), tsd.VectorReplayBuffer(4000, 4)
    fill(ours, theirs, 4, 150)
    assert len(ours) == len(theirs)
    # every stored step in time order, env by env
    a, b = ours[:], theirs[:]
    for key in ("obs", "act", "terminated", "truncated", "done", "obs_next"):
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_allclose(a.rew, b.rew, rtol=1e-6)
    # prev / next / unfinished episodes, matched through the unique observations
    mo, mt = by_obs(ours, ours.sample_indices(0)), by_obs(theirs, theirs.sample_indices(0))
    assert mo.keys() == mt.keys()
    keys = list(mo)
    io, it = np.array([mo[k] for k in keys]), np.array([mt[k] for k in keys])
    for step in ("prev", "next"):
        np.testing.assert_array_equal(
            ours[getattr(ours, step)(io)].obs, theirs[getattr(theirs, step)(it)].obs
        )
    uo = sorted(ours[int(i)].obs.tobytes() for i in ours.unfinished_index())
    ut = sorted(theirs[int(i)].obs.tobytes() for i in theirs.unfinished_index())
    assert uo == ut


def test_single_buffer_matches_tianshou():
    ours, theirs = compat.ReplayBuffer(500), tsd.ReplayBuffer(500)
    fill(ours, theirs, 1, 200, subsets=False)
    np.testing.assert_array_equal(ours[:].obs, theirs[:].obs)
    # an unstacked single step without buffer_ids, as Tianshou allows
    step = Batch(
        obs=np.full(4, 9, F32), act=1, rew=1.0, terminated=True, truncated=False, obs_next=np.ones(4, F32)
    )
    a, b = ours.add(step), theirs.add(step)
    assert ours[a[0]].obs.tolist() == theirs[b[0]].obs.tolist() and a[0].shape == b[0].shape == (1,)


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_tianshou_nstep_return_code_gives_the_same_targets(n_step):
    """Tianshou's own ``Algorithm.compute_nstep_return`` (the code DQN/DDPG/SAC use) reads
    next/done/rew/unfinished_index/terminated of the buffer: same targets on both."""
    ours, theirs = compat.VectorReplayBuffer(4000, 3), tsd.VectorReplayBuffer(4000, 3)
    fill(ours, theirs, 3, 250, seed=1)

    def target_q(buf, idx):  # a fake Q' of the bootstrap observation: its step counter + 1
        return torch.as_tensor(buf[idx].obs_next[:, 2] + 1.0)

    mo, mt = by_obs(ours, ours.sample_indices(0)), by_obs(theirs, theirs.sample_indices(0))
    keys = list(mo)
    io, it = np.array([mo[k] for k in keys]), np.array([mt[k] for k in keys])
    ro = Algorithm.compute_nstep_return(ours[io], ours, io, target_q, gamma=0.9, n_step=n_step).returns
    rt = Algorithm.compute_nstep_return(theirs[it], theirs, it, target_q, gamma=0.9, n_step=n_step).returns
    torch.testing.assert_close(ro.float(), rt.float(), rtol=1e-5, atol=1e-5)


def test_sample_is_uniform_and_consistent():
    ours = compat.VectorReplayBuffer(2000, 2, random_seed=3)
    for batch, ids in stream(2, 100, subsets=False):
        ours.add(batch, buffer_ids=ids)
    batch, idx = ours.sample(20_000)
    ref = ours[idx]
    for key in ("obs", "act", "rew", "terminated", "truncated", "done", "obs_next"):
        np.testing.assert_array_equal(batch[key], ref[key])
    counts = np.bincount(np.searchsorted(np.sort(ours.sample_indices(0)), idx), minlength=len(ours))
    expected = 20_000 / len(ours)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < len(ours) + 5 * np.sqrt(2 * len(ours))
    assert ours.sample_indices(-1).size == 0 and ours.sample_indices(0).size == len(ours)


def test_prioritized_weights_match_tianshou():
    ours = compat.PrioritizedVectorReplayBuffer(2000, 2, alpha=0.6, beta=0.4)
    theirs = tsd.PrioritizedVectorReplayBuffer(2000, 2, alpha=0.6, beta=0.4)
    fill(ours, theirs, 2, 150, subsets=False)
    mo, mt = by_obs(ours, ours.sample_indices(0)), by_obs(theirs, theirs.sample_indices(0))
    keys = list(mo)
    io, it = np.array([mo[k] for k in keys]), np.array([mt[k] for k in keys])
    td = np.random.default_rng(0).exponential(size=len(keys))
    ours.update_weight(io, td)
    theirs.update_weight(it, td)
    np.testing.assert_allclose(ours[io].weight, theirs[it].weight, rtol=1e-4)
    # set_beta must reach the weights. Tianshou's PrioritizedVectorReplayBuffer.set_beta
    # sets the sub-buffers' beta only, so its weights keep beta = 0.4 (a peer bug, corrected here)
    before = theirs[it].weight
    ours.set_beta(1.0)
    theirs.set_beta(1.0)
    np.testing.assert_allclose(theirs[it].weight, before)
    p = (td + np.finfo(F32).eps) ** 0.6
    np.testing.assert_allclose(ours[io].weight, p.min() / p, rtol=1e-4)
    # sampled in proportion to (|td| + eps)^alpha
    _, idx = ours.sample(40_000)
    freq = np.array([(idx == i).mean() for i in io])
    np.testing.assert_allclose(freq, p / p.sum(), atol=0.004)
    batch, idx = ours.sample(64)
    np.testing.assert_allclose(batch.weight, ours[idx].weight, rtol=1e-5)


def test_pickle_and_hdf5_round_trips(tmp_path):
    ours = compat.PrioritizedVectorReplayBuffer(1000, 2, alpha=0.5, beta=0.5, random_seed=9)
    for batch, ids in stream(2, 80):
        ours.add(batch, buffer_ids=ids)
    ours.update_weight(np.array(ours.sample_indices(0)[:10]), np.arange(10.0))
    for clone in (pickle.loads(pickle.dumps(ours)), None):
        if clone is None:
            ours.save_hdf5(str(tmp_path / "b.h5"))
            clone = compat.PrioritizedVectorReplayBuffer.load_hdf5(str(tmp_path / "b.h5"))
        assert len(clone) == len(ours)
        np.testing.assert_array_equal(clone[:].obs, ours[:].obs)
        np.testing.assert_array_equal(clone.done, ours.done)
        a, ia = ours.sample(32)
        b, ib = clone.sample(32)
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_allclose(a.weight, b.weight)


def test_unsupported_options_raise():
    with pytest.raises(NotImplementedError, match="save_only_last_obs"):
        compat.VectorReplayBuffer(100, 2, save_only_last_obs=True)
    buf = compat.VectorReplayBuffer(100, 2)
    with pytest.raises(NotImplementedError):
        buf.set_array_at_key(np.zeros(3), "adv")


# -- add's arguments ------------------------------------------------------------------------------


def step_batch(n: int, **changes) -> Batch:
    """A batch of n steps that continues nothing (fresh observations ``[100, i, 0, 0]``)."""
    obs = np.array([[100, i, 0, 0] for i in range(n)], F32)
    fields = dict(
        obs=obs,
        act=np.zeros(n, np.int64),
        rew=np.ones(n),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        obs_next=obs + [0, 0, 1, 0],
        info={},
    )
    fields.update(changes)
    return Batch(**fields)


def without(key: str) -> Batch:
    b = step_batch(2)
    b.pop(key)
    return b


def snapshot(buf) -> dict[str, np.ndarray]:
    """Everything a refused add must leave as it was: the core's full state (storage, episode
    index, per-env heads, RNG, priorities), the done column, the (HER-relabeled) rewards."""
    out = {k: np.array(v, copy=True) for k, v in buf.core.state_dict()["arrays"].items()}
    out["done"] = buf.done.copy()
    try:
        out["rew"] = np.array(buf.rew, copy=True)
    except rlcore.errors.ApiUsageError:  # no columns before the first add
        out["rew"] = np.zeros(0)
    return out


def assert_unchanged(buf, before: dict[str, np.ndarray]) -> None:
    after = snapshot(buf)
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=f"{k} changed")


# (ids, batch, the rlcore error, the builtin a Tianshou user catches); 3 envs
BAD_ADDS = {
    "duplicate ids": ([0, 0], step_batch(2), rlcore.errors.InvalidValueError, ValueError),
    "duplicate ids among others": ([2, 1, 2], step_batch(3), rlcore.errors.InvalidValueError, ValueError),
    "id past the end": ([3], step_batch(1), compat.BufferIdError, IndexError),
    "negative id": ([-1], step_batch(1), compat.BufferIdError, IndexError),
    "huge unsigned id": (np.array([2**63], np.uint64), step_batch(1), compat.BufferIdError, ValueError),
    "float ids": ([0.0, 1.0], step_batch(2), rlcore.errors.DTypeError, TypeError),
    "bool ids": ([True, False], step_batch(2), rlcore.errors.DTypeError, TypeError),
    "2-D ids": ([[0, 1]], step_batch(2), rlcore.errors.ShapeError, ValueError),
    "scalar ids": (0, step_batch(1), rlcore.errors.ShapeError, ValueError),
    "more steps than ids": ([0], step_batch(2), rlcore.errors.ShapeError, ValueError),
    "fewer steps than ids": ([0, 1, 2], step_batch(2), rlcore.errors.ShapeError, ValueError),
    "obs of one row for two envs": (
        [0, 2],
        step_batch(2, obs=np.zeros((1, 4), F32)),
        rlcore.errors.ShapeError,
        ValueError,
    ),
    "act longer than the batch": (
        [1],
        step_batch(1, act=np.zeros(2, np.int64)),
        rlcore.errors.ShapeError,
        ValueError,
    ),
    "scalar rew": ([0], step_batch(1, rew=1.0), rlcore.errors.ShapeError, ValueError),
    "float terminated": (
        [0, 1],
        step_batch(2, terminated=np.array([0.0, 1.0])),
        rlcore.errors.DTypeError,
        TypeError,
    ),
    "truncated of 2": (
        [0, 1],
        step_batch(2, truncated=np.array([0, 2])),
        rlcore.errors.InvalidValueError,
        ValueError,
    ),
    "no obs_next": ([0, 1], without("obs_next"), rlcore.errors.InvalidValueError, ValueError),
    "no act": ([0, 1], without("act"), rlcore.errors.InvalidValueError, ValueError),
    "obs of another dtype kind": (  # checked by the core against the columns of the first add
        [0, 1],
        step_batch(2, obs=np.array([["a"] * 4] * 2)),
        rlcore.errors.DTypeError,
        TypeError,
    ),
    "obs of another shape": (
        [0, 1],
        step_batch(2, obs=np.zeros((2, 5), F32)),
        rlcore.errors.ShapeError,
        ValueError,
    ),
}


@pytest.mark.parametrize("case", list(BAD_ADDS))
@pytest.mark.parametrize("klass", [compat.VectorReplayBuffer, compat.PrioritizedVectorReplayBuffer])
def test_add_refuses_bad_arguments_with_typed_errors_and_leaves_the_buffer_unchanged(klass, case):
    ids, batch, error, builtin = BAD_ADDS[case]
    kw = dict(alpha=0.6, beta=0.4) if klass is compat.PrioritizedVectorReplayBuffer else {}
    ours, theirs = klass(600, 3, **kw), tsd.VectorReplayBuffer(600, 3)
    steps = list(stream(3, 80))
    for b, i in steps[:40]:
        ours.add(b, buffer_ids=i)
        theirs.add(b, buffer_ids=i)
    before = snapshot(ours)
    with pytest.raises(error) as info:
        ours.add(batch, buffer_ids=ids)
    assert isinstance(info.value, rlcore.errors.RlcoreError) and isinstance(info.value, builtin)
    assert_unchanged(ours, before)
    # the stream goes on as if the refused add never happened, exactly as in Tianshou
    for b, i in steps[40:]:
        a, t = ours.add(b, buffer_ids=i), theirs.add(b, buffer_ids=i)
        np.testing.assert_array_equal(a[2], t[2])
        np.testing.assert_array_equal(ours[a[3]].obs, theirs[t[3]].obs)
    np.testing.assert_array_equal(ours[:].obs, theirs[:].obs)


def test_add_of_two_steps_for_one_env_is_refused_not_collapsed():
    """The issue's example: ``buffer_ids=[0, 0]`` used to write one row twice (insertion_idx
    [0, 0], len 1), losing a step. Tianshou itself would store them as two successive steps of
    env 0; rlcore refuses (one step per env per add) so nothing is silently lost."""
    buf = compat.VectorReplayBuffer(20, 2)
    before = snapshot(buf)
    with pytest.raises(rlcore.errors.InvalidValueError, match="distinct"):
        buf.add(step_batch(2), buffer_ids=[0, 0])
    assert len(buf) == 0
    assert_unchanged(buf, before)
    idx = buf.add(step_batch(2), buffer_ids=[1, 0])[0]  # distinct ids in any order are fine
    assert len(buf) == 2 and len(set(idx.tolist())) == 2
    np.testing.assert_array_equal(buf[idx].obs[:, 1], [0, 1])


@pytest.mark.parametrize("ids", [[1], [0, 0], [-1], [0.0]])
def test_single_buffer_refuses_ids_other_than_zero(ids):
    buf = compat.ReplayBuffer(50)
    buf.add(step_batch(1), buffer_ids=[0])
    before = snapshot(buf)
    with pytest.raises((ValueError, TypeError)) as info:
        buf.add(step_batch(len(ids)), buffer_ids=ids)
    assert isinstance(info.value, rlcore.errors.RlcoreError)
    assert_unchanged(buf, before)


def test_dqn_cartpole_with_collector_and_trainer():
    """Tianshou's DQN, Collector and OffPolicyTrainer, unchanged, on the rlcore buffer."""
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    np.random.seed(0)  # noqa: NPY002 - Tianshou's exploration draws from the global generator
    torch.manual_seed(0)
    train_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    test_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    train_envs.seed(0)
    test_envs.seed(100)
    env = gym.make("CartPole-v1")
    net = Net(state_shape=env.observation_space.shape, action_shape=env.action_space.n, hidden_sizes=[64, 64])
    policy = DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=0.1)
    algo = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=1e-3),
        gamma=0.9,
        n_step_return_horizon=3,
        target_update_freq=100,
    )
    buf = compat.VectorReplayBuffer(10_000, 4)
    training = Collector[CollectStats](algo, train_envs, buf, exploration_noise=True)
    training.reset()
    training.collect(n_step=256)
    result = algo.run_training(
        OffPolicyTrainerParams(
            training_collector=training,
            test_collector=Collector[CollectStats](algo, test_envs),
            max_epochs=1,
            epoch_num_steps=4000,
            collection_step_num_env_steps=12,
            test_step_num_episodes=10,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.25,
            show_progress=False,
            verbose=False,
        )
    )
    assert len(buf) >= 2000 and not buf.hasnull()
    assert result.best_reward > 30, result  # untrained: about 9-10


# -- HER ------------------------------------------------------------------------------------------


def asym_reward(achieved_goal, desired_goal):
    """Asymmetric (achieved - desired): a swapped call flips the sign."""
    return (achieved_goal - desired_goal)[..., 0].astype(F32)


def goal_stream(n_envs: int, n_episodes: int, length: int):
    """Env e, episode k, step t: ``observation = [e, k, t]``, ``achieved_goal = [1000 k + t]``
    (the goal achieved after step t' is ``1000 k + t' + 1``), ``desired_goal = [-1 - k]``."""
    for k in range(n_episodes):
        for t in range(length):

            def ob(tt, k=k):
                return Batch(
                    observation=np.array([[e, k, tt] for e in range(n_envs)], F32),
                    achieved_goal=np.full((n_envs, 1), 1000 * k + tt, F32),
                    desired_goal=np.full((n_envs, 1), -1 - k, F32),
                )

            yield Batch(
                obs=ob(t),
                obs_next=ob(t + 1),
                act=np.zeros((n_envs, 2), F32),
                rew=np.zeros(n_envs),
                terminated=np.zeros(n_envs, bool),
                truncated=np.full(n_envs, t == length - 1),
                info={},
            )


def her_stats(buf, horizon, draws=100):
    """Relabeled fraction and mean goal offset (t' - t); checks every relabeled sample."""
    fractions, offsets = [], []
    for _ in range(draws):
        b, idx = buf.sample(64)
        g, k, t = b.obs.desired_goal[:, 0], b.obs.observation[:, 1], b.obs.observation[:, 2]
        np.testing.assert_array_equal(b.obs.desired_goal, b.obs_next.desired_goal)
        rel = g >= 0
        goal_step = g[rel] - 1000 * k[rel] - 1
        assert (goal_step >= 0).all() and (goal_step <= 9).all(), "goal from another episode"
        if horizon >= 10:  # windows never overlap: the goal comes from the sample's own future
            assert (goal_step >= t[rel]).all()
        np.testing.assert_allclose(b.rew[rel], b.obs_next.achieved_goal[rel, 0] - g[rel])  # (ag, g) order
        np.testing.assert_allclose(buf.rew[idx], b.rew)  # what compute_nstep_return reads
        fractions.append(rel.mean())
        offsets.append((goal_step - t[rel]).mean())
    return np.mean(fractions), np.mean(offsets)


@pytest.mark.parametrize("horizon", [10, 4])
def test_her_matches_tianshou_statistically(horizon):
    stats = {}
    for name, klass in (("ours", compat.HERVectorReplayBuffer), ("theirs", tsd.HERVectorReplayBuffer)):
        buf = klass(2000, 2, compute_reward_fn=asym_reward, horizon=horizon, future_k=4)
        for batch in goal_stream(2, 30, 10):
            buf.add(batch, buffer_ids=[0, 1])
        np.random.seed(1)  # noqa: NPY002 - Tianshou's HER draws from the global generator
        stats[name] = her_stats(buf, horizon)
    (fo, oo), (ft, ot) = stats["ours"], stats["theirs"]
    assert fo == pytest.approx(ft, abs=0.03) and oo == pytest.approx(ot, abs=0.25), stats


def test_her_overlay_never_writes_storage_and_nstep_reads_it():
    buf = compat.HERReplayBuffer(500, compute_reward_fn=asym_reward, horizon=10, future_k=4)
    for batch in goal_stream(1, 20, 10):
        buf.add(batch, buffer_ids=[0])
    stored = np.array(buf.core.column("obs")["desired_goal"], copy=True)
    b, idx = buf.sample(128)
    np.testing.assert_array_equal(buf.core.column("obs")["desired_goal"], stored)
    ret = Algorithm.compute_nstep_return(
        b, buf, idx, lambda bf, i: torch.as_tensor(bf[i].obs_next.desired_goal[:, 0]), 0.5, 1
    )
    want = b.rew + 0.5 * b.obs_next.desired_goal[:, 0]  # FetchReach-like: never terminated
    np.testing.assert_allclose(ret.returns.numpy().reshape(-1), want, rtol=1e-5)
    clone = pickle.loads(pickle.dumps(buf))
    np.testing.assert_array_equal(clone.rew, buf.core.rew)  # the overlay is not pickled


def test_refused_add_keeps_her_relabeling_of_the_last_sample():
    """A refused add changes nothing, not even the relabeled rewards of the last sample (a
    successful add drops them, as Tianshou's)."""
    buf = compat.HERVectorReplayBuffer(400, 2, compute_reward_fn=asym_reward, horizon=10, future_k=4)
    stream = list(goal_stream(2, 6, 10))
    for batch in stream[:-1]:
        buf.add(batch, buffer_ids=[0, 1])
    buf.sample(64)
    assert (buf.rew != buf.core.rew).any(), "the sample relabeled nothing"
    before = snapshot(buf)
    for ids in ([0, 0], [2], [0]):
        with pytest.raises(rlcore.errors.RlcoreError):
            buf.add(stream[-1], buffer_ids=ids)
        assert_unchanged(buf, before)
    buf.add(stream[-1], buffer_ids=[0, 1])
    np.testing.assert_array_equal(buf.rew, buf.core.rew)


def test_ddpg_her_fetchreach_short_run():
    """Tianshou's DDPG, Collector and trainer with the rlcore HERVectorReplayBuffer on
    FetchReach-v4 (set up as Tianshou's fetch_her_ddpg example, scaled down): it runs and the
    buffer's relabeled rewards are the env's own."""
    gymnasium_robotics = pytest.importorskip("gymnasium_robotics")
    from tianshou.algorithm import DDPG
    from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats
    from tianshou.env import DummyVectorEnv, TruncatedAsTerminated
    from tianshou.exploration import GaussianNoise
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net, get_dict_state_decorator
    from tianshou.utils.net.continuous import ContinuousActorDeterministic, ContinuousCritic

    gym.register_envs(gymnasium_robotics)
    np.random.seed(0)  # noqa: NPY002 - Tianshou draws from the global generator
    torch.manual_seed(0)
    env = TruncatedAsTerminated(gym.make("FetchReach-v4"))
    train_envs = DummyVectorEnv([lambda: TruncatedAsTerminated(gym.make("FetchReach-v4")) for _ in range(2)])
    test_envs = DummyVectorEnv([lambda: TruncatedAsTerminated(gym.make("FetchReach-v4"))])
    train_envs.seed(0)
    test_envs.seed(1)
    shapes = {k: env.observation_space[k].shape for k in ("observation", "achieved_goal", "desired_goal")}
    dec, flat = get_dict_state_decorator(state_shape=shapes, keys=list(shapes))
    act_shape = env.action_space.shape
    net_a = dec(Net)(state_shape=flat, hidden_sizes=[64, 64])
    actor = dec(ContinuousActorDeterministic)(preprocess_net=net_a, action_shape=act_shape, max_action=1.0)
    net_c = dec(Net)(state_shape=flat, action_shape=act_shape, hidden_sizes=[64, 64], concat=True)
    critic = dec(ContinuousCritic)(preprocess_net=net_c)
    policy = ContinuousDeterministicPolicy(
        actor=actor, exploration_noise=GaussianNoise(sigma=0.1), action_space=env.action_space
    )
    algo = DDPG(
        policy=policy,
        policy_optim=AdamOptimizerFactory(lr=1e-3),
        critic=critic,
        critic_optim=AdamOptimizerFactory(lr=3e-3),
        tau=0.005,
        gamma=0.98,
    )

    def compute_reward_fn(ag, g):
        return env.unwrapped.compute_reward(ag, g, {})

    buf = compat.HERVectorReplayBuffer(5000, 2, compute_reward_fn=compute_reward_fn, horizon=50, future_k=8)
    training = Collector[CollectStats](algo, train_envs, buf, exploration_noise=True)
    training.reset()
    training.collect(n_step=100, random=True)
    algo.run_training(
        OffPolicyTrainerParams(
            training_collector=training,
            test_collector=Collector[CollectStats](algo, test_envs),
            max_epochs=1,
            epoch_num_steps=100,
            collection_step_num_env_steps=2,
            test_step_num_episodes=1,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.5,
            show_progress=False,
            verbose=False,
        )
    )
    assert len(buf) >= 200
    b, idx = buf.sample(256)
    want = env.unwrapped.compute_reward(b.obs_next.achieved_goal, b.obs.desired_goal, {})
    np.testing.assert_array_equal(b.rew, want.astype(F32))
    assert (b.obs.desired_goal != buf.core.column("obs")["desired_goal"][idx]).any()  # some relabeled
