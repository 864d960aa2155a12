"""rlcore.envs.stepping: THE env stepper, in every autoreset mode, with a scripted env whose
observation is (episode, step): which rows are transitions, the true next observation of every
row, episode returns/lengths, success read from ``info["is_success"]`` in the NEXT_STEP and
SAME_STEP layouts (the same values through the collector, the rollout sampler and evaluate), its
own observation copies, and its snapshots."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from rlcore.collect import Collector, RolloutSampler, evaluate
from rlcore.envs.stepping import EnvStepper, episode_success
from rlcore.errors import ApiUsageError

MODES = list(AutoresetMode)
RESET_SUCCESS = -1.0  # what the reset's info says: reading it instead of the final step's is wrong


class ScriptedEnv(gym.Env):
    """Episode k of this env lasts ``lengths[k % len]`` steps and ends by termination when
    ``terminate[k % len]``, else by truncation. obs = (k, t); reward = 10 k + t + action; at the
    last step ``is_success = successes[k % len]`` (0 before it; the reset info says -1). With
    ``report=False`` the env never reports ``is_success``. With ``dict_obs`` the observation is a
    goal-env dict whose entries all hold (k, t)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        lengths: tuple[int, ...],
        terminate: tuple[bool, ...],
        successes: tuple[float, ...],
        *,
        report: bool = True,
        dict_obs: bool = False,
    ) -> None:
        self.lengths, self.terminate, self.successes = lengths, terminate, successes
        self.report, self.dict_obs = report, dict_obs
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space: gym.Space = (
            gym.spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box}) if dict_obs else box
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.k = -1
        self.t = 0

    def _obs(self) -> Any:
        o = np.array([self.k, self.t], np.float32)
        return {"observation": o, "achieved_goal": o.copy(), "desired_goal": o.copy()} if self.dict_obs else o

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.k, self.t = self.k + 1, 0
        return self._obs(), ({"is_success": RESET_SUCCESS} if self.report else {})

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        n = len(self.lengths)
        end = self.t == self.lengths[self.k % n]
        term = end and self.terminate[self.k % n]
        info = {"is_success": self.successes[self.k % len(self.successes)] if end else 0.0} if self.report else {}
        return self._obs(), float(10 * self.k + self.t + action[0]), term, end and not term, info


# env 0: episodes of 2 (terminated, success 1) and 3 (truncated, success 0) steps, alternating;
# env 1: episodes of 4 steps, truncated, success 1 then 0.
SCRIPTS = [((2, 3), (True, False), (1.0, 0.0)), ((4,), (False,), (1.0, 0.0))]


def make_envs(
    mode: AutoresetMode, *, report: tuple[bool, ...] = (True, True), dict_obs: bool = False
) -> SyncVectorEnv:
    fns = [
        lambda s=s, r=r: ScriptedEnv(*s, report=r, dict_obs=dict_obs)
        for s, r in zip(SCRIPTS, report, strict=True)
    ]
    return SyncVectorEnv(fns, autoreset_mode=mode)


def expected_episodes(i: int, count: int, *, report: bool = True) -> list[tuple[int, float, int, float | None]]:
    """(env, return, length, success) of env i's first ``count`` episodes, from its script."""
    lengths, _, successes = SCRIPTS[i]
    out = []
    for k in range(count):
        n = lengths[k % len(lengths)]
        ret = float(sum(10 * k + t for t in range(1, n + 1)))
        out.append((i, ret, n, successes[k % len(successes)] if report else None))
    return out


def obs_array(obs: Any) -> np.ndarray:
    return obs["observation"] if isinstance(obs, dict) else obs


def zeros(obs: Any) -> np.ndarray:
    return np.zeros((len(obs_array(obs)), 1), np.float32)


