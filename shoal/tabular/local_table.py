"""A plain in-process Q-table: the serial oracle the shared table is checked against."""

from __future__ import annotations

import numpy as np

from shoal.agent.qlearning import AlphaSchedule

__all__ = ["LocalQTable"]


class LocalQTable:
    """Q-values and visit counts in a dict, with the same methods as
    :class:`~shoal.tabular.SharedQTable` (no locks, no capacity limit, one process).

    Example:
        >>> from shoal.agent.qlearning import inverse_count
        >>> t = LocalQTable()
        >>> t.update(5, 2.0, inverse_count()), t.update(5, 4.0, inverse_count())
        (2.0, 3.0)
    """

    def __init__(self) -> None:
        self._q: dict[int, float] = {}
        self._n: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._q)

    def get(self, key: int | np.uint64) -> float:
        """Q of one key (0.0 if never updated)."""
        return self._q.get(int(key), 0.0)

    def get_many(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q, N) for each key; (0.0, 0) for unseen keys."""
        ks = [int(k) for k in np.asarray(keys, dtype=np.uint64).reshape(-1)]
        return (
            np.array([self._q.get(k, 0.0) for k in ks], dtype=np.float64),
            np.array([self._n.get(k, 0) for k in ks], dtype=np.int64),
        )

    def max_q(self, keys: np.ndarray) -> float:
        """max over ``keys`` of Q (0.0 for unseen keys; -inf for no keys)."""
        q, _ = self.get_many(keys)
        return float(q.max()) if len(q) else float("-inf")

    def update(self, key: int | np.uint64, target: float, alpha: AlphaSchedule) -> float:
        """N += 1, Q += alpha(N) * (target - Q); returns the new Q."""
        k = int(key)
        n = self._n.get(k, 0) + 1
        self._n[k] = n
        q = self._q.get(k, 0.0)
        q += float(alpha(np.array(n))) * (target - q)
        self._q[k] = q
        return q

    def update_many(self, keys: np.ndarray, targets: np.ndarray, alpha: AlphaSchedule) -> None:
        """:meth:`update` for each (key, target) in order."""
        for k, t in zip(np.asarray(keys, dtype=np.uint64).reshape(-1), np.asarray(targets)):
            self.update(k, float(t), alpha)

    def total_visits(self) -> int:
        """Sum of all visit counts."""
        return sum(self._n.values())

    def snapshot(self) -> dict[str, np.ndarray]:
        """Keys, Q-values and counts as arrays (the format SharedQTable saves)."""
        keys = np.array(list(self._q), dtype=np.uint64)
        return {
            "keys": keys,
            "q": np.array([self._q[int(k)] for k in keys], dtype=np.float64),
            "n": np.array([self._n[int(k)] for k in keys], dtype=np.int64),
        }
