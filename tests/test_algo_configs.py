"""Algorithm configs: every inconsistent option raises rlcore's InvalidValueError (a ValueError) naming
the config and the field; one bad value per field kind, and every numeric option of every config is
covered."""

from __future__ import annotations

import dataclasses
import math

import pytest
from rlcore.algos import A2CConfig, DDPGConfig, DQNConfig, PPOConfig, SACConfig, TD3Config, VPGConfig
from rlcore.algos.bc import BCConfig
from rlcore.algos.gail import GAILConfig
from rlcore.errors import InvalidValueError, RlcoreError

CONFIGS = [DQNConfig, DDPGConfig, TD3Config, SACConfig, VPGConfig, A2CConfig, PPOConfig, BCConfig, GAILConfig]
NAN, INF = math.nan, math.inf

# (config, field, bad value), grouped by field kind.
BAD = [
    # layer widths: a sequence of whole numbers >= 1
    *[(cls, "hidden", v) for cls in CONFIGS for v in [(64, 0)]],
    (DQNConfig, "hidden", "64"),
    (PPOConfig, "hidden", (32.5,)),
    *[(cls, "hidden", None) for cls in CONFIGS],  # widths are never optional
    # off-policy learning rates: >= 0 (0 freezes a network), finite
    (DQNConfig, "lr", -1e-3),
    (DDPGConfig, "actor_lr", -1e-3),
    (DDPGConfig, "critic_lr", NAN),
    (TD3Config, "actor_lr", -1.0),
    (TD3Config, "critic_lr", INF),
    (SACConfig, "actor_lr", -1.0),
    (SACConfig, "critic_lr", -1.0),
    (SACConfig, "alpha_lr", NAN),
    # on-policy and imitation learning rates, and other strictly positive scales
    (VPGConfig, "policy_lr", 0.0),
    (VPGConfig, "value_lr", NAN),
    (A2CConfig, "lr", 0.0),
    (PPOConfig, "lr", -3e-4),
    (PPOConfig, "adam_eps", 0.0),
    (PPOConfig, "clip_coef", 0.0),
    (PPOConfig, "value_clip_coef", -0.2),
    (PPOConfig, "target_kl", 0.0),
    (BCConfig, "lr", 0.0),
    (GAILConfig, "lr", -1.0),
    (DQNConfig, "huber_delta", 0.0),
    (SACConfig, "init_alpha", 0.0),
    *[
        (cls, "max_grad_norm", 0.0)
        for cls in [DQNConfig, DDPGConfig, TD3Config, SACConfig, VPGConfig, A2CConfig, PPOConfig]
    ],
    # non-negative weights and noise scales
    (DDPGConfig, "exploration_noise", -0.1),
    (DDPGConfig, "action_l2", -1.0),
    (TD3Config, "exploration_noise", -0.1),
    (TD3Config, "target_policy_noise", NAN),
    (TD3Config, "target_noise_clip", -0.5),
    (VPGConfig, "ent_coef", -0.01),
    (A2CConfig, "ent_coef", -0.01),
    (A2CConfig, "vf_coef", -0.5),
    (PPOConfig, "ent_coef", INF),
    (PPOConfig, "vf_coef", -0.5),
    (BCConfig, "weight_decay", -1e-4),
    (GAILConfig, "grad_penalty", -10.0),
    # probabilities and discounts in [0, 1]
    (DQNConfig, "eps_start", 1.5),
    (DQNConfig, "eps_end", -0.1),
    (DQNConfig, "eval_epsilon", 1.5),
    (DDPGConfig, "random_action_prob", 1.1),
    (VPGConfig, "gamma", 1.5),
    (VPGConfig, "gae_lambda", -0.1),
    (A2CConfig, "gamma", NAN),
    (A2CConfig, "gae_lambda", 2.0),
    (PPOConfig, "gamma", -0.5),
    (PPOConfig, "gae_lambda", 1.5),
    # polyak tau in (0, 1]
    *[(cls, "tau", 0.0) for cls in [DQNConfig, DDPGConfig, SACConfig]],
    (TD3Config, "tau", 1.5),
    # counts: whole numbers >= 1 (>= 0 where 0 means "none")
    (DQNConfig, "lr_anneal_env_steps", 0),
    (DQNConfig, "target_update_interval", 0),
    (DQNConfig, "eps_decay_env_steps", -1),
    (TD3Config, "policy_delay", 0),
    (SACConfig, "target_update_interval", 0),
    (SACConfig, "policy_frequency", 1.5),
    (VPGConfig, "lr_anneal_env_steps", 0),
    (VPGConfig, "value_iters", -1),
    (A2CConfig, "lr_anneal_env_steps", -5),
    (PPOConfig, "n_epochs", 0),
    (PPOConfig, "minibatch_size", 2.5),
    (PPOConfig, "lr_anneal_env_steps", 0),
    (PPOConfig, "clip_anneal_env_steps", 0),
    (GAILConfig, "disc_updates", -1),
    (GAILConfig, "disc_batch_size", 0),
    # (low, high) intervals
    (DDPGConfig, "q_target_clip", (1.0, -1.0)),
    (TD3Config, "q_target_clip", (0.0,)),
    (SACConfig, "q_target_clip", (NAN, 0.0)),
    # finite numbers of either sign
    (SACConfig, "target_entropy", -INF),
    (VPGConfig, "init_log_std", NAN),
    (A2CConfig, "init_log_std", INF),
    (PPOConfig, "init_log_std", NAN),
    # one of a fixed set of names
    (DQNConfig, "loss", "l1"),
    (GAILConfig, "reward", "airl"),
]


