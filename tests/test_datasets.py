"""Offline datasets into buffers (rlcore.datasets): D4RL-format HDF5 files with and without
``next_observations``, Minari datasets made with Minari's own DataCollector on real envs, and
``from_arrays`` without ``obs_next``. Each loaded buffer is compared, transition by transition and
with n-step windows, with a reference built by hand from the episodes the data came from."""

from __future__ import annotations

import gc
import warnings
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import rlcore
from rlcore.buffers.offline import complete_steps
from rlcore.datasets import load_d4rl, load_dataset, load_minari, read_d4rl, write_d4rl
from rlcore.datasets.scores import D4RL_REFERENCE_RETURNS, normalized_score
from rlcore.errors import SaveFileError

h5py = pytest.importorskip("h5py")


@dataclass
class Episode:
    obs: np.ndarray  # [L + 1, O]: o_0 .. o_L (o_L the final observation)
    act: np.ndarray  # [L, A]
    rew: np.ndarray  # [L]
    terminated: bool
    truncated: bool  # False for both: still running when the recording stopped


def _episodes(lengths_ends: list[tuple[int, str]], seed: int = 0) -> list[Episode]:
    rng = np.random.default_rng(seed)
    out = []
    for length, end in lengths_ends:
        out.append(
            Episode(
                obs=rng.standard_normal((length + 1, 3)).astype(np.float32),
                act=rng.standard_normal((length, 2)).astype(np.float32),
                rew=rng.integers(-3, 4, length).astype(np.float32),
                terminated=end == "term",
                truncated=end == "trunc",
            )
        )
    return out


def _d4rl_arrays(episodes: list[Episode]) -> dict[str, np.ndarray]:
    """The D4RL layout of the episodes: one row per step, flags on each episode's last step."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc", "obs_next")}
    for ep in episodes:
        n = len(ep.rew)
        term, trunc = np.zeros(n, bool), np.zeros(n, bool)
        term[-1], trunc[-1] = ep.terminated, ep.truncated
        for k, v in zip(cols, (ep.obs[:-1], ep.act, ep.rew, term, trunc, ep.obs[1:]), strict=True):
            cols[k].append(v)
    return {k: np.concatenate(v) for k, v in cols.items()}


def _reference(episodes: list[Episode], n: int, gamma: float, *, final_obs: bool) -> dict[str, np.ndarray]:
    """Every transition the buffer must hold, in time order, with its n-step window (docs/n-step.md), built from the episodes alone. Without final observations (``final_obs=False``, the
    D4RL layout without next_observations): a terminated episode keeps its last step with a
    placeholder (its own observation); a truncated or unfinished one loses its last step, and the
    step before ends it, truncated for a truncated episode."""
    rows: dict[str, list[object]] = {
        k: [] for k in ("obs", "act", "rew", "obs_next", "discount", "term", "trunc")
    }
    for ep in episodes:
        obs, act, rew, term, trunc = ep.obs, ep.act, ep.rew, ep.terminated, ep.truncated
        length = len(rew)
        if not final_obs:
            if term:
                obs = np.concatenate([obs[:-1], obs[-2:-1]])
            else:
                length -= 1
                obs, act, rew = obs[: length + 1], act[:length], rew[:length]
                trunc = ep.truncated
        for t in range(length):
            m = min(n, length - t)
            last = t + m - 1 == length - 1
            rows["obs"].append(obs[t])
            rows["act"].append(act[t])
            rows["rew"].append(sum(gamma**k * rew[t + k] for k in range(m)))
            rows["obs_next"].append(obs[t + m])
            rows["discount"].append(gamma**m * (0.0 if (last and term) else 1.0))
            rows["term"].append(last and term)
            rows["trunc"].append(last and trunc)
    return {k: np.asarray(v) for k, v in rows.items()}


def _transitions(buffer: rlcore.ReplayBuffer, n: int, gamma: float) -> dict[str, np.ndarray]:
    """The buffer's transitions in storage (= time) order, with n-step windows."""
    rows = np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity))))
    b = buffer.sample_at(rows, n_step=n, gamma=gamma)
    return {
        "obs": b.obs,
        "act": b.act,
        "rew": b.rew,
        "obs_next": b.obs_next,
        "discount": b.discount,
        "term": b.terminated.astype(bool),
        "trunc": b.truncated.astype(bool),
    }


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape[0] == want[k].shape[0], k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6, err_msg=k)


EPISODES = [(5, "term"), (4, "trunc"), (1, "trunc"), (7, "term"), (1, "term"), (6, "trunc"), (3, "running")]


