"""Replay buffers backed by the Rust core (``rlcore._core.RawBuffer``).

Storage model (docs/replay-buffer.md, "Storage model"): each env of a vector env owns a contiguous ring
segment of ``capacity // num_envs`` rows. An episode of length L occupies L + 1 consecutive rows:
L transition rows (o_t, a_t, r_t, terminated_t, truncated_t, extras) and one terminal row holding
the final observation o_L. Every observation is stored once and ``obs_next`` of row t is always the
observation of row t + 1, so the next observation of a terminated, truncated or still running
episode is always the true one. The overhead is one row per episode.

The hot methods (``add``, ``__len__``) are the Rust methods themselves; ``sample`` is a one-line
wrapper that packs the Rust result into a :class:`~rlcore.batch.TransitionBatch`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from rlcore._core import AddResult, RawBuffer
from rlcore.batch import SequenceBatch, TransitionBatch, state_names
from rlcore.buffers import persist
from rlcore.buffers.offline import complete_steps, offline_capacity
from rlcore.errors import ApiUsageError, DTypeError, SaveFileError, ShapeError

__all__ = ["ReplayBuffer"]


_new_batch = tuple.__new__


def _index_array(indices: Any) -> np.ndarray:
    """``indices`` as a 1-D array of their own dtype; the core converts and checks them (an
    empty list is no indices, a uint64 above ``2**63 - 1`` is out of range, not wrapped).

    Raises:
        DTypeError: a non-empty array that is not integers.
    """
    return np.ascontiguousarray(np.asarray(indices).reshape(-1))


def _space_spec(name: str, space: Any) -> tuple[str, str, tuple[int, ...]]:
    """(name, dtype name, shape) of one column for a gymnasium space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return (name, np.dtype(space.dtype).name, tuple(int(s) for s in space.shape))
    if isinstance(space, spaces.Discrete):
        return (name, "int64", ())
    raise ApiUsageError(
        f"{name}: gymnasium space {type(space).__name__} is not supported; use Box, Discrete, "
        "MultiDiscrete or MultiBinary (and Dict of those for observations)"
    )


def _extra_spec(name: str, spec: Any) -> tuple[str, str, tuple[int, ...]]:
    if isinstance(spec, tuple) and len(spec) == 2:
        shape, dtype = spec
        return (name, np.dtype(dtype).name, tuple(int(s) for s in shape))
    return _space_spec(name, spec)