@pytest.mark.parametrize(("cls", "field", "value"), BAD, ids=lambda x: getattr(x, "__name__", repr(x)))
def test_bad_config_value_raises_invalid_value_error_naming_the_field(cls, field, value) -> None:
    with pytest.raises(InvalidValueError, match=rf"^{cls.__name__}\.{field} must be") as err:
        cls(**{field: value})
    assert isinstance(err.value, ValueError) and isinstance(err.value, RlcoreError)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize("cls", CONFIGS)
def test_default_configs_are_valid(cls) -> None:
    cls()


def test_every_numeric_or_tuple_option_of_every_config_is_checked() -> None:
    """A new numeric option needs a range check (and a row in BAD); flags and seeds need none."""
    checked = {(cls, field) for cls, field, _ in BAD}
    unchecked = {"seed"}
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls in CONFIGS
        for f in dataclasses.fields(cls)
        if f.name not in unchecked and not isinstance(f.default, bool) and (cls, f.name) not in checked
    ]
    assert missing == []


def test_zero_learning_rates_are_allowed_off_policy() -> None:
    """A learning rate of 0 freezes a network (the TD-target tests rely on it)."""
    DDPGConfig(actor_lr=0.0, critic_lr=0.0)
    SACConfig(actor_lr=0.0, critic_lr=0.0, alpha_lr=0.0)
    DQNConfig(lr=0.0)


def test_switched_off_options_may_be_none() -> None:
    DQNConfig(lr_anneal_env_steps=None, max_grad_norm=None)
    PPOConfig(value_clip_coef=None, target_kl=None, clip_anneal_env_steps=None, max_grad_norm=None)
    SACConfig(target_entropy=None, q_target_clip=None)
    TD3Config(q_target_clip=[-1.0, 0.0])  # a list from a JSON config is fine


# Values of the wrong kind (a string from a hand-edited config, a bool, None where nothing may be
# switched off) raise the same typed error, never a bare TypeError from a comparison.
WRONG_KIND = [
    (SACConfig, "actor_lr", "3e-4"),
    (PPOConfig, "n_epochs", True),
    (DQNConfig, "target_update_interval", "1000"),
    (TD3Config, "tau", None),
    (VPGConfig, "gamma", None),
    (A2CConfig, "gae_lambda", "0.95"),
    (DDPGConfig, "q_target_clip", "(-50, 0)"),
    (GAILConfig, "reward", None),
    (BCConfig, "weight_decay", [0.0]),
]


@pytest.mark.parametrize(("cls", "field", "value"), WRONG_KIND, ids=lambda x: getattr(x, "__name__", repr(x)))
def test_value_of_the_wrong_kind_raises_invalid_value_error(cls, field, value) -> None:
    with pytest.raises(InvalidValueError, match=rf"^{cls.__name__}\.{field} must be"):
        cls(**{field: value})
