"""On-policy rollouts: a ``[T, N]`` :class:`Rollout` and the :class:`RolloutSampler` that fills it.

The sampler is separate from the algorithm::

    rollout = sampler.sample(policy, envs, num_steps)   # T = num_steps vector steps of N envs
    stats = algo.update(rollout)

Stepping, autoreset, episode accounting and env snapshots are
:class:`~rlcore.envs.stepping.EnvStepper`'s. What each autoreset mode means for a rollout:

* ``NEXT_STEP`` (default): the step after a done returns the reset observation with reward 0 and
  ignores the action. That row is kept in the ``[T, N]`` grid (every env steps together) but marked
  ``valid = False``: it is no transition, the algorithms leave it out of every loss and it is not
  counted as an env step. Its ``obs`` is the true final observation o_L of the episode that just
  ended, so the value the policy computed for it *is* V(o_L): it becomes ``final_value`` of the done
  row (a truncated episode bootstraps from it).
* ``SAME_STEP``: the done step returns the reset observation; the true final observation is in
  ``info["final_obs"]``, and the sampler evaluates ``policy.value`` on it for truncated rows. Every
  row is valid.
* ``DISABLED``: the stepper resets done envs itself; the observation the done step returned is the
  final one. Every row is valid.

Backends: any :class:`~rlcore.envs.backends.VecBackend` (gymnasium Sync/Async, EnvPool) through
the ``send``/``recv`` protocol. **Asynchronous envs** (EnvPool ``batch_size < N``): each ``recv``
returns the envs that finished; the policy acts on those and their rows go into their own
columns, so column i of the ``[T, N]`` rollout is env i's next T steps in its own time order,
whatever the order the envs come back in. An env whose column is full is held back (not sent an
action) while at least ``batch_size`` other envs are in flight; when fewer are, it steps on and
its rows are **carried** into the next rollout, with the ``log_prob`` and ``value`` of the policy
that chose them (one update older than the next rollout's: PPO's ratio uses the stored
``log_prob``, so its importance weight stays right). The envs in flight when a rollout ends are
carried the same way. ``last_value`` of env i is the value of the observation after its T-th
row (the stored value of its next row when that row was already chosen). NEXT_STEP autoreset
only; rows of reset steps are ``valid = False`` as above.

Dimension letters: T time (vector steps), N envs, O observation shape, A action shape."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlcore.batch import Rollout
from rlcore.envs.backends import VecBackend
from rlcore.envs.stepping import Episode, SteppedEnvs, collect_stats
from rlcore.errors import ApiUsageError, InvalidValueError
from rlcore.stats import CollectStats
from rlcore.types import ActorCriticPolicy, RewardFn

__all__ = ["RolloutSampler"]


class RolloutSampler(SteppedEnvs):
    """Steps a vector env with an :class:`ActorCriticPolicy` for ``T`` vector steps.

    The sampler's stepper owns the env's current observations between calls (its own copy, so envs
    that rewrite the array they returned, ``copy=False`` or shared memory, give right rollouts),
    so consecutive rollouts continue the same episodes. It does not reset at
    construction: call :meth:`reset` once (the trainer does).

    Args:
        envs: a gymnasium ``VectorEnv`` with N sub-envs and a ``Box`` observation space, or a
            lock-step :class:`~rlcore.envs.backends.VecBackend` (EnvPool).
        reward_fn: optional ``reward_fn(obs, act, obs_next, rew) -> rew`` whose output becomes
            ``rollout.rew`` (learned rewards: GAIL, preference models); ``obs_next`` is the true next
            observation (the final one at a done step), ``act`` the action the env received. Episode
            statistics always use the env's reward.

    Raises:
        InvalidValueError: a ``Dict`` observation space (flatten it with a wrapper first).
    """

    def __init__(self, envs: gym.vector.VectorEnv | VecBackend, *, reward_fn: RewardFn | None = None) -> None:
        if isinstance(envs.single_observation_space, gym.spaces.Dict):
            raise InvalidValueError(
                "RolloutSampler needs array observations; wrap dict envs with "
                "gymnasium.wrappers.vector.FlattenObservation"
            )
        super().__init__(envs, reward_fn=reward_fn)
        self._async = _AsyncRows(self.num_envs) if not self.stepper.lock_step else None
        space = envs.single_action_space
        self._clip: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(space, gym.spaces.Box):
            self._clip = (space.low.astype(np.float32), space.high.astype(np.float32))

    @property
    def env_steps(self) -> int:
        """Transitions (valid rows) of the rollouts sampled since construction (rows carried over
        to the next rollout are not counted yet)."""
        return self.stepper.env_steps - self._carried_transitions()

    def _carried_transitions(self) -> int:
        if self._async is None:
            return 0
        return sum(row.valid for rows in self._async.carry for row in rows)

    def reset(self, *, seed: int | None = None) -> None:
        """Reset all sub-envs (seeded with ``seed, seed+1, ...``) and forget partial episodes
        (and, with asynchronous envs, the rows carried over and the actions in flight)."""
        super().reset(seed=seed)
        if self._async is not None:
            self._async = _AsyncRows(self.num_envs)

    def sample(
        self,
        policy: ActorCriticPolicy,
        envs: gym.vector.VectorEnv | VecBackend | None = None,
        num_steps: int = 128,
    ) -> tuple[Rollout, CollectStats]:
        """Run ``num_steps`` vector steps and return the rollout and its episode statistics.

        Args:
            policy: samples actions and values.
            envs: must be the sampler's env when given (the argument exists so the call reads
                ``sampler.sample(policy, envs, num_steps)``).
            num_steps: T (> 0).

        Raises:
            ApiUsageError: :meth:`reset` was never called (a ``RuntimeError``).
            InvalidValueError: ``num_steps <= 0`` or another env than the sampler's (a ``ValueError``).
        """
        if envs is not None and envs is not self.envs:
            raise InvalidValueError("sample(): envs must be the env this sampler was built with")
        if self.stepper.needs_reset:
            raise ApiUsageError("RolloutSampler.sample() before reset(): call sampler.reset(seed=...) once")
        if num_steps <= 0:
            raise InvalidValueError(f"num_steps must be > 0, got {num_steps}")
        if self._async is not None:
            return self._sample_async(policy, num_steps)
        start = time.perf_counter()
        T, N = num_steps, self.num_envs
        first = np.asarray(self.stepper.obs)
        obs_TNO = np.empty((T, *first.shape), dtype=first.dtype)
        act_TNA: np.ndarray | None = None
        rew_TN = np.zeros((T, N), dtype=np.float32)
        env_rew_TN = np.zeros((T, N), dtype=np.float32)
        term_TN = np.zeros((T, N), dtype=bool)
        trunc_TN = np.zeros((T, N), dtype=bool)
        valid_TN = np.ones((T, N), dtype=bool)
        log_prob_TN = np.zeros((T, N), dtype=np.float32)
        value_TN = np.zeros((T, N), dtype=np.float32)
        final_value_TN = np.zeros((T, N), dtype=np.float32)
        ended: list[Episode] = []
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP

        for t in range(T):
            obs = self.stepper.obs
            act, log_prob_N, value_N = policy.act_value(obs)
            if act_TNA is None:
                act_TNA = np.empty((T, *np.shape(act)), dtype=np.asarray(act).dtype)
            env_act = act if self._clip is None else np.clip(act, *self._clip)
            step = self.stepper.step(env_act)
            valid_N = step.transition_N

            # V(final observation) of truncated rows, which bootstrap from it (termination does not).
            if next_step and t > 0:
                # A reset row's obs is the final observation of the done row before it.
                fill = ~valid_N & trunc_TN[t - 1]
                final_value_TN[t - 1, fill] = value_N[fill]
            if not next_step:
                cut = np.flatnonzero(np.asarray(step.truncated_N) & valid_N)
                if cut.size:
                    final_value_TN[t, cut] = policy.value(np.asarray(step.obs_next)[cut])

            rew_N = np.asarray(step.rew_N, dtype=np.float32)
            learn_rew_N = rew_N
            if self.reward_fn is not None:
                learn_rew_N = np.asarray(self.reward_fn(obs, env_act, step.obs_next, rew_N), dtype=np.float32)
            obs_TNO[t] = obs
            act_TNA[t] = act
            valid_TN[t] = valid_N
            rew_TN[t] = np.where(valid_N, learn_rew_N, 0.0)
            env_rew_TN[t] = np.where(valid_N, rew_N, 0.0)
            term_TN[t] = np.asarray(step.terminated_N) & valid_N
            trunc_TN[t] = np.asarray(step.truncated_N) & valid_N
            log_prob_TN[t] = log_prob_N
            value_TN[t] = value_N
            ended += step.episodes

        last_value_N = np.asarray(policy.value(self.stepper.obs), dtype=np.float32)
        if next_step:
            # A truncation at the last step: the next observation is the final one.
            fill = self.stepper.next_is_reset_N & trunc_TN[T - 1]
            final_value_TN[T - 1, fill] = last_value_N[fill]
        assert act_TNA is not None
        rollout = Rollout(
            obs=obs_TNO,
            act=act_TNA,
            rew=rew_TN,
            terminated=term_TN,
            truncated=trunc_TN,
            valid=valid_TN,
            log_prob=log_prob_TN,
            value=value_TN,
            final_value=final_value_TN,
            last_value=last_value_N,
            env_rew=env_rew_TN,
        )
        stats = collect_stats(
            ended, env_steps=rollout.num_transitions, vector_steps=T, duration_s=time.perf_counter() - start
        )
        return rollout, stats

    def _sample_async(self, policy: ActorCriticPolicy, num_steps: int) -> tuple[Rollout, CollectStats]:
        """A ``[T, N]`` rollout from asynchronous envs (module docstring)."""
        assert self._async is not None
        start = time.perf_counter()
        T, N = num_steps, self.num_envs
        stepper, rows = self.stepper, self._async
        grid = _Grid(T, N, np.asarray(stepper.obs))
        for e in range(N):  # the rows carried over from the last rollout come first
            while rows.carry[e] and grid.count[e] < T:
                grid.place(e, rows.carry[e].pop(0), rows.carry[e])
        ended: list[Episode] = []
        vector_steps = 0
        while (grid.count < T).any():
            ready = stepper.ready_ids
            in_flight = N - len(ready)
            full = grid.count[ready] >= T
            send = ready[~full]
            short = stepper.batch_size - in_flight - len(send)
            if short > 0:  # too few envs in flight to recv: full envs step on, their rows carried
                send = np.concatenate([send, ready[full][:short]])
            if send.size:
                obs = np.asarray(stepper.obs)[send]
                act, log_prob, value = policy.act_value(obs)
                rows.choose(send, obs, act, log_prob, value)
                env_act = act if self._clip is None else np.clip(act, *self._clip)
            else:  # every ready env is full and enough are in flight: only receive
                env_act = None
            step = stepper.step(env_act, env_ids=send)
            rew = np.asarray(step.rew_N, dtype=np.float32)
            learn_rew = rew
            if self.reward_fn is not None:
                learn_rew = np.asarray(self.reward_fn(step.obs, step.act, step.obs_next, rew), dtype=np.float32)
            for k, e in enumerate(step.env_ids.tolist()):
                row = rows.finish(e, bool(step.transition_N[k]), float(learn_rew[k]), float(rew[k]),
                                  bool(step.terminated_N[k]), bool(step.truncated_N[k]))
                grid.place(e, row, rows.carry[e])
            ended += step.episodes
            vector_steps += 1
        # V(observation after each env's T-th row): its next row's stored value when chosen already
        last_value = np.zeros(N, np.float32)
        todo = []
        for e in range(N):
            if rows.carry[e]:
                last_value[e] = rows.carry[e][0].value
            elif rows.pending[e] is not None:
                last_value[e] = rows.pending[e].value
            else:
                todo.append(e)
        if todo:
            last_value[todo] = np.asarray(policy.value(np.asarray(stepper.obs)[todo]), dtype=np.float32)
        # a truncation at the last row: the next row is a reset whose value is V(final observation)
        fill = grid.trunc[T - 1] & np.array([not c for c in rows.carry])
        grid.final_value[T - 1, fill] = last_value[fill]
        rollout = grid.rollout(last_value)
        stats = collect_stats(
            ended, env_steps=rollout.num_transitions, vector_steps=vector_steps,
            duration_s=time.perf_counter() - start,
        )
        return rollout, stats

    def state_dict(self) -> dict[str, Any]:
        """Current observations, pending NEXT_STEP resets, partial episodes and counters (numpy
        arrays and plain values), plus ``"envs"``: a deep copy of the sub-envs when they allow it
        (classic control does, MuJoCo does not), else ``None``
        (:meth:`rlcore.envs.stepping.EnvStepper.state_dict`). Asynchronous envs (EnvPool) have
        no snapshot: a resumed sampler resets them, and the carried rows and actions in flight
        are dropped (``env_steps`` counts only the rows of past rollouts).
        """
        state = self.stepper.state_dict()
        state["env_steps"] = self.env_steps
        return state

    def load_state_dict(self, state: dict[str, Any], *, seed: int | None = None) -> None:
        """Restore :meth:`state_dict`; without ``state["envs"]`` (``None``) reset the envs with
        ``seed`` (warns): partial episodes are dropped and every env starts a fresh episode."""
        self.stepper.load_state_dict(state, seed=seed)


class _Row(NamedTuple):
    """One env step of an asynchronous rollout: what the policy chose, what the env returned."""

    obs: np.ndarray
    act: np.ndarray
    log_prob: float
    value: float
    valid: bool = True
    rew: float = 0.0
    env_rew: float = 0.0
    terminated: bool = False
    truncated: bool = False


class _AsyncRows:
    """The rows between asynchronous rollouts: per env, the step chosen and in flight
    (``pending``) and the finished rows that did not fit the last rollout (``carry``)."""

    def __init__(self, n: int) -> None:
        self.pending: list[_Row | None] = [None] * n
        self.carry: list[list[_Row]] = [[] for _ in range(n)]

    def choose(self, ids: np.ndarray, obs: np.ndarray, act: Any, log_prob: Any, value: Any) -> None:
        act = np.asarray(act)
        for k, e in enumerate(ids.tolist()):
            self.pending[e] = _Row(obs[k].copy(), act[k].copy(), float(log_prob[k]), float(value[k]))

    def finish(self, e: int, valid: bool, rew: float, env_rew: float, term: bool, trunc: bool) -> _Row:
        chosen = self.pending[e]
        assert chosen is not None, "a row came back for an env that was sent no action"
        self.pending[e] = None
        return chosen._replace(
            valid=valid,
            rew=rew if valid else 0.0,
            env_rew=env_rew if valid else 0.0,
            terminated=term and valid,
            truncated=trunc and valid,
        )


class _Grid:
    """The ``[T, N]`` arrays of one rollout, filled column by column."""

    def __init__(self, T: int, N: int, obs_NO: np.ndarray) -> None:
        self.T = T
        self.count = np.zeros(N, np.int64)
        self.obs = np.zeros((T, *obs_NO.shape), obs_NO.dtype)
        self.act: np.ndarray | None = None
        self.rew = np.zeros((T, N), np.float32)
        self.env_rew = np.zeros((T, N), np.float32)
        self.term = np.zeros((T, N), bool)
        self.trunc = np.zeros((T, N), bool)
        self.valid = np.ones((T, N), bool)
        self.log_prob = np.zeros((T, N), np.float32)
        self.value = np.zeros((T, N), np.float32)
        self.final_value = np.zeros((T, N), np.float32)

    def place(self, e: int, row: _Row, carry: list[_Row]) -> None:
        """Row ``count[e]`` of column e, or the end of ``carry`` once the column is full. A reset
        row (not valid) after a truncation gives that row its ``final_value`` (its obs is the
        final observation)."""
        t = int(self.count[e])
        if not row.valid and t > 0 and self.trunc[t - 1, e] and (t < self.T or not carry):
            self.final_value[t - 1, e] = row.value
        if t >= self.T:
            carry.append(row)
            return
        if self.act is None:
            self.act = np.zeros((self.T, self.obs.shape[1], *np.shape(row.act)), np.asarray(row.act).dtype)
        self.obs[t, e], self.act[t, e] = row.obs, row.act
        self.log_prob[t, e], self.value[t, e] = row.log_prob, row.value
        self.valid[t, e], self.rew[t, e], self.env_rew[t, e] = row.valid, row.rew, row.env_rew
        self.term[t, e], self.trunc[t, e] = row.terminated, row.truncated
        self.count[e] = t + 1

    def rollout(self, last_value: np.ndarray) -> Rollout:
        assert self.act is not None
        return Rollout(
            obs=self.obs,
            act=self.act,
            rew=self.rew,
            terminated=self.term,
            truncated=self.trunc,
            valid=self.valid,
            log_prob=self.log_prob,
            value=self.value,
            final_value=self.final_value,
            last_value=last_value,
            env_rew=self.env_rew,
        )
