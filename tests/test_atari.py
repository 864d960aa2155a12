"""Atari end to end (issue 19, part 2): the env wrappers on real ALE games, the Nature CNN, DQN on
image observations (CPU and CUDA), the Atari preset and a 2k-step Breakout run through the CLI.

The ALE tests need the ``atari`` extra (ale-py, OpenCV); CI installs it (``make test``)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import rlcore
import torch
from rlcore.algos.dqn import DQN, DQNConfig
from rlcore.cli import main
from rlcore.collect.collector import Collector
from rlcore.envs import make_vec
from rlcore.envs.atari import envpool_atari_id, is_atari, make_atari, make_atari_vec
from rlcore.errors import ApiUsageError, DTypeError, InvalidValueError
from rlcore.logging import JsonlLogger
from rlcore.nets import DiscreteQNetwork, ImageQNetwork, NatureCNN, ObsEncoder, PixelObs, is_image_space
from rlcore.presets import ATARI_CAPACITY, atari_replay_buffer, preset_for
from rlcore.stats import EpisodeStats, EpochStats, TimeStats
from test_backends import plain_pool_streams

torch.set_num_threads(1)

try:
    import ale_py  # noqa: F401
    import cv2  # noqa: F401

    HAVE_ALE = True
except ImportError:
    HAVE_ALE = False
needs_ale = pytest.mark.skipif(not HAVE_ALE, reason="needs the atari extra (pip install -e '.[atari]')")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
try:
    import envpool  # noqa: F401

    HAVE_ENVPOOL = True
except ImportError:
    HAVE_ENVPOOL = False
needs_envpool = pytest.mark.skipif(not HAVE_ENVPOOL, reason="needs the envpool extra (pip install -e '.[envpool]')")

NOOP = 0
IMAGE_SPACE = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


def _rewards(env: gym.Env, actions: np.ndarray, seed: int) -> np.ndarray:
    env.reset(seed=seed)
    out = []
    for a in actions:
        _, rew, terminated, truncated, _ = env.step(int(a))
        out.append(float(rew))
        if terminated or truncated:
            break
    return np.asarray(out)


# ------------------------------------------------------------------ wrappers


@needs_ale
def test_training_env_reward_is_the_sign_of_the_eval_envs_raw_score() -> None:
    # SpaceInvaders pays 5-30 points per alien: raw rewards differ from their sign within a few
    # hundred random steps. Same seed and actions: same game, so the two reward streams pair up.
    actions = np.random.default_rng(0).integers(0, 6, size=600)
    raw = _rewards(make_atari("ALE/SpaceInvaders-v5", clip_reward=False), actions, seed=3)
    clipped = _rewards(make_atari("ALE/SpaceInvaders-v5", clip_reward=True), actions, seed=3)
    assert len(raw) == len(clipped)
    assert (raw > 1).sum() >= 3  # the eval env reports the game's score, unclipped
    np.testing.assert_array_equal(clipped, np.sign(raw))
    assert set(np.unique(clipped)) <= {-1.0, 0.0, 1.0}


@needs_ale
def test_observations_are_uint8_frame_stacks() -> None:
    env = make_atari("ALE/Breakout-v5")
    obs, _ = env.reset(seed=0)
    assert env.observation_space == IMAGE_SPACE
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    obs2, *_ = env.step(1)
    np.testing.assert_array_equal(obs2[:3], obs[1:])  # the stack shifts by one frame per step
    envs = make_atari_vec("ALE/Breakout-v5", 2, frame_stack=3, screen_size=64)
    obs_N, _ = envs.reset(seed=0)
    assert obs_N.shape == (2, 3, 64, 64) and obs_N.dtype == np.uint8
    assert envs.single_observation_space.shape == (3, 64, 64)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP


def _lives_while_idle(env: gym.Env, steps: int) -> list[int]:
    _, info = env.reset(seed=0)
    lives = [info["lives"]]
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(NOOP)
        lives.append(info["lives"])
        if terminated or truncated:
            break
    return lives


@needs_ale
def test_fire_on_life_start_serves_every_ball_so_an_idle_agent_loses_its_lives() -> None:
    # Breakout serves the ball only on FIRE: an agent that never presses it never starts a game.
    with_fire = _lives_while_idle(make_atari("ALE/Breakout-v5", clip_reward=False), 600)
    assert with_fire[-1] == 0 and len(with_fire) < 600  # five balls served and missed: game over
    without = _lives_while_idle(make_atari("ALE/Breakout-v5", clip_reward=False, fire_on_life_start=False), 600)
    assert min(without) == 5  # the ball was never served


@needs_ale
def test_life_loss_ends_the_episode_but_the_game_goes_on() -> None:
    env = make_atari("ALE/Breakout-v5", terminal_on_life_loss=True)
    obs, info = env.reset(seed=0)
    assert info["lives"] == 5
    ends = []
    for _ in range(5):
        steps = 0
        while True:
            last, _, terminated, truncated, info = env.step(NOOP)
            steps += 1
            if terminated or truncated:
                break
        ends.append((info["lives"], terminated))
        obs, info = env.reset()
        if info["lives"] > 0 and ends[-1][0] > 0:
            assert info["lives"] == ends[-1][0]  # not a new game: the lives left
            np.testing.assert_array_equal(obs[-1], last[-1])  # the game's current frame
    assert ends == [(4, True), (3, True), (2, True), (1, True), (0, True)]
    assert info["lives"] == 5  # after the game over, a new game


@needs_ale
def test_bad_atari_options_raise_typed_errors() -> None:
    with pytest.raises(InvalidValueError, match="frame_stack"):
        make_atari("ALE/Breakout-v5", frame_stack=0)
    with pytest.raises(InvalidValueError, match="repeat_action_probability"):
        make_atari("ALE/Breakout-v5", repeat_action_probability=1.5)
    with pytest.raises(rlcore.errors.ApiUsageError, match="unknown Atari environment"):
        make_atari("ALE/NoSuchGame-v5")


def test_is_atari_tells_ale_ids_from_others() -> None:
    assert is_atari("ALE/Breakout-v5")
    assert not is_atari("CartPole-v1")
    if HAVE_ALE:
        assert is_atari("BreakoutNoFrameskip-v4")


def test_make_vec_refuses_wrappers_for_envpool() -> None:
    with pytest.raises(InvalidValueError, match="backend='gymnasium'"):
        make_vec("CartPole-v1", 1, backend="envpool", wrappers=(lambda e: e,))


# ------------------------------------------------------------------ EnvPool's Atari envs


def test_envpool_atari_ids_and_their_sticky_actions() -> None:
    assert envpool_atari_id("ALE/Breakout-v5") == ("Breakout-v5", 0.25)
    assert envpool_atari_id("PongNoFrameskip-v4") == ("Pong-v5", 0.0)
    for bad in ("CartPole-v1", "ALE/Breakout-v4", "Breakout-v5"):
        with pytest.raises(ApiUsageError, match="EnvPool backend takes"):
            envpool_atari_id(bad)


@needs_envpool
def test_envpool_atari_refusals_leave_nothing_open() -> None:
    with pytest.raises(ApiUsageError, match="always press FIRE"):
        make_atari_vec("ALE/Breakout-v5", 1, backend="envpool", fire_on_life_start=False)
    with pytest.raises(InvalidValueError, match="repeat_action_probability"):
        make_atari_vec("ALE/Breakout-v5", 1, backend="envpool", repeat_action_probability=1.5)
    with pytest.raises(InvalidValueError, match="not options of EnvPool"):
        make_vec("Breakout-v5", 1, backend="envpool", make_kwargs={"stack_size": 4})
    with pytest.raises(InvalidValueError, match="noop_max >= 1"):  # envpool 1.2.5 segfaults at reset
        make_atari_vec("ALE/Breakout-v5", 1, backend="envpool", noop_max=0)
    for seed in (-1, 2**31 - 1):  # env i gets seed + i, an int32 in EnvPool
        with pytest.raises(InvalidValueError, match=r"\[0, 2\*\*31\)"):
            make_atari_vec("ALE/Breakout-v5", 2, backend="envpool", seed=seed)


def test_make_atari_vec_refuses_an_unknown_backend() -> None:
    with pytest.raises(InvalidValueError, match="backend must be"):
        make_atari_vec("ALE/Breakout-v5", 1, backend="envppol")  # type: ignore[arg-type]


def test_on_policy_cli_points_atari_games_to_dqn(capsys: pytest.CaptureFixture[str]) -> None:
    for backend in ("gymnasium", "envpool"):
        assert main(["train", "--algo", "ppo", "--env", "ALE/Breakout-v5", "--backend", backend]) == 2
        assert "Atari games train with --algo dqn" in capsys.readouterr().err


@needs_envpool
def test_cli_eval_seed_of_envpool_atari_stays_an_int32(tmp_path: Path) -> None:
    argv = ["train", "--algo", "dqn", "--env", "ALE/Breakout-v5", "--backend", "envpool", "--steps", "40",
            "--warmup-env-steps", "40", "--seed", str(2**31 - 100), "--out", str(tmp_path / "r"),
            "--no-progress", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0


def _obs_policy(obs: np.ndarray) -> np.ndarray:
    """Actions that depend on the observation only (4 actions), so that each env's stream is the
    same whatever order an asynchronous pool returns the envs in."""
    return (obs.reshape(len(obs), -1)[:, ::97].astype(np.int64).sum(1) % 4).astype(np.int64)


def _plain_envpool_atari_streams(n: int, vector_steps: int, seed: int) -> list[list[tuple]]:
    """Per env (obs, act, rew, term, trunc, obs_next) of a plain lock-step loop over the same
    EnvPool envs (training settings), NEXT_STEP autoreset rows left out."""
    pool = make_atari_vec("ALE/Breakout-v5", n, backend="envpool", seed=seed, terminal_on_life_loss=True)
    try:
        return plain_pool_streams(pool, _obs_policy, n, vector_steps)
    finally:
        pool.close()


@needs_envpool
@pytest.mark.parametrize("async_batch", [None, 1])
def test_envpool_breakout_stacks_are_stored_byte_for_byte(async_batch: int | None) -> None:
    """Training settings (a lost life ends the episode, the game goes on with FIRE): every stored
    transition's rebuilt stacks are the frames EnvPool returned, across episode starts."""
    n, steps, seed = 2, 700, 5
    envs = make_atari_vec(
        "ALE/Breakout-v5", n, backend="envpool", seed=seed, async_batch=async_batch, terminal_on_life_loss=True
    )
    assert envs.single_observation_space.shape == (4, 84, 84)
    buf = atari_replay_buffer(4 * steps, num_envs=n, seed=0)
    col = Collector(envs, buf)
    col.reset(seed=seed)
    stats = col.collect(n * steps, policy=_obs_policy)
    envs.close()
    assert len(stats.episode_returns) >= 4  # several lives lost: episode starts inside a game
    plain = _plain_envpool_atari_streams(n, steps + 50, seed)
    seg = buf.capacity // n
    for i in range(n):
        rows = np.arange(i * seg, (i + 1) * seg)
        idx = rows[buf.is_transition(rows)]
        assert len(idx) >= steps - 60
        b = buf.sample_at(idx, n_step=1, gamma=1.0)
        want = plain[i][: len(idx)]
        assert len(want) == len(idx)
        np.testing.assert_array_equal(b.obs, np.stack([w[0] for w in want]))
        np.testing.assert_array_equal(b.act, [w[1] for w in want])
        np.testing.assert_array_equal(b.rew, np.asarray([w[2] for w in want], np.float32))
        np.testing.assert_array_equal(b.terminated, [w[3] for w in want])
        np.testing.assert_array_equal(b.obs_next, np.stack([w[5] for w in want]))


