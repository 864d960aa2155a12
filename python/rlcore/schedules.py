"""Schedules for annealed hyperparameters (PER's beta, exploration rates)."""

from __future__ import annotations

from rlcore.errors import InvalidValueError


class LinearSchedule:
    """Linear annealing from ``start`` to ``end`` over ``duration`` steps, then constant; e.g.
    PER's β from 0.4 to 1 (Schaul et al. 2016, sec. 3.4): ``buf.beta = schedule(step)``.

    Raises:
        InvalidValueError: duration < 1.
    """

    def __init__(self, start: float, end: float, duration: int) -> None:
        if duration < 1:
            raise InvalidValueError(f"duration must be >= 1, got {duration}")
        self.start, self.end, self.duration = float(start), float(end), int(duration)

    def __call__(self, step: int) -> float:
        frac = min(max(step, 0) / self.duration, 1.0)
        return self.start + frac * (self.end - self.start)
