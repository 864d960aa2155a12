"""Conservative Q-Learning (continuous actions, on SAC), for offline RL.

Source: Kumar, Zhou, Tucker & Levine 2020, "Conservative Q-Learning for Offline Reinforcement
Learning". :meth:`CQL.update` follows the paper's Algorithm 1 (a Q step with the CQL regulariser,
then a SAC policy step) and the authors' ``cql_sac.py`` for the details:

1. SAC's TD target ``y = r + discount * min_k Q'_k(s', a')``, ``a' ~ pi(.|s')`` (without the entropy
   term: the authors' ``backup_entropy=False``; ``backup_entropy=True`` subtracts ``alpha log pi``);
2. the critic loss is the TD error plus the CQL(H) regulariser (eq. 4, the variant of Appendix F)
   for each critic k::

       alpha_cql * E_s[ log sum_a exp Q_k(s, a) - E_{a ~ D} Q_k(s, a) ]

   where the log-sum-exp over actions is estimated by importance sampling with ``n_actions``
   actions from each of: the uniform distribution over the action box, ``pi(.|s)`` and ``pi(.|s')``,
   each ``Q_k(s, a)`` minus the log-density of its proposal (Appendix F, eq. 30), at temperature
   ``cql_temperature``; with ``lagrange=True`` the weight is ``alpha' * alpha_cql``, where ``alpha' >= 0``
   is tuned by dual gradient descent to keep the gap near ``target_action_gap`` (CQL-Lagrange,
   Appendix F, eq. 31);
3. SAC's actor step ``min alpha log pi(a|s) - min_k Q_k(s, a)`` and temperature step (Haarnoja et
   al. 2018, eq. 7 and 18);
4. polyak update of the target critics.

Defaults are the paper's for the D4RL MuJoCo tasks (Appendix F): 256x256 networks, critic lr 3e-4,
policy lr 1e-4, alpha_cql 5.0, 10 sampled actions, temperature 1, automatic entropy tuning with
target entropy ``-A``, tau 0.005.

Difference, on purpose: ``batch.rew`` / ``batch.discount`` are the buffer's (n-step) return and
``gamma**m * (1 - terminated)``, so time-limit ends bootstrap. The authors' code starts with 40k
steps of behaviour cloning for the policy on some tasks; that is not done here.

Dimension letters: B batch, N sampled actions, O flat observation, A action, K critics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rlcore.algos.common import (
    adam,
    as_torch,
    check_fields,
    gradient_step,
    learner_state,
    load_learner_state,
    no_param_grad,
    td_target,
)
from rlcore.algos.squashed import SquashedGaussianActorCritic
from rlcore.batch import TransitionBatch

__all__ = ["CQL", "CQLConfig", "CQLStats", "cql_gap"]


@dataclass(frozen=True, kw_only=True)
class CQLConfig:
    """Hyperparameters of :class:`CQL` (defaults: Kumar et al. 2020, Appendix F, D4RL MuJoCo)."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor and critics (used by ``from_spaces``)."""
    actor_lr: float = 1e-4
    """Adam learning rate of the policy (used by ``from_spaces``)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics (used by ``from_spaces``)."""
    alpha_lr: float = 1e-4
    """Adam learning rate of ``log(alpha)`` (the entropy temperature)."""
    tau: float = 0.005
    """Polyak coefficient of the target critics, applied every gradient step."""
    init_alpha: float = 1.0
    """Initial entropy temperature."""
    autotune_alpha: bool = True
    """Learn the entropy temperature (SAC, eq. 18); else it stays ``init_alpha``."""
    target_entropy: float | None = None
    """Target entropy in nats; ``None``: ``-A``."""
    backup_entropy: bool = False
    """Subtract ``alpha * log pi(a'|s')`` in the TD target (SAC's soft target); off in the authors' code."""
    cql_alpha: float = 5.0
    """alpha of eq. 4: the weight of the conservative regulariser."""
    n_actions: int = 10
    """Actions sampled from each of the three proposals per state for the log-sum-exp."""
    cql_temperature: float = 1.0
    """Temperature of the log-sum-exp over actions."""
    lagrange: bool = False
    """CQL-Lagrange: tune a multiplier alpha' so the gap stays near ``target_action_gap`` (eq. 31)."""
    target_action_gap: float = 5.0
    """tau of eq. 31 (with ``lagrange``)."""
    alpha_prime_lr: float = 3e-4
    """Adam learning rate of ``log(alpha')`` (with ``lagrange``)."""
    normalize_obs: bool = False
    """Normalise observations with running statistics (the paper does not)."""
    seed: int | None = None
    """Seed of the policy's sampling generator and the uniform actions and, in ``from_spaces``, of
    the initial weights; ``None``: drawn from torch's global generator."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            non_negative=("actor_lr", "critic_lr", "alpha_lr", "cql_alpha", "alpha_prime_lr"),
            positive=("init_alpha", "cql_temperature"),
            positive_unit_interval=("tau",),
            counts=("n_actions",),
            finite=("target_entropy", "target_action_gap"),
        )


@dataclass(frozen=True)
class CQLStats:
    """Statistics of one CQL gradient step."""

    critic_loss: float
    """TD loss plus the weighted regulariser, summed over the two critics."""
    td_loss: float
    """Mean squared TD error, summed over the two critics."""
    cql_gap: float
    """Mean over critics of ``logsumexp_a Q(s, a) - Q(s, a_data)`` (eq. 4 before its weight)."""
    actor_loss: float
    """``alpha log pi(a|s) - min_k Q_k(s, a)`` of the policy step."""
    alpha: float
    """Entropy temperature used in this step."""
    alpha_prime: float
    """Lagrange multiplier alpha' (1 without ``lagrange``)."""
    entropy: float
    """Mean ``-log pi(a|s)`` of the policy step's actions, in nats."""
    q_mean: float
    """Mean Q_1(s, a) of the dataset actions."""