@needs_envpool
def test_cli_trains_dqn_on_breakout_on_envpool(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "dqn", "--env", "ALE/Breakout-v5", "--backend", "envpool", "--steps", "1200",
            "--warmup-env-steps", "1000", "--out", str(out), "--no-progress", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["args"]["backend"] == "envpool"
    last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["time/env_steps"] == 1200 and last["time/grad_steps"] == 50
    assert np.isfinite(last["train/loss"]) and last["eval/episodes"] == 10 and last["eval/return_mean"] >= 0


# ------------------------------------------------------------------ the Nature CNN


def test_nature_cnn_shapes_and_layers_follow_mnih_2015() -> None:
    cnn = NatureCNN((4, 84, 84))
    convs = [m for m in cnn.convs if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (32, (8, 8), (4, 4)),
        (64, (4, 4), (2, 2)),
        (64, (3, 3), (1, 1)),
    ]
    assert cnn.fc[0].in_features == 3136 and cnn.fc[0].out_features == 512
    x = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    assert cnn(x).shape == (5, 512)
    q = ImageQNetwork((4, 84, 84), 6)
    assert q(x).shape == (5, 6) and q(x).dtype == torch.float32
    assert ImageQNetwork((4, 84, 84), 6, dueling=True)(x).shape == (5, 6)


def test_nature_cnn_scales_uint8_pixels_by_1_over_255() -> None:
    torch.manual_seed(0)
    cnn = NatureCNN((4, 84, 84))
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    ref = cnn.fc(cnn.convs(x.double().div(255.0).float()))
    torch.testing.assert_close(cnn(x), ref, rtol=1e-5, atol=1e-6)
    unscaled = cnn.fc(cnn.convs(x.float()))
    assert not torch.allclose(cnn(x), unscaled)
    with pytest.raises(DTypeError, match="uint8"):
        cnn(x.float() / 255)


def test_dqn_builds_the_cnn_for_images_and_the_mlp_for_vectors() -> None:
    assert is_image_space(IMAGE_SPACE)
    assert not is_image_space(gym.spaces.Box(0, 255, (4, 84), np.uint8))
    assert not is_image_space(gym.spaces.Box(0.0, 1.0, (4, 84, 84), np.float32))
    img = DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), device="cpu")
    assert isinstance(img.q_net, ImageQNetwork) and isinstance(img.encoder, PixelObs)
    assert img.act(np.zeros((2, 4, 84, 84), np.uint8)).shape == (2,)
    vec = DQN.from_spaces(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Discrete(2), device="cpu")
    assert isinstance(vec.q_net, DiscreteQNetwork) and isinstance(vec.encoder, ObsEncoder)
    assert vec.act(np.zeros((2, 3), np.float32)).shape == (2,)
    with pytest.raises(ValueError, match="normalize_obs"):
        DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), DQNConfig(normalize_obs=True))


