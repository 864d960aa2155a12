"""Remote collectors: a Ray actor running the off-policy :class:`~rlcore.collect.Collector` on its
own vector env with a CPU copy of the policy, and the store it pulls new weights from."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from rlcore.distributed.ray_setup import _ray
from rlcore.distributed.writer import ShardWriter


def policy_weights(algorithm: Any) -> dict[str, dict[str, Any]]:
    """CPU ``state_dict`` of every ``torch.nn.Module`` attribute of ``algorithm`` except target
    networks (names containing ``target``): what a collector's copy needs to act."""
    import torch

    out = {}
    for name, value in vars(algorithm).items():
        if isinstance(value, torch.nn.Module) and "target" not in name:
            out[name] = {k: v.detach().to("cpu", copy=True) for k, v in value.state_dict().items()}
    return out


def _load_policy_weights(algorithm: Any, weights: Mapping[str, Mapping[str, Any]]) -> None:
    for name, state in weights.items():
        getattr(algorithm, name).load_state_dict(state)


class WeightStore:
    """A Ray actor holding the newest policy weights and their version (learner grad steps)."""

    def __init__(self) -> None:
        self.version = -1
        self.weights: Any = None
        self.env_steps = 0

    def put(self, version: int, weights: Any, env_steps: int = 0) -> None:
        self.version, self.weights, self.env_steps = int(version), weights, int(env_steps)

    def get_if_newer(self, version: int) -> tuple[int, Any, int] | None:
        """``(version, weights, env_steps)`` when newer than ``version``, else ``None``."""
        if self.version > version:
            return self.version, self.weights, self.env_steps
        return None


class CollectorWorker:
    """A Ray actor that steps its own vector env with a CPU copy of the policy and writes whole
    vector steps into a :class:`ShardWriter` (chunks of ``writer.chunk_rows`` rows).

    Args:
        make_envs: ``make_envs() -> gymnasium VectorEnv`` (built inside the actor).
        make_policy: ``make_policy() -> algorithm`` with ``act(obs, deterministic=...)`` (built
            on CPU inside the actor); weights come from ``weights``.
        writer: where rows go.
        weights: a :class:`WeightStore` actor.
        seed: seed of the first env reset; a restarted actor adds ``1_000 * restarts`` so it does
            not replay the same episodes.
    """

    def __init__(
        self,
        make_envs: Callable[[], Any],
        make_policy: Callable[[], Any],
        writer: ShardWriter,
        weights: Any,
        seed: int,
    ) -> None:
        import torch

        from rlcore.collect.collector import Collector

        torch.set_num_threads(1)
        ray = _ray()
        with warnings.catch_warnings():  # Ray 2.60 warns about its own use of a deprecated API here
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarts = 1 if ray.get_runtime_context().was_current_actor_reconstructed else 0
        self.envs = make_envs()
        self.algorithm = make_policy()
        self.writer = writer
        self.weights = weights
        self.version = -1
        self.collector = Collector(self.envs, writer)
        self.collector.reset(seed=seed + 1_000 * self.restarts)

    def collect(self, n_env_steps: int, *, random: bool = False) -> tuple[Any, int, int]:
        """Pull newer weights, collect ``n_env_steps`` transitions (uniform random actions when
        ``random``), and wait until they are stored. Returns ``(CollectStats, weight version,
        restarted)``."""
        ray = _ray()
        if not random:
            new = ray.get(self.weights.get_if_newer.remote(self.version))
            if new is not None:
                self.version, weights, env_steps = new
                _load_policy_weights(self.algorithm, weights)
                if hasattr(self.algorithm, "explore_env_steps"):
                    self.algorithm.explore_env_steps = env_steps  # DQN's epsilon follows the global steps
        policy = None if random else (lambda obs: self.algorithm.act(obs, deterministic=False))
        stats = self.collector.collect(n_env_steps, policy=policy)
        self.writer.flush(wait=True)
        restarted, self.restarts = self.restarts, 0
        return stats, self.version, restarted

    def reset(self, seed: int) -> None:
        """Reset the envs with ``seed`` (fresh episodes), as a resumed trainer does."""
        self.collector.reset(seed=seed)

    def pid(self) -> int:
        return os.getpid()
