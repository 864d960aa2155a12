"""Deep Q-Network with double-Q targets, an optional dueling head, n-step returns and PER weights.

Sources: Mnih et al. 2015 (DQN), van Hasselt et al. 2016 (double DQN, eq. 4), Wang et al. 2016
(dueling networks), Schaul et al. 2016 (prioritized replay). Reads like CleanRL's ``dqn.py``:
act epsilon-greedily, compute the TD target with the target network, regress, update the target.

n-step returns and termination come from the buffer: ``batch.rew`` is the n-step return and
``batch.discount = gamma**m * (1 - terminated)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlcore.algos.common import (
    adam,
    as_torch,
    check_fields,
    obs_to_torch,
    resolve_device,
    td_priorities,
    td_target,
    weighted_mean,
)
from rlcore.algos.q_learning import DiscreteQLearner, epsilon_greedy
from rlcore.batch import TransitionBatch
from rlcore.nets import DiscreteQNetwork, ImageQNetwork, ObsEncoder, PixelObs, is_image_space
from rlcore.stats import not_logged

__all__ = ["DQN", "DQNConfig", "DQNStats"]


@dataclass(frozen=True, kw_only=True)
class DQNConfig:
    """Hyperparameters of :class:`DQN` (defaults follow CleanRL's CartPole ``dqn.py``)."""

    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the MLP Q-network (used by ``from_spaces``; image observations get
    the Nature CNN instead, :class:`~rlcore.nets.ImageQNetwork`)."""
    lr: float = 5e-4
    """Adam learning rate (used by ``from_spaces``; the start of the annealing below)."""
    lr_anneal_env_steps: int | None = None
    """Anneal the learning rate linearly from ``lr`` to 0 over this many env steps (counted like
    epsilon, in ``act(deterministic=False)``); ``None``: constant ``lr``."""
    double_q: bool = True
    """Select the next action with the online network, evaluate it with the target (van Hasselt 2016)."""
    dueling: bool = False
    """Use a dueling value/advantage head (Wang et al. 2016; used by ``from_spaces``)."""
    loss: Literal["huber", "mse"] = "huber"
    """Per-sample regression loss on the TD error."""
    huber_delta: float = 1.0
    """Threshold of the Huber loss, in units of Q."""
    tau: float = 1.0
    """Polyak coefficient for the target network at each target update (1.0 = hard copy)."""
    target_update_interval: int = 250
    """Gradient steps between target-network updates."""
    max_grad_norm: float | None = 10.0
    """Clip the global gradient norm to this value (``None``: no clipping)."""
    eps_start: float = 1.0
    """Exploration epsilon at the first env step."""
    eps_end: float = 0.05
    """Exploration epsilon after ``eps_decay_env_steps`` env steps."""
    eps_decay_env_steps: int = 10_000
    """Env steps (counted in ``act(deterministic=False)``) over which epsilon decays linearly."""
    eval_epsilon: float = 0.0
    """Epsilon of ``act(deterministic=True)``, the evaluation policy: 0 is greedy. DQN's Atari
    evaluation uses 0.05 (Mnih et al. 2015, "Methods: evaluation procedure"); it also breaks the
    loops a greedy policy can play forever (up to the game's 27k-step limit). Its draws come from
    a generator of their own (``seed + 1``), so evaluation does not move the exploration stream."""
    normalize_obs: bool = False
    """Normalise observations with running statistics (used by ``from_spaces``; not for image
    observations, which the CNN scales by 1/255)."""
    seed: int | None = None
    """Seed of the exploration generator (epsilon-greedy coin and random actions)."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("lr",),  # 0 freezes the network
            positive=("huber_delta", "max_grad_norm"),
            counts=("lr_anneal_env_steps", "target_update_interval"),
            counts_from_zero=("eps_decay_env_steps",),
            positive_unit_interval=("tau",),
            unit_interval=("eps_start", "eps_end", "eval_epsilon"),
            choices={"loss": ("huber", "mse")},
        )


@dataclass(frozen=True)
class DQNStats:
    """Statistics of one DQN gradient step."""

    loss: float
    """Importance-weighted mean regression loss."""
    q_mean: float
    """Mean Q(o, a) of the taken actions."""
    td_abs_mean: float
    """Mean absolute TD error |Q - y|."""
    grad_norm: float
    """Global gradient norm before clipping (0 when clipping is off)."""
    epsilon: float
    """Current exploration epsilon."""
    learning_rate: float
    """Learning rate of this gradient step."""
    priorities: np.ndarray | None = not_logged()
    """New PER priorities ``|Q - y|`` float32 ``[B]`` when the batch carried weights, else ``None``
    (not logged; the trainer hands them to ``buffer.update_priorities``)."""


@dataclass(eq=False, repr=False, kw_only=True)
class DQN(DiscreteQLearner):
    """Double DQN for discrete actions.

    Constructor arguments: those of :class:`~rlcore.algos.q_learning.DiscreteQLearner`
    (``q_net`` maps ``obs_BO`` to ``q_BA``, ``[B, n_actions]``; ``config`` a :class:`DQNConfig`), and

    Args:
        encoder: flattens/normalises observations (:class:`~rlcore.nets.PixelObs` passes uint8
            images through); shared by online and target network.
    """

    encoder: ObsEncoder | PixelObs
    eval_rng: np.random.Generator = field(init=False)
    """The generator of ``act(deterministic=True)``'s epsilon (``seed + 1``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.encoder = self.encoder.to(self.device)
        seed = self.config.seed
        self.eval_rng = np.random.default_rng(None if seed is None else seed + 1)

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: DQNConfig | None = None,
        *,
        device: str | torch.device | None = None,
    ) -> DQN:
        """Build the default Q-network and Adam optimizer for single-env spaces.

        Image observations (:func:`~rlcore.nets.is_image_space`: a uint8 ``Box`` ``[C, H, W]``,
        e.g. stacked Atari frames) get the Nature CNN (:class:`~rlcore.nets.ImageQNetwork`) and stay
        uint8 up to the network; any other ``Box`` or ``Dict`` space gets an MLP of
        ``config.hidden`` on the flattened observation.

        Raises:
            ValueError: the action space is not ``Discrete``; ``normalize_obs`` with image
                observations.
        """
        config = config or DQNConfig()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"DQN needs a Discrete action space, got {action_space}")
        n_actions = int(action_space.n)
        encoder: ObsEncoder | PixelObs
        q_net: torch.nn.Module
        if is_image_space(observation_space):
            if config.normalize_obs:
                raise ValueError("normalize_obs is for vector observations; the CNN scales images by 1/255")
            encoder = PixelObs(observation_space)
            q_net = ImageQNetwork(encoder.shape, n_actions, dueling=config.dueling)
        else:
            encoder = ObsEncoder(observation_space, normalize=config.normalize_obs)
            q_net = DiscreteQNetwork(encoder.dim, n_actions, config.hidden, dueling=config.dueling)
        dev = resolve_device(device)
        q_net.to(dev)
        return cls(
            encoder=encoder,
            q_net=q_net,
            optimizer=adam(q_net.parameters(), lr=config.lr),
            n_actions=n_actions,
            config=config,
            device=dev,
        )

    @torch.no_grad()
    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Epsilon-greedy actions int64 ``[N]`` for a NumPy batch of N observations.

        ``deterministic=False`` (training): epsilon of the schedule (:attr:`epsilon`); the call
        advances the schedule by N env steps. ``deterministic=True`` (evaluation): epsilon
        ``config.eval_epsilon``, greedy at its default 0.
        """
        q_NA = self.q_net(self.encoder(obs_to_torch(obs, self.device)))
        act_N = q_NA.argmax(-1).cpu().numpy().astype(np.int64)
        if not deterministic:
            return self.explore(act_N)
        eps = self.config.eval_epsilon
        return act_N if eps == 0.0 else epsilon_greedy(act_N, self.eval_rng, eps, self.n_actions)

    def update(self, batch: TransitionBatch) -> DQNStats:
        """One gradient step on a sampled batch; the stats carry new priorities when ``batch.weights`` is set."""
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_B = batch.act.reshape(-1).long()
        weights_B = batch.weights.float() if batch.weights is not None else None

        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            q_next_target_BA = self.q_target(obs_next_BO)
            if c.double_q:
                act_next_B = self.q_net(obs_next_BO).argmax(-1)
            else:
                act_next_B = q_next_target_BA.argmax(-1)
            q_next_B = q_next_target_BA.gather(1, act_next_B[:, None]).squeeze(1)
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B)

        q_B = self.q_net(obs_BO).gather(1, act_B[:, None]).squeeze(1)
        if c.loss == "huber":
            loss_B = F.huber_loss(q_B, y_B, reduction="none", delta=c.huber_delta)
        else:
            loss_B = F.mse_loss(q_B, y_B, reduction="none")
        loss = weighted_mean(loss_B, weights_B)

        grad_norm = self.q_step(loss, c.tau)

        td_abs_B = (q_B.detach() - y_B).abs()
        return DQNStats(
            loss=loss.item(),
            q_mean=float(q_B.detach().mean()),
            td_abs_mean=float(td_abs_B.mean()),
            grad_norm=grad_norm,
            epsilon=self.epsilon,
            learning_rate=float(self.optimizer.param_groups[0]["lr"]),
            priorities=td_priorities(td_abs_B, weights_B),
        )

    def state_dict(self) -> dict[str, Any]:
        """:meth:`DiscreteQLearner.state_dict`, the encoder and the evaluation generator."""
        return {
            **super().state_dict(),
            "encoder": self.encoder.state_dict(),
            "eval_rng": self.eval_rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.encoder.load_state_dict(state["encoder"])
        super().load_state_dict(state)
        if "eval_rng" in state:  # checkpoints before eval_epsilon have none (greedy evaluation)
            self.eval_rng.bit_generator.state = state["eval_rng"]