def test_eval_epsilon_explores_from_its_own_stream_and_zero_is_greedy() -> None:
    obs = np.zeros((400, 4, 84, 84), np.uint8)  # one observation, so the greedy action is one action
    greedy = DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), DQNConfig(seed=0), device="cpu")
    assert len(set(greedy.act(obs, deterministic=True).tolist())) == 1
    agent = DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), DQNConfig(seed=0, eval_epsilon=0.5), device="cpu")
    train_rng = agent.rng.bit_generator.state
    act = agent.act(obs, deterministic=True)
    with torch.no_grad():
        best = int(agent.q_net(torch.from_numpy(obs[:1])).argmax())
    share = (act != best).mean()  # random actions other than the greedy one: 0.5 * 3/4
    assert 0.28 < share < 0.47
    assert agent.rng.bit_generator.state == train_rng and agent.explore_env_steps == 0
    with pytest.raises(InvalidValueError, match="eval_epsilon"):
        DQNConfig(eval_epsilon=1.5)


# ------------------------------------------------------------------ DQN on real Breakout batches


def _breakout_buffer(steps: int) -> rlcore.ReplayBuffer:
    envs = make_atari_vec("ALE/Breakout-v5", 1)
    buffer = atari_replay_buffer(steps + 100, num_envs=1, seed=0)
    collector = Collector(envs, buffer)
    collector.reset(seed=0)
    collector.collect(steps)
    envs.close()
    return buffer


