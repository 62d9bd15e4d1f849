"""Schedules of a value over training steps (exploration epsilon, for instance)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinearSchedule"]


@dataclass(frozen=True)
class LinearSchedule:
    """Moves linearly from ``start`` to ``end`` over ``steps`` steps, then stays at ``end``.

    Example:
        >>> eps = LinearSchedule(1.0, 0.1, 100)
        >>> eps(0), eps(50), eps(1000)
        (1.0, 0.55, 0.1)
    """

    start: float
    end: float
    steps: int

    def __call__(self, t: int) -> float:
        """The value at step ``t``."""
        if t >= self.steps:
            return self.end  # exactly, not start + 1.0 * (end - start) with its rounding
        frac = max(t, 0) / self.steps
        return self.start + frac * (self.end - self.start)
