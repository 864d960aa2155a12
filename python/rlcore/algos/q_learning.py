"""The parts that DQN and R2D2 share: :class:`DiscreteQLearner`, a declared dataclass of the online
Q-network, its frozen target copy, the optimizer, the epsilon-greedy exploration generator and
schedule, the gradient step (learning-rate annealing, clipping, target update) and the state-dict
entries of those parts; and :func:`epsilon_greedy`, the exploring action itself.

Each algorithm's ``act`` and ``update`` stay in its own module, in the order of its paper.

Dimension letters: N envs, A actions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from rlcore.algos.common import TargetNetwork, anneal_learning_rate, freeze, gradient_step, resolve_device
from rlcore.schedules import LinearSchedule

__all__ = ["DiscreteQLearner", "epsilon_greedy"]


def epsilon_greedy(act_N: np.ndarray, rng: np.random.Generator, epsilon: float, n_actions: int) -> np.ndarray:
    """Each greedy action int64 ``[N]`` replaced, with probability ``epsilon``, by one drawn
    uniformly from ``0 .. n_actions - 1`` (Mnih et al. 2015, Algorithm 1).

    Two draws from ``rng``: the N coins (``rng.random(N)``), then N actions
    (``rng.integers(0, n_actions, N)``), whatever the coins say.
    """
    n = act_N.shape[0]
    explore_N = rng.random(n) < epsilon
    return np.where(explore_N, rng.integers(0, n_actions, size=n), act_N)


@dataclass(eq=False, repr=False, kw_only=True)
class DiscreteQLearner:
    """What DQN and R2D2 hold: the given Q-network and optimizer on ``device``, a frozen target
    copy of the network (updated through ``_q_target``), the exploration generator ``rng`` seeded
    with ``config.seed``, the env-step counter of the epsilon schedule and the gradient-step
    counter. A subclass adds ``act`` and ``update``.

    The config must have ``seed``, ``eps_start``, ``eps_end``, ``eps_decay_env_steps``, ``lr``,
    ``lr_anneal_env_steps``, ``max_grad_norm`` and ``target_update_interval``.

    Args:
        q_net: the online Q-network (its output's last axis: the ``n_actions`` Q-values).
        optimizer: optimises ``q_net`` (and nothing else).
        n_actions: size of the discrete action space.
        config: hyperparameters.
        device: where the networks live (``None``/``"auto"``: cuda when available); the resolved
            ``torch.device`` after construction.
    """

    q_net: torch.nn.Module
    optimizer: torch.optim.Optimizer
    n_actions: int
    config: Any
    device: Any = None
    q_target: torch.nn.Module = field(init=False)
    rng: np.random.Generator = field(init=False)
    explore_env_steps: int = field(init=False, default=0)
    """Env steps the exploring ``act`` has taken: the epsilon schedule's clock."""
    grad_steps: int = field(init=False, default=0)
    _q_target: TargetNetwork = field(init=False)
    _q_params: list[torch.nn.Parameter] = field(init=False)

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        self.q_net = self.q_net.to(self.device)
        self.q_target = freeze(copy.deepcopy(self.q_net))
        self._q_target = TargetNetwork(self.q_target, self.q_net)
        self._q_params = list(self.q_net.parameters())
        self.rng = np.random.default_rng(self.config.seed)

    @property
    def epsilon(self) -> float:
        """Linear schedule from ``eps_start`` to ``eps_end`` over ``eps_decay_env_steps`` env steps."""
        c = self.config
        return LinearSchedule(c.eps_start, c.eps_end, max(1, c.eps_decay_env_steps))(self.explore_env_steps)

    def explore(self, act_N: np.ndarray) -> np.ndarray:
        """:func:`epsilon_greedy` with the schedule's epsilon and ``rng``; advances the schedule
        by N env steps."""
        act_N = epsilon_greedy(act_N, self.rng, self.epsilon, self.n_actions)
        self.explore_env_steps += act_N.shape[0]
        return act_N

    def q_step(self, loss: torch.Tensor, tau: float) -> float:
        """One optimizer step on ``loss``: the learning rate annealed to the env-step clock when
        ``lr_anneal_env_steps`` is set, the gradient clipped to ``max_grad_norm``; then, every
        ``target_update_interval`` gradient steps, the target moved toward the online network by
        ``tau`` (1.0: a hard copy). Returns the gradient norm before clipping (0 when clipping is off)."""
        c = self.config
        if c.lr_anneal_env_steps is not None:
            anneal_learning_rate(self.optimizer, c.lr, self.explore_env_steps, c.lr_anneal_env_steps)
        grad_norm = gradient_step(self.optimizer, loss, self._q_params, c.max_grad_norm)
        self.grad_steps += 1
        if self.grad_steps % c.target_update_interval == 0:
            self._q_target.update(tau)
        return grad_norm

    def state_dict(self) -> dict[str, Any]:
        """Config, ``q_net``, ``q_target``, the optimizer, both counters and the exploration
        generator, each under its attribute name."""
        return {
            "config": asdict(self.config),
            "q_net": self.q_net.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "explore_env_steps": self.explore_env_steps,
            "grad_steps": self.grad_steps,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned, in place (the config is not read)."""
        self.q_net.load_state_dict(state["q_net"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.explore_env_steps = int(state["explore_env_steps"])
        self.grad_steps = int(state["grad_steps"])
        self.rng.bit_generator.state = state["rng"]
