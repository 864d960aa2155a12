"""Discriminator-Actor-Critic: adversarial imitation with an off-policy (SAC) generator.

Source: Kostrikov et al. 2019, "Discriminator-Actor-Critic: Addressing Sample Inefficiency and
Reward Bias in Adversarial Imitation Learning" (ICLR 2019), Algorithm 1, with rlcore's
:class:`~rlcore.algos.sac.SAC` as the generator where the paper uses TD3. The env steps go into an
ordinary replay buffer (their env reward is stored but never read by the learner); each
:meth:`DAC.update` on a sampled 1-step batch of B transitions does, in this order:

1. one discriminator step (``disc_updates`` of them) on the first ``disc_batch_size`` pairs
   ``(obs, act)`` of the batch (a uniform sample of the replay, the paper's policy pairs; actions
   clipped to the action bounds) against as many expert pairs drawn from DAC's own stream:
   ``BCE(logit D_E, 1) + BCE(logit D_pi, 0) + lambda * GP``
   (:func:`~rlcore.algos.adversarial.discriminator_step`);
2. the batch's ``rew`` replaced by the learned reward of the *updated* discriminator,
   ``r(s, a) = logit D(s, a)`` (``"logit"``, the paper's code's default) or ``softplus(logit D)``
   (:func:`~rlcore.algos.adversarial.learned_reward`), the same order as the paper's code, where a
   rollout's discriminator steps come before its policy steps;
3. with ``absorbing``, ``gamma * r_a / (1 - gamma)`` added at the terminated rows: the discounted
   value ``V(s_a) = r_a / (1 - gamma)`` of the absorbing state that follows a termination
   (section 4.2), with ``r_a`` the reward of the Bayes-optimal ``logit D(s_a) = log(s_E / s_pi)``
   (:func:`~rlcore.algos.adversarial.absorbing_reward`): ``s_E`` the expert's share of absorbing
   pairs, ``s_pi`` a running estimate of the replay's, the add-one smoothed ratio of exponentially
   discounted counts ``(T + 1) / (R + T + 2)`` of the batches' terminated rows ``T`` and rows ``R``
   (discount ``1 - 1 / policy_share_grad_steps`` per update). The absorbing state has no action to
   choose, so its value carries no entropy term;
4. one :meth:`SAC.update <rlcore.algos.sac.SAC.update>` on the relabelled batch (``discount`` at a
   terminated row is 0, so its target is ``r + gamma r_a / (1 - gamma)``).

Differences from the paper, on purpose: the absorbing state's reward is the closed form above (as
in rlcore's GAIL, whose docstring says why) instead of a discriminator input flag and absorbing
transitions in both buffers; SAC instead of TD3; the policy pairs are the generator's own batch
(the paper's code samples a second replay batch); no expert subsampling (the paper keeps every
20th expert transition of a trajectory to make the task harder).

Dimension letters: B batch, O flat observation, A action, X = O + A.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.adversarial import (
    Discriminator,
    DiscriminatorStats,
    RewardForm,
    absorbing_reward,
    action_bounds,
    discriminator_step,
    expert_absorbing_share,
    learned_reward,
)
from rlcore.algos.common import (
    adam,
    as_torch,
    check_fields,
    generator_state,
    obs_to_torch,
    resolve_device,
    seeded_init,
    set_generator_state,
    torch_generator,
)
from rlcore.algos.sac import SAC, SACConfig, SACStats
from rlcore.batch import TransitionBatch
from rlcore.buffers.draws import DatasetDraws
from rlcore.errors import ApiUsageError, InvalidValueError

__all__ = ["DAC", "DACConfig", "DACStats"]


@dataclass(frozen=True, kw_only=True)
class DACConfig:
    """Hyperparameters of the discriminator and the learned reward of :class:`DAC` (the SAC
    generator has its own :class:`~rlcore.algos.sac.SACConfig`). Sources: the paper's code
    (google-research ``dac/``: ``gail.py``, ``lfd_training_worker.py``) unless a field says otherwise.

    Raises:
        InvalidValueError: a field out of range (a ``ValueError``).
    """

    hidden: Sequence[int] = (256, 256)
    """Hidden widths of the discriminator MLP (tanh): the paper's code, 256 x 256 tanh."""
    lr: float = 1e-3
    """Adam learning rate of the discriminator: the paper's code (TensorFlow's Adam default, 1e-3)."""
    disc_batch_size: int = 256
    """Policy pairs per discriminator step (the first this many rows of the replay batch, which
    must hold at least as many) and as many expert pairs. The paper's code: 100 and 100, its batch
    size; here the SAC preset's batch, 256 (our choice)."""
    grad_penalty: float = 10.0
    """Weight lambda of the gradient penalty (0: none): the paper's and its code's 10."""
    reward: RewardForm = "logit"
    """Learned reward: ``logit D`` (``"logit"``: the paper's code's default ``gail_loss='airl'``) or
    ``-log(1 - D)`` (``"softplus"``, always > 0: a survival bonus)."""
    disc_updates: int = 1
    """Discriminator steps per gradient step of the generator: the paper's code takes one per env
    step and one policy update per env step, so 1."""
    absorbing: bool = True
    """Absorbing-state value at terminated rows (module docstring; the paper's code learns it by
    default, ``learn_absorbing=True``). Needs an expert buffer with a ``terminated`` array and
    ``gamma < 1``."""
    policy_share_grad_steps: int = 1_000
    """Horizon, in gradient steps, of the running estimate ``s_pi`` of the replay's absorbing share
    (counts discounted by ``1 - 1 / this`` per update; our choice: about the last 256k sampled rows
    with batch 256, while the replay changes by 1k env steps)."""
    seed: int = 0
    """Seed of the discriminator's initial weights (in ``from_spaces``), the expert draws and the
    gradient penalty's mixing."""

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("lr",),
            counts=("disc_batch_size", "disc_updates", "policy_share_grad_steps"),
            non_negative=("grad_penalty",),
            choices={"reward": ("softplus", "logit")},
        )


