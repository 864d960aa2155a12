"""Generative Adversarial Imitation Learning with a PPO generator.

Source: Ho & Ermon 2016, "Generative Adversarial Imitation Learning", Algorithm 1. Each iteration:

1. sample trajectories of the policy pi (the :class:`~rlcore.collect.sampler.RolloutSampler`, whose
   ``reward_fn`` is :meth:`GAIL.reward`, so the rollout's ``rew`` already holds the learned reward);
2. update the discriminator ``D(s, a)`` (here: the probability that a pair is the *expert's*) by
   ascending ``E_expert[log D] + E_pi[log(1 - D)]`` (eq. 17 with the roles of the two labels
   swapped, as in most implementations), optionally with the gradient penalty of Gulrajani et al.
   2017, eq. 3, on interpolates of expert and policy inputs;
3. take a policy step on the learned reward with PPO (:class:`~rlcore.algos.ppo.PPO`, Schulman et
   al. 2017), where the paper uses TRPO.

The learned reward ``r(s, a)`` is, with ``x = logit D(s, a)``:

* ``"softplus"`` (default): ``-log(1 - D(s, a)) = softplus(x)`` -- the generator cost ``log D`` of
  eq. 17 as a reward; always > 0, i.e. a survival bonus (fine for CartPole, Hopper; neutral for
  fixed-length episodes like Pendulum's);
* ``"logit"``: ``log D - log(1 - D) = x`` (Fu et al. 2018, AIRL; Kostrikov et al. 2019, section 4.1),
  without the survival bias.

Absorbing states (``GAILConfig(absorbing=True)``; after Kostrikov et al. 2019, "Discriminator-
Actor-Critic", section 4.2): a terminated episode continues in an absorbing state ``s_a`` forever, so
a terminated step's reward gets ``gamma * V(s_a) = gamma r_a / (1 - gamma)`` added before the PPO
update instead of the implicit 0 of a terminal state. ``s_a`` is one discrete state, so its
discriminator output is not an MLP's but the Bayes-optimal one for it: with ``s_E`` and ``s_pi`` the
shares of absorbing pairs among the expert's and the rollout's pairs (one per terminated episode),
``D(s_a) = s_E / (s_E + s_pi)``, i.e. ``logit D(s_a) = log(s_E / s_pi)`` (``s_pi`` with add-one
smoothing, the logit clipped to +-10). ``r_a`` is then the reward of that logit: high while the
policy terminates less often than the expert, low while it terminates more often. Without it the
positive ``-log(1 - D)`` is a survival bonus whatever the expert did: on Hopper-v5 with an expert
that falls after ~240 steps the generator learned to stand still for 1000 steps. DAC feeds an
absorbing flag to the discriminator network instead; with this project's input normalisation the
absorbing input (zero observation and action) sits at the expert's mean, the gradient penalty keeps
its logit close to the expert's, and on Hopper ``r_a`` grew while the generator fell after 6 steps
(docs/imitation.md).

The rewards of a rollout come from the discriminator *before* this iteration's update (they are
computed while sampling, through ``reward_fn``); the paper's Algorithm 1 uses the updated one. The
lag is one iteration of a slowly moving discriminator.

The discriminator, its step, the two reward forms and the absorbing reward are
:mod:`rlcore.algos.adversarial`'s, shared with the off-policy DAC (:mod:`rlcore.algos.dac`);
``Discriminator``, ``DiscriminatorStats`` and ``gradient_penalty`` are re-exported here.

Dimension letters: B batch, T time, N envs, O flat observation, A action (one-hot K for ``Discrete``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch

from rlcore.algos.adversarial import (
    Discriminator,
    DiscriminatorStats,
    absorbing_reward,
    action_bounds,
    discriminator_step,
    expert_absorbing_share,
    gradient_penalty,
    learned_reward,
)
from rlcore.algos.common import (
    adam,
    check_fields,
    generator_state,
    resolve_device,
    set_generator_state,
    torch_generator,
)
from rlcore.algos.ppo import PPO, PPOConfig, PPOStats
from rlcore.batch import Rollout
from rlcore.buffers.draws import DatasetDraws

__all__ = ["GAIL", "Discriminator", "DiscriminatorStats", "GAILConfig", "GAILStats", "gradient_penalty"]


@dataclass(frozen=True, kw_only=True)
class GAILConfig:
    """Hyperparameters of the discriminator and the learned reward of :class:`GAIL`."""

    hidden: Sequence[int] = (64, 64)
    """Hidden widths of the discriminator MLP (tanh)."""
    lr: float = 3e-4
    """Adam learning rate of the discriminator."""
    disc_updates: int = 1
    """Discriminator gradient steps per iteration (rollout)."""
    disc_batch_size: int = 256
    """Policy pairs (sampled from the rollout) and as many expert pairs per discriminator step."""
    grad_penalty: float = 10.0
    """Weight of the gradient penalty ``(||grad_x logit D(x_hat)|| - 1)^2`` (0: none). Without it the
    discriminator wins on CartPole (policy pairs classified at ~100 %, learned reward -> 0) and the
    generator collapsed from 500 to ~40 (docs/imitation.md); 10 is Gulrajani et al.'s and
    Kostrikov et al. 2019's value."""
    reward: Literal["softplus", "logit"] = "softplus"
    """Learned reward: ``-log(1 - D)`` (``"softplus"``) or ``log D - log(1 - D)`` (``"logit"``)."""
    absorbing: bool = False
    """Absorbing-state value at terminations (module docstring). Needs an expert buffer with a
    ``terminated`` array (:class:`rlcore.ReplayBuffer`) and a generator ``gamma < 1``."""
    seed: int = 0
    """Seed of the policy-pair sampling."""

    def __post_init__(self) -> None:
        """Raises :class:`~rlcore.errors.InvalidValueError` for an out-of-range field."""
        check_fields(
            self,
            positive=("lr",),
            counts=("disc_batch_size",),
            counts_from_zero=("disc_updates",),
            non_negative=("grad_penalty",),
            choices={"reward": ("softplus", "logit")},
        )