@pytest.mark.parametrize("dict_obs", [False, True], ids=["array", "dict"])
@pytest.mark.parametrize("mode", MODES)
def test_stepper_rows_next_obs_and_episode_accounting(mode: AutoresetMode, dict_obs: bool) -> None:
    stepper = EnvStepper(make_envs(mode, dict_obs=dict_obs))
    with pytest.raises(ApiUsageError, match="reset"):
        stepper.step(np.zeros((2, 1), np.float32))
    stepper.reset(seed=0)
    steps = [stepper.step(zeros(stepper.obs)) for _ in range(14)]

    for step in steps:
        o, o_next = obs_array(step.obs), obs_array(step.obs_next)
        for i in range(2):
            if step.transition_N[i]:
                # every transition, the done ones included, goes from (k, t) to (k, t + 1)
                np.testing.assert_array_equal(o_next[i], o[i] + [0, 1])
                assert step.rew_N[i] == 10 * o[i][0] + o[i][1] + 1
                if isinstance(step.obs_next, dict):
                    for key in ("achieved_goal", "desired_goal"):
                        np.testing.assert_array_equal(step.obs_next[key][i], o_next[i])
            else:
                # a NEXT_STEP reset row: acted on the final observation, lands on the reset one
                assert mode == AutoresetMode.NEXT_STEP and step.rew_N[i] == 0.0
                np.testing.assert_array_equal(o_next[i], [o[i][0] + 1, 0])
    transition_TN = np.array([s.transition_N for s in steps])
    done_TN = np.array([s.done_N for s in steps])
    if mode == AutoresetMode.NEXT_STEP:
        np.testing.assert_array_equal(transition_TN[1:], ~done_TN[:-1])  # the row after a done is a reset
    else:
        assert transition_TN.all()
        # the step after a done starts the next episode at t = 0
        for t, i in zip(*np.nonzero(done_TN[:-1]), strict=True):
            np.testing.assert_array_equal(obs_array(steps[t + 1].obs)[i], [obs_array(steps[t].obs)[i][0] + 1, 0])
    for step in steps:  # termination and truncation as scripted, only where an episode ends
        for i in np.flatnonzero(step.done_N):
            k = int(obs_array(step.obs)[i][0])
            lengths, terminate, _ = SCRIPTS[i]
            assert obs_array(step.obs_next)[i][1] == lengths[k % len(lengths)]
            assert (bool(step.terminated_N[i]), bool(step.truncated_N[i])) == (
                terminate[k % len(terminate)],
                not terminate[k % len(terminate)],
            )

    ended = [e for s in steps for e in s.episodes]
    assert [e.env for s in steps for e in s.episodes] == [i for s in steps for i in np.flatnonzero(s.done_N)]
    for i in range(2):
        mine = [tuple(e) for e in ended if e.env == i]
        assert mine == expected_episodes(i, len(mine))
    assert len(ended) >= 5
    assert stepper.episodes == len(ended)
    assert stepper.env_steps == int(transition_TN.sum()) == sum(s.transitions for s in steps)


@pytest.mark.parametrize("mode", MODES)
def test_success_is_the_same_through_collector_sampler_and_evaluate(mode: AutoresetMode) -> None:
    """``is_success`` of the final step (``info`` under NEXT_STEP and DISABLED,
    ``info["final_info"]`` under SAME_STEP, where ``info`` is the reset's): the same values through
    the stepper, the collector, the rollout sampler and evaluate; env 1 does not report it."""
    report = (True, False)
    want = {i: expected_episodes(i, 6, report=report[i]) for i in range(2)}

    stepper = EnvStepper(make_envs(mode, report=report))
    stepper.reset(seed=0)
    ended = [e for _ in range(12) for e in stepper.step(zeros(stepper.obs)).episodes]
    for i in range(2):
        mine = [tuple(e) for e in ended if e.env == i]
        assert mine == want[i][: len(mine)]
    stepper_successes = [e.success for e in ended if e.success is not None]
    assert stepper_successes and RESET_SUCCESS not in stepper_successes

    collector = Collector(make_envs(mode, report=report), None)
    collector.reset(seed=0)
    want_env_steps = stepper.env_steps
    collected = collector.collect(want_env_steps, policy=zeros)
    assert collected.env_steps == want_env_steps and collected.vector_steps == 12
    assert collected.episode_successes == tuple(stepper_successes)
    assert collected.episode_returns == tuple(e.ret for e in ended)
    assert collected.episode_lengths == tuple(e.length for e in ended)

    class ZeroPolicy:
        def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            n = len(obs)
            return np.zeros((n, 1), np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)

        def value(self, obs: np.ndarray) -> np.ndarray:
            return np.zeros(len(obs), np.float32)

    sampler = RolloutSampler(make_envs(mode, report=report))
    sampler.reset(seed=0)
    rollout, sampled = sampler.sample(ZeroPolicy(), num_steps=12)
    assert sampled.episode_successes == tuple(stepper_successes)
    assert sampled.episode_returns == tuple(e.ret for e in ended)
    assert rollout.num_transitions == want_env_steps

    # evaluate: env 0 runs episodes 0, 1, 2 (success 1, 0, 1), env 1 runs 0, 1 (no success signal)
    stats = evaluate(zeros, make_envs(mode, report=report), 5, seed=0)
    assert stats.episodes == 5
    assert stats.success_rate == pytest.approx(2 / 3)
    assert stats.length_mean == pytest.approx((2 + 3 + 2 + 4 + 4) / 5)
    assert stats.return_mean == pytest.approx(np.mean([r for i in (0, 1) for _, r, _, _ in want[i][: 3 - i]]))


