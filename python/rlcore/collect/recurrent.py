"""Carry a recurrent policy's state across the steps of a vector env, for the collector and for
evaluation (a :class:`~rlcore.types.StatefulPolicy`).

:class:`RecurrentActor` holds the state ``[N, *H]`` of every env. Before a step it acts on the
waiting envs from their states and keeps, per env, the state the action was chosen from; after the
step it hands that state back as the extra column ``state_key`` of each row (R2D2's "stored
state", Kapturowski et al. 2019, sec. 3: a learner burns in from it) and restarts at
``initial_state`` every env whose next observation begins an episode: the row after a done under
NEXT_STEP autoreset (a reset row, no transition), the done row itself under SAME_STEP and DISABLED
(the stepper's next observation is then the reset one), and both where they coincide. Works in
lock-step and with asynchronous envs (a subset of envs per step, any order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlcore.envs.stepping import Step
from rlcore.errors import ApiUsageError
from rlcore.types import RecurrentPolicy

__all__ = ["RecurrentActor"]


class RecurrentActor:
    """A :class:`~rlcore.types.StatefulPolicy` over a :class:`~rlcore.types.RecurrentPolicy`
    (module docstring).

    Args:
        policy: ``initial_state(n)`` and ``act(obs, state, deterministic=...) -> (act, state)``.
        deterministic: act greedily (evaluation) instead of exploring.
        state_key: the extra column :meth:`observe` returns (``None``: return no column).

    Attributes:
        state: float32 ``[N, *H]``: the state each env acts from next (``None`` before :meth:`reset`).
    """

    def __init__(self, policy: RecurrentPolicy, *, deterministic: bool = False, state_key: str | None = "h") -> None:
        self.policy = policy
        self.deterministic = deterministic
        self.state_key = state_key
        self.state: np.ndarray | None = None
        self._acted_from: np.ndarray | None = None

    def reset(self, num_envs: int) -> None:
        """Every env starts an episode: all states at ``initial_state``."""
        self.state = np.asarray(self.policy.initial_state(num_envs), np.float32)
        self._acted_from = self.state.copy()

    def act(self, obs: Any, env_ids: np.ndarray) -> np.ndarray:
        """Actions of the envs ``env_ids`` from their states; their states advance.

        Raises:
            ApiUsageError: :meth:`reset` was never called.
        """
        if self.state is None or self._acted_from is None:
            raise ApiUsageError("RecurrentActor.act() before reset(num_envs)")
        state_in = self.state[env_ids]
        act, state_out = self.policy.act(obs, state_in, deterministic=self.deterministic)
        self._acted_from[env_ids] = state_in
        self.state[env_ids] = state_out
        return act

    def observe(self, step: Step) -> Mapping[str, np.ndarray]:
        """The state each row's action was chosen from (``{state_key: [K, *H]}``); restart the envs
        whose next observation begins an episode (module docstring)."""
        if self.state is None or self._acted_from is None:
            raise ApiUsageError("RecurrentActor.observe() before reset(num_envs)")
        ids = step.env_ids
        extras = {} if self.state_key is None else {self.state_key: self._acted_from[ids].copy()}
        restart = ids[~step.transition_N | step.done_N]
        if restart.size:
            self.state[restart] = self.policy.initial_state(int(restart.size))
        return extras

    def state_dict(self) -> dict[str, Any]:
        """The per-env states (a numpy array, or ``None`` before :meth:`reset`) for checkpoints."""
        return {"state": None if self.state is None else self.state.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        saved = state["state"]
        self.state = None if saved is None else np.array(saved, np.float32)
        self._acted_from = None if self.state is None else self.state.copy()
