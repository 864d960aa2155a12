"""Stable-Baselines3 2.9 replay buffers backed by the rlcore core.

Swap one class, keep the algorithm::

    from stable_baselines3 import SAC
    from rlcore.compat.sb3 import ReplayBuffer

    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=ReplayBuffer)

    from rlcore.compat.sb3 import HerReplayBuffer
    model = SAC("MultiInputPolicy", "FetchReach-v4", replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"})

Each class subclasses the SB3 class of the same name (SB3's ``isinstance``/``issubclass`` checks
pass), takes the constructor arguments SB3's off-policy algorithms pass, and keeps SB3's
attributes (``buffer_size`` per env, ``n_envs``, ``pos``, ``full``, ``size()``, ``device``,
``observation_space``, ``action_space``, ``handle_timeout_termination``), but allocates none of
SB3's numpy arrays: the steps live in an :class:`rlcore.ReplayBuffer` (``buffer.core``), which
stores every observation once and keeps the true final observation of every episode.

Semantics (identical to SB3's buffers unless listed under "Differences"):

- ``add(obs, next_obs, action, reward, done, infos)``: a step with ``done`` and
  ``infos[i]["TimeLimit.truncated"]`` is stored as *truncated* (when
  ``handle_timeout_termination``; otherwise as terminated, like SB3), any other ``done`` as
  *terminated*. ``next_obs`` must already hold ``infos[i]["terminal_observation"]`` at done
  steps — SB3's ``OffPolicyAlgorithm._store_transition`` puts it there (un-normalized), exactly
  as SB3's own buffers expect.
- ``sample(batch_size, env)`` returns ``ReplayBufferSamples`` / ``DictReplayBufferSamples`` of
  torch tensors on ``device``: ``observations``/``next_observations`` ``[B, *O]`` (dtype of the
  observation space; normalized by ``env.normalize_obs`` when ``env`` is a VecNormalize),
  ``actions`` ``[B, A]`` (float64 action spaces stored as float32, like SB3), ``rewards``
  ``[B, 1]`` float32 (``env.normalize_reward`` applied), ``dones`` ``[B, 1]`` float32, 1 only
  for true terminations, so SB3's target ``r + (1 - dones) * gamma * Q'(s')`` bootstraps through
  time limits. ``NStepReplayBuffer`` adds ``discounts`` ``[B, 1]`` float32 = gamma^m.

Differences from SB3's buffers (deliberate):

- Capacity: rows are allocated for ``buffer_size`` transitions plus ``extra_rows`` (one row per
  episode holds its final observation); with the default ``buffer_size // 8 + 2`` extra rows
  per env at least ``buffer_size`` transitions fit when episodes average >= 8 steps.
- Randomness: the core owns its generator (seed ``seed``, or derived from NumPy's global state
  without consuming it, so ``set_random_seed`` in SB3 makes runs repeatable). SB3's
  ``np.random`` stream is not used by sampling.
- ``HerReplayBuffer`` samples as SB3's by default (``exact_parity=True``): only transitions of
  finished episodes whole in the ring (a ``RuntimeError`` before the first episode ends) and
  exactly ``int(B * k / (k + 1))`` relabeled samples placed last in the batch.
  (One difference remains: an episode longer than ``buffer_size`` is never whole in the ring,
  so it is not sampled; SB3 2.9 samples it with episode bounds taken modulo its buffer.)
  ``exact_parity=False`` gives rlcore's own HER sampling: running episodes are sampled too
  (relabeling from their stored part) and each sample is relabeled independently with
  probability k / (k + 1).
- ``NStepReplayBuffer`` with ``VecNormalize(norm_reward=True)``: the n-step sum is normalized
  once (``normalize_reward(sum)``); SB3 normalizes (and clips) each reward of the window
  before summing. Equal unless the clip is reached.
- ``size()``, ``full`` and ``pos`` report what ``sample`` can draw from, so
  ``size() == (buffer_size if full else pos)`` (SB3's own reading) is true of the stored
  data: ``size() = min(len(core) // n_envs, buffer_size)``, ``full = size() == buffer_size``,
  ``pos`` = ``size()`` while not full, else SB3's cursor (vector steps added modulo
  ``buffer_size``). They equal SB3's while nothing has been overwritten, and whenever the
  core holds at least ``buffer_size`` transitions per env (episodes of >= 8 steps on
  average). They differ after the ring wraps with short episodes: 1-step episodes take two
  rows each, so the core holds ``(buffer_size + extra_rows) // 2`` of them per env, and
  ``size()`` says so (``full`` stays False) where SB3 holds and reports ``buffer_size``.
  ``full`` can therefore turn False again when episodes get shorter. For ``HerReplayBuffer``
  every stored transition counts (SB3's counts rows too, but samples finished episodes only).
- ``optimize_memory_usage=True`` is refused (every observation is stored once anyway), and
  ``copy_info_dict=True`` (HER) is refused: the core does not hand the relabeled rows to the
  reward callable, so stored infos cannot be matched to transitions.
- SB3's raw arrays (``observations``, ``dones``, ``timeouts``, ...) do not exist; read the
  stored data through ``buffer.core`` (:meth:`rlcore.ReplayBuffer.column`).

Pickling (``model.save_replay_buffer`` / ``load_replay_buffer``) saves the core's full state
(``state_dict``); HER drops the env like SB3 (call ``set_env`` after loading, which
``load_replay_buffer`` does).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from rlcore.compat import _missing

try:
    import torch as th
    from gymnasium import spaces
    from stable_baselines3.common import buffers as _sb3_buffers
    from stable_baselines3.common.preprocessing import get_obs_shape
    from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
    from stable_baselines3.her import her_replay_buffer as _sb3_her
    from stable_baselines3.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise _missing("stable-baselines3", "sb3", _err) from _err

from rlcore.buffers.her import HERReplayBuffer as _CoreHER
from rlcore.buffers.replay import ReplayBuffer as _CoreBuffer
from rlcore.errors import ApiUsageError

__all__ = ["DictReplayBuffer", "HerReplayBuffer", "NStepReplayBuffer", "ReplayBuffer"]


def _seed_from_numpy() -> int:
    """A 63-bit seed derived from NumPy's global generator state without drawing from it."""
    # SB3 seeds the legacy global generator (set_random_seed), so that is the state to follow
    _, key, pos, *_ = np.random.get_state()  # noqa: NPY002
    return zlib.crc32(np.asarray(key).tobytes()) << 16 ^ int(pos)