@pytest.mark.parametrize("n", [1, 3])
def test_d4rl_file_with_next_observations_keeps_every_final_observation(tmp_path: Path, n: int) -> None:
    episodes = _episodes(EPISODES)
    a = _d4rl_arrays(episodes)
    path = write_d4rl(
        tmp_path / "d.hdf5",
        obs=a["obs"],
        act=a["act"],
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
        obs_next=a["obs_next"],
    )
    buffer = load_d4rl(path, make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=0))
    _assert_same(_transitions(buffer, n, 0.5), _reference(episodes, n, 0.5, final_obs=True))
    # one row per step plus one per episode (the final observations)
    assert len(buffer) == a["rew"].size and buffer.capacity == a["rew"].size + len(episodes)
    starts, ends, lengths = buffer.episode_bounds(np.flatnonzero(np.asarray(buffer.terminated)))
    np.testing.assert_array_equal(lengths, [5, 7, 1])


@pytest.mark.parametrize("n", [1, 3])
def test_d4rl_file_without_next_observations(tmp_path: Path, n: int) -> None:
    episodes = _episodes(EPISODES)
    a = _d4rl_arrays(episodes)
    path = write_d4rl(
        tmp_path / "d.hdf5",
        obs=a["obs"],
        act=a["act"],
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
    )
    steps = read_d4rl(path)
    assert steps.dropped == 4  # the last steps of the three truncated episodes and of the running one
    buffer = load_d4rl(path)
    _assert_same(_transitions(buffer, n, 0.5), _reference(episodes, n, 0.5, final_obs=False))


def test_the_oracle_of_the_design_page(tmp_path: Path) -> None:
    """One 6-step episode, n = 3, gamma = 0.5, reward 1: rew_n 1.75 x4, 1.5, 1.0; gamma powers
    .125 x4, .25, .5; after termination the last three rows have discount 0."""
    obs = np.arange(7, dtype=np.float32)[:, None]
    for ends, zeros in (("term", 3), ("trunc", 0)):
        flags = np.zeros(6, bool)
        flags[-1] = True
        path = write_d4rl(
            tmp_path / f"{ends}.hdf5",
            obs=obs[:-1],
            act=np.zeros((6, 1), np.float32),
            rew=np.ones(6),
            terminated=flags if ends == "term" else ~flags & False,
            truncated=flags if ends == "trunc" else ~flags & False,
            obs_next=obs[1:],
        )
        got = _transitions(load_d4rl(path), 3, 0.5)
        np.testing.assert_allclose(got["rew"], [1.75, 1.75, 1.75, 1.75, 1.5, 1.0])
        power = np.array([0.125, 0.125, 0.125, 0.125, 0.25, 0.5])
        want = power.copy()
        if zeros:
            want[-zeros:] = 0
        np.testing.assert_allclose(got["discount"], want)
        np.testing.assert_array_equal(got["obs_next"][:, 0], [3, 4, 5, 6, 6, 6])


def test_from_arrays_without_obs_next() -> None:
    """``obs_next=None`` (once 'dtype object is not supported'): D4RL's layout, ends handled as
    :func:`complete_steps` documents."""
    episodes = _episodes(EPISODES, seed=3)
    a = _d4rl_arrays(episodes)
    buffer = rlcore.ReplayBuffer.from_arrays(
        a["obs"], a["act"], a["rew"], a["term"], a["trunc"], None, seed=0
    )
    _assert_same(_transitions(buffer, 2, 0.9), _reference(episodes, 2, 0.9, final_obs=False))
    prio = rlcore.PrioritizedReplayBuffer.from_arrays(
        a["obs"], a["act"], a["rew"], a["term"], a["trunc"], None
    )
    assert len(prio) == len(buffer)


