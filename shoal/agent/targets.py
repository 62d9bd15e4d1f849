"""The one TD target every learner uses, tabular or deep: ``reward + discount * next_value``.

``discount`` carries both gamma**k of an n-step return and termination (0 when the episode
ended, so nothing is bootstrapped); it works on floats, numpy arrays and torch tensors
alike, which is why it lives in a module that imports neither.

Example:
    >>> td_target(1.0, 0.9, 2.0)
    2.8
    >>> td_target(1.0, 0.0, 2.0)  # terminated: no bootstrap
    1.0
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["td_target"]

T = TypeVar("T")


def td_target(reward: T, discount: T | float, next_value: T | float) -> T:
    """``reward + discount * next_value``: the bootstrapped return a value is moved toward."""
    return reward + discount * next_value  # type: ignore[operator, return-value]
