"""Recurrent DQN with R2D2's replay: sequences, burn-in from a stored state, double-Q n-step
targets inside the sequence and sequence priorities.

Sources: Hausknecht & Stone 2015 (DRQN), Kapturowski et al. 2019 ("Recurrent Experience Replay in
Distributed Reinforcement Learning", R2D2: stored state + burn-in, sec. 3; priority mixture
``eta * max + (1 - eta) * mean``, sec. 2.3), van Hasselt et al. 2016 (double Q, eq. 4).

The batch is a :class:`~rlcore.batch.SequenceBatch` of L = burn_in + seq_len steps
with the GRU state stored at collection in ``batch.state["h"]`` (the state *before* the first
step). The online network unrolls from it over the burn-in steps without gradient, then over the
training steps with gradient; a sequence that starts at its episode's first step
(``is_first[:, 0]``) has the exact (zero) state already and trains on every step. Targets use
the buffer's n-step fields: ``y_k = rew_k + discount_k * Q'(step k + horizon_k, argmax Q)``, the
bootstrap step read from the same unrolled sequence (the observation after the last valid step is
``obs_next`` of that step). With ``value_rescaling`` the networks output ``h(Q)`` and the target is
``y_k = h(rew_k + discount_k * h^-1(Q'(...)))`` (R2D2, sec. 2.3; Pohlen et al. 2018).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlcore.algos.common import adam, check_fields, resolve_device, value_rescale, value_rescale_inverse
from rlcore.algos.q_learning import DiscreteQLearner
from rlcore.batch import SequenceBatch
from rlcore.errors import ApiUsageError, ShapeError
from rlcore.nets import RecurrentQNetwork, RunningMeanStd
from rlcore.stats import not_logged

__all__ = ["R2D2", "R2D2Config", "R2D2Stats"]


@dataclass(frozen=True, kw_only=True)
class R2D2Config:
    """Hyperparameters of :class:`R2D2` (sized for small POMDPs such as ``rlcore/CartPoleNoVel-v1``)."""

    hidden: tuple[int, ...] = (64,)
    """Widths of the MLP between the observation and the GRU (used by ``from_spaces``)."""
    recurrent_size: int = 64
    """Width of the GRU state H (used by ``from_spaces``)."""
    lr: float = 1e-3
    """Adam learning rate (used by ``from_spaces``)."""
    burn_in: int = 8
    """Steps at the start of each sequence that only warm the state up (no loss, no gradient)."""
    seq_len: int = 16
    """Training steps after the burn-in (the trainer samples ``burn_in + seq_len`` steps)."""
    double_q: bool = True
    """Select the bootstrap action with the online network, evaluate it with the target."""
    huber_delta: float = 1.0
    """Threshold of the Huber loss, in units of Q."""
    target_update_interval: int = 500
    """Gradient steps between hard target-network copies."""
    max_grad_norm: float | None = 10.0
    """Clip the global gradient norm to this value (``None``: no clipping)."""
    eps_start: float = 1.0
    """Exploration epsilon at the first env step."""
    eps_end: float = 0.02
    """Exploration epsilon after ``eps_decay_env_steps`` env steps."""
    eps_decay_env_steps: int = 30_000
    """Env steps (counted in ``act(deterministic=False)``) over which epsilon decays linearly."""
    priority_eta: float = 0.9
    """eta of R2D2's sequence priority ``eta * max|delta| + (1 - eta) * mean|delta|``."""
    normalize_obs: bool = False
    """Normalise observations with a running mean and std (updated by the exploring ``act``, i.e.
    on the collected observations; clipped to ±5), for both networks."""
    lr_anneal_env_steps: int | None = None
    """Anneal the learning rate linearly from ``lr`` to 0 over this many env steps (``None``: constant)."""
    prev_action_input: bool = False
    """Feed the previous action (one-hot; zeros at an episode's first step) to the network with
    the observation, as R2D2 does (Kapturowski et al. 2019, sec. 2.3). The recurrent state then
    carries it: ``[H + A]`` = the GRU state and the one-hot action taken."""
    value_rescaling: bool = False
    """Learn ``h(Q)`` with R2D2's invertible rescaling ``h(x) = sign(x)(sqrt(|x| + 1) - 1) + 1e-3 x``
    (:func:`~rlcore.algos.common.value_rescale`): the target becomes
    ``h(rew + discount * h^-1(Q'(s', argmax_a Q(s', a))))`` (Kapturowski et al. 2019, sec. 2.3;
    Pohlen et al. 2018). The network's outputs, the losses, the TD errors and hence the priorities
    are then in h's units; the greedy action is the same (h is increasing)."""
    seed: int | None = None
    """Seed of the exploration generator."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("lr",),
            positive=("huber_delta", "max_grad_norm"),
            counts=("recurrent_size", "seq_len", "target_update_interval", "lr_anneal_env_steps"),
            counts_from_zero=("burn_in", "eps_decay_env_steps"),
            unit_interval=("eps_start", "eps_end", "priority_eta"),
        )


@dataclass(frozen=True)
class R2D2Stats:
    """Statistics of one R2D2 gradient step."""

    loss: float
    """Importance-weighted mean (over sequences) of the masked mean Huber loss of each sequence."""
    q_mean: float
    """Mean Q(o, a) of the taken actions on the trained steps (the network's output: h(Q) with
    ``value_rescaling``)."""
    td_abs_mean: float
    """Mean |Q - y| on the trained steps (in h's units with ``value_rescaling``)."""
    grad_norm: float
    """Global gradient norm before clipping (0 when clipping is off)."""
    epsilon: float
    """Current exploration epsilon."""
    td_abs: np.ndarray | None = not_logged()
    """float32 ``[B, L]`` |Q - y| per step (not logged): ``update_sequence_priorities``'s input."""
    td_mask: np.ndarray | None = not_logged()
    """bool ``[B, L]`` the trained steps of each sequence (not logged), at least one per row."""


@dataclass(eq=False, repr=False, kw_only=True)
class R2D2(DiscreteQLearner):
    """Recurrent double DQN on sequences (R2D2's learner, single process).

    Constructor arguments: those of :class:`~rlcore.algos.q_learning.DiscreteQLearner`, with
    ``q_net`` a :class:`RecurrentQNetwork` (or a module with its signature) and ``config`` an
    :class:`R2D2Config`.
    """

    q_net: RecurrentQNetwork
    recurrent_size: int = field(init=False)
    """H, the GRU state's width."""
    state_size: int = field(init=False)
    """S, the width of the state ``act`` carries: H, or H + A with ``prev_action_input``."""
    obs_rms: RunningMeanStd | None = field(init=False)
    """Running observation statistics with ``normalize_obs``, else ``None``."""
    _prev_width: int = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.recurrent_size = self.q_net.recurrent_size
        self._prev_width = self.n_actions if self.config.prev_action_input else 0
        self.state_size = self.recurrent_size + self._prev_width
        self.obs_rms = (
            RunningMeanStd(self.q_net.obs_dim - self._prev_width, eps=1e-8).to(self.device)
            if self.config.normalize_obs
            else None
        )

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: R2D2Config | None = None,
        *,
        device: str | torch.device | None = None,
    ) -> R2D2:
        """The default GRU Q-network and Adam for a ``Box`` observation and ``Discrete`` action space.

        Raises:
            ValueError: the action space is not ``Discrete`` or the observation space not a ``Box``.
        """
        config = config or R2D2Config()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"R2D2 needs a Discrete action space, got {action_space}")
        if not isinstance(observation_space, gym.spaces.Box):
            raise ValueError(f"R2D2 needs a Box observation space, got {observation_space}")
        n_actions = int(action_space.n)
        obs_dim = int(np.prod(observation_space.shape))
        in_dim = obs_dim + (n_actions if config.prev_action_input else 0)
        q_net = RecurrentQNetwork(in_dim, n_actions, config.hidden, config.recurrent_size)
        dev = resolve_device(device)
        q_net.to(dev)
        return cls(q_net=q_net, optimizer=adam(q_net.parameters(), lr=config.lr), n_actions=n_actions,
                   config=config, device=dev)

    def _norm(self, obs_BTO: torch.Tensor) -> torch.Tensor:
        """Observations as the networks see them (normalised when ``normalize_obs``)."""
        if self.obs_rms is None:
            return obs_BTO
        b, t, o = obs_BTO.shape
        return self.obs_rms(obs_BTO.reshape(b * t, o)).reshape(b, t, o)

    def initial_state(self, n: int) -> np.ndarray:
        """float32 ``[N, S]`` zeros: the state at an episode's first step (``S = H``, or ``H + A``
        with ``prev_action_input``)."""
        return np.zeros((n, self.state_size), np.float32)

    def _inputs(self, obs_BTO: torch.Tensor, prev_BTA: torch.Tensor | None) -> torch.Tensor:
        """What the network reads at each step: the (normalised) observation, and the previous
        action's one-hot with ``prev_action_input``."""
        x = self._norm(obs_BTO)
        return x if prev_BTA is None else torch.cat([x, prev_BTA], -1)

    @torch.no_grad()
    def act(self, obs: Any, state: np.ndarray, *, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Actions int64 ``[N]`` and the next state float32 ``[N, S]`` for N observations ``[N, *O]``
        and the current state ``[N, S]`` (:meth:`initial_state`). Non-deterministic calls act
        epsilon-greedily and advance the epsilon schedule by N env steps."""
        obs_N1O = torch.tensor(np.asarray(obs, np.float32), device=self.device).reshape(len(state), 1, -1)
        state_NS = torch.tensor(np.asarray(state, np.float32), device=self.device)
        h = self.recurrent_size
        if self.obs_rms is not None and not deterministic:
            self.obs_rms.update(obs_N1O[:, 0])
        prev_N1A = state_NS[:, None, h:] if self._prev_width else None
        q_N1A, h_NH = self.q_net(self._inputs(obs_N1O, prev_N1A), state_NS[:, :h])
        act_N = q_N1A[:, 0].argmax(-1).cpu().numpy().astype(np.int64)
        if not deterministic:
            act_N = self.explore(act_N)
        h_next = h_NH.cpu().numpy().astype(np.float32)
        if self._prev_width:
            h_next = np.concatenate([h_next, np.eye(self.n_actions, dtype=np.float32)[act_N]], 1)
        return act_N, h_next

    def update(self, batch: SequenceBatch) -> R2D2Stats:
        """One gradient step on a batch of sequences (module docstring).

        Raises:
            ShapeError: the batch has fewer than ``burn_in + 1`` steps per sequence.
        """
        c = self.config
        dev = self.device
        mask_BL = torch.as_tensor(batch.mask, device=dev)
        b, length = mask_BL.shape
        bi = c.burn_in
        if length <= bi:
            raise ShapeError(f"sequences of {length} steps leave no training step after burn_in={bi}")
        obs_BLO = torch.as_tensor(batch.obs, device=dev).float().reshape(b, length, -1)
        obs_next_BLO = torch.as_tensor(batch.obs_next, device=dev).float().reshape(b, length, -1)
        act_BL = torch.as_tensor(batch.act, device=dev).reshape(b, length).long()
        rew_BL = torch.as_tensor(batch.rew, device=dev).float()
        discount_BL = torch.as_tensor(batch.discount, device=dev).float()
        horizon_BL = torch.as_tensor(batch.horizon, device=dev).long()
        first_B = torch.as_tensor(batch.is_first[:, 0], device=dev)
        state0_BS = (
            torch.as_tensor(batch.state["h"], device=dev).float()
            if "h" in batch.state
            else torch.zeros(b, self.state_size, device=dev)
        )
        h0_BH = state0_BS[:, : self.recurrent_size]
        weights_B = torch.as_tensor(batch.weights, device=dev).float() if batch.weights is not None else None

        # the observation sequence with the bootstrap observation after the last valid step
        valid_B = mask_BL.sum(1).clamp(min=1)
        rows_B = torch.arange(b, device=dev)
        obs_ext_BKO = torch.cat([obs_BLO, torch.zeros_like(obs_BLO[:, :1])], 1)
        obs_ext_BKO[rows_B, valid_B] = obs_next_BLO[rows_B, valid_B - 1]
        prev_ext_BKA = None
        if self._prev_width:  # the action before each step: the stored one, then the sequence's own
            taken_BLA = F.one_hot(act_BL, self.n_actions).float()
            prev_ext_BKA = torch.cat([state0_BS[:, None, self.recurrent_size :], taken_BLA], 1)
        obs_ext_BKO = self._inputs(obs_ext_BKO, prev_ext_BKA)

        # online: burn-in (gradient only for sequences that start their episode), then training steps
        q_burn_BTA, h_burn_BH = self.q_net(obs_ext_BKO[:, :bi], h0_BH) if bi else (None, h0_BH)
        h_burn_BH = torch.where(first_B[:, None], h_burn_BH, h_burn_BH.detach())
        q_rest_BTA, _ = self.q_net(obs_ext_BKO[:, bi:], h_burn_BH)
        q_BKA = q_rest_BTA if q_burn_BTA is None else torch.cat([q_burn_BTA, q_rest_BTA], 1)

        with torch.no_grad():
            q_target_BKA, _ = self.q_target(obs_ext_BKO, h0_BH)
            boot_BL = (torch.arange(length, device=dev)[None, :] + horizon_BL).clamp(max=length)
            q_boot_online_BLA = q_BKA.detach().gather(1, boot_BL[..., None].expand(-1, -1, self.n_actions))
            q_boot_target_BLA = q_target_BKA.gather(1, boot_BL[..., None].expand(-1, -1, self.n_actions))
            source_BLA = q_boot_online_BLA if c.double_q else q_boot_target_BLA
            act_next_BL = source_BLA.argmax(-1)
            q_next_BL = q_boot_target_BLA.gather(2, act_next_BL[..., None]).squeeze(-1)
            if c.value_rescaling:  # the network outputs h(Q): back to returns, add, rescale
                y_BL = value_rescale(rew_BL + discount_BL * value_rescale_inverse(q_next_BL))
            else:
                y_BL = rew_BL + discount_BL * q_next_BL

        q_taken_BL = q_BKA[:, :length].gather(2, act_BL[..., None]).squeeze(-1)
        steps_L = torch.arange(length, device=dev)
        train_BL = mask_BL & ((steps_L[None, :] >= bi) | first_B[:, None])
        loss_BL = F.huber_loss(q_taken_BL, y_BL, reduction="none", delta=c.huber_delta)
        n_B = train_BL.sum(1)
        loss_B = (loss_BL * train_BL).sum(1) / n_B.clamp(min=1)
        loss = (loss_B * weights_B).mean() if weights_B is not None else loss_B.mean()
        grad_norm = self.q_step(loss, tau=1.0)

        td_abs_BL = (q_taken_BL.detach() - y_BL).abs()
        td_mask_BL = train_BL.clone()
        td_mask_BL[n_B == 0, 0] = True  # no trained step: priority from a zero TD error
        td_abs_BL = torch.where(train_BL, td_abs_BL, torch.zeros_like(td_abs_BL))
        trained = train_BL.sum().clamp(min=1)
        return R2D2Stats(
            loss=loss.item(),
            q_mean=float((q_taken_BL.detach() * train_BL).sum() / trained),
            td_abs_mean=float(td_abs_BL.sum() / trained),
            grad_norm=grad_norm,
            epsilon=self.epsilon,
            td_abs=td_abs_BL.cpu().numpy().astype(np.float32),
            td_mask=td_mask_BL.cpu().numpy(),
        )

    def state_dict(self) -> dict[str, Any]:
        """:meth:`DiscreteQLearner.state_dict` and the observation statistics."""
        return {**super().state_dict(), "obs_rms": None if self.obs_rms is None else self.obs_rms.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Raises:
            ApiUsageError: the state was saved with another ``value_rescaling`` (its networks output
                ``h(Q)`` where this learner reads ``Q``, or the reverse); a state saved before the
                option existed counts as ``value_rescaling=False``. Nothing is loaded then.
        """
        saved = bool(state.get("config", {}).get("value_rescaling", False))
        if saved != self.config.value_rescaling:
            raise ApiUsageError(
                f"this R2D2 state was trained with value_rescaling={saved} and this learner has "
                f"value_rescaling={self.config.value_rescaling}: its Q-values are in other units "
                f"(rlcore train: pass {'--value-rescaling' if saved else '--no-value-rescaling'})"
            )
        super().load_state_dict(state)
        if self.obs_rms is not None:
            self.obs_rms.load_state_dict(state["obs_rms"])
