"""What the on-policy algorithms (VPG, A2C, PPO) share besides their network
(:class:`~rlcore.nets.on_policy.ActorCritic`):

* :class:`ReturnNormalizer`: scales rewards by the running std of the discounted return
  (gymnasium's ``NormalizeReward``, SB3's ``VecNormalize(norm_reward=True)``).
* :class:`ActorCriticAlgorithm`: what VPG, A2C and PPO share around their ``update``: the policy
  on its device, the return normaliser, the step counters, ``act``/``act_value``/``value`` for the
  sampler, and the state-dict layout. Each algorithm adds its config, its optimizer(s),
  ``from_spaces`` (through :func:`default_policy`) and ``update``.
* Free functions: :func:`ppo_policy_loss`, :func:`value_loss`, :func:`normalize_advantages`,
  :func:`explained_variance`, :func:`flatten_valid`, :func:`anneal_learning_rate` (from
  :mod:`rlcore.algos.common`). Adam and gradient clipping are :mod:`rlcore.algos.common`'s.

Dimension letters: B batch (valid rows of a rollout), T time, N envs, O flat observation, A action.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, ClassVar, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlcore.algos.common import (
    anneal_learning_rate,
    generator_state,
    resolve_device,
    set_generator_state,
    torch_generator,
)
from rlcore.algos.numpy_acting import NumpyActor, obs_batch
from rlcore.batch import Rollout
from rlcore.nets import ActorCritic, EnsembleLinear, RunningMeanStd, TwinTrunk

__all__ = [
    "ActorCriticAlgorithm",
    "OnPolicyAlgorithm",
    "PolicyConfig",
    "ReturnNormalizer",
    "anneal_learning_rate",
    "approx_kl",
    "clip_fraction",
    "default_policy",
    "explained_variance",
    "flatten_valid",
    "normalize_advantages",
    "ppo_policy_loss",
    "value_loss",
]

@runtime_checkable
class OnPolicyAlgorithm(Protocol):
    """What :class:`~rlcore.trainers.on_policy.OnPolicyTrainer` needs from an algorithm."""

    device: torch.device

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray: ...

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def value(self, obs: np.ndarray) -> np.ndarray: ...

    def update(self, rollout: Rollout) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class ReturnNormalizer(nn.Module):
    """Divide rewards by the running std of the discounted return (no mean subtraction).

    Per env ``R_t = gamma * R_{t-1} * (1 - done_{t-1}) + r_t``; the std of all R_t seen so far scales
    the rewards (Engstrom et al. 2020, "Implementation Matters", sec. 3, "reward scaling"; gymnasium's
    ``NormalizeReward``). State is part of ``state_dict()``.

    Args:
        num_envs: N.
        gamma: discount of the running return.
        clip: scaled rewards are clipped to ``[-clip, clip]``.
    """

    ret_N: torch.Tensor

    def __init__(self, num_envs: int, gamma: float, *, clip: float = 10.0) -> None:
        super().__init__()
        self.gamma = gamma
        self.clip = clip
        self.rms = RunningMeanStd(1, clip=math.inf, eps=1e-8)
        self.register_buffer("ret_N", torch.zeros(num_envs, dtype=torch.float64))

    def forward(self, rollout: Rollout) -> np.ndarray:
        """Update the statistics with the rollout's valid rows; return scaled float32 rewards ``[T, N]``."""
        rew_TN = rollout.rew.astype(np.float64)
        done_TN = rollout.terminated | rollout.truncated
        ret_N = self.ret_N.cpu().numpy().copy()
        if ret_N.shape[0] != rollout.num_envs:
            raise ValueError(
                f"ReturnNormalizer built for {ret_N.shape[0]} envs, rollout has {rollout.num_envs}"
            )
        ret_TN = np.empty_like(rew_TN)
        for t in range(rollout.num_steps):
            ret_N = ret_N * self.gamma + rew_TN[t]
            ret_TN[t] = ret_N
            ret_N = np.where(done_TN[t], 0.0, ret_N)
        self.ret_N.copy_(torch.from_numpy(ret_N))
        self.rms.update(torch.from_numpy(ret_TN[rollout.valid]).reshape(-1, 1))
        std = math.sqrt(float(self.rms.var[0]) + 1e-8)
        return np.clip(rew_TN / std, -self.clip, self.clip).astype(np.float32)