@dataclass(frozen=True)
class GAILStats:
    """Statistics of one GAIL iteration: discriminator steps, then the PPO update."""

    disc_loss: float
    """Binary cross-entropy of the discriminator (expert label 1, policy label 0), mean over its steps."""
    disc_expert_acc: float
    """Share of expert pairs with ``D > 0.5`` at the last discriminator step."""
    disc_policy_acc: float
    """Share of policy pairs with ``D < 0.5`` at the last discriminator step."""
    grad_penalty: float
    """Gradient penalty (before its weight; 0 when disabled), mean over the steps."""
    learned_reward: float
    """Mean learned reward of the rollout's valid rows (what PPO maximised)."""
    env_reward: float
    """Mean env reward of the rollout's valid rows (never seen by the learner)."""
    policy_loss: float
    """PPO clipped surrogate loss."""
    value_loss: float
    """PPO value loss."""
    entropy: float
    """Policy entropy (nats)."""
    approx_kl: float
    """PPO approximate KL."""
    grad_steps: int
    """Gradient steps of this iteration (discriminator plus PPO)."""
    absorbing_reward: float = float("nan")
    """Reward ``r_a`` of the absorbing state given to this rollout's terminated steps (NaN: off)."""
    policy_absorbing_share: float = float("nan")
    """Share ``s_pi`` of absorbing pairs among this rollout's pairs (NaN: off)."""
    generator: PPOStats | None = None
    """The full PPO statistics (left out of the flat metric logs)."""