@pytest.fixture(scope="module")
def breakout_buffer() -> rlcore.ReplayBuffer:
    if not HAVE_ALE:
        pytest.skip("needs the atari extra")
    return _breakout_buffer(400)


@needs_ale
def test_dqn_update_on_a_breakout_batch_lowers_its_loss_and_moves_the_weights(
    breakout_buffer: rlcore.ReplayBuffer,
) -> None:
    batch = breakout_buffer.sample(32, gamma=0.99)
    assert batch.obs.dtype == np.uint8 and batch.obs.shape == (32, 4, 84, 84)
    assert batch.obs_next.dtype == np.uint8 and batch.obs_next.shape == (32, 4, 84, 84)
    torch.manual_seed(0)
    agent = DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), DQNConfig(lr=1e-3, seed=0), device="cpu")
    before = [p.detach().clone() for p in agent.q_net.parameters()]
    losses = [agent.update(batch).loss for _ in range(20)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.5 * losses[0]  # fitting one batch (the target stays fixed)
    assert all(not torch.equal(b, p) for b, p in zip(before, agent.q_net.parameters(), strict=True))


@needs_ale
@needs_cuda
def test_dqn_on_cuda_takes_uint8_batches_to_the_gpu(breakout_buffer: rlcore.ReplayBuffer) -> None:
    batch = breakout_buffer.sample(32, gamma=0.99).to_torch("cuda")
    assert batch.obs.dtype == torch.uint8 and batch.obs.device.type == "cuda"
    agent = DQN.from_spaces(IMAGE_SPACE, gym.spaces.Discrete(4), DQNConfig(seed=0), device="cuda")
    assert next(agent.q_net.parameters()).device.type == "cuda"
    stats = agent.update(batch)
    assert np.isfinite(stats.loss)
    assert agent.act(np.zeros((3, 4, 84, 84), np.uint8)).shape == (3,)


# ------------------------------------------------------------------ preset, logging, CLI


def test_atari_preset_has_the_zoo_settings() -> None:
    p = preset_for("ALE/Breakout-v5", her=False)
    assert p.capacity == ATARI_CAPACITY == 100_000 and p.trainer.gamma == 0.99 and p.num_envs == 1
    assert p.trainer.batch_size == 32 and p.trainer.collect_env_steps == 4
    assert p.trainer.utd_ratio == 0.25  # one gradient step every 4 agent steps
    dqn = p.configs["dqn"]
    assert isinstance(dqn, DQNConfig)
    assert (dqn.lr, dqn.loss, dqn.eps_end, dqn.eval_epsilon) == (1e-4, "huber", 0.01, 0.05)
    assert dqn.target_update_interval * 4 == 1_000  # SB3 counts it in env steps
    assert p.dqn_eps_decay_fraction == 0.1


def test_jsonl_rows_carry_the_cumulative_wall_time_split(tmp_path: Path) -> None:
    logger = JsonlLogger(tmp_path / "m.jsonl", every_iterations=2)
    none = EpisodeStats.from_episodes((), (), ())
    for i in (1, 2, 3, 4):
        t = TimeStats(
            env_steps=i, grad_steps=0, episodes=0, collect_s=1.0, update_s=2.0, eval_s=0.5,
            iteration_s=3.5, env_steps_per_s=1.0,
        )  # fmt: skip
        logger.write(EpochStats(iteration=i, env_steps=i, grad_steps=0, rollout=none, train=None, eval=None, time=t))
    logger.close()
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["time/iteration"] for r in rows] == [2.0, 4.0]  # thinned ...
    assert [r["time/collect_total_s"] for r in rows] == [2.0, 4.0]  # ... the totals are not
    assert [r["time/update_total_s"] for r in rows] == [4.0, 8.0]
    assert [r["time/eval_total_s"] for r in rows] == [1.0, 2.0]
    assert 0 <= rows[0]["time/wall_s"] <= rows[1]["time/wall_s"]


