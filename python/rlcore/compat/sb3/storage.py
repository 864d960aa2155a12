"""What the four SB3 buffer classes share: the core buffer behind them, ``add``, sampling into
SB3's sample tuples, ``reset`` and pickling (see :mod:`rlcore.compat.sb3`)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common import buffers as _sb3_buffers
from stable_baselines3.common.preprocessing import get_obs_shape
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
from stable_baselines3.her import her_replay_buffer as _sb3_her

from rlcore.buffers.replay import ReplayBuffer as _CoreBuffer

__all__ = ["CoreStorage", "obs_specs", "seed_from_numpy"]


def seed_from_numpy() -> int:
    """A 63-bit seed derived from NumPy's global generator state without drawing from it."""
    # SB3 seeds the legacy global generator (set_random_seed), so that is the state to follow
    _, key, pos, *_ = np.random.get_state()  # noqa: NPY002
    return zlib.crc32(np.asarray(key).tobytes()) << 16 ^ int(pos)


def obs_specs(space: spaces.Space) -> list[tuple[str, str, tuple[int, ...]]]:
    """Core obs columns (name, dtype, shape) with SB3's shapes (``get_obs_shape``)."""
    shapes: Any = get_obs_shape(space)
    if isinstance(space, spaces.Dict):
        return [(f"obs.{k}", np.dtype(space[k].dtype).name, tuple(shapes[k])) for k in space.spaces]
    return [("obs", np.dtype(space.dtype).name, tuple(shapes))]


class CoreStorage:
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
        self.seed = seed_from_numpy() if seed is None else int(seed)
        self._act_dtype = np.dtype(_sb3_buffers.ReplayBuffer._maybe_cast_dtype(action_space.dtype))
        self._obs_dict = isinstance(observation_space, spaces.Dict)
        self._steps_added = 0  # vector steps added since the last reset (SB3's cursor, once full)
        self._core = self._make_core()

    def _make_core(self) -> _CoreBuffer:
        rows = max(2, self.buffer_size + self.extra_rows) * self.n_envs
        core = _CoreBuffer(rows, num_envs=self.n_envs, seed=self.seed)
        core._declare(obs_specs(self.observation_space), [("act", self._act_dtype.name, (self.action_dim,))])
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