@dataclass(frozen=True, kw_only=True)
class DACStats(SACStats):
    """Statistics of one :meth:`DAC.update`: the discriminator steps and the relabelled reward
    below, then the SAC step's fields as :class:`~rlcore.algos.sac.SACStats` documents them (its
    Q values and TD errors in units of the learned reward)."""

    disc_loss: float
    """Discriminator loss (BCE plus the weighted gradient penalty), mean over its steps."""
    disc_expert_acc: float
    """Share of expert pairs with ``D > 0.5`` at the last discriminator step."""
    disc_policy_acc: float
    """Share of policy pairs with ``D < 0.5`` at the last discriminator step."""
    grad_penalty: float
    """Gradient penalty before its weight (0 when disabled), mean over the steps."""
    learned_reward: float
    """Mean learned reward of the batch (before the absorbing value)."""
    env_reward: float
    """Mean env reward of the batch (never seen by the learner)."""
    absorbing_reward: float
    """Reward ``r_a`` of the absorbing state in this update (NaN: absorbing states off)."""
    policy_absorbing_share: float
    """Running estimate ``s_pi`` of the replay's absorbing share (NaN: off)."""


class DAC:
    """DAC: a :class:`~rlcore.algos.adversarial.Discriminator` whose reward trains a
    :class:`~rlcore.algos.sac.SAC` generator on replayed transitions.

    Implements :class:`~rlcore.algos.common.OffPolicyAlgorithm`, so an
    :class:`~rlcore.trainers.off_policy.OffPolicyTrainer` with ``n_step=1`` and the same ``gamma``
    drives it; ``act`` is the generator's.

    Args:
        generator: the SAC policy learner.
        discriminator: the discriminator (its observation normaliser is fitted on ``expert`` here).
        optimizer: optimises the discriminator's parameters.
        expert: a buffer of expert transitions (e.g. ``rlcore.ReplayBuffer.load(path)`` of
            ``rlcore collect-expert``; :class:`~rlcore.buffers.draws.DatasetDraws` draws from it).
        config: discriminator hyperparameters.
        action_space: the env's single action space (policy actions are clipped to its bounds
            before the discriminator sees them, as the env and the expert data saw them).
        gamma: the discount of the trainer's batches (``batch.discount = gamma * (1 - terminated)``).

    Raises:
        InvalidValueError: ``gamma`` outside ``[0, 1]``, or ``config.absorbing`` with ``gamma = 1``.
        ValueError: the expert buffer is empty, or ``config.absorbing`` with an expert without
            ``terminated`` flags.
    """

    def __init__(
        self,
        *,
        generator: SAC,
        discriminator: Discriminator,
        optimizer: torch.optim.Optimizer,
        expert: Any,
        config: DACConfig,
        action_space: gym.Space,
        gamma: float,
    ) -> None:
        if len(expert) == 0:
            raise ValueError("DAC needs a non-empty expert buffer")
        if not 0.0 <= gamma <= 1.0:
            raise InvalidValueError(f"gamma must be in [0, 1], got {gamma}")
        if config.absorbing and gamma >= 1.0:
            raise InvalidValueError("config.absorbing needs gamma < 1 (V(s_a) = r_a / (1 - gamma))")
        self.generator = generator
        self.device = generator.device
        self.discriminator = discriminator.to(self.device)
        self.optimizer = optimizer
        self.expert = expert
        self.config = config
        self.gamma = float(gamma)
        self.torch_rng = torch_generator(config.seed, self.device, stream=2)
        # expert pairs come from DAC's own stream, not the expert buffer's: checkpoints hold it
        self.expert_draws = DatasetDraws(expert, (config.seed, 3))
        bounds = action_bounds(action_space)
        self._bounds = None if bounds is None else tuple(torch.as_tensor(b, device=self.device) for b in bounds)
        self.expert_absorbing_share = expert_absorbing_share(expert) if config.absorbing else float("nan")
        """``s_E``: terminated expert episodes / (expert transitions + terminated episodes)."""
        self.share_counts = [0.0, 0.0]
        """Discounted counts ``[T, R]`` of the batches' terminated rows and rows (``s_pi``)."""
        sample = self.expert_draws.sample(min(len(expert), 20_000))
        self.discriminator.fit_obs(obs_to_torch(sample.obs, self.device))

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.spaces.Box,
        expert: Any,
        config: DACConfig | None = None,
        sac_config: SACConfig | None = None,
        *,
        gamma: float = 0.99,
        device: str | torch.device | None = None,
    ) -> DAC:
        """Build the default SAC generator (:meth:`SAC.from_spaces <rlcore.algos.sac.SAC.from_spaces>`),
        the discriminator (widths ``config.hidden``, initial weights under ``config.seed``) and its
        Adam at ``config.lr``."""
        config = config or DACConfig()
        dev = resolve_device(device)
        generator = SAC.from_spaces(observation_space, action_space, sac_config, device=dev)
        with seeded_init(config.seed):
            disc = Discriminator(observation_space, action_space, config.hidden).to(dev)
        return cls(
            generator=generator,
            discriminator=disc,
            optimizer=adam(disc.parameters(), lr=config.lr),
            expert=expert,
            config=config,
            action_space=action_space,
            gamma=gamma,
        )

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """The generator's actions float32 ``[N, A]`` for N observations (unclipped)."""
        return self.generator.act(obs, deterministic=deterministic)

    def _clip_act(self, act_BA: torch.Tensor) -> torch.Tensor:
        return act_BA if self._bounds is None else act_BA.clamp(*self._bounds)

    def _check_one_step(self, batch: TransitionBatch) -> None:
        """``batch.discount == gamma * (1 - terminated)`` on every row, else :class:`ApiUsageError`."""
        expected_B = self.gamma * (~batch.terminated.bool()).float()
        if not torch.allclose(batch.discount.float(), expected_B, rtol=0.0, atol=1e-6):
            found = sorted({round(v, 6) for v in batch.discount.float().unique().tolist()})
            raise ApiUsageError(
                f"DAC relabels each transition's reward, so it needs 1-step batches (n_step=1) whose "
                f"discount is gamma * (1 - terminated) with gamma={self.gamma}; this batch's discounts "
                f"are {found[:6]}. Sample with n_step=1 and the gamma DAC was built with."
            )

    def absorbing_share(self, n_terminated: int, n_rows: int) -> float:
        """Add a batch's counts to the running estimate and return ``s_pi = (T + 1) / (R + T + 2)``
        (module docstring, step 3)."""
        decay = 1.0 - 1.0 / self.config.policy_share_grad_steps
        t, r = self.share_counts
        self.share_counts = [decay * t + n_terminated, decay * r + n_rows]
        t, r = self.share_counts
        return (t + 1.0) / (r + t + 2.0)

    def update(self, batch: TransitionBatch) -> DACStats:
        """Discriminator step(s), reward relabelling (plus the absorbing value at terminated rows),
        one SAC step: the module docstring's steps 1-4.

        Args:
            batch: B >= ``disc_batch_size`` 1-step transitions (NumPy or torch; not modified).

        Raises:
            ApiUsageError: the batch is not a 1-step batch at DAC's ``gamma``, or holds fewer than
                ``disc_batch_size`` rows.
        """
        c = self.config
        batch = as_torch(batch, self.device)
        self._check_one_step(batch)
        n_rows = int(batch.rew.shape[0])
        if n_rows < c.disc_batch_size:
            raise ApiUsageError(f"DAC needs batches of at least disc_batch_size={c.disc_batch_size} rows, got {n_rows}")
        d = self.discriminator
        x_BX = d.features(batch.obs, self._clip_act(batch.act))
        x_policy = x_BX[: c.disc_batch_size]

        # 1. Discriminator step(s): policy pairs of the batch against expert pairs.
        losses, gps = [], []
        step: DiscriminatorStats | None = None
        for _ in range(c.disc_updates):
            expert = self.expert_draws.sample(c.disc_batch_size)
            x_expert = d.features(obs_to_torch(expert.obs, self.device), obs_to_torch(expert.act, self.device))
            step = discriminator_step(d, self.optimizer, x_expert, x_policy, grad_penalty=c.grad_penalty, generator=self.torch_rng)
            losses.append(step.loss)
            gps.append(step.grad_penalty)
        assert step is not None  # disc_updates >= 1

        # 2. The learned reward of the updated discriminator replaces the env reward.
        with torch.no_grad():
            rew_B = learned_reward(d.logit(x_BX), c.reward).float()
        learned = float(rew_B.mean())

        # 3. The absorbing state's value at terminated rows.
        r_abs = share = float("nan")
        if c.absorbing:
            term_B = batch.terminated.bool()
            share = self.absorbing_share(int(term_B.sum()), n_rows)
            r_abs = absorbing_reward(self.expert_absorbing_share, share, c.reward)
            rew_B = rew_B + term_B.float() * (self.gamma * r_abs / (1.0 - self.gamma))

        # 4. One SAC step on the relabelled batch.
        gen = self.generator.update(batch._replace(rew=rew_B))
        return DACStats(
            **{f.name: getattr(gen, f.name) for f in fields(gen)},
            disc_loss=float(np.mean(losses)),
            disc_expert_acc=step.expert_acc,
            disc_policy_acc=step.policy_acc,
            grad_penalty=float(np.mean(gps)),
            learned_reward=learned,
            env_reward=float(batch.rew.float().mean()),
            absorbing_reward=r_abs,
            policy_absorbing_share=share,
        )

    def state_dict(self) -> dict[str, Any]:
        """Generator (SAC's state dict), discriminator (incl. its normaliser), its optimizer, the
        gradient penalty's generator, the expert draws and the absorbing-share counts. The expert
        buffer is not included (it is data, loaded from its own path)."""
        return {
            "config": asdict(self.config),
            "generator": self.generator.state_dict(),
            "discriminator": self.discriminator.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": generator_state(self.torch_rng),
            "expert_draws": self.expert_draws.state_dict(),
            "share_counts": [float(v) for v in self.share_counts],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.generator.load_state_dict(dict(state["generator"]))
        self.discriminator.load_state_dict(state["discriminator"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_generator_state(self.torch_rng, state["torch_rng"])
        self.expert_draws.load_state_dict(state["expert_draws"])
        self.share_counts = [float(v) for v in state["share_counts"]]
