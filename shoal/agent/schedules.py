"""Schedules of a value over training steps (exploration epsilon, for instance)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinearSchedule", "actor_epsilon"]


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


def actor_epsilon(base: float, i: int, actors: int, alpha: float) -> float:
    """Exploration of actor ``i`` of ``actors`` (Ape-X): ``base ** (1 + alpha * i /
    (actors - 1))``, so actor 0 explores at ``base`` and the others less and less; one
    actor, or ``alpha = 0``, explores at ``base``.

    Example:
        >>> round(actor_epsilon(0.4, 0, 8, 7.0), 4), round(actor_epsilon(0.4, 7, 8, 7.0), 6)
        (0.4, 0.000655)
    """
    if alpha == 0 or actors == 1:
        return base
    return base ** (1 + alpha * i / (actors - 1))