def cql_gap(
    q_rand_KBN: torch.Tensor,
    log_density_rand: float,
    q_pi_KBN: torch.Tensor,
    log_pi_BN: torch.Tensor,
    q_pi_next_KBN: torch.Tensor,
    log_pi_next_BN: torch.Tensor,
    q_data_KB: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """The CQL(H) gap per critic ``[K]``: ``E_s[T logsumexp_a (Q(s, a) / T) - Q(s, a_data)]`` with the
    log-sum-exp over the 3N importance-sampled actions, each ``Q`` minus its proposal's log-density
    (Kumar et al. 2020, eq. 4 and Appendix F, eq. 30).

    Args:
        q_rand_KBN: Q of N uniform actions per state.
        log_density_rand: their (constant) log-density.
        q_pi_KBN: Q of N actions from ``pi(.|s)``.
        log_pi_BN: their log-density.
        q_pi_next_KBN: Q (at s) of N actions from ``pi(.|s')``.
        log_pi_next_BN: their log-density.
        q_data_KB: Q of the dataset actions.
        temperature: T.
    """
    cat_KB3N = torch.cat(
        [q_rand_KBN - log_density_rand, q_pi_next_KBN - log_pi_next_BN, q_pi_KBN - log_pi_BN], dim=-1
    )
    lse_KB = temperature * torch.logsumexp(cat_KB3N / temperature, dim=-1)
    return (lse_KB - q_data_KB).mean(-1)


_STATE = {
    "modules": ("encoder", "actor", "critic", "critic_target"),
    "optimizers": ("actor_optimizer", "critic_optimizer", "alpha_optimizer", "alpha_prime_optimizer"),
    "tensors": ("log_alpha", "log_alpha_prime"),
}
"""The state-dict layout of :class:`CQL` (:func:`~rlcore.algos.common.learner_state`)."""


class CQL(SquashedGaussianActorCritic):
    """CQL(H) on SAC for bounded continuous actions, trained on a fixed dataset.

    Constructor arguments: those of :class:`~rlcore.algos.squashed.SquashedGaussianActorCritic`,
    with the twin critics (K = 2).
    """

    CONFIG = CQLConfig
    DETERMINISTIC_ACT = True
    config: CQLConfig

    def __post_init__(self) -> None:
        super().__post_init__()
        self.log_alpha_prime = torch.zeros((), device=self.device, requires_grad=True)
        self.alpha_prime_optimizer = adam([self.log_alpha_prime], lr=self.config.alpha_prime_lr)
        scale_A, bias_A = self.actor.action_scale, self.actor.action_bias
        self._low_A, self._width_A = bias_A - scale_A, 2 * scale_A
        self._log_density_rand = -float(torch.log(self._width_A).sum())

    def _q_of_samples(self, obs_BO: torch.Tensor, act_BNA: torch.Tensor) -> torch.Tensor:
        """Q of N actions per state, ``[K, B, N]``."""
        b, n, a = act_BNA.shape
        obs_XO = obs_BO.repeat_interleave(n, dim=0)
        return self.critic(obs_XO, act_BNA.reshape(b * n, a)).reshape(-1, b, n)

    def _policy_samples(self, obs_BO: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """N actions of ``pi(.|s)`` per state ``[B, N, A]`` and their log-densities ``[B, N]``, no
        gradient; the policy network runs once per state (``SquashedGaussianActor.sample_n``)."""
        with torch.no_grad():
            return self.actor.sample_n(obs_BO, n, generator=self.torch_rng)

    def update(self, batch: TransitionBatch) -> CQLStats:
        """One critic step with the CQL regulariser (and alpha' step), one policy and temperature
        step, one target update (module docstring, steps 1-4)."""
        c = self.config
        batch = as_torch(batch, self.device)
        self.encoder.update(batch.obs)
        obs_BO = self.encoder(batch.obs)
        act_BA = batch.act.float().reshape(obs_BO.shape[0], -1)
        b, n = obs_BO.shape[0], c.n_actions
        alpha = self.log_alpha.detach().exp()

        # TD target: y = r_n + discount * min_k Q'_k(s', a'), a' ~ pi(.|s').
        with torch.no_grad():
            obs_next_BO = self.encoder(batch.obs_next)
            act_next_BA, log_pi_next_B = self.actor(obs_next_BO, generator=self.torch_rng)
            q_next_B = self.critic_target(obs_next_BO, act_next_BA).min(0).values
            if c.backup_entropy:
                q_next_B = q_next_B - alpha * log_pi_next_B
            y_B = td_target(batch.rew.float(), batch.discount.float(), q_next_B)
        q_KB = self.critic(obs_BO, act_BA)
        td_loss = ((q_KB - y_B) ** 2).sum(0).mean()

        # CQL(H) regulariser, eq. 4, with the importance-sampled log-sum-exp of Appendix F.
        rand_BNA = self._low_A + self._width_A * torch.rand(
            (b, n, act_BA.shape[1]), generator=self.torch_rng, device=self.device
        )
        # one actor pass for the samples at s and s', one critic pass for all 3N actions at s
        pi_XNA, log_pi_XN = self._policy_samples(torch.cat([obs_BO, obs_next_BO]), n)
        q_rand_KBN, q_pi_KBN, q_pi_next_KBN = self._q_of_samples(
            obs_BO, torch.cat([rand_BNA, pi_XNA[:b], pi_XNA[b:]], dim=1)
        ).split(n, dim=-1)
        gap_K = cql_gap(
            q_rand_KBN,
            self._log_density_rand,
            q_pi_KBN,
            log_pi_XN[:b],
            q_pi_next_KBN,
            log_pi_XN[b:],
            q_KB,
            c.cql_temperature,
        )
        alpha_prime = torch.ones((), device=self.device)
        if c.lagrange:
            alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6)
            cql_loss = (alpha_prime.detach() * c.cql_alpha * (gap_K - c.target_action_gap)).sum()
            # Dual step: maximise alpha' * (gap - target) over alpha' >= 0, eq. 31.
            alpha_prime_loss = -(alpha_prime * c.cql_alpha * (gap_K.detach() - c.target_action_gap)).sum()
            gradient_step(self.alpha_prime_optimizer, alpha_prime_loss, [self.log_alpha_prime], None)
        else:
            cql_loss = c.cql_alpha * gap_K.sum()
        critic_loss = td_loss + cql_loss
        gradient_step(self.critic_optimizer, critic_loss, self._critic_params, None)

        # Policy step: minimise alpha * log pi(a|s) - min_k Q_k(s, a) (SAC, eq. 7).
        pi_BA, log_pi_B = self.actor(obs_BO, generator=self.torch_rng)
        with no_param_grad(self._critic_params):
            q_pi_B = self.critic(obs_BO, pi_BA).min(0).values
        actor_loss = (alpha * log_pi_B - q_pi_B).mean()
        gradient_step(self.actor_optimizer, actor_loss, self.actor.parameters(), None)

        # Temperature step (SAC, eq. 18) on the policy step's sample.
        if c.autotune_alpha:
            alpha_loss = -(self.log_alpha.exp() * (log_pi_B.detach() + self.target_entropy)).mean()
            gradient_step(self.alpha_optimizer, alpha_loss, [self.log_alpha], None)

        # Target update.
        self._critic_target.update(c.tau)
        self.grad_steps += 1

        out = torch.stack(
            [
                critic_loss.detach(),
                td_loss.detach(),
                gap_K.detach().mean(),
                actor_loss.detach(),
                alpha,
                alpha_prime.detach(),
                -log_pi_B.detach().mean(),
                q_KB[0].detach().mean(),
            ]
        ).tolist()
        return CQLStats(*out)

    def state_dict(self) -> dict[str, Any]:
        """Networks, target critics, optimizers, temperature, alpha', the generator and the counter
        (:func:`~rlcore.algos.common.learner_state`)."""
        return learner_state(self, **_STATE)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        load_learner_state(self, state, **_STATE)
