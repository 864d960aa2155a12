"""The one registry of ``rlcore train``'s algorithms: each ``--algo`` name, its family (which
builder makes its trainer, which flags apply) and where its class and config live. Plain strings:
reading it imports nothing heavy, so flags are checked before torch loads.

Adding an algorithm touches its own module in :mod:`rlcore.algos`, its preset
(:mod:`rlcore.presets`) and one :class:`Algorithm` line here.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ALGORITHMS", "FLAG_FAMILIES", "Algorithm", "Family", "check_flags"]

Family = Literal["off-policy", "recurrent", "on-policy", "imitation", "offline", "offline-rl"]


@dataclass(frozen=True)
class Algorithm:
    """One ``--algo`` choice."""

    name: str
    family: Family
    """Which builder makes the trainer (:data:`rlcore.cli.train.BUILDERS`) and which flags apply."""
    cls: str
    """``module:Class`` of the algorithm."""
    config: str
    """``module:Class`` of its config."""

    def load(self) -> tuple[Any, Any]:
        """``(algorithm class, config class)`` (imports the algorithm's module)."""
        return _attr(self.cls), _attr(self.config)


def _attr(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("dqn", "off-policy", "rlcore.algos.dqn:DQN", "rlcore.algos.dqn:DQNConfig"),
        Algorithm("ddpg", "off-policy", "rlcore.algos.ddpg:DDPG", "rlcore.algos.ddpg:DDPGConfig"),
        Algorithm("td3", "off-policy", "rlcore.algos.td3:TD3", "rlcore.algos.td3:TD3Config"),
        Algorithm("sac", "off-policy", "rlcore.algos.sac:SAC", "rlcore.algos.sac:SACConfig"),
        Algorithm("r2d2", "recurrent", "rlcore.algos.r2d2:R2D2", "rlcore.algos.r2d2:R2D2Config"),
        Algorithm("vpg", "on-policy", "rlcore.algos.vpg:VPG", "rlcore.algos.vpg:VPGConfig"),
        Algorithm("a2c", "on-policy", "rlcore.algos.a2c:A2C", "rlcore.algos.a2c:A2CConfig"),
        Algorithm("ppo", "on-policy", "rlcore.algos.ppo:PPO", "rlcore.algos.ppo:PPOConfig"),
        Algorithm("bc", "offline", "rlcore.algos.bc:BC", "rlcore.algos.bc:BCConfig"),
        Algorithm("gail", "imitation", "rlcore.algos.gail:GAIL", "rlcore.algos.gail:GAILConfig"),
        Algorithm("dac", "imitation", "rlcore.algos.dac:DAC", "rlcore.algos.dac:DACConfig"),
        # offline RL on --dataset (issue 42, rlcore.cli.offline)
        Algorithm("td3bc", "offline-rl", "rlcore.algos.td3bc:TD3BC", "rlcore.algos.td3bc:TD3BCConfig"),
        Algorithm("iql", "offline-rl", "rlcore.algos.iql:IQL", "rlcore.algos.iql:IQLConfig"),
        Algorithm("cql", "offline-rl", "rlcore.algos.cql:CQL", "rlcore.algos.cql:CQLConfig"),
    )
}

_REPLAY: frozenset[Family] = frozenset({"off-policy", "recurrent"})
_ONLINE: frozenset[Family] = frozenset({"off-policy", "recurrent", "on-policy", "imitation"})

FLAG_FAMILIES: dict[str, frozenset[Family]] = {
    "her": frozenset({"off-policy"}),
    "n_step": _REPLAY,
    "prioritized": _REPLAY,
    "warmup_env_steps": _REPLAY,
    "value_rescaling": frozenset({"recurrent"}),
    "distributed": frozenset({"off-policy"}),
    "expert": frozenset({"imitation", "offline"}),
    "dataset": frozenset({"offline-rl"}),
    "ref_returns": frozenset({"offline-rl"}),
    "num_envs": _ONLINE,
    "backend": frozenset({"off-policy", "recurrent", "on-policy"}),
    "async_batch": frozenset({"off-policy", "recurrent", "on-policy"}),
}
"""The flags that apply to some families only (by ``argparse`` dest); every other flag applies
to every algorithm."""

_NEEDS: dict[str, tuple[str, str]] = {
    "num_collectors": ("distributed", "--distributed"),
    "num_shards": ("distributed", "--distributed"),
    "ray_address": ("distributed", "--distributed"),
    "trust_env_state": ("resume", "--resume"),
    "jobs": ("seeds", "--seeds"),
}
"""Flags that mean something only beside another one."""


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_flags(train: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The one-line complaint about a ``rlcore train`` flag that does not apply to ``--algo`` (or
    that needs another flag), or ``None``. A flag counts as given when its value differs from its
    default in ``train`` (the ``rlcore train`` parser)."""
    algo = ALGORITHMS[args.algo]
    given = {dest for dest in vars(args) if getattr(args, dest) != train.get_default(dest)}
    for dest in sorted(given & FLAG_FAMILIES.keys()):
        families = FLAG_FAMILIES[dest]
        if algo.family not in families:
            fit = sorted(a.name for a in ALGORITHMS.values() if a.family in families)
            return f"{_flag(dest)} does not apply to --algo {algo.name} ({algo.family}); it is for {', '.join(fit)}"
    for dest in sorted(given & _NEEDS.keys()):
        other, flag = _NEEDS[dest]
        if other not in given:
            return f"{_flag(dest)} needs {flag}"
    if "distributed" in given and ({"backend", "async_batch"} & given):
        return "--backend and --async-batch are for single-process training, not --distributed"
    if algo.family in ("imitation", "offline") and not given & {"expert", "dataset"}:
        return f"--algo {algo.name} needs --expert PATH (a dataset of `rlcore collect-expert`)"
    if algo.family == "offline-rl" and "dataset" not in given:
        return f"--algo {algo.name} needs --dataset PATH (a D4RL-format file, a Minari id or an rlcore save)"
    return None
