"""D4RL's normalised score (Fu et al. 2020, sec. 5): ``100 * (R - R_random) / (R_expert - R_random)``,
0 for a random policy's return and 100 for an expert's."""

from __future__ import annotations

from collections.abc import Mapping

from rlcore.errors import InvalidValueError

__all__ = ["D4RL_REFERENCE_RETURNS", "normalized_score"]

D4RL_REFERENCE_RETURNS: Mapping[str, tuple[float, float]] = {
    "hopper": (-20.272305, 3234.3),
    "halfcheetah": (-280.178953, 12135.0),
    "walker2d": (1.629008, 4592.3),
    "ant": (-325.6, 3879.7),
}
"""(random, expert) undiscounted returns of D4RL's MuJoCo tasks (``d4rl/infos.py``, REF_MIN_SCORE
and REF_MAX_SCORE; measured on the ``-v2`` envs, 1000-step episodes), keyed by task."""


def normalized_score(ret: float, reference: tuple[float, float]) -> float:
    """``100 * (ret - random) / (expert - random)`` for ``reference = (random, expert)`` returns.

    Raises:
        InvalidValueError: ``expert == random`` (no scale).
    """
    random, expert = float(reference[0]), float(reference[1])
    if expert == random:
        raise InvalidValueError(f"normalized_score: the reference returns are equal ({random}); no scale")
    return 100.0 * (float(ret) - random) / (expert - random)
