"""Networks: the building blocks (:mod:`rlcore.nets.layers`), the actors, critics and
Q-networks of the off-policy and offline algorithms (:mod:`rlcore.nets.off_policy`) and the
actor-critic of the on-policy ones (:mod:`rlcore.nets.on_policy`). Every name is importable from
``rlcore.nets``.
"""

from rlcore.nets.layers import (
    EnsembleLinear,
    NatureCNN,
    ObsEncoder,
    PixelObs,
    RunningMeanStd,
    is_image_space,
    mlp,
)
from rlcore.nets.off_policy import (
    DeterministicActor,
    DiscreteQNetwork,
    EnsembleQNetwork,
    GaussianActor,
    ImageQNetwork,
    RecurrentQNetwork,
    SquashedGaussianActor,
    squashed_gaussian_log_prob,
)
from rlcore.nets.on_policy import ActorCritic, TwinTrunk, gaussian_log_prob

__all__ = [
    "ActorCritic",
    "DeterministicActor",
    "DiscreteQNetwork",
    "EnsembleLinear",
    "EnsembleQNetwork",
    "GaussianActor",
    "ImageQNetwork",
    "NatureCNN",
    "ObsEncoder",
    "PixelObs",
    "RecurrentQNetwork",
    "RunningMeanStd",
    "SquashedGaussianActor",
    "TwinTrunk",
    "gaussian_log_prob",
    "is_image_space",
    "mlp",
    "squashed_gaussian_log_prob",
]