class ReplayBuffer(RawBuffer):
    """Episode-aware replay buffer for one env or a vector env of ``num_envs`` envs.

    Args:
        capacity: total rows of storage, shared equally by the envs (each env gets
            ``capacity // num_envs`` rows; one row per episode holds its final observation).
        num_envs: N, the number of envs whose steps each ``add`` receives.
        seed: seed of the buffer's own Xoshiro256++ generator (``None``: from the OS).
        frame_stack: k to store observations ``[k, *F]`` that are stacks of the k newest
            frames (gymnasium's ``FrameStackObservation``, stack axis first) as one frame ``F``
            per row, rebuilding the stacks of ``obs`` and ``obs_next`` at sample time, byte for
            byte as the env returned them (``None``: observations are stored as given). A
            1M-step Atari buffer (84x84 uint8, k = 4) then holds 7.08 kB per row instead of
            28 kB. Exact semantics (padding, which rows are sampleable, the checks of ``add``)
            in ``docs/frames.md``.

    Raises:
        InvalidValueError: ``capacity // num_envs < 2``, ``num_envs < 1``, a seed outside
            ``[0, 2**64)``, ``frame_stack < 1``, or a capacity that cannot be allocated (with
            ``frame_stack``, ``capacity // num_envs <= k`` when the columns are defined).
        DTypeError: a capacity, num_envs, seed or frame_stack that is not an integer (a float,
            even ``8.0``, a bool, None or a string).

    Columns are defined by the first :meth:`add` (shapes and dtypes of its arrays; bool is
    stored as uint8) or up front by :meth:`from_spaces`. Memory is allocated once, then never
    reallocated, so the views of :meth:`column` stay valid.

    Example:
        >>> import numpy as np, rlcore
        >>> buf = rlcore.ReplayBuffer(1000, num_envs=2, seed=0)
        >>> obs = np.zeros((2, 3), np.float32)
        >>> res = buf.add(obs, np.zeros((2, 1), np.float32), np.ones(2), np.zeros(2, bool),
        ...               np.array([False, True]), obs + 1)
        >>> len(buf), res.done_envs.tolist(), res.episode_returns.tolist()
        (2, [1], [1.0])
        >>> batch = buf.sample(4, n_step=3, gamma=0.9)
        >>> batch.obs.shape, batch.discount.dtype
        ((4, 3), dtype('float32'))
    """

    _kind: ClassVar[str] = "replay"
    # no per-instance __dict__: attribute lookups on the hot methods skip the instance dict
    __slots__ = ("__weakref__",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # rlcore's own buffer kinds register for load(); a user's subclass keeps its base's kind
        if "_kind" in cls.__dict__ and cls.__module__.startswith("rlcore."):
            _KINDS[cls._kind] = cls

    def __new__(
        cls, capacity: int, *, num_envs: int = 1, seed: int | None = None, frame_stack: int | None = None
    ) -> ReplayBuffer:
        return super().__new__(cls, capacity, num_envs=num_envs, seed=seed, frame_stack=frame_stack)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_spaces(
        cls,
        observation_space: Any,
        action_space: Any,
        *,
        capacity: int,
        num_envs: int = 1,
        seed: int | None = None,
        extras: Mapping[str, Any] | None = None,
        frame_stack: int | None = None,
    ) -> ReplayBuffer:
        """A buffer whose columns are declared from gymnasium spaces (use the *single* env's
        spaces of a vector env). ``extras`` maps a column name to a space or ``(shape, dtype)``.

        Extra names are any strings except the reserved ones (``rlcore._core.RESERVED_NAMES``:
        the argument names of ``add``/``extend``, the fields of a ``TransitionBatch``,
        ``flags``, ``env_ids``) and names starting with ``obs.``.

        ``frame_stack=k`` (see the class docstring and ``docs/frames.md``) needs a Box
        observation space of shape ``[k, *F]``, as ``FrameStackObservation(env, k)`` has
        (:func:`rlcore.buffers.frames.frame_stack_of` reads k from such an env, e.g.
        ``frame_stack=frame_stack_of(envs)``); the stored
        ``obs`` column is then ``[capacity, *F]``.

        Raises:
            ApiUsageError: an unsupported space (nested Dict, Text, Graph, ...), or
                ``frame_stack`` with a Dict observation space.
            ShapeError: ``frame_stack=k`` with an observation space whose first axis is not k.
            InvalidValueError: a reserved extra name; ``frame_stack < 1``; with
                ``frame_stack``, ``capacity // num_envs <= k``.
            DTypeError: an extra name that is not a str.
        """
        buf = cls(capacity, num_envs=num_envs, seed=seed, frame_stack=frame_stack)
        buf._declare_spaces(observation_space, action_space, extras)
        return buf

    def _declare_spaces(
        self, observation_space: Any, action_space: Any, extras: Mapping[str, Any] | None
    ) -> None:
        from gymnasium import spaces

        if isinstance(observation_space, spaces.Dict):
            obs = []
            for key, sub in observation_space.spaces.items():
                if isinstance(sub, spaces.Dict):
                    raise ApiUsageError(f"obs['{key}']: nested Dict observation spaces are not supported")
                obs.append(_space_spec(f"obs.{key}", sub))
        else:
            obs = [_space_spec("obs", observation_space)]
        step = [_space_spec("act", action_space)]
        for name, spec in (extras or {}).items():
            step.append(_extra_spec(name, spec))
        self._declare(obs, step)

    @classmethod
    def from_arrays(
        cls,
        obs: np.ndarray | Mapping[str, np.ndarray],
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: np.ndarray | Mapping[str, np.ndarray] | None,
        *,
        capacity: int | None = None,
        seed: int | None = None,
        extras: Mapping[str, np.ndarray] | None = None,
    ) -> ReplayBuffer:
        """A single-env buffer holding an offline dataset of T steps in time order.

        Arrays have a leading time dimension T: ``obs``/``obs_next`` ``[T, *O]`` (or dicts of
        such), ``act`` ``[T, *A]``, ``rew``/``terminated``/``truncated`` ``[T]``. Consecutive
        steps of one episode must satisfy ``obs[t + 1] == obs_next[t]``; where they don't (or a
        step is terminated/truncated) a new episode starts. The episode index is exactly the one
        that T single-step :meth:`add` calls would build. ``capacity`` defaults to the rows the
        data needs (T plus one row per episode). ``extras`` maps column names (not reserved, see
        :meth:`from_spaces`) to ``[T, *shape]`` arrays.

        ``obs_next=None`` is a stream without next observations (D4RL's layout): inside an
        episode the next observation is ``obs[t + 1]``; an episode's last step is handled by
        :func:`rlcore.buffers.offline.complete_steps` (a terminated step keeps a placeholder that
        no target reads, a truncated step and the stream's unfinished last step are left out).

        Raises:
            ShapeError, DTypeError: as :meth:`add`.
            InvalidValueError: a reserved extra name (``"mask"``, ``"rew"``, ...).
        """
        if obs_next is None:
            s = complete_steps(obs, act, rew, terminated, truncated, extras=extras)
            obs, act, rew, obs_next, extras = s.obs, s.act, s.rew, s.obs_next, s.extras
            terminated, truncated = s.terminated, s.truncated
        rew_a, capacity = offline_capacity(obs, rew, terminated, truncated, obs_next, capacity)
        buf = cls(capacity, num_envs=1, seed=seed)
        buf._extend(obs, act, rew_a, terminated, truncated, obs_next, extras=dict(extras or {}))
        return buf

    def extend(
        self,
        obs: np.ndarray | Mapping[str, np.ndarray],
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: np.ndarray | Mapping[str, np.ndarray],
        *,
        mask: np.ndarray | None = None,
        **extras: np.ndarray,
    ) -> AddResult:
        """Add T consecutive vector-env steps in one call, exactly as T :meth:`add` calls would.

        Arrays have leading dimensions ``[T, N]`` (N = ``num_envs``): ``obs``/``obs_next``
        ``[T, N, *O]`` (or dicts of such), ``act`` ``[T, N, *A]``, ``rew``/``terminated``/
        ``truncated``/``mask`` ``[T, N]``, extras ``[T, N, *shape]``. A single-env buffer also
        takes ``[T, ...]`` arrays (``rew`` of shape ``[T]``). Everything is validated before
        anything is written.

        Returns:
            AddResult whose ``indices`` are ``[T * N]`` in time-major order (step t of env i at
            ``t * N + i``; -1 where masked) and whose finished episodes are listed in order.

        Raises:
            ShapeError: ``rew`` is not ``[T, N]`` (or ``[T]`` for one env), or another array's
                leading dimensions differ; everything else as :meth:`add`.
            DTypeError, InvalidValueError: as :meth:`add` (a reserved extra name is refused
                when the first call declares the columns).
        """
        rew_a = np.asarray(rew)
        n = self.num_envs
        if rew_a.ndim == 1 and n == 1:  # T steps of one env: the core validates the leading T
            if mask is None and not extras:  # (keyword arguments cost a dict per call)
                return self._extend(obs, act, rew_a, terminated, truncated, obs_next)
            return self._extend(obs, act, rew_a, terminated, truncated, obs_next, mask=mask, extras=extras)
        if rew_a.ndim == 2 and rew_a.shape[1] == n:
            lead: tuple[int, ...] = rew_a.shape
        else:
            want = "[T, num_envs]" + (" or [T]" if n == 1 else "")
            raise ShapeError(f"extend: rew must have shape {want} with num_envs={n}, got {rew_a.shape}")
        rows = lead[0] * lead[1]

        def flat(name: str, x: Any) -> Any:
            if isinstance(x, Mapping):
                return {k: flat(f"{name}['{k}']", v) for k, v in x.items()}
            a = np.asarray(x)
            if a.shape[: len(lead)] != lead:
                raise ShapeError(f"extend: {name} must have leading dimensions {list(lead)}, got {a.shape}")
            return a.reshape(rows, *a.shape[len(lead) :])

        args = [
            flat(k, v)
            for k, v in (
                ("obs", obs),
                ("act", act),
                ("rew", rew_a),
                ("terminated", terminated),
                ("truncated", truncated),
                ("obs_next", obs_next),
            )
        ]
        kw = {k: flat(k, v) for k, v in extras.items()}
        return self._extend(*args, mask=None if mask is None else flat("mask", mask), extras=kw)

    # -- sampling -----------------------------------------------------------------------------

    def sample(
        self,
        batch_size: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        out: TransitionBatch | None = None,
    ) -> TransitionBatch:
        """Sample ``batch_size`` transitions uniformly (with replacement) among stored ones.

        With ``n_step = n``, for sampled step t in an episode whose last stored step is e − 1,
        m = min(n, e − t) and ``rew = sum_{k<m} gamma^k r_{t+k}``, ``obs_next = o_{t+m}``,
        ``discount = gamma^m * (1 - terminated_{t+m-1})`` (Sutton & Barto
        2018, eq. 7.1). Windows never cross an episode end or the newest stored step.

        Args:
            batch_size: B in [1, max(capacity, 65536)] (an int; NumPy integers are accepted).
            n_step: n >= 1 (an int); any n >= ``segment_len`` gives the same windows, since no
                window is longer than an episode's stored part of one segment.
            gamma: discount in [0, 1] (a float or int).
            out: a batch of preallocated arrays (e.g. pinned memory, made once with
                ``buf.sample(B)`` and reused) to fill instead of allocating; its arrays must
                match dtypes and shapes exactly and be C-contiguous and writable.

        Returns:
            TransitionBatch of numpy arrays (see its docstring for shapes and dtypes).

        Raises:
            InvalidValueError: batch_size outside ``[1, max(capacity, 65536)]`` (checked before
                anything is allocated), n_step < 1 (or
                ``>= 2**64``), or gamma outside [0, 1].
            DTypeError: batch_size or n_step not an integer (a float, even ``4.0``, a bool, None,
                a string), gamma not a number.
            EmptyBufferError: the buffer holds no transition.
            ShapeError: ``out`` arrays of the wrong shapes.
            DTypeError: ``out`` arrays of the wrong dtypes.
            ApiUsageError: ``out`` arrays that are not C-contiguous and writable, or an ``out``
                that is not a batch of this buffer (a missing field, obs key or extra).
        """
        return _new_batch(TransitionBatch, self._sample(batch_size, n_step, gamma, out, None))

    def sample_at(
        self,
        indices: Any,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        out: TransitionBatch | None = None,
    ) -> TransitionBatch:
        """The batch that :meth:`sample` returns when it draws the rows ``indices``, in that
        order: the same n-step windows, fields and (for prioritized buffers) IS weights, with
        no randomness used and nothing changed. For re-reading chosen transitions and for
        replaying another library's draws on this buffer.

        Args:
            indices: ``[B]`` integer row indices, each holding a transition (as
                ``TransitionBatch.indices``, ``AddResult.indices`` or :meth:`last_index` give
                them).
            n_step: n >= 1, as :meth:`sample`.
            gamma: discount in [0, 1], as :meth:`sample`.
            out: preallocated arrays to fill, as :meth:`sample`.

        Raises:
            InvalidValueError: an empty ``indices``, a row out of ``[0, capacity)`` or one that
                holds no transition (see :meth:`is_transition`); n_step/gamma as :meth:`sample`.
            DTypeError: non-integer ``indices``.
            ShapeError, DTypeError, ApiUsageError: ``out`` as :meth:`sample`.
        """
        idx = _index_array(indices)
        return _new_batch(TransitionBatch, self._sample(idx.size, n_step, gamma, out, None, idx))

    def sample_sequences(
        self,
        batch_size: int,
        seq_len: int,
        *,
        burn_in: int = 0,
        n_step: int = 1,
        gamma: float = 0.99,
        pad: bool = True,
        state: str | Sequence[str] = (),
        out: SequenceBatch | None = None,
    ) -> SequenceBatch:
        """Sample ``batch_size`` sequences of ``L = burn_in + seq_len`` consecutive steps of one
        episode each, for recurrent learners (R2D2, Kapturowski et al. 2019), in one core call.

        Eligible starts (see :class:`~rlcore.batch.SequenceBatch` for the exact rules): every step
        ``t`` of an episode with ``t + L <= end`` (the sequence fits), and, with ``pad=True``,
        the first surviving step of each episode shorter than L (padded at the end, ``mask``
        False there). Starts are uniform over the eligible ones (prioritized buffers:
        proportional to the start row's priority). No sequence crosses an episode end, the
        newest stored step or an overwritten row. The n-step window of each step stays inside
        the sequence. HER buffers relabel each sequence with one goal (strategy ``future``: the
        achieved goal after a step uniform in [last valid step, episode end)), recomputing
        every step's reward; their ``finished_only``/``exact_ratio`` sampling rules are those of
        ``sample`` and do not restrict the starts here (``exact_ratio`` fixes the relabeled count).

        Args:
            batch_size: B >= 1, with ``B * (burn_in + seq_len)`` at most ``max(capacity, 65536)``.
            seq_len: steps a learner trains on, >= 1.
            burn_in: steps before them to unroll the recurrent state over, >= 0.
            n_step: n >= 1; gamma: discount in [0, 1] (as :meth:`sample`).
            pad: take episodes shorter than L (padded) or never choose them.
            state: extra column name(s) of a recurrent state written at collection
                (``add(..., h=h)``): returned once per sequence, ``[B, *shape]`` from its first
                step, in ``batch.state`` (and not per step in ``batch.extras``).
            out: a batch from a previous call with the same arguments whose arrays to fill.

        Returns:
            SequenceBatch (see its docstring for shapes and dtypes).

        Raises:
            InvalidValueError: batch_size out of range, seq_len < 1, burn_in < 0, n_step < 1,
                gamma outside [0, 1], ``B * L > 2**31 - 1``, a state name given twice.
            DTypeError: a non-integer count, a non-number gamma, a state that is not str(s).
            EmptyBufferError: no transition stored, or (``pad=False``) no stored episode with
                L transitions.
            ApiUsageError: a state name that is not an extra column; ``out`` arrays not
                C-contiguous and writable, or ``out`` not a batch of this call's layout.
            ShapeError, DTypeError: ``out`` arrays of the wrong shapes or dtypes.
        """
        names = state_names(state)
        reward = getattr(self, "_compute_reward", None)
        fields = self._sample_sequences(batch_size, seq_len, burn_in, n_step, gamma, bool(pad), names, out, reward)
        return _new_batch(SequenceBatch, fields)

    def sequence_start_mass(self, seq_len: int, *, burn_in: int = 0, pad: bool = True) -> tuple[int, float]:
        """``(count, mass)`` of the starts :meth:`sample_sequences` can draw for these arguments:
        how many are eligible, and the sum of their priorities on a prioritized buffer (their
        count otherwise), so that ``p_t / mass`` is a start's probability. A sharded buffer
        weights its shards by it. O(stored episodes).

        Raises:
            InvalidValueError: ``seq_len < 1``, ``burn_in < 0``.
            DTypeError: a non-integer count.
        """
        return super().sequence_start_mass(seq_len, burn_in=burn_in, pad=bool(pad))

    # -- views --------------------------------------------------------------------------------

    def column(self, name: str) -> np.ndarray | dict[str, np.ndarray]:
        """A read-only zero-copy view ``[capacity, *shape]`` of a stored column.

        Names: ``"obs"`` (a dict of views for dict observations; ``"obs.<key>"`` for one key;
        with ``frame_stack`` the stored frames ``[capacity, *F]``, the newest frame of each row),
        ``"act"``, the extras, ``"rew"`` (float32), ``"terminated"``/``"truncated"`` (uint8) and
        ``"flags"`` (uint8 bits: 1 transition, 2 episode start, 4 cut, 8 terminal row). Later
        writes show through the view; the view keeps the buffer alive. Rows are indexed by row
        numbers: ``TransitionBatch.indices`` of a uniform buffer, ``rows_of(batch.indices)`` of
        a prioritized one (whose indices carry a generation above the row); rows that hold no
        transition contain stale data (use :meth:`is_transition`).

        Raises:
            ApiUsageError: unknown name, or no columns yet (before the first add).
            DTypeError: ``name`` is not a ``str``.
        """
        if not isinstance(name, str):
            raise DTypeError(f"column name must be a str such as 'obs', got {type(name).__name__} {name!r}")
        if name == "obs" and self.obs_is_dict:
            return {spec[0][4:]: self._column(spec[0]) for spec in self._schema()[0]}
        return self._column(name)

    @property
    def obs_is_dict(self) -> bool:
        """Whether observations are dicts (one column per key)."""
        return any(spec[0].startswith("obs.") for spec in self._schema()[0])

    @property
    def obs(self) -> np.ndarray | dict[str, np.ndarray]:
        """``column("obs")``."""
        return self.column("obs")

    @property
    def act(self) -> np.ndarray:
        """``column("act")``."""
        return self._column("act")

    @property
    def rew(self) -> np.ndarray:
        """``column("rew")``."""
        return self._column("rew")

    @property
    def terminated(self) -> np.ndarray:
        """``column("terminated")``."""
        return self._column("terminated")

    @property
    def truncated(self) -> np.ndarray:
        """``column("truncated")``."""
        return self._column("truncated")

    # -- state --------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        config = {"kind": self._kind, "capacity": self.capacity, "num_envs": self.num_envs}
        if self.frame_stack is not None:  # saves without stacking keep their old config
            config["frame_stack"] = self.frame_stack
        return config

    @classmethod
    def _from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> ReplayBuffer:
        """An empty buffer of ``config`` (:meth:`_config`'s) with ``kwargs``' ``seed`` (``None``:
        from the OS)."""
        return cls(
            config["capacity"],
            num_envs=config["num_envs"],
            seed=kwargs.get("seed"),
            frame_stack=config.get("frame_stack"),
        )

    def _snapshot(self) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        """(schema, state parts) taken together: if another thread's first add declares the
        columns in between, take both again."""
        while True:
            obs, step = self._schema()
            parts = self._state_parts()  # fresh arrays, owned by the caller
            if self._schema() == (obs, step):
                return {"obs": [list(s) for s in obs], "step": [list(s) for s in step]}, parts

    def state_dict(self) -> dict[str, Any]:
        """A deep copy of the whole state: ``{"config", "schema", "arrays"}`` (JSON-able config
        and schema, numpy arrays). Restores exactly with :meth:`load_state_dict`."""
        schema, parts = self._snapshot()
        return {"config": self._config(), "schema": schema, "arrays": dict(parts)}

    def _check_fits(self, config: Mapping[str, Any], schema: Any) -> tuple[list[Any], list[Any]]:
        """The (obs, step) column specs of a state's ``schema`` after checking that a state of
        this ``config`` and ``schema`` fits this buffer (raises SaveFileError otherwise)."""
        try:
            obs = [(s[0], s[1], tuple(s[2])) for s in schema["obs"]]
            step = [(s[0], s[1], tuple(s[2])) for s in schema["step"]]
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise SaveFileError(f"not a buffer state (config, schema, arrays): {e!r}") from e
        mine = self._config()
        for key in ("kind", "capacity", "num_envs", "frame_stack"):
            if config.get(key) != mine.get(key):
                raise SaveFileError(f"state has {key}={config.get(key)!r}, this buffer has {mine.get(key)!r}")
        # stored priorities are (|p| + eps) ** alpha: a state of other prioritized settings would
        # mix two units (or drop its priorities), so it is refused, never adopted silently
        for key in ("prioritized", "alpha", "eps"):
            theirs, ours = config.get(key), mine.get(key)
            if key == "prioritized":
                theirs, ours = bool(theirs), bool(ours)
            if theirs != ours:
                raise SaveFileError(
                    f"state has {key}={theirs!r}, this buffer has {key}={ours!r}: its priorities "
                    "are (|p| + eps) ** alpha of the saved settings; build the buffer with the "
                    "saved prioritized settings, or load the save with Class.load(path), which "
                    "builds the buffer from them"
                )
        cur_obs, cur_step = self._schema()
        if cur_step and ([tuple(s) for s in cur_obs] != obs or [tuple(s) for s in cur_step] != step):
            raise SaveFileError(f"state columns {obs + step} differ from this buffer's {cur_obs + cur_step}")
        return obs, step

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Copy a :meth:`state_dict` into this buffer's existing memory (same kind, capacity,
        num_envs and columns). Everything is validated before anything changes.

        Raises:
            SaveFileError: the state does not fit this buffer or is inconsistent.
        """
        try:
            config = dict(state["config"])
            schema = state["schema"]
            arrays = dict(state["arrays"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise SaveFileError(f"not a buffer state (config, schema, arrays): {e!r}") from e
        obs, step = self._check_fits(config, schema)
        # a buffer without columns declares them and loads in one core call (undone on error)
        self._load_state(arrays, obs, step)

    def __reduce__(self) -> tuple[Any, ...]:
        # the class itself (a subclass stays a subclass) and a subclass's own attributes
        return (_restore, (type(self), self.state_dict()), _instance_state(self))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save to directory ``path`` (created if needed): the state as one ``.npy`` file per
        array in a fresh data folder, then ``manifest.json`` (config, columns, a CRC-32 of every
        file and of itself), written last and atomically; format and guarantees in
        :mod:`rlcore.buffers.persist`.

        A crash or error mid-save leaves the previous save loadable and nothing of this one
        behind. Once the new manifest is durable, only the data folder of the manifest it
        replaced is removed, and the data folder of an earlier save that was killed before its
        manifest (proven by rlcore's marker file in it); other files and folders in ``path``
        are never touched, whatever their names. Concurrent
        saves into one directory (threads or processes) take turns on the lock file
        ``path/rlcore.lock``: the last one wins. Column names can be any ``str`` (file names do
        not depend on them).

        A file named ``manifest.json`` already in ``path`` is replaced only if it is an rlcore
        buffer manifest: a user's own file of that name is never overwritten.

        Raises:
            SaveFileError: ``path/manifest.json`` exists and is not an rlcore buffer manifest
                (nothing is written).
            OSError: the directory cannot be written (e.g. a full disk).
        """
        schema, parts = self._snapshot()
        length = sum(int(a.sum()) for name, a in parts if name == "env.n_trans")
        persist.write(
            path,
            config=self._config(),
            schema=schema,
            length=length,
            class_name=type(self).__name__,
            parts=parts,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> ReplayBuffer:
        """Load a buffer saved with :meth:`save`; the round trip is exact (episode index,
        cursors, priorities and RNG state included). HER buffers saved with a Python reward
        need ``compute_reward=...`` again (callables are not saved).

        ``SubClass.load(path)`` of a save of the same kind returns a ``SubClass``; through a base
        class (``ReplayBuffer.load`` of a prioritized save) it returns the kind's rlcore class.
        The class name in the manifest is never imported: loading runs no code from the save.

        Before anything of the buffer's size is allocated, the manifest's checksum, its config
        and columns, every file's ``.npy`` header and size, and every file's checksum are
        checked, so a corrupt or edited save costs milliseconds and no memory.

        Raises:
            SaveFileError: missing, unreadable, corrupt or edited manifest or array file (the
                message names it), inconsistent data, or a save of another kind than ``cls``.
            ApiUsageError: a HER save with a Python reward and no ``compute_reward``.
        """
        with persist.open_save(path) as save:
            klass = cls._class_for(save)
            arrays = save.arrays(persist.saved_layout(save))
            with persist.as_save_error(save):
                buf = klass._from_config(save.config, **kwargs)
                buf.load_state_dict(save.state(arrays))
        return buf

    @classmethod
    def _class_for(cls, save: persist.Save) -> type[ReplayBuffer]:
        """The class ``cls.load`` builds for ``save``: ``cls`` if it is of the save's kind, else
        the kind's class if that is a subclass of ``cls``."""
        kind = save.config.get("kind")
        klass = _KINDS.get(kind) if isinstance(kind, str) else None
        if klass is None:
            raise SaveFileError(f"{save.root}: unknown buffer kind {kind!r}")
        if cls._kind == kind and issubclass(cls, klass):
            return cls
        if issubclass(klass, cls):
            return klass
        raise SaveFileError(f"{save.root} holds a {klass.__name__}, not a {cls.__name__}")

    def restore(self, path: str | os.PathLike[str]) -> None:
        """Copy the save at ``path`` into this buffer's existing memory (same kind, capacity,
        num_envs and columns), as :meth:`load_state_dict` does with a state; nothing changes
        unless the whole save is valid. Every check of :meth:`load` is made first (manifest
        checksum, headers, sizes, file checksums, the episode index). Trainers restore their
        buffer from a checkpoint this way.

        Raises:
            SaveFileError: missing, unreadable, corrupt or edited save (the message names the
                file), or one that does not fit this buffer.
        """
        with persist.open_save(path) as save:
            self._check_fits(save.config, save.schema)
            arrays = save.arrays(persist.saved_layout(save))
            with persist.as_save_error(save):
                self.load_state_dict(save.state(arrays))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self.capacity}, num_envs={self.num_envs}, "
            f"len={len(self)}, columns={[s[0] for s in self._schema()[0] + self._schema()[1]]})"
        )


