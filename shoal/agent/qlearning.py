"""Tabular Q-learning, pure: step-size schedules, the TD target, exploration.

The update ``q += alpha(n) * (r + gamma * max_a' q(s', a') - q)`` is applied by a table
(``shoal.tabular``) inside one critical section, so the schedules here are vectorized
functions of the visit count that the table calls with the count it just incremented.
Nothing here locks or shares anything.

Example:
    >>> import numpy as np
    >>> alpha = harmonic(10.0)
    >>> alpha(np.array([1, 10, 90]))
    array([0.90909091, 0.5       , 0.1       ])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shoal.agent.targets import td_target as _td

__all__ = [
    "AlphaSchedule",
    "constant",
    "count_bonus",
    "epsilon_greedy",
    "harmonic",
    "inverse_count",
    "make_alpha",
    "td_target",
]

AlphaSchedule = Callable[[np.ndarray], np.ndarray]
"""Step size as a function of the visit counts n >= 1 (after this visit)."""


@dataclass(frozen=True)
class _InverseCount:
    def __call__(self, n: np.ndarray) -> np.ndarray:
        return 1.0 / np.asarray(n, dtype=np.float64)


@dataclass(frozen=True)
class _Harmonic:
    c: float

    def __call__(self, n: np.ndarray) -> np.ndarray:
        return self.c / (self.c + np.asarray(n, dtype=np.float64))


@dataclass(frozen=True)
class _Constant:
    alpha: float

    def __call__(self, n: np.ndarray) -> np.ndarray:
        return np.full(np.shape(n), self.alpha, dtype=np.float64)


def inverse_count() -> AlphaSchedule:
    """alpha(n) = 1/n: q becomes the plain average of its targets (no forgetting)."""
    return _InverseCount()


def harmonic(c: float) -> AlphaSchedule:
    """alpha(n) = c / (c + n): starts near 1, decays like 1/n; c sets how slowly."""
    if not c > 0:
        raise ValueError(f"harmonic alpha: c must be > 0, got {c!r}")
    return _Harmonic(float(c))


def constant(alpha: float) -> AlphaSchedule:
    """alpha(n) = alpha: tracks non-stationary targets, never converges exactly."""
    if not 0 < alpha <= 1:
        raise ValueError(f"constant alpha: must lie in (0, 1], got {alpha!r}")
    return _Constant(float(alpha))


def make_alpha(kind: str, value: float = 1.0) -> AlphaSchedule:
    """A schedule by name: 'inverse' (1/n), 'harmonic' (value/(value+n)), 'constant'."""
    if kind == "inverse":
        return inverse_count()
    if kind == "harmonic":
        return harmonic(value)
    if kind == "constant":
        return constant(value)
    raise ValueError(f"alpha schedule {kind!r}: allowed 'inverse', 'harmonic', 'constant'")


def td_target(reward: float, gamma: float, next_q: np.ndarray | None, terminal: bool) -> float:
    """r + gamma * max_a' q(s', a'); just r when the episode ended or s' has no actions."""
    if terminal or next_q is None or len(next_q) == 0:
        return float(_td(reward, 0.0, 0.0))
    return float(_td(reward, gamma, np.max(next_q)))


def count_bonus(n: np.ndarray, beta: float) -> np.ndarray:
    """Optimism for rarely tried actions: beta / sqrt(n + 1) (0 when beta is 0)."""
    if beta == 0:
        return np.zeros(np.shape(n))
    return beta / np.sqrt(np.asarray(n, dtype=np.float64) + 1.0)


def epsilon_greedy(q: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """Index of a uniformly random entry with probability epsilon, else of a maximum
    (ties broken at random: a fresh table is all zeros, and a fixed tie-break would
    always try the same action first)."""
    if len(q) == 0:
        raise ValueError("epsilon_greedy: no actions to choose from")
    if rng.random() < epsilon:
        return int(rng.integers(len(q)))
    best = np.flatnonzero(q == q.max())
    return int(best[0] if len(best) == 1 else rng.choice(best))