def _obs_specs(space: spaces.Space) -> list[tuple[str, str, tuple[int, ...]]]:
    """Core obs columns (name, dtype, shape) with SB3's shapes (``get_obs_shape``)."""
    shapes: Any = get_obs_shape(space)
    if isinstance(space, spaces.Dict):
        return [(f"obs.{k}", np.dtype(space[k].dtype).name, tuple(shapes[k])) for k in space.spaces]
    return [("obs", np.dtype(space.dtype).name, tuple(shapes))]


class _CoreStorage:
    """What the four SB3 classes share: the core buffer, ``add``, sampling into SB3 samples,
    ``reset`` and pickling. (A mixin because SB3's classes must stay the real bases.)"""

    _core: _CoreBuffer
    _n_step: int = 1
    _gamma: float = 0.99
    buffer_size: int
    n_envs: int
    pos: int
    full: bool
    device: th.device
    observation_space: Any
    action_space: Any
    action_dim: int
    handle_timeout_termination: bool

    def _init_storage(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str,
        n_envs: int,
        optimize_memory_usage: bool,
        handle_timeout_termination: bool,
        seed: int | None,
        extra_rows: int | None,
    ) -> None:
        if optimize_memory_usage:
            raise ValueError(
                "optimize_memory_usage=True is not supported by rlcore.compat.sb3 buffers and not needed: "
                "rlcore stores every observation once; pass optimize_memory_usage=False"
            )
        # SB3's BaseBuffer attributes only; ReplayBuffer.__init__ would allocate SB3's arrays
        base_init = _sb3_buffers.BaseBuffer.__init__
        base_init(self, buffer_size, observation_space, action_space, device, n_envs=n_envs)  # type: ignore[arg-type]
        self.buffer_size = max(buffer_size // n_envs, 1)
        self.optimize_memory_usage = False
        self.handle_timeout_termination = handle_timeout_termination
        self.extra_rows = self.buffer_size // 8 + 2 if extra_rows is None else int(extra_rows)
        self.seed = _seed_from_numpy() if seed is None else int(seed)
        self._act_dtype = np.dtype(_sb3_buffers.ReplayBuffer._maybe_cast_dtype(action_space.dtype))
        self._obs_dict = isinstance(observation_space, spaces.Dict)
        self._steps_added = 0  # vector steps added since the last reset (SB3's cursor, once full)
        self._core = self._make_core()

    def _make_core(self) -> _CoreBuffer:
        rows = max(2, self.buffer_size + self.extra_rows) * self.n_envs
        core = _CoreBuffer(rows, num_envs=self.n_envs, seed=self.seed)
        core._declare(_obs_specs(self.observation_space), [("act", self._act_dtype.name, (self.action_dim,))])
        return core

    @property
    def core(self) -> _CoreBuffer:
        """The :class:`rlcore.ReplayBuffer` holding the steps (read its columns for the raw data)."""
        return self._core

    # -- writing ------------------------------------------------------------------------------

    def _obs_in(self, obs: Any) -> Any:
        if self._obs_dict:
            return {
                k: np.asarray(obs[k], dtype=self.observation_space[k].dtype).reshape(self.n_envs, *shape)  # type: ignore[index]
                for k, shape in self.obs_shape.items()  # type: ignore[attr-defined]
            }
        return np.asarray(obs, dtype=self.observation_space.dtype).reshape(self.n_envs, *self.obs_shape)  # type: ignore[attr-defined]

    def add(
        self,
        obs: np.ndarray | dict[str, np.ndarray],
        next_obs: np.ndarray | dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one vector-env step of N = ``n_envs`` envs.

        Args:
            obs: ``[N, *O]`` (dict of such for Dict spaces), the observations the actions saw.
            next_obs: ``[N, *O]``, the next observations, holding the true final observation
                (``infos[i]["terminal_observation"]``) where ``done[i]``.
            action: ``[N, A]`` (or anything of N * A elements), cast to the stored action dtype.
            reward: ``[N]`` rewards, stored as float32.
            done: ``[N]`` bool, episode ended (terminated or timed out).
            infos: N dicts; ``"TimeLimit.truncated"`` marks a time-limit end.

        Raises:
            rlcore.errors.ShapeError, ValueError: arrays whose shapes do not fit the spaces.
        """
        done_a = np.asarray(done, dtype=bool).reshape(self.n_envs)
        if self.handle_timeout_termination and done_a.any():
            timeout = np.fromiter(
                (info.get("TimeLimit.truncated", False) for info in infos), dtype=bool, count=self.n_envs
            )
            truncated = done_a & timeout
            terminated = done_a & ~timeout
        else:
            truncated = np.zeros(self.n_envs, dtype=bool)
            terminated = done_a
        self._core.add(
            self._obs_in(obs),
            np.asarray(action, dtype=self._act_dtype).reshape(self.n_envs, self.action_dim),
            np.asarray(reward, dtype=np.float32).reshape(self.n_envs),
            terminated,
            truncated,
            self._obs_in(next_obs),
        )
        self._steps_added += 1
        self._report_fill()

    def _report_fill(self) -> None:
        """Set SB3's ``full`` and ``pos`` from what the core holds (see :meth:`size`)."""
        stored = len(self._core) // self.n_envs
        self.full = stored >= self.buffer_size
        self.pos = self._steps_added % self.buffer_size if self.full else stored

    def size(self) -> int:
        """Transitions per env that :meth:`sample` draws from, at most ``buffer_size``:
        ``min(len(core) // n_envs, buffer_size)``.

        SB3's own reading holds: ``size() == (buffer_size if full else pos)``. While nothing
        was overwritten this is SB3's count (every ``add`` stores one transition per env).
        Once the ring wraps, the core holds what fits in its rows, which depends on episode
        lengths: fewer than ``buffer_size`` when episodes are short (one row per episode
        holds its final observation: 1-step episodes fit ``(buffer_size + extra_rows) // 2``),
        and then ``full`` is False and ``pos`` equals the count; up to ``extra_rows - 1`` more
        when episodes are long, which ``size()`` does not report (``len(buffer.core)`` is the
        exact total over all envs).
        """
        return self.buffer_size if self.full else self.pos

    def reset(self) -> None:
        """Forget every stored step (memory and columns are kept)."""
        self._core.clear()
        self._steps_added = 0
        self._report_fill()

    # -- sampling -----------------------------------------------------------------------------

    def _tensor(self, array: np.ndarray) -> th.Tensor:
        # the arrays are fresh per sample: sharing their memory on CPU is safe
        if self.device.type == "cpu":
            return th.from_numpy(array)
        return th.as_tensor(array, device=self.device)

    def _obs_out(self, obs: Any, env: Any) -> Any:
        if env is not None:
            obs = env.normalize_obs(obs)
        if isinstance(obs, dict):
            return {k: self._tensor(np.asarray(v)) for k, v in obs.items()}
        return self._tensor(np.asarray(obs))

    def _samples(self, batch: Any, env: Any, discounts: np.ndarray | None = None) -> Any:
        rew = batch.rew.reshape(-1, 1)
        if env is not None:
            rew = env.normalize_reward(rew).astype(np.float32)
        klass = DictReplayBufferSamples if self._obs_dict else ReplayBufferSamples
        return klass(
            self._obs_out(batch.obs, env),
            self._tensor(batch.act),
            self._obs_out(batch.obs_next, env),
            self._tensor(batch.terminated.astype(np.float32).reshape(-1, 1)),
            self._tensor(rew),
            None if discounts is None else self._tensor(discounts.reshape(-1, 1)),
        )

    def sample(self, batch_size: int, env: Any = None) -> Any:
        """Sample ``batch_size`` transitions uniformly among the stored ones (see the module
        docstring for the fields, shapes and dtypes).

        Args:
            batch_size: B >= 1.
            env: a ``VecNormalize`` to normalize observations and rewards with, or ``None``.

        Raises:
            rlcore.errors.EmptyBufferError: nothing stored yet (an ``IndexError``).
            rlcore.errors.InvalidValueError: ``batch_size < 1``.
        """
        return self._samples(self._core.sample(batch_size, n_step=self._n_step, gamma=self._gamma), env)

    def sample_at(self, indices: np.ndarray, goal_indices: np.ndarray | None = None, env: Any = None) -> Any:
        """The samples of the core rows ``indices`` (as :meth:`sample` returns them had it drawn
        those rows, in that order), for replaying draws made elsewhere, e.g. SB3's own buffer's
        on the same stream (the draw-injection tests). ``goal_indices`` (HER only): per sample,
        the core row of the transition whose next achieved goal becomes the goal, -1 to keep it.
        Core rows: :meth:`rlcore.ReplayBuffer.last_index` after an ``add`` gives each env's row.

        Raises:
            rlcore.errors.InvalidValueError: a row that holds no transition, a goal row of
                another episode.
        """
        if goal_indices is None:
            batch = self._core.sample_at(indices, n_step=self._n_step, gamma=self._gamma)
        else:
            batch = self._core.sample_at(indices, goal_indices)  # type: ignore[call-arg]
        return self._samples(batch, env, self._discounts(batch))

    def _discounts(self, batch: Any) -> np.ndarray | None:
        """SB3's n-step ``discounts = gamma^m`` of a batch (None for 1-step buffers)."""
        return None

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:
        raise NotImplementedError(
            "rlcore.compat.sb3 buffers sample inside the core; SB3 row indices do not address them, "
            "use sample(batch_size, env)"
        )

    # -- pickling -----------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_core"] = self._core.state_dict()
        state.pop("env", None)  # HER: envs are generally not picklable (as in SB3)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        core_state = state.pop("_core")
        self.__dict__.update(state)
        if isinstance(self, _sb3_her.HerReplayBuffer):
            self.env = None
        self._core = self._make_core()
        self._core.load_state_dict(core_state)
        if "_steps_added" not in state:  # pickled before full/pos were derived from the core
            self._steps_added = self.pos + (self.buffer_size if self.full else 0)
        self._report_fill()


class ReplayBuffer(_CoreStorage, _sb3_buffers.ReplayBuffer):
    """SB3's ``ReplayBuffer`` backed by the rlcore core (see the module docstring).

    Args:
        buffer_size: transitions to keep in total (``buffer_size // n_envs`` per env, as SB3).
        observation_space: Box, Discrete, MultiDiscrete or MultiBinary space of one env.
        action_space: the action space of one env.
        device: torch device of the sampled tensors.
        n_envs: N, envs per ``add``.
        optimize_memory_usage: must be False (see the module docstring).
        handle_timeout_termination: store time-limit ends as truncations (bootstrapped).
        seed: seed of the core's generator (``None``: derived from NumPy's global state).
        extra_rows: rows per env for episodes' final observations (default ``buffer_size // 8 + 2``).

    Raises:
        ValueError: ``optimize_memory_usage=True``.
        rlcore.errors.ApiUsageError: an unsupported observation space.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )


class DictReplayBuffer(_CoreStorage, _sb3_buffers.DictReplayBuffer):
    """SB3's ``DictReplayBuffer`` (Dict observation spaces) backed by the rlcore core; arguments
    as :class:`ReplayBuffer`. Samples are ``DictReplayBufferSamples``.

    Raises:
        ValueError: ``optimize_memory_usage=True``, or a non-Dict observation space.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(f"DictReplayBuffer needs a Dict observation space, got {observation_space}")
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )


class NStepReplayBuffer(_CoreStorage, _sb3_buffers.NStepReplayBuffer):
    """SB3's ``NStepReplayBuffer`` backed by the rlcore core (Sutton & Barto 2018, eq. 7.1).

    For a sampled step t whose window ends after m = min(n, steps to the episode's end or to
    the newest stored step) steps: ``rewards = sum_{k<m} gamma^k r_{t+k}``,
    ``next_observations = o_{t+m}``, ``dones`` = termination of step t+m-1 and
    ``discounts = gamma^m`` (``[B, 1]`` float32), so SB3's target is
    ``rewards + (1 - dones) * discounts * Q'(next_observations)``.

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        n_steps: n >= 1.
        gamma: discount in [0, 1].

    Raises:
        ValueError: ``optimize_memory_usage=True``, n_steps < 1 or gamma outside [0, 1].
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_steps: int = 3,
        gamma: float = 0.99,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
    ) -> None:
        if n_steps < 1 or not 0.0 <= gamma <= 1.0:
            raise ValueError(
                f"NStepReplayBuffer needs n_steps >= 1 and gamma in [0, 1], got {n_steps}, {gamma}"
            )
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )
        self.n_steps = self._n_step = int(n_steps)
        self.gamma = self._gamma = float(gamma)

    def sample(self, batch_size: int, env: Any = None) -> ReplayBufferSamples:
        """As :meth:`ReplayBuffer.sample`, with n-step ``rewards``, ``next_observations``,
        ``dones`` and ``discounts = gamma^m`` (see the class docstring)."""
        batch = self._core.sample(batch_size, n_step=self._n_step, gamma=self._gamma)
        return self._samples(batch, env, self._discounts(batch))

    def _discounts(self, batch: Any) -> np.ndarray:
        """SB3's ``discounts = gamma^m`` ``[B]`` float32, computed as SB3 computes it (a float32
        power), where the core's ``discount`` is ``gamma^m * (1 - terminated)`` in float64.

        A window ends at the n-th step, at its episode's last row e (terminal row, or the open
        row of a running episode) or at the newest stored step, which is that open row: so
        ``m = min(n, e - t)`` (rows counted in the ring)."""
        _, end, _ = self._core.episode_bounds(batch.indices)
        m = np.minimum((end - batch.indices) % self._core.segment_len, self._n_step)
        return np.float32(self._gamma) ** m.astype(np.float32)


class HerReplayBuffer(_CoreStorage, _sb3_her.HerReplayBuffer):
    """SB3's ``HerReplayBuffer`` (Andrychowicz et al. 2017) backed by the rlcore core's HER.

    With ``exact_parity`` (the default, as SB3) batches are drawn from finished episodes only
    and exactly ``int(B * k / (k + 1))`` of them, the last ones, are relabeled (k =
    ``n_sampled_goal``); without it every stored transition is drawn and each is relabeled with
    probability ``k / (k + 1)``. ``"future"`` takes the achieved goal after a step t' uniform
    in [t, end of episode] (inclusive of t, as SB3), ``"final"`` after the episode's last step,
    ``"episode"`` after a step uniform over the episode. The new goal replaces ``desired_goal`` in ``observations``
    and ``next_observations`` and the reward is recomputed in one batched call of
    ``env.env_method("compute_reward", next_achieved_goal [M, G], new_goal [M, G], infos,
    indices=[0])`` — exactly SB3's call — or, with ``distance_threshold``, natively in Rust as
    ``-(||ag - g||_2 > distance_threshold)`` (gymnasium-robotics' Fetch sparse reward).

    The arguments not listed below are those of :class:`ReplayBuffer`.

    Args:
        env: the training VecEnv (for ``compute_reward``); SB3 passes it.
        n_sampled_goal: k, relabeled-to-real ratio.
        goal_selection_strategy: ``"future"``, ``"final"``, ``"episode"`` or SB3's enum.
        copy_info_dict: must be False (see the module docstring).
        distance_threshold: use the native Fetch-style reward instead of ``env``'s
            ``compute_reward`` (it must be the env's own threshold and sparse reward).
        exact_parity: sample as SB3's buffer does (default): finished episodes only, exactly
            ``int(B * k / (k + 1))`` relabeled samples, last in the batch. False: rlcore's own
            HER sampling (see the module docstring, "Differences").

    Raises:
        ValueError: ``optimize_memory_usage=True``, a non-Dict observation space or one
            without ``observation``/``achieved_goal``/``desired_goal``.
        NotImplementedError: ``copy_info_dict=True``.
        KeyError: unknown ``goal_selection_strategy``.
    """

    env: Any

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: Any,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        copy_info_dict: bool = False,
        *,
        seed: int | None = None,
        extra_rows: int | None = None,
        distance_threshold: float | None = None,
        exact_parity: bool = True,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict) or any(
            k not in observation_space.spaces for k in ("observation", "achieved_goal", "desired_goal")
        ):
            raise ValueError(
                "HerReplayBuffer needs a Dict observation space with keys observation, achieved_goal, "
                f"desired_goal; got {observation_space}"
            )
        if copy_info_dict:
            raise NotImplementedError(
                "copy_info_dict=True is not supported by rlcore.compat.sb3.HerReplayBuffer: the core's "
                "reward callback does not receive the relabeled rows, so stored infos cannot be matched"
            )
        if isinstance(goal_selection_strategy, str):
            goal_selection_strategy = KEY_TO_GOAL_STRATEGY[goal_selection_strategy.lower()]
        self.env = env
        self.copy_info_dict = False
        self.goal_selection_strategy = goal_selection_strategy
        self.n_sampled_goal = n_sampled_goal
        self.her_ratio = 1 - (1.0 / (n_sampled_goal + 1))
        self.distance_threshold = distance_threshold
        self.exact_parity = bool(exact_parity)
        self._init_storage(
            buffer_size,
            observation_space,
            action_space,
            device,
            n_envs,
            optimize_memory_usage,
            handle_timeout_termination,
            seed,
            extra_rows,
        )

    def _make_core(self) -> _CoreBuffer:
        rows = max(2, self.buffer_size + self.extra_rows) * self.n_envs
        core = _CoreHER(
            rows,
            num_envs=self.n_envs,
            seed=self.seed,
            strategy=self.goal_selection_strategy.name.lower(),
            future_k=float(self.n_sampled_goal),
            compute_reward=None if self.distance_threshold is not None else self._compute_reward,
            distance_threshold=self.distance_threshold,
            finished_only=getattr(self, "exact_parity", False),
            exact_ratio=getattr(self, "exact_parity", False),
        )
        core._declare(_obs_specs(self.observation_space), [("act", self._act_dtype.name, (self.action_dim,))])
        return core

    def _compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """SB3's reward call for relabeled samples: ``[M, G]``, ``[M, G]`` -> float32 ``[M]``."""
        if self.env is None:
            raise ApiUsageError(
                "HerReplayBuffer has no env to compute rewards with (it is dropped when pickled): call set_env(env)"
            )
        infos: list[dict[str, Any]] = [{} for _ in range(len(achieved_goal))]
        rewards = self.env.env_method("compute_reward", achieved_goal, desired_goal, infos, indices=[0])
        return np.asarray(rewards[0], dtype=np.float32)

    def set_env(self, env: Any) -> None:
        """Set the VecEnv whose ``compute_reward`` relabels rewards (after unpickling).

        Raises:
            ValueError: an env is already set (as SB3).
        """
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self.env = env

    def sample(self, batch_size: int, env: Any = None) -> DictReplayBufferSamples:  # type: ignore[override]
        """As :meth:`ReplayBuffer.sample`, with hindsight relabeling (see the class docstring).

        Raises:
            rlcore.errors.EmptyBufferError: nothing stored yet.
            rlcore.errors.ApiUsageError: no env to compute rewards with (call ``set_env``); with
                ``exact_parity``, no episode has finished yet (a ``RuntimeError``, as SB3's).
        """
        return self._samples(self._core.sample(batch_size), env)

    def truncate_last_trajectory(self) -> None:
        """SB3 marks still-running episodes as ended (and bootstrapped) after loading a buffer.

        Nothing to do here: the core samples running episodes from their stored part already,
        and when the next ``add`` brings an observation that does not continue an episode (the
        env was reset) the core ends it as a cut, which bootstraps like a time limit.
        """