def test_complete_steps_by_hand() -> None:
    obs = np.arange(10, dtype=np.float32)[:, None]
    term = np.zeros(10, bool)
    trunc = np.zeros(10, bool)
    term[3] = True
    trunc[6] = True
    trunc[7] = True  # a one-step truncated episode: gone
    s = complete_steps(obs, obs * 10, obs[:, 0], term, trunc)
    np.testing.assert_array_equal(s.obs[:, 0], [0, 1, 2, 3, 4, 5, 8])
    np.testing.assert_array_equal(s.obs_next[:, 0], [1, 2, 3, 3, 5, 6, 9])
    np.testing.assert_array_equal(s.terminated, [0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(s.truncated, [0, 0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(s.act[:, 0], [0, 10, 20, 30, 40, 50, 80])
    assert s.dropped == 3


def test_infos_become_extra_columns_and_any_buffer_kind(tmp_path: Path) -> None:
    episodes = _episodes([(4, "term"), (3, "trunc")])
    a = _d4rl_arrays(episodes)
    qpos = np.arange(7 * 2, dtype=np.float64).reshape(7, 2)
    path = write_d4rl(
        tmp_path / "d.hdf5",
        obs=a["obs"],
        act=a["act"],
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
        obs_next=a["obs_next"],
        infos={"qpos": qpos, "goal": np.ones((7, 2))},
        metadata={"algorithm": "by hand"},
    )
    buffer = load_d4rl(
        path, infos=["qpos"], make_buffer=lambda rows: rlcore.PrioritizedReplayBuffer(rows, alpha=0.5, seed=1)
    )
    assert isinstance(buffer, rlcore.PrioritizedReplayBuffer)
    batch = buffer.sample_at(np.flatnonzero(np.asarray(buffer.is_transition(np.arange(buffer.capacity)))))
    np.testing.assert_array_equal(batch.extras["infos/qpos"], qpos)
    assert batch.weights is not None
    assert set(read_d4rl(path, infos=True).extras) == {"infos/qpos", "infos/goal"}


def _write(path: Path, **columns: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        for k, v in columns.items():
            f.create_dataset(k, data=v)
    return path


def _good(t: int = 5) -> dict[str, np.ndarray]:
    return {
        "observations": np.zeros((t, 3), np.float32),
        "actions": np.zeros((t, 2), np.float32),
        "rewards": np.zeros(t, np.float32),
        "terminals": np.zeros(t, bool),
        "timeouts": np.zeros(t, bool),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timeouts": None}, "'timeouts' is missing"),
        ({"rewards": np.zeros(4, np.float32)}, "'rewards' has shape (4,), expected 5 rows"),
        ({"rewards": np.zeros((5, 2), np.float32)}, "'rewards' has shape (5, 2)"),
        ({"terminals": np.full(5, 2, np.int64)}, "values other than 0 and 1"),
        ({"terminals": np.zeros((5, 1), bool)}, "'terminals' has shape (5, 1)"),
        ({"next_observations": np.zeros((5, 4), np.float32)}, "'next_observations' has shape (5, 4)"),
        ({"actions": np.array([b"a"] * 5)}, "a D4RL file stores numbers"),
    ],
)
def test_a_malformed_file_is_a_typed_error(
    tmp_path: Path, change: dict[str, np.ndarray | None], message: str
) -> None:
    columns = {k: v for k, v in {**_good(), **change}.items() if v is not None}
    path = _write(tmp_path / "bad.hdf5", **columns)
    with pytest.raises(SaveFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_d4rl(path)


def test_not_hdf5_missing_file_and_unknown_infos(tmp_path: Path) -> None:
    (tmp_path / "text.hdf5").write_text("not hdf5")
    with pytest.raises(SaveFileError, match="not a readable HDF5 file"):
        read_d4rl(tmp_path / "text.hdf5")
    with pytest.raises(FileNotFoundError):
        read_d4rl(tmp_path / "nothing.hdf5")
    path = _write(tmp_path / "ok.hdf5", **_good())
    with pytest.raises(SaveFileError, match="no infos/qpos"):
        read_d4rl(path, infos=["qpos"])
    assert isinstance(SaveFileError("x"), OSError)


def test_progress_bar_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "ok.hdf5", **_good(300))
    buffer = load_d4rl(path, progress=True)
    assert len(buffer) == 299
    err = capsys.readouterr().err
    assert "reading ok.hdf5" in err and "filling the buffer" in err


def test_normalized_score() -> None:
    low, high = D4RL_REFERENCE_RETURNS["hopper"]
    assert normalized_score(low, (low, high)) == 0.0
    assert normalized_score(high, (low, high)) == pytest.approx(100.0)
    assert normalized_score(5.0, (0.0, 10.0)) == 50.0
    with pytest.raises(ValueError, match="equal"):
        normalized_score(1.0, (2.0, 2.0))


# -- Minari ---------------------------------------------------------------------------------------


@pytest.fixture
def minari_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("minari")
    pytest.importorskip("jax", reason="Minari's DataCollector needs minari[create] (jax)")
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def _collect(
    env_id: str, dataset_id: str, episodes: int, *, max_steps: int, seed: int, **kw: object
) -> list[Episode]:
    """Record episodes of a random policy with Minari's DataCollector on a real env; return what the
    env handed out, step by step (the reference)."""
    import minari

    env = minari.DataCollector(gym.make(env_id, max_episode_steps=max_steps, **kw))
    env.action_space.seed(seed)
    out = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        rows: dict[str, list[np.ndarray]] = {"obs": [obs], "act": [], "rew": []}
        while True:
            act = env.action_space.sample()
            obs, rew, term, trunc, _ = env.step(act)
            rows["obs"].append(obs)
            rows["act"].append(np.asarray(act))
            rows["rew"].append(np.float32(rew))
            if term or trunc:
                break
        out.append(
            Episode(
                np.asarray(rows["obs"]),
                np.asarray(rows["act"]),
                np.asarray(rows["rew"]),
                bool(term),
                bool(trunc),
            )
        )
    # Minari 0.5.4 removes its temporary directories with shutil and leaves their TemporaryDirectory
    # finalizers armed (create_dataset drops one, close() the other), which warn when collected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        env.create_dataset(
            dataset_id,
            eval_env=env_id,
            algorithm_name="random",
            author="rlcore tests",
            author_email="tests@rlcore.invalid",
            code_permalink="https://github.com/rlcore/rlcore",
            description="random actions, for rlcore's loader tests",
            ref_min_score=-10.0,
            ref_max_score=10.0,
        )
        env.close()
        del env
        gc.collect()
    return out


def test_minari_dataset_pendulum_truncated_episodes_keep_final_observations(minari_root: Path) -> None:
    episodes = _collect("Pendulum-v1", "rlcore/pendulum-test-v0", 4, max_steps=15, seed=10)
    assert all(ep.truncated for ep in episodes)
    buffer = load_minari(
        "rlcore/pendulum-test-v0", make_buffer=lambda rows: rlcore.ReplayBuffer(rows, seed=0)
    )
    for n in (1, 4):
        _assert_same(_transitions(buffer, n, 0.9), _reference(episodes, n, 0.9, final_obs=True))
    from rlcore.datasets import minari_reference_returns

    assert minari_reference_returns("rlcore/pendulum-test-v0") == (-10.0, 10.0)


def test_minari_dataset_cartpole_terminated_and_truncated(minari_root: Path) -> None:
    episodes = _collect("CartPole-v1", "rlcore/cartpole-test-v0", 6, max_steps=20, seed=0)
    assert {ep.terminated for ep in episodes} == {True, False}  # both kinds of end
    buffer = load_dataset("rlcore/cartpole-test-v0")  # an id: Minari
    _assert_same(_transitions(buffer, 3, 0.5), _reference(episodes, 3, 0.5, final_obs=True))


def test_minari_unknown_dataset(minari_root: Path) -> None:
    with pytest.raises(SaveFileError, match="no local Minari dataset"):
        load_minari("rlcore/none-v0")


def test_load_dataset_reads_rlcore_saves_and_d4rl_files(tmp_path: Path) -> None:
    episodes = _episodes([(4, "term"), (3, "trunc")])
    a = _d4rl_arrays(episodes)
    path = write_d4rl(
        tmp_path / "d.h5",
        obs=a["obs"],
        act=a["act"],
        rew=a["rew"],
        terminated=a["term"],
        truncated=a["trunc"],
        obs_next=a["obs_next"],
    )
    from_file = load_dataset(path)
    from_file.save(tmp_path / "save")
    from_save = load_dataset(tmp_path / "save")
    _assert_same(_transitions(from_save, 2, 0.7), _transitions(from_file, 2, 0.7))


def test_goal_data_into_a_her_buffer() -> None:
    """Dict observations (a goal env's) go into an HERReplayBuffer through ``make_buffer``."""
    from rlcore.buffers.offline import OfflineSteps
    from rlcore.datasets import to_buffer

    t = 12
    ag = np.arange(t + 1, dtype=np.float32)[:, None].repeat(2, 1)
    goal = np.full((t + 1, 2), 100.0, np.float32)
    obs = {"observation": ag.copy(), "achieved_goal": ag, "desired_goal": goal}
    trunc = np.zeros(t, bool)
    trunc[5] = trunc[-1] = True
    nxt = {k: v[1:].copy() for k, v in obs.items()}
    cur = {k: v[:-1].copy() for k, v in obs.items()}
    for v in cur.values():  # the second episode starts from a fresh reset observation
        v[6] += 1000.0
    steps = OfflineSteps(
        obs=cur,
        act=np.zeros((t, 1), np.float32),
        rew=-np.ones(t, np.float32),
        terminated=np.zeros(t, bool),
        truncated=trunc,
        obs_next=nxt,
    )
    buffer = to_buffer(
        steps,
        make_buffer=lambda rows: rlcore.HERReplayBuffer(rows, distance_threshold=0.5, future_k=4, seed=0),
    )
    assert isinstance(buffer, rlcore.HERReplayBuffer) and len(buffer) == t
    batch = buffer.sample(64)
    relabeled = batch.obs["desired_goal"][:, 0] != 100.0
    assert relabeled.any()
    np.testing.assert_array_equal(batch.obs["desired_goal"], batch.obs_next["desired_goal"])