def _instance_state(buf: ReplayBuffer) -> tuple[dict[str, Any] | None, dict[str, Any]] | None:
    """A subclass's own attributes (its ``__dict__`` and ``__slots__``) for pickle and copy."""
    slots = {}
    for klass in type(buf).__mro__:
        if klass.__module__.startswith("rlcore.buffers.") or klass in (RawBuffer, object):
            continue
        names = klass.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__dict__", "__weakref__") and hasattr(buf, name):
                slots[name] = getattr(buf, name)
    attrs = getattr(buf, "__dict__", None) or None
    return (attrs, slots) if attrs or slots else None


def _restore(
    klass: type[ReplayBuffer], state: Mapping[str, Any], compute_reward: Callable[..., Any] | None = None
) -> ReplayBuffer:
    """Unpickle: a ``klass`` (the pickled buffer's own class) holding ``state``."""
    kwargs = {} if compute_reward is None else {"compute_reward": compute_reward}
    buf = klass._from_config(state["config"], **kwargs)
    buf.load_state_dict(state)
    return buf


_KINDS: dict[str, type[ReplayBuffer]] = {"replay": ReplayBuffer}
"""Buffer kind (``_kind``, the manifest's ``config.kind``) -> rlcore class; the kinds of
``prioritized`` and ``her`` register themselves when their classes are defined."""