def flatten_valid(rollout: Rollout, device: torch.device, **extra: np.ndarray) -> dict[str, torch.Tensor]:
    """The valid rows of the rollout (and of any extra ``[T, N]`` arrays) as flat ``[B, ...]`` tensors.

    Keys: ``obs``, ``act``, ``log_prob``, ``value`` and the names of ``extra``.
    """
    valid = rollout.valid.reshape(-1)
    all_valid = bool(valid.all())
    out: dict[str, torch.Tensor] = {}
    arrays = {"obs": rollout.obs, "act": rollout.act, "log_prob": rollout.log_prob, "value": rollout.value}
    arrays.update(extra)
    for name, a in arrays.items():
        flat = a.reshape(-1, *a.shape[2:])
        if not all_valid:
            flat = flat[valid]
        out[name] = torch.as_tensor(np.ascontiguousarray(flat), device=device)
    return out


def normalize_advantages(adv_B: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(adv - mean) / (std + eps)``; a batch of one is only centred."""
    if adv_B.numel() < 2:
        return adv_B - adv_B.mean()
    return (adv_B - adv_B.mean()) / (adv_B.std() + eps)


def ppo_policy_loss(
    log_prob_B: torch.Tensor, old_log_prob_B: torch.Tensor, adv_B: torch.Tensor, clip_coef: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate loss (Schulman et al. 2017, eq. 7), negated for minimisation.

    ``L = mean(max(-A r, -A clip(r, 1 - eps, 1 + eps)))`` with ``r = exp(log_prob - old_log_prob)``.

    Returns:
        ``(loss, log_ratio_B)``; ``log_ratio_B = log r`` is detached, for :func:`approx_kl` and
        :func:`clip_fraction`.
    """
    log_ratio_B = log_prob_B - old_log_prob_B
    ratio_B = log_ratio_B.exp()
    # max(-x, -y) = -min(x, y), one negation fewer per step (the same floats: negation is exact)
    loss = -torch.min(adv_B * ratio_B, adv_B * ratio_B.clamp(1.0 - clip_coef, 1.0 + clip_coef)).mean()
    return loss, log_ratio_B.detach()


def approx_kl(log_ratio_B: torch.Tensor) -> torch.Tensor:
    """``mean((r - 1) - log r)``: the unbiased, non-negative k3 estimator of KL(old || new)
    (Schulman 2020, "Approximating KL divergence"), from ``log r = log_prob - old_log_prob``."""
    return (torch.expm1(log_ratio_B) - log_ratio_B).mean()


def clip_fraction(log_ratio_B: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Share of samples whose ratio left ``[1 - eps, 1 + eps]`` (float tensor)."""
    return (torch.expm1(log_ratio_B).abs() > clip_coef).float().mean()


def value_loss(
    value_B: torch.Tensor,
    ret_B: torch.Tensor,
    old_value_B: torch.Tensor | None = None,
    clip_coef: float | None = None,
) -> torch.Tensor:
    """``0.5 * mean((V - ret)^2)``, or PPO's clipped variant when ``clip_coef`` is set.

    Clipped (OpenAI baselines ``ppo2``; CleanRL ``clip_vloss``):
    ``0.5 * mean(max((V - ret)^2, (V_old + clip(V - V_old, -c, c) - ret)^2))``.
    """
    if clip_coef is None:
        return 0.5 * (value_B - ret_B).square().mean()
    assert old_value_B is not None
    clipped_B = old_value_B + (value_B - old_value_B).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max((value_B - ret_B).square(), (clipped_B - ret_B).square()).mean()


def explained_variance(pred: np.ndarray, target: np.ndarray) -> float:
    """``1 - Var(target - pred) / Var(target)`` (NaN when the target is constant)."""
    var = float(np.var(target))
    return float("nan") if var == 0 else 1.0 - float(np.var(target - pred)) / var


class PolicyConfig(Protocol):
    """The config fields of VPG, A2C and PPO that :func:`default_policy` and
    :class:`ActorCriticAlgorithm` read."""

    @property
    def hidden(self) -> Sequence[int]: ...
    @property
    def gamma(self) -> float: ...
    @property
    def normalize_obs(self) -> bool: ...
    @property
    def normalize_returns(self) -> bool: ...
    @property
    def init_log_std(self) -> float: ...


def default_policy(
    observation_space: gym.Space,
    action_space: gym.Space,
    config: PolicyConfig,
    *,
    fused: bool,
    with_critic: bool = True,
    device: torch.device,
) -> ActorCritic:
    """The default :class:`ActorCritic` of an on-policy config (tanh MLPs of widths
    ``config.hidden``), on ``device``.

    Raises:
        ValueError: unsupported spaces, or ``fused`` without a critic.
    """
    return ActorCritic(
        observation_space,
        action_space,
        config.hidden,
        with_critic=with_critic,
        fused=fused,
        normalize_obs=config.normalize_obs,
        init_log_std=config.init_log_std,
    ).to(device)


class ActorCriticAlgorithm:
    """The part of VPG, A2C and PPO that is not their update (the one base class of the on-policy
    algorithms; they differ only in ``__init__``'s optimizers, ``from_spaces`` and ``update``).

    Holds ``config``, ``device``, the ``policy`` on it, the optional ``return_normalizer``, the
    counters ``env_steps`` (valid rollout rows seen by ``update``) and ``grad_steps``; answers the
    sampler's ``act``/``act_value``/``value`` (in numpy on the CPU with the default fused network,
    :mod:`rlcore.algos.numpy_acting`, drawing from ``act_rng``; in torch otherwise); saves and
    restores all of it plus the optimizers named in :attr:`OPTIMIZERS`, the action generators
    ``act_rng`` (numpy) and ``torch_rng`` (torch) and, when set, the generator ``rng``.

    Args:
        policy: actor (and critic) networks.
        num_envs: N of the rollouts (the return normaliser keeps one running return per env).
        config: the algorithm's config (reads ``gamma`` and ``normalize_returns``).
        device: where the networks live (``None``/``"auto"``: cuda when available).
    """

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("optimizer",)
    """Attribute names of the optimizers, in state-dict order (``None`` values allowed)."""

    def __init__(
        self, *, policy: ActorCritic, num_envs: int, config: Any, device: str | torch.device | None
    ) -> None:
        self.config = config
        self.device = resolve_device(device)
        self.policy = policy.to(self.device)
        self.return_normalizer = (
            ReturnNormalizer(num_envs, config.gamma) if config.normalize_returns else None
        )
        self.rng: np.random.Generator | None = None
        seed = getattr(config, "seed", None)
        if seed is None:  # no seed in the config: torch's generator (torch.manual_seed) decides
            seed = int(torch.randint(0, 2**62, ()).item())
        self.act_rng = np.random.default_rng((int(seed), 1))
        self.torch_rng = torch_generator(int(seed), self.device, stream=1)
        self._numpy_actor = NumpyActor(self.policy, self.act_rng) if self._numpy_acting() else None
        self.env_steps = 0
        self.grad_steps = 0

    def _numpy_acting(self) -> bool:
        """Whether acting takes numpy's path (:mod:`rlcore.algos.numpy_acting`): the CPU and the
        default fused actor-critic over plain (non-dict) observations."""
        p = self.policy
        return (
            self.device.type == "cpu"
            and type(p) is ActorCritic
            and type(p.trunk) is TwinTrunk
            and p.encoder.keys is None
            and type(p.actor) is nn.Linear
            and type(p.critic) is nn.Linear
            and all(type(layer) is EnsembleLinear for layer in p.trunk.layers)
        )

    def _fast(self) -> NumpyActor | None:
        na = self._numpy_actor
        return na if na is not None and na.policy is self.policy and na.ready() else None

    def _features(self, obs: Any) -> torch.Tensor:
        if not isinstance(obs, Mapping):
            obs = obs_batch(obs, self.policy.encoder.dim)
        return self.policy.features(torch.as_tensor(obs, device=self.device))

    def act(self, obs: Any, *, deterministic: bool = False) -> np.ndarray:
        """Actions for N observations: a sample, or the mode when ``deterministic``; int64 ``[N]``
        (``Discrete``) or float32 ``[N, A]`` (``Box``, unclipped). Samples come from ``act_rng``
        on the CPU path (:mod:`rlcore.algos.numpy_acting`), from the torch generator ``torch_rng``
        otherwise."""
        if (fast := self._fast()) is not None:
            return fast.act(obs, deterministic=deterministic)
        return self._torch_act(obs, deterministic)

    @torch.inference_mode()
    def _torch_act(self, obs: Any, deterministic: bool) -> np.ndarray:
        act, _ = self.policy.sample(self._features(obs), deterministic=deterministic, generator=self.torch_rng)
        return act.cpu().numpy()

    def act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(act, log_prob float32 [N], value float32 [N])`` for the sampler (value 0 without a
        critic); on the CPU with the default fused network computed in numpy (no torch dispatch,
        draws from ``act_rng``), else in torch."""
        if (fast := self._fast()) is not None:
            return fast.act_value(obs)
        return self._torch_act_value(obs)

    @torch.inference_mode()  # (cheaper than no_grad: the results leave as numpy arrays)
    def _torch_act_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x_NO = self._features(obs)
        out_NK, value_N = self.policy(x_NO)
        act, log_prob_N = self.policy.sample(x_NO, out_BK=out_NK, generator=self.torch_rng)
        return act.cpu().numpy(), log_prob_N.cpu().numpy(), value_N.cpu().numpy()

    def value(self, obs: np.ndarray) -> np.ndarray:
        """``V(o)`` float32 ``[N]`` (zeros without a critic)."""
        if (fast := self._fast()) is not None:
            return fast.value(obs)
        return self._torch_value(obs)

    @torch.inference_mode()
    def _torch_value(self, obs: np.ndarray) -> np.ndarray:
        return self.policy.value(self._features(obs)).cpu().numpy()

    def state_dict(self) -> dict[str, Any]:
        """Config, networks (incl. observation normaliser), optimizers, return normaliser, the
        action generator, the generator ``rng`` (when set) and the counters."""
        state: dict[str, Any] = {"config": asdict(self.config), "policy": self.policy.state_dict()}
        for name in self.OPTIMIZERS:
            optimizer = getattr(self, name)
            state[name] = None if optimizer is None else optimizer.state_dict()
        rn = self.return_normalizer
        state["return_normalizer"] = None if rn is None else rn.state_dict()
        if self.rng is not None:
            state["rng"] = self.rng.bit_generator.state
        state["act_rng"] = self.act_rng.bit_generator.state
        state["torch_rng"] = generator_state(self.torch_rng)
        state["env_steps"] = self.env_steps
        state["grad_steps"] = self.grad_steps
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned, in place (the config is not read)."""
        self.policy.load_state_dict(state["policy"])
        for name in self.OPTIMIZERS:
            optimizer = getattr(self, name)
            if optimizer is not None:
                optimizer.load_state_dict(state[name])
        if self.return_normalizer is not None:
            self.return_normalizer.load_state_dict(state["return_normalizer"])
        if self.rng is not None:
            self.rng.bit_generator.state = state["rng"]
        self.act_rng.bit_generator.state = state["act_rng"]
        set_generator_state(self.torch_rng, state["torch_rng"])
        self.env_steps = int(state["env_steps"])
        self.grad_steps = int(state["grad_steps"])