def test_episode_success_reads_the_final_info_only_under_same_step() -> None:
    info = {
        "is_success": np.array([RESET_SUCCESS, 0.0]),
        "_is_success": np.array([True, False]),
        "final_info": {"is_success": np.array([1.0, 0.0]), "_is_success": np.array([True, False])},
    }
    assert episode_success(info, 0, AutoresetMode.SAME_STEP) == 1.0
    assert episode_success(info, 0, AutoresetMode.NEXT_STEP) == RESET_SUCCESS
    assert episode_success(info, 1, AutoresetMode.SAME_STEP) is None  # masked out: not reported
    assert episode_success({}, 0, AutoresetMode.SAME_STEP) is None


@pytest.mark.parametrize("mode", MODES)
def test_stepper_arrays_are_its_own_with_an_env_that_reuses_its_array(mode: AutoresetMode) -> None:
    """``SyncVectorEnv(copy=False)`` returns (and then rewrites) one internal array:
    what the stepper handed out stays as it was."""
    envs = SyncVectorEnv([lambda s=s: ScriptedEnv(*s) for s in SCRIPTS], autoreset_mode=mode, copy=False)
    stepper = EnvStepper(envs)
    stepper.reset(seed=0)
    steps = [stepper.step(zeros(stepper.obs)) for _ in range(12)]
    for step in steps:
        assert not np.shares_memory(step.obs, envs._observations)
        assert not np.shares_memory(step.obs_next, envs._observations)
        t = step.transition_N
        np.testing.assert_array_equal(step.obs_next[t], step.obs[t] + [0, 1])
    # evaluate on the same kind of env counts the scripted lengths
    stats = evaluate(zeros, SyncVectorEnv([lambda s=s: ScriptedEnv(*s) for s in SCRIPTS], copy=False), 4)
    assert stats.length_mean == pytest.approx((2 + 3 + 4 + 4) / 4)


@pytest.mark.parametrize("mode", MODES)
def test_stepper_snapshot_continues_exactly_or_warns_and_resets(mode: AutoresetMode) -> None:
    a = EnvStepper(make_envs(mode))
    a.reset(seed=0)
    for _ in range(5):
        a.step(zeros(a.obs))
    state = a.state_dict()
    assert state["envs"] is not None
    b = EnvStepper(make_envs(mode))
    assert b.load_state_dict(state) is True
    for _ in range(9):
        sa, sb = a.step(zeros(a.obs)), b.step(zeros(b.obs))
        np.testing.assert_array_equal(sa.obs, sb.obs)
        np.testing.assert_array_equal(sa.obs_next, sb.obs_next)
        np.testing.assert_array_equal(sa.transition_N, sb.transition_N)
        assert sa.episodes == sb.episodes
    assert (a.env_steps, a.episodes) == (b.env_steps, b.episodes)

    c = EnvStepper(make_envs(mode))
    with pytest.warns(RuntimeWarning, match="every env starts a fresh episode"):
        assert c.load_state_dict({**state, "envs": None}, seed=3) is False
    assert (c.env_steps, c.episodes) == (state["env_steps"], state["episodes"])
    np.testing.assert_array_equal(c.obs, [[0, 0], [0, 0]])  # fresh first episodes
    assert not c.next_is_reset_N.any()
