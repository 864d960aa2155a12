"""gymnasium-robotics' environments (FetchReach-v4, ...) registered with gymnasium, quietly."""

from __future__ import annotations

import contextlib
import io
import warnings

__all__ = ["register_robotics"]


def register_robotics() -> bool:
    """Import gymnasium-robotics and register its environments with gymnasium; False when it is not
    installed. Its import prints a notice about the Adroit environments (gymnasium-robotics 1.4.2)
    that says nothing to a user of Fetch: it is kept off the console, with any import warnings."""
    import gymnasium as gym

    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            import gymnasium_robotics  # type: ignore[import-untyped]
    except ImportError:
        return False
    gym.register_envs(gymnasium_robotics)
    return True
