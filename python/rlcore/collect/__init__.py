"""Collecting experience from gymnasium vector envs: the off-policy :class:`Collector` (steps into a
replay buffer), the on-policy :class:`RolloutSampler` (``[T, N]`` rollouts) and :func:`evaluate`."""

from rlcore.collect.collector import Collector
from rlcore.collect.evaluate import evaluate
from rlcore.collect.sampler import RolloutSampler

__all__ = ["Collector", "RolloutSampler", "evaluate"]