def test_cli_refuses_atari_with_other_algorithms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--algo", "sac", "--env", "ALE/Breakout-v5"]) == 2
    assert "Atari games train with --algo dqn" in capsys.readouterr().err


@needs_ale
def test_cli_trains_dqn_on_breakout_for_2k_steps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--algo", "dqn", "--env", "ALE/Breakout-v5", "--steps", "2000", "--warmup-env-steps",
            "1500", "--out", str(out), "--no-progress", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["capacity"] == 3_000  # min(100k, steps + 1000)
    assert config["algo_config"]["lr"] == 1e-4 and config["algo_config"]["eps_decay_env_steps"] == 200
    assert config["trainer_config"]["warmup_env_steps"] == 1500
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["time/env_steps"] == 2000 and last["time/grad_steps"] == 125  # (2000 - 1500) / 4
    assert np.isfinite(last["train/loss"])
    assert last["eval/episodes"] == 10 and last["eval/return_mean"] >= 0  # raw score of whole games
    assert max(r["eval/length_mean"] for r in rows if "eval/length_mean" in r) > 100
    assert (out / "checkpoint").is_dir()


@needs_ale
def test_atari_example_runs_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "atari_dqn.py"
    argv = ["--steps", "600", "--warmup-env-steps", "500", "--capacity", "1000", "--eval-episodes", "1",
            "--no-progress", "--device", "cpu", "--out", str(tmp_path / "run")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", [example.name, *argv])
    runpy.run_path(str(example), run_name="__main__")
    out = capsys.readouterr().out
    assert "gradient steps: 25" in out and "final eval return" in out
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