class GAIL:
    """GAIL: a :class:`Discriminator` whose reward trains a :class:`~rlcore.algos.ppo.PPO` generator.

    Implements :class:`~rlcore.algos.actor_critic.OnPolicyAlgorithm` (``act``, ``act_value``,
    ``value`` delegate to the generator), so an
    :class:`~rlcore.trainers.on_policy.OnPolicyTrainer` whose ``reward_fn`` is :meth:`reward` drives it.

    Args:
        generator: the PPO policy learner.
        discriminator: the discriminator (its observation normaliser is fitted on ``expert`` here).
        optimizer: optimises the discriminator's parameters.
        expert: a buffer of expert transitions (``sample(B)`` with ``obs``, ``act``; e.g.
            ``rlcore.ReplayBuffer.load(path)`` of ``rlcore collect-expert``).
        config: discriminator hyperparameters.
        action_space: the env's single action space (policy actions are clipped to a ``Box``'s bounds
            before the discriminator sees them, as the env and the expert data saw them).

    Raises:
        ValueError: the expert buffer is empty; ``config.absorbing`` with an expert without
            ``terminated`` flags or a generator ``gamma`` of 1.
    """

    def __init__(
        self,
        *,
        generator: PPO,
        discriminator: Discriminator,
        optimizer: torch.optim.Optimizer,
        expert: Any,
        config: GAILConfig,
        action_space: gym.Space,
    ) -> None:
        if len(expert) == 0:
            raise ValueError("GAIL needs a non-empty expert buffer")
        self.generator = generator
        self.device = generator.device
        self.discriminator = discriminator.to(self.device)
        self.optimizer = optimizer
        self.expert = expert
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.torch_rng = torch_generator(config.seed, self.device, stream=2)
        # expert pairs come from GAIL's own stream, not the expert buffer's: checkpoints hold it
        self.expert_draws = DatasetDraws(expert, (config.seed, 3))
        self._clip = action_bounds(action_space)
        self.expert_absorbing_share = float("nan")
        """``s_E``: terminated expert episodes / (expert transitions + terminated episodes)."""
        if config.absorbing:
            if not hasattr(expert, "terminated"):
                raise ValueError("config.absorbing needs an expert buffer with a `terminated` array")
            if generator.config.gamma >= 1.0:
                raise ValueError("config.absorbing needs a generator gamma < 1 (V(s_a) = r_a / (1 - gamma))")
            self.expert_absorbing_share = expert_absorbing_share(expert)
        # Normalise the discriminator's observations with the expert's statistics (one big sample).
        sample = self.expert_draws.sample(min(len(expert), 20_000))
        self.discriminator.fit_obs(torch.as_tensor(np.asarray(sample.obs), device=self.device))

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        expert: Any,
        config: GAILConfig | None = None,
        ppo_config: PPOConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device | None = None,
    ) -> GAIL:
        """Build the default PPO generator, the discriminator and its Adam optimizer."""
        config = config or GAILConfig()
        dev = resolve_device(device)
        generator = PPO.from_spaces(
            observation_space, action_space, ppo_config, num_envs=num_envs, device=dev
        )
        disc = Discriminator(observation_space, action_space, config.hidden).to(dev)
        optimizer = adam(disc.parameters(), lr=config.lr)
        return cls(
            generator=generator,
            discriminator=disc,
            optimizer=optimizer,
            expert=expert,
            config=config,
            action_space=action_space,
        )

    # -- policy (delegated to the generator) ---------------------------------------------------

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """The generator's actions for N observations (unclipped)."""
        return self.generator.act(obs, deterministic=deterministic)

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The generator's ``(act, log_prob [N], value [N])``."""
        return self.generator.act_value(obs)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """The generator's ``V(o)`` float32 ``[N]``."""
        return self.generator.value(obs)

    # -- learned reward ------------------------------------------------------------------------

    def _clip_act(self, act: np.ndarray) -> np.ndarray:
        return act if self._clip is None else np.clip(act, *self._clip)

    @torch.no_grad()
    def reward(self, obs: np.ndarray, act: np.ndarray, obs_next: np.ndarray, rew: np.ndarray) -> np.ndarray:
        """The sampler's ``reward_fn``: learned reward float32 ``[N]`` of N pairs (``obs_next`` and the env
        reward ``rew`` are ignored). See the module docstring for the two forms."""
        del obs_next, rew
        x_BX = self.discriminator.features(
            torch.as_tensor(np.asarray(obs), device=self.device),
            torch.as_tensor(self._clip_act(np.asarray(act)), device=self.device),
        )
        r_B = learned_reward(self.discriminator.logit(x_BX), self.config.reward)
        return r_B.float().cpu().numpy()

    def absorbing_reward(self, policy_share: float) -> float:
        """Reward ``r_a`` of the absorbing state when a share ``policy_share`` of the policy's pairs are
        absorbing: the reward form of ``logit D(s_a) = clip(log(s_E / s_pi), -10, 10)``.

        Raises:
            ValueError: absorbing states are off.
        """
        if not self.config.absorbing:
            raise ValueError("absorbing states are off (GAILConfig.absorbing=False)")
        return absorbing_reward(self.expert_absorbing_share, policy_share, self.config.reward)

    def add_absorbing_value(self, rollout: Rollout) -> tuple[float, float]:
        """Add ``gamma r_a / (1 - gamma)`` to ``rollout.rew`` in place at its terminated rows.

        ``s_pi = (terminated rows + 1) / (valid rows + terminated rows + 2)`` (add-one smoothing: a
        rollout without terminations still has ``s_pi > 0``).

        Returns:
            ``(r_a, s_pi)``.

        Raises:
            ValueError: absorbing states are off.
        """
        term_TN = rollout.terminated & rollout.valid
        n_term, n_valid = int(np.count_nonzero(term_TN)), int(np.count_nonzero(rollout.valid))
        share = (n_term + 1) / (n_valid + n_term + 2)
        r_abs = self.absorbing_reward(share)
        gamma = self.generator.config.gamma
        rollout.rew[term_TN] += np.float32(gamma * r_abs / (1.0 - gamma))
        return r_abs, share

    # -- update --------------------------------------------------------------------------------

    def discriminator_update(self, rollout: Rollout) -> DiscriminatorStats:
        """``disc_updates`` steps of the discriminator: ``disc_batch_size`` pairs drawn uniformly from the
        rollout's valid rows (actions clipped as the env saw them) against as many expert samples."""
        c = self.config
        valid_TN = rollout.valid
        obs_PO = rollout.obs[valid_TN]
        act_PA = self._clip_act(rollout.act[valid_TN])
        n_policy = obs_PO.shape[0]
        d = self.discriminator
        losses, gps = [], []
        step: DiscriminatorStats | None = None
        for _ in range(c.disc_updates if n_policy else 0):
            idx = self.rng.integers(0, n_policy, size=min(c.disc_batch_size, n_policy))
            expert = self.expert_draws.sample(len(idx))
            x_e = d.features(
                torch.as_tensor(np.asarray(expert.obs), device=self.device),
                torch.as_tensor(np.asarray(expert.act), device=self.device),
            )
            x_p = d.features(
                torch.as_tensor(obs_PO[idx], device=self.device),
                torch.as_tensor(act_PA[idx], device=self.device),
            )
            step = discriminator_step(
                d, self.optimizer, x_e, x_p, grad_penalty=c.grad_penalty, generator=self.torch_rng
            )
            losses.append(step.loss)
            gps.append(step.grad_penalty)
        nan = float("nan")
        return DiscriminatorStats(
            loss=float(np.mean(losses)) if losses else nan,
            expert_acc=step.expert_acc if step is not None else nan,
            policy_acc=step.policy_acc if step is not None else nan,
            grad_penalty=float(np.mean(gps)) if gps else nan,
        )

    def update(self, rollout: Rollout) -> GAILStats:
        """Discriminator steps on the rollout's valid pairs against expert samples, then one PPO update.

        With ``absorbing``, :meth:`add_absorbing_value` first adds the absorbing state's value to the
        rollout's terminated rows (in place)."""
        valid_TN = rollout.valid
        learned = float(rollout.rew[valid_TN].mean())
        r_abs = share = float("nan")
        if self.config.absorbing:
            r_abs, share = self.add_absorbing_value(rollout)
        disc = self.discriminator_update(rollout)
        gen = self.generator.update(rollout)
        return GAILStats(
            disc_loss=disc.loss,
            disc_expert_acc=disc.expert_acc,
            disc_policy_acc=disc.policy_acc,
            grad_penalty=disc.grad_penalty,
            learned_reward=learned,
            env_reward=float(rollout.env_rew[valid_TN].mean()),
            policy_loss=gen.policy_loss,
            value_loss=gen.value_loss,
            entropy=gen.entropy,
            approx_kl=gen.approx_kl,
            grad_steps=gen.grad_steps + self.config.disc_updates,
            absorbing_reward=r_abs,
            policy_absorbing_share=share,
            generator=gen,
        )

    def state_dict(self) -> dict[str, Any]:
        """Generator, discriminator (incl. its normaliser), discriminator optimizer, the generators
        ``rng`` (policy draws), ``torch_rng`` (gradient-penalty mixing) and ``expert_draws``.

        The expert buffer is not included (it is data, loaded from its own path)."""
        return {
            "config": asdict(self.config),
            "generator": self.generator.state_dict(),
            "discriminator": self.discriminator.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.bit_generator.state,
            "torch_rng": generator_state(self.torch_rng),
            "expert_draws": self.expert_draws.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.generator.load_state_dict(dict(state["generator"]))
        self.discriminator.load_state_dict(state["discriminator"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = state["rng"]
        set_generator_state(self.torch_rng, state["torch_rng"])
        self.expert_draws.load_state_dict(state["expert_draws"])
