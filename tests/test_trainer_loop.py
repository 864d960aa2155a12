"""rlcore.trainers.loop: the one loop of every trainer (evaluation schedule and seeds, stats,
run, checkpoints), typed config errors, and GAIL as the on-policy trainer with GAIL's reward."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import rlcore.envs  # registers rlcore/CartPoleNoVel-v1
import torch
from rlcore.algos import PPO, SAC, PPOConfig, SACConfig
from rlcore.algos.bc import BC, BCConfig
from rlcore.algos.gail import GAIL, GAILConfig
from rlcore.algos.r2d2 import R2D2, R2D2Config
from rlcore.distributed import DistributedConfig, DistributedTrainer
from rlcore.errors import InvalidValueError
from rlcore.trainers import (
    OfflineTrainer,
    OfflineTrainerConfig,
    OffPolicyTrainer,
    OffPolicyTrainerConfig,
    OnPolicyTrainer,
    OnPolicyTrainerConfig,
    RecurrentTrainer,
    Trainer,
)
from rlcore.trainers.loop import eval_seed

torch.set_num_threads(1)


def vec(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")


def expert_data() -> rlcore.ReplayBuffer:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    act = (obs[:, 2] > 0).astype(np.int64)
    done = np.zeros(64, bool)
    done[-1] = True
    return rlcore.ReplayBuffer.from_arrays(
        obs, act, np.ones(64, np.float32), done, np.zeros(64, bool), obs, seed=0
    )


def off_policy(**cfg: Any) -> OffPolicyTrainer:
    envs = vec("Pendulum-v1", 2)
    sac = SAC.from_spaces(
        envs.single_observation_space, envs.single_action_space, SACConfig(hidden=(8,)), device="cpu"
    )
    config = OffPolicyTrainerConfig(collect_env_steps=20, batch_size=16, **cfg)
    return OffPolicyTrainer(
        sac, rlcore.ReplayBuffer(500, num_envs=2, seed=0), envs, config=config, eval_envs=vec("Pendulum-v1", 1)
    )


def on_policy(**cfg: Any) -> OnPolicyTrainer:
    envs = vec("CartPole-v1", 2)
    ppo = PPO.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        PPOConfig(n_epochs=1, minibatch_size=32),
        num_envs=2,
        device="cpu",
    )
    config = OnPolicyTrainerConfig(num_steps=16, **cfg)
    return OnPolicyTrainer(ppo, envs, config=config, eval_envs=vec("CartPole-v1", 1))


def offline(**cfg: Any) -> OfflineTrainer:
    env = gym.make("CartPole-v1")
    bc = BC.from_spaces(env.observation_space, env.action_space, BCConfig(hidden=(8,)))
    config = OfflineTrainerConfig(grad_steps_per_iteration=5, batch_size=16, **cfg)
    return OfflineTrainer(bc, expert_data(), config=config, eval_envs=vec("CartPole-v1", 1))


def recurrent(**cfg: Any) -> RecurrentTrainer:
    envs = vec("rlcore/CartPoleNoVel-v1", 2)
    r2d2 = R2D2.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        R2D2Config(burn_in=2, seq_len=4, hidden=(8,), recurrent_size=8, target_update_interval=5, seed=0,
                   normalize_obs=True, lr_anneal_env_steps=1_000, prev_action_input=True),
        device="cpu",
    )
    config = OffPolicyTrainerConfig(collect_env_steps=20, utd_ratio=0.25, batch_size=4, n_step=2, **cfg)
    buffer = rlcore.PrioritizedReplayBuffer(500, num_envs=2, seed=0)
    return RecurrentTrainer(r2d2, buffer, envs, config=config, eval_envs=vec("rlcore/CartPoleNoVel-v1", 1))


TRAINERS = {"off-policy": off_policy, "on-policy": on_policy, "offline": offline, "recurrent": recurrent}


def test_every_trainer_is_one_loop() -> None:
    """Evaluation, run, the iterator protocol and checkpoints have one implementation; the
    distributed trainer only adds its no-restart-after-start check around the shared load."""
    for cls in (OffPolicyTrainer, OnPolicyTrainer, OfflineTrainer, RecurrentTrainer, DistributedTrainer):
        assert issubclass(cls, Trainer)
        for name in ("evaluate", "run", "__iter__", "_epoch_stats", "_eval_due"):
            assert getattr(cls, name) is getattr(Trainer, name), (cls.__name__, name)
    # the recurrent trainer is the off-policy loop: only its policy, gradient step and state differ
    assert issubclass(RecurrentTrainer, OffPolicyTrainer)
    assert RecurrentTrainer.__next__ is OffPolicyTrainer.__next__
    for cls in (OffPolicyTrainer, OnPolicyTrainer, OfflineTrainer, RecurrentTrainer):
        for name in ("save_checkpoint", "load_checkpoint"):
            assert getattr(cls, name) is getattr(Trainer, name), (cls.__name__, name)


@pytest.mark.parametrize("kind", list(TRAINERS))
def test_evaluation_schedule_and_seeds_are_the_same_for_every_trainer(kind: str) -> None:
    """Every ``eval_every`` iterations and at the last one; an evaluation after iteration i resets
    the eval envs with seed + 10_000 + 1_000 i (a function of the iteration, so a resumed run
    evaluates with the seeds of the uninterrupted one)."""
    horizon = {"offline": {"max_grad_steps": 25}}.get(kind, {"max_env_steps": 100})
    trainer = TRAINERS[kind](eval_every=2, eval_episodes=1, seed=7, **horizon)
    seeds: list[int | None] = []
    reset = trainer.eval_envs.reset

    def spy(*, seed: int | None = None, options: Any = None) -> Any:
        seeds.append(seed)
        return reset(seed=seed, options=options)

    trainer.eval_envs.reset = spy  # type: ignore[method-assign]
    stats = list(trainer)
    n = len(stats)
    assert n >= 3 and trainer.done
    due = [i for i in range(1, n + 1) if i % 2 == 0 or i == n]  # and always the last
    assert [s.iteration for s in stats if s.eval is not None] == due
    assert seeds == [eval_seed(7, i) for i in due]
    assert seeds[:2] == [12_007, 14_007]
    assert trainer._evaluations == len(due)


@pytest.mark.parametrize("kind", list(TRAINERS))
def test_run_without_a_horizon_raises_a_typed_error(kind: str) -> None:
    horizon = "max_grad_steps" if kind == "offline" else "max_env_steps"
    with pytest.raises(InvalidValueError, match=f"run\\(\\) needs config.{horizon}"):
        TRAINERS[kind]().run()


@pytest.mark.parametrize(
    ("config", "field", "value"),
    [
        (OffPolicyTrainerConfig, "collect_env_steps", 0),
        (OffPolicyTrainerConfig, "utd_ratio", float("nan")),
        (OffPolicyTrainerConfig, "batch_size", 0),
        (OffPolicyTrainerConfig, "n_step", 0),
        (OffPolicyTrainerConfig, "gamma", 1.5),
        (OffPolicyTrainerConfig, "warmup_env_steps", -1),
        (OffPolicyTrainerConfig, "eval_every", 0),
        (OffPolicyTrainerConfig, "eval_episodes", 0),
        (OffPolicyTrainerConfig, "max_env_steps", 0),
        (OffPolicyTrainerConfig, "per_beta_end", 1.0),
        (OnPolicyTrainerConfig, "num_steps", 0),
        (OnPolicyTrainerConfig, "eval_every", 0),
        (OnPolicyTrainerConfig, "eval_episodes", 0),
        (OnPolicyTrainerConfig, "max_env_steps", 0),
        (OfflineTrainerConfig, "max_grad_steps", 0),
        (OfflineTrainerConfig, "grad_steps_per_iteration", 0),
        (OfflineTrainerConfig, "batch_size", 0),
        (OfflineTrainerConfig, "eval_every", 0),
        (OfflineTrainerConfig, "eval_episodes", 0),
        (DistributedConfig, "num_collectors", 0),
        (DistributedConfig, "collect_env_steps", 0),
        (DistributedConfig, "weight_sync_every", 0),
        (DistributedConfig, "batches_per_request", 0),
        (DistributedConfig, "chunk_rows", 0),
        (DistributedConfig, "max_collector_restarts", -2),
        (DistributedConfig, "eval_every_env_steps", 0),
    ],
)
def test_configs_raise_typed_errors_naming_the_field(config: Any, field: str, value: Any) -> None:
    with pytest.raises(InvalidValueError, match=field) as info:
        config(**{field: value})
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("kind", list(TRAINERS))
def test_eval_every_without_eval_envs_is_a_typed_error(kind: str) -> None:
    trainer = TRAINERS[kind]()
    args: dict[str, Any] = {"config": dataclasses.replace(trainer.config, eval_every=1)}
    with pytest.raises(InvalidValueError, match="eval_envs"):
        if kind in ("off-policy", "recurrent"):
            type(trainer)(trainer.algorithm, trainer.buffer, trainer.collector.envs, **args)
        elif kind == "on-policy":
            OnPolicyTrainer(trainer.algorithm, trainer.sampler.envs, **args)
        else:
            OfflineTrainer(trainer.algorithm, trainer.buffer, **args)


# --------------------------------------------------------------------------- GAIL

# Recorded from rlcore before the trainer merge (GAILTrainer, a subclass of OnPolicyTrainer), same
# machine, and re-recorded once since, when on-policy acting on the CPU moved to numpy with its own
# generator (CHANGELOG, 0.9.0 "Changed": a new action stream, the same code path), and again when
# the uniform draw's rejected candidates were replaced from its prefetched queue (CHANGELOG,
# "Uniform and HER sampling streams": the expert batches differ; only the discriminator's loss and
# reward moved, in the third significant digit), and again when GAIL drew its expert batches with
# its own generator and evaluations took their seed from the iteration (CHANGELOG, "Runs": the
# discriminator's loss and reward moved in the third digit, the evaluation returns changed with
# their seeds; rollouts unchanged): per iteration
# (env_steps, grad_steps, rollout episodes, rollout return_mean, train/disc_loss,
# train/learned_reward, eval return_mean or None).
GAIL_BEFORE = [
    (61, 3, 3, 14.666666666666666, 8.236857414245605, 0.7149948477745056, None),
    (122, 6, 3, 17.333333333333332, 8.032716751098633, 0.7172381281852722, 43.0),
    (184, 9, 2, 31.5, 7.692854881286621, 0.7042103409767151, None),
    (245, 12, 3, 19.0, 7.502443790435791, 0.6912404298782349, 45.0),
    (305, 15, 4, 20.0, 7.359601974487305, 0.7115626931190491, None),
    (367, 18, 2, 16.0, 6.903801918029785, 0.709220826625824, 53.0),
    (429, 21, 2, 44.0, 6.554812431335449, 0.7296479344367981, 110.0),
]


def gail_parts() -> tuple[GAIL, gym.vector.VectorEnv, OnPolicyTrainerConfig, gym.vector.VectorEnv]:
    torch.manual_seed(0)
    np.random.seed(0)  # noqa: NPY002 - as the recording did
    envs = vec("CartPole-v1", 2)
    gail = GAIL.from_spaces(
        envs.single_observation_space,
        envs.single_action_space,
        expert_data(),
        GAILConfig(disc_updates=1, disc_batch_size=32, seed=0),
        PPOConfig(n_epochs=1, minibatch_size=32, seed=0),
        num_envs=2,
        device="cpu",
    )
    config = OnPolicyTrainerConfig(max_env_steps=384, num_steps=32, eval_every=2, eval_episodes=1, seed=0)
    return gail, envs, config, vec("CartPole-v1", 1)


def gail_row(s: Any) -> tuple[Any, ...]:
    return (
        s.env_steps,
        s.grad_steps,
        s.rollout.episodes,
        s.rollout.return_mean,
        s.train.disc_loss,
        s.train.learned_reward,
        None if s.eval is None else s.eval.return_mean,
    )


def test_gail_is_the_on_policy_trainer_with_gails_reward_and_gives_the_recorded_stats() -> None:
    gail, envs, config, eval_envs = gail_parts()
    trainer = OnPolicyTrainer(gail, envs, config=config, eval_envs=eval_envs, reward_fn=gail.reward)
    got = [gail_row(s) for s in trainer]
    assert len(got) == len(GAIL_BEFORE)
    for g, w in zip(got, GAIL_BEFORE, strict=True):
        assert g[:3] == w[:3] and g[6] == w[6]  # counters, episodes and eval returns exactly
        assert g[3:6] == pytest.approx(w[3:6], rel=1e-5)


# --------------------------------------------------------------------------- stats and resume


def gail_trainer(**cfg: Any) -> OnPolicyTrainer:
    gail, envs, config, eval_envs = gail_parts()
    config = dataclasses.replace(config, **cfg)
    return OnPolicyTrainer(gail, envs, config=config, eval_envs=eval_envs, reward_fn=gail.reward)


RESUMABLE = {**TRAINERS, "gail": gail_trainer}


def horizon(kind: str) -> dict[str, int]:
    return {"offline": {"max_grad_steps": 30}, "gail": {"max_env_steps": 256}}.get(kind, {"max_env_steps": 120})


@pytest.mark.parametrize("kind", list(RESUMABLE))
def test_stats_have_the_same_sections_and_consistent_counters_for_every_trainer(kind: str) -> None:
    """Every trainer's EpochStats: the same rollout/eval/time sections (only ``train`` is the
    algorithm's), counters that match the trainer's, one iteration more each time, and timings
    that add up (env_steps_per_s over collect + update time, evaluation excluded)."""
    trainer = RESUMABLE[kind](eval_every=2, eval_episodes=1, **horizon(kind))
    stats = list(trainer)
    assert [s.iteration for s in stats] == list(range(1, len(stats) + 1))
    last = stats[-1]
    assert type(last.rollout) is rlcore.stats.EpisodeStats
    assert type(last.eval) is rlcore.stats.EvalStats and type(last.time) is rlcore.stats.TimeStats
    assert dataclasses.is_dataclass(last.train)
    assert (last.env_steps, last.grad_steps) == (trainer.env_steps, trainer.grad_steps)
    assert (last.time.env_steps, last.time.grad_steps, last.time.episodes) == (
        trainer.env_steps,
        trainer.grad_steps,
        trainer.episodes,
    )
    assert sum(s.rollout.episodes for s in stats) == trainer.episodes
    prev_env_steps = 0
    for s in stats:
        t = s.time
        assert min(t.collect_s, t.update_s, t.eval_s) >= 0
        assert t.iteration_s == pytest.approx(t.collect_s + t.update_s + t.eval_s, abs=1e-9)
        new = s.env_steps - prev_env_steps
        assert t.env_steps_per_s == pytest.approx(new / max(t.collect_s + t.update_s, 1e-9), rel=1e-9)
        prev_env_steps = s.env_steps
    keys = {k for k in rlcore.stats.flatten_stats(last) if not k.startswith("train/")}
    assert {"time/iteration", "rollout/episodes", "eval/episodes", "eval/return_mean", "time/env_steps"} <= keys


def comparable(stats: Any) -> dict[str, float]:
    flat = rlcore.stats.flatten_stats(stats)
    return {k: v for k, v in flat.items() if not k.endswith("_s") and k != "time/env_steps_per_s"}


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    out = {}
    for part, state in trainer.algorithm.state_dict().items():
        if isinstance(state, dict):
            out.update({f"{part}.{k}": v for k, v in state.items() if isinstance(v, torch.Tensor)})
    assert out
    return out


def dataset_of(trainer: Trainer) -> Any:
    return trainer.buffer if isinstance(trainer, OfflineTrainer) else getattr(trainer.algorithm, "expert", None)


def straight_and_resumed(kind: str, tmp_path: Any, *, restore_dataset: bool) -> tuple[list, list, Trainer, Trainer]:
    cfg = {"eval_every": 2, "eval_episodes": 1, **horizon(kind)}
    torch.manual_seed(0)
    straight = RESUMABLE[kind](**cfg)
    rows = []
    for s in straight:
        rows.append(comparable(s))
        if s.iteration == 2:
            straight.save_checkpoint(tmp_path / "ckpt")
            if (data := dataset_of(straight)) is not None:
                data.save(tmp_path / "dataset")
    torch.manual_seed(123)  # disturbed: the checkpoint's RNG states take over
    resumed = RESUMABLE[kind](**cfg)
    resumed.load_checkpoint(tmp_path / "ckpt", trust_env_state=True)
    if restore_dataset and (data := dataset_of(resumed)) is not None:
        data.restore(tmp_path / "dataset")
    assert (resumed.iteration, resumed._evaluations) == (2, 1)
    return rows[2:], [comparable(s) for s in resumed], straight, resumed


@pytest.mark.parametrize("kind", list(RESUMABLE))
def test_resume_from_a_checkpoint_gives_the_same_stats_and_weights_for_every_trainer(kind: str, tmp_path: Any) -> None:
    """Save after 2 iterations, resume a fresh trainer (torch RNG disturbed) with the env snapshot:
    every later iteration's stats (timings aside) and the final weights equal the straight run's,
    bit for bit. BC's dataset and GAIL's expert data are restored beside the checkpoint here; the
    test below shows that it does not matter."""
    want, got, straight, resumed = straight_and_resumed(kind, tmp_path, restore_dataset=True)
    assert len(want) >= 2 and got == want
    w_straight, w_resumed = weights(straight), weights(resumed)
    assert w_straight.keys() == w_resumed.keys()
    for name, tensor in w_straight.items():
        torch.testing.assert_close(w_resumed[name], tensor, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("kind", ["offline", "gail"])
def test_resume_without_restoring_the_dataset_continues_exactly(kind: str, tmp_path: Any) -> None:
    """BC and GAIL draw their dataset's transitions with a generator of their own, which the
    checkpoint holds (rlcore.buffers.draws.DatasetDraws): the dataset's own sampling RNG does not
    matter, so a resumed run continues exactly without restoring it."""
    want, got, _, _ = straight_and_resumed(kind, tmp_path, restore_dataset=False)
    assert got == want
