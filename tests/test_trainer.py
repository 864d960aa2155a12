"""OffPolicyTrainer: iterator contract, typed stats, zip, checkpoint/resume, PER, per-algorithm smoke runs."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from rlcore.algos import DDPG, DQN, SAC, TD3, DDPGConfig, DQNConfig, SACConfig, SACStats, TD3Config
from rlcore.batch import TransitionBatch
from rlcore.stats import EpochStats, EvalStats, flatten_stats
from rlcore.trainers.checkpoint import resume_seed
from rlcore.trainers.off_policy import OffPolicyTrainer, OffPolicyTrainerConfig

torch.set_num_threads(1)


def real_buffers() -> Any | None:
    try:
        import rlcore

        return rlcore if hasattr(rlcore, "ReplayBuffer") else None
    except ImportError:
        return None


class TinyReplay:
    """A minimal numpy replay buffer with the rlcore buffer API (n_step=1), for when the core is absent."""

    def __init__(self, capacity: int, *, seed: int = 0, prioritized: bool = False) -> None:
        self.capacity = capacity
        self.rows: list[tuple] = []
        self.rng = np.random.default_rng(seed)
        self.prioritized = prioritized
        self.beta = 0.4
        self.priority_updates: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, obs, act, rew, terminated, truncated, obs_next, *, mask=None) -> None:
        for i in range(len(rew)):
            if mask is not None and not mask[i]:
                continue

            def pick(x, i=i):
                return {k: v[i].copy() for k, v in x.items()} if isinstance(x, dict) else np.array(x[i])  # noqa: E731

            self.rows.append(
                (
                    pick(obs),
                    np.array(act[i]),
                    float(rew[i]),
                    bool(terminated[i]),
                    bool(truncated[i]),
                    pick(obs_next),
                )
            )
            if len(self.rows) > self.capacity:
                self.rows.pop(0)

    def sample(self, batch_size: int, *, n_step: int = 1, gamma: float = 0.99) -> TransitionBatch:
        assert n_step == 1
        idx = self.rng.integers(0, len(self.rows), size=batch_size)
        rows = [self.rows[i] for i in idx]
        stack = lambda j: (  # noqa: E731
            {k: np.stack([r[j][k] for r in rows]) for k in rows[0][j]}
            if isinstance(rows[0][j], dict)
            else np.stack([r[j] for r in rows])
        )
        term = np.array([r[3] for r in rows])
        return TransitionBatch(
            obs=stack(0),
            act=stack(1),
            rew=np.array([r[2] for r in rows], np.float32),
            obs_next=stack(5),
            terminated=term,
            truncated=np.array([r[4] for r in rows]),
            discount=(gamma * (1 - term)).astype(np.float32),
            indices=idx.astype(np.int64),
            weights=np.full(batch_size, 0.5, np.float32) if self.prioritized else None,
        )

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.priority_updates.append((indices, priorities))

    def state_dict(self) -> dict[str, Any]:
        return {"rows": list(self.rows), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = list(state["rows"])
        self.rng.bit_generator.state = state["rng"]


def make_buffer(capacity: int = 10_000, seed: int = 0, num_envs: int = 2) -> Any:
    core = real_buffers()
    if core is not None:
        return core.ReplayBuffer(capacity, num_envs=num_envs, seed=seed)
    return TinyReplay(capacity, seed=seed)


def pendulum(n: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec("Pendulum-v1", num_envs=n, vectorization_mode="sync")


def sac_trainer(*, seed: int = 0, **cfg: Any) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    envs = pendulum()
    algo = SAC.from_spaces(
        envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(32, 32)), device="cpu"
    )
    defaults = dict(
        collect_env_steps=20,
        batch_size=32,
        warmup_env_steps=40,
        utd_ratio=0.5,
        eval_every=3,
        eval_episodes=2,
        seed=seed,
    )
    defaults.update(cfg)
    return OffPolicyTrainer(
        algo, make_buffer(seed=seed), envs, config=OffPolicyTrainerConfig(**defaults), eval_envs=pendulum(1)
    )


def comparable(s: EpochStats) -> dict[str, float]:
    """Everything but the wall-clock timings (NaN fields are left out by flatten_stats)."""
    return {k: v for k, v in flatten_stats(s).items() if not k.endswith("_s")}


def test_epoch_stats_are_typed_and_fully_populated() -> None:
    trainer = sac_trainer(max_env_steps=400)
    history = list(trainer)
    assert len(history) == 20 and trainer.done
    for k, s in enumerate(history, start=1):
        assert s.iteration == k and s.env_steps == 20 * k and s.time.env_steps == s.env_steps
        if s.env_steps <= 40:
            assert s.train is None and s.grad_steps == 0
        else:
            assert isinstance(s.train, SACStats)
        assert (s.eval is not None) == (k % 3 == 0 or k == 20)
    assert history[-1].grad_steps == int(0.5 * (400 - 40))
    final = history[-1]
    assert isinstance(final.eval, EvalStats) and final.eval.episodes == 2 and final.eval.length_mean == 200
    assert final.rollout.episodes == 2 and final.time.episodes == 2  # two 200-step episodes ended at 200
    keys = flatten_stats(final)
    assert {"train/critic_loss", "eval/return_mean", "rollout/return_mean", "time/env_steps"} <= keys.keys()
    assert all(k.split("/")[0] in {"train", "eval", "rollout", "time"} for k in keys)
    with pytest.raises(StopIteration):
        next(trainer)


def test_iter_never_resets_and_zip_advances_side_by_side() -> None:
    trainer = sac_trainer(max_env_steps=400, eval_every=None)
    trainer.eval_envs = None
    for s in trainer:
        if s.iteration == 2:
            break
    s = next(iter(trainer))
    assert s.iteration == 3 and s.env_steps == 60
    a, b = (
        sac_trainer(max_env_steps=60, eval_every=None),
        sac_trainer(max_env_steps=60, eval_every=None, seed=1),
    )
    pairs = list(zip(a, b, strict=True))
    assert [(x.env_steps, y.env_steps) for x, y in pairs] == [(20, 20), (40, 40), (60, 60)]
    assert pairs[-1][0].train != pairs[-1][1].train  # two independent runs


def test_checkpoint_resume_gives_the_same_next_stats(tmp_path) -> None:
    straight = sac_trainer(max_env_steps=160)
    want = [comparable(s) for s in straight]
    stopped = sac_trainer(max_env_steps=160)
    for s in stopped:
        if s.iteration == 4:
            break
    stopped.save_checkpoint(tmp_path / "ckpt")
    manifest = json.loads((tmp_path / "ckpt" / "checkpoint.json").read_text())
    gen = tmp_path / "ckpt" / manifest["data_dir"]
    assert sorted(p.name for p in gen.iterdir()) == ["buffer", "counters.json", "env_state.pkl", "trainer.pt"]
    assert not list((tmp_path / "ckpt").rglob("buffer.pkl"))
    torch.manual_seed(123)  # disturb the global RNG: resume must restore it
    resumed = sac_trainer(max_env_steps=160, seed=0)
    resumed.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    got = [comparable(s) for s in resumed]
    assert got == want[4:]
    with pytest.raises(FileNotFoundError):
        resumed.load_checkpoint(tmp_path / "missing")


def test_resume_without_trusted_env_state_restarts_episodes_from_a_derived_seed(tmp_path) -> None:
    """The documented difference: without trust_env_state the envs are reset with
    resume_seed(seed, iteration); everything else continues, and the next episodes start fresh."""
    straight = sac_trainer(max_env_steps=600, eval_every=None)
    straight.eval_envs = None
    ended_straight = [s.env_steps for s in straight if s.rollout.episodes]
    stopped = sac_trainer(max_env_steps=600, eval_every=None)
    stopped.eval_envs = None
    for s in stopped:
        if s.iteration == 4:  # 80 env steps: 40 into every env's first 200-step episode
            break
    stopped.save_checkpoint(tmp_path / "ckpt")
    last_rows = stopped.buffer.last_index().copy()

    def resume() -> OffPolicyTrainer:
        trainer = sac_trainer(max_env_steps=600, eval_every=None)
        trainer.eval_envs = None
        with pytest.warns(RuntimeWarning, match="trust_env_state=True.*every env starts a fresh episode"):
            trainer.load_checkpoint(tmp_path / "ckpt")
        return trainer

    a = resume()
    seed = resume_seed(0, 4)
    assert seed not in (0, 1) and seed != resume_seed(0, 5)
    want_obs, _ = pendulum().reset(seed=seed)
    np.testing.assert_array_equal(a.collector.obs, want_obs)
    assert (a.iteration, a.env_steps, a.grad_steps) == (4, 80, stopped.grad_steps)
    assert len(a.buffer) == len(stopped.buffer)
    history = list(a)
    assert [comparable(s) for s in history] == [comparable(s) for s in resume()]  # deterministic
    # Uninterrupted: the first episodes end at env step 400; resumed fresh, 200 steps per env later.
    assert ended_straight[0] == 400
    ended = [s.env_steps for s in history if s.rollout.episodes]
    assert ended[0] == 80 + 400
    assert [s.rollout.length_mean for s in history if s.rollout.episodes][0] == 200
    # the buffer cut the unfinished episodes at the checkpoint: 40 steps each, nothing crosses the reset
    _, _, lengths = a.buffer.episode_bounds(last_rows)
    assert lengths.tolist() == [40, 40]


def test_prioritized_buffer_gets_priorities_and_annealed_beta() -> None:
    envs = pendulum()
    algo = TD3.from_spaces(
        envs.single_observation_space, envs.single_action_space, TD3Config(hidden=(16,)), device="cpu"
    )
    buf = TinyReplay(1000, prioritized=True)
    cfg = OffPolicyTrainerConfig(max_env_steps=100, collect_env_steps=20, batch_size=16, per_beta_end=1.0)
    trainer = OffPolicyTrainer(algo, buf, envs, config=cfg)
    trainer.run()
    assert len(buf.priority_updates) == trainer.grad_steps == 100
    idx, prio = buf.priority_updates[-1]
    assert prio.shape == idx.shape == (16,) and np.all(prio >= 0)
    assert buf.beta == pytest.approx(1.0)


def test_invalid_trainer_configs_raise() -> None:
    with pytest.raises(ValueError):
        OffPolicyTrainerConfig(collect_env_steps=0)
    with pytest.raises(ValueError):
        OffPolicyTrainerConfig(per_beta_end=1.0)
    with pytest.raises(ValueError):
        OffPolicyTrainerConfig(gamma=1.5)
    envs = pendulum()
    algo = SAC.from_spaces(
        envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(8,)), device="cpu"
    )
    with pytest.raises(ValueError, match="eval_envs"):
        OffPolicyTrainer(algo, make_buffer(), envs, config=OffPolicyTrainerConfig(eval_every=1))
    with pytest.raises(ValueError, match="max_env_steps"):
        OffPolicyTrainer(algo, make_buffer(), envs, config=OffPolicyTrainerConfig()).run()


class TinyGoalEnv(gym.Env):
    """A 2-D point that moves by its action towards a goal; reward -1 until within 0.1; 20 steps."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self) -> None:
        box = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box}
        )
        self.action_space = gym.spaces.Box(-0.2, 0.2, (2,), np.float32)

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        return -(np.linalg.norm(achieved_goal - desired_goal, axis=-1) > 0.1).astype(np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = np.zeros(2, np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + np.asarray(action, np.float32), -2, 2)
        self.t += 1
        rew = float(self.compute_reward(self.pos, self.goal, {}))
        return self._obs(), rew, False, self.t >= 20, {"is_success": float(rew == 0.0)}


SMOKE = [
    ("dqn", "CartPole-v1"),
    ("ddpg", "Pendulum-v1"),
    ("td3", "Pendulum-v1"),
    ("sac", "Pendulum-v1"),
    ("ddpg", "goal"),
    ("sac", "goal"),
]


@pytest.mark.parametrize(("algo_name", "env_id"), SMOKE)
def test_smoke_every_algorithm(algo_name: str, env_id: str) -> None:
    torch.manual_seed(0)
    if env_id == "goal":
        envs = gym.vector.SyncVectorEnv([TinyGoalEnv, TinyGoalEnv])
        eval_envs = gym.vector.SyncVectorEnv([TinyGoalEnv])
    else:
        envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync")
        eval_envs = gym.make_vec(env_id, num_envs=1, vectorization_mode="sync")
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    factory = {
        "dqn": lambda: DQN.from_spaces(obs_space, act_space, DQNConfig(hidden=(32,)), device="cpu"),
        "ddpg": lambda: DDPG.from_spaces(obs_space, act_space, DDPGConfig(hidden=(32,)), device="cpu"),
        "td3": lambda: TD3.from_spaces(obs_space, act_space, TD3Config(hidden=(32,)), device="cpu"),
        "sac": lambda: SAC.from_spaces(obs_space, act_space, SACConfig(hidden=(32,)), device="cpu"),
    }
    core = real_buffers()
    if env_id == "goal" and core is not None:
        buffer = core.HERReplayBuffer(5000, num_envs=2, seed=0, compute_reward=TinyGoalEnv().compute_reward)
    else:
        buffer = make_buffer(5000)
    cfg = OffPolicyTrainerConfig(
        max_env_steps=300,
        collect_env_steps=50,
        batch_size=32,
        warmup_env_steps=100,
        eval_every=3,
        eval_episodes=2,
    )
    last = OffPolicyTrainer(factory[algo_name](), buffer, envs, config=cfg, eval_envs=eval_envs).run()
    assert last is not None
    assert 300 <= last.env_steps < 300 + 2  # a vector step may overshoot by N - 1 (reset rows)
    assert 200 <= last.grad_steps <= last.env_steps - 100
    assert last.eval is not None and np.isfinite(last.eval.return_mean)
    assert all(np.isfinite(v) for v in vars(last.train).values())


def test_real_prioritized_buffer_priorities_flow_back() -> None:
    core = real_buffers()
    if core is None:
        pytest.skip("needs the built rlcore core")
    torch.manual_seed(0)
    envs = pendulum()
    algo = TD3.from_spaces(
        envs.single_observation_space, envs.single_action_space, TD3Config(hidden=(16,)), device="cpu"
    )
    buf = core.PrioritizedReplayBuffer(2000, num_envs=2, alpha=0.6, beta=0.4, seed=0)
    cfg = OffPolicyTrainerConfig(max_env_steps=200, collect_env_steps=20, batch_size=32, per_beta_end=1.0)
    OffPolicyTrainer(algo, buf, envs, config=cfg).run()
    assert buf.beta == pytest.approx(1.0)
    weights = buf.sample(256).weights
    assert weights is not None and weights.min() < 0.99 * weights.max()  # priorities are no longer uniform


class UnpicklableGoalEnv(TinyGoalEnv):
    """Like MuJoCo envs: the env object cannot be pickled."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.lock = threading.Lock()


def test_resume_with_unpicklable_envs_warns_and_restarts_episodes(tmp_path) -> None:
    core = real_buffers()
    if core is None:
        pytest.skip("needs the built rlcore core")

    def build() -> OffPolicyTrainer:
        torch.manual_seed(0)
        envs = gym.vector.SyncVectorEnv([UnpicklableGoalEnv, UnpicklableGoalEnv])
        algo = DDPG.from_spaces(
            envs.single_observation_space, envs.single_action_space, DDPGConfig(hidden=(16,)), device="cpu"
        )
        buffer = core.HERReplayBuffer(2000, num_envs=2, seed=0, distance_threshold=0.1)
        cfg = OffPolicyTrainerConfig(max_env_steps=200, collect_env_steps=30, batch_size=16)
        return OffPolicyTrainer(algo, buffer, envs, config=cfg)

    first = build()
    next(first)
    next(first)
    first.save_checkpoint(tmp_path / "ckpt")
    second = build()
    with pytest.warns(RuntimeWarning, match="no env snapshot"):
        second.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    assert second.env_steps == 60 and len(second.buffer) == len(first.buffer)
    s = next(second)
    assert s.iteration == 3 and s.env_steps == 90 and s.grad_steps == first.grad_steps + 30
