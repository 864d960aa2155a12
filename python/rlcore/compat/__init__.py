"""Drop-in replay buffers for other RL libraries, backed by the rlcore core.

- :mod:`rlcore.compat.sb3`: ``ReplayBuffer``, ``DictReplayBuffer``, ``NStepReplayBuffer`` and
  ``HerReplayBuffer`` for Stable-Baselines3 2.9 (``replay_buffer_class=...``).
- :mod:`rlcore.compat.tianshou`: ``ReplayBuffer``, ``VectorReplayBuffer``, ``HERReplayBuffer``, ``HERVectorReplayBuffer``,
  ``PrioritizedReplayBuffer`` and ``PrioritizedVectorReplayBuffer`` for Tianshou 2.0.

The peers are optional (``pip install -e '.[compat]'``): this package imports neither, and each
submodule raises an :class:`ImportError` naming the extra when its peer is missing, so
``import rlcore`` and ``import rlcore.compat`` always work.
"""

from __future__ import annotations

__all__: list[str] = []


def _missing(peer: str, module: str, err: ImportError) -> ImportError:
    """The ImportError raised by a compat module whose peer library is not installed."""
    return ImportError(
        f"rlcore.compat.{module} needs {peer}, which is not installed: pip install -e '.[compat]' "
        f"(or pip install {peer}); original error: {err}"
    )
