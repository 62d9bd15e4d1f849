"""A vectorized sum tree (with a companion min tree) for proportional prioritized replay.

Prioritized replay needs three things fast: the total priority, "which item does this point
of the cumulative sum fall in" (to sample), and the smallest priority (to normalise the
importance weights). A binary tree whose inner nodes hold the sum (and, in a second array,
the min) of their children gives all three in O(log n). Every operation here works on a
whole batch of indices at once: Python only loops over the tree's levels, never over items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SumTree"]


class SumTree:
    """Non-negative float64 values over ``capacity`` leaves, with O(log n) sum, min and find.

    The tree is stored heap-style in flat arrays: node 1 is the root, node ``k`` has children
    ``2k`` and ``2k + 1``, and leaf ``i`` is node ``size + i`` where ``size`` is ``capacity``
    rounded up to a power of two (so every leaf is at the same depth). Leaves that were never
    set hold 0 and are never returned by :meth:`find`.

    Args:
        capacity: number of leaves.

    Example:
        >>> import numpy as np
        >>> tree = SumTree(4)
        >>> tree.update(np.array([0, 1, 2]), np.array([1.0, 0.0, 3.0]))
        >>> tree.total, tree.min()
        (4.0, 1.0)
        >>> tree.find(np.array([0.0, 0.99, 1.0, 3.99]))
        array([0, 0, 2, 2])
    """

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool):
            raise TypeError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity <= 0:
            raise ValueError(f"capacity must be a positive integer (>= 1), got {capacity}")
        self._capacity = int(capacity)
        self._size = 1 << (self._capacity - 1).bit_length()
        self._depth = self._size.bit_length() - 1
        # Index 0 is unused; it keeps the parent/child arithmetic to a shift.
        self._sums = np.zeros(2 * self._size, dtype=np.float64)
        # Unset (zero) leaves count as +inf in the min tree, so min() ignores them.
        self._mins = np.full(2 * self._size, np.inf, dtype=np.float64)

    @property
    def capacity(self) -> int:
        """Number of leaves."""
        return self._capacity

    @property
    def total(self) -> float:
        """Sum of all leaf values."""
        return float(self._sums[1])

    def min(self) -> float:
        """Smallest leaf value among leaves that are set (> 0); ``inf`` if there are none."""
        return float(self._mins[1])

    def _check_indices(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {indices.dtype}")
        indices = indices.astype(np.int64, copy=False)
        if indices.size and (indices.min() < 0 or indices.max() >= self._capacity):
            raise IndexError(
                f"indices must lie in [0, {self._capacity}), "
                f"got values in [{indices.min()}, {indices.max()}]"
            )
        return indices

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray:
        """Return the leaf values at ``indices`` (a float64 array; a float64 scalar for an int)."""
        indices = self._check_indices(np.asarray(indices))
        return self._sums[self._size + indices]

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaf ``indices[j]`` to ``values[j]``; for repeated indices the last value wins.

        Values must be finite and non-negative. Only the ancestors of the changed leaves are
        recomputed, each from its two children, so rounding errors never accumulate.
        """
        indices = self._check_indices(np.atleast_1d(indices))
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), indices.shape)
        if indices.ndim != 1:
            raise ValueError(f"indices must be 1-D, got shape {indices.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("values must be finite, got NaN or inf")
        if np.any(values < 0):
            raise ValueError(f"values must be non-negative, got minimum {values.min()}")
        if indices.size == 0:
            return
        # np.unique keeps the first occurrence; on the reversed arrays that is the last one,
        # which makes "last value wins" explicit rather than relying on numpy's write order.
        unique, first_in_reversed = np.unique(indices[::-1], return_index=True)
        leaf_values = values[::-1][first_in_reversed]
        nodes = unique + self._size
        self._sums[nodes] = leaf_values
        self._mins[nodes] = np.where(leaf_values > 0, leaf_values, np.inf)
        self._propagate(nodes)

    def _propagate(self, nodes: np.ndarray) -> None:
        """Recompute every ancestor of the sorted, unique leaf ``nodes``, level by level."""
        while True:
            nodes = np.unique(nodes >> 1)
            if nodes[0] < 1:
                break
            left = nodes << 1
            self._sums[nodes] = self._sums[left] + self._sums[left + 1]
            self._mins[nodes] = np.minimum(self._mins[left], self._mins[left + 1])

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """For each ``u`` return the leaf ``i`` with ``cumsum[i-1] <= u < cumsum[i]``.

        ``u`` should lie in ``[0, total)``; values outside are clipped to that range, so the
        result is always a leaf with a positive value even when rounding pushes a stratified
        draw onto ``total`` itself. Returns int64 leaf indices with ``prefix_sums``' shape.

        Raises ``ValueError`` if the tree is empty (total is 0) or a query is NaN.
        """
        u = np.array(prefix_sums, dtype=np.float64)  # a copy: the descent edits it in place
        if self._sums[1] <= 0:
            raise ValueError("cannot find in a SumTree whose total is 0 (no positive values)")
        if np.isnan(u).any():
            raise ValueError("prefix_sums must not contain NaN")
        np.clip(u, 0.0, self._sums[1], out=u)
        nodes = np.ones(u.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = nodes << 1
            left_sum = self._sums[left]
            # Going right into a subtree whose sum is 0 can only happen through rounding (or
            # u == total); staying left then ends on the rightmost positive leaf instead of an
            # empty one. The current node's sum is positive at every step, by induction.
            go_right = (u >= left_sum) & (self._sums[left + 1] > 0)
            u -= np.where(go_right, left_sum, 0.0)
            nodes = left + go_right
        return nodes - self._size

    def state_dict(self) -> dict[str, Any]:
        """Return the capacity and a copy of the leaf values (inner nodes are rebuilt on load)."""
        return {
            "capacity": self._capacity,
            "values": self._sums[self._size : self._size + self._capacity].copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore leaf values from :meth:`state_dict` and rebuild the inner nodes.

        Raises ``ValueError`` if the capacity or the values' shape does not match, or a value
        is negative or not finite.
        """
        capacity = int(state["capacity"])
        if capacity != self._capacity:
            raise ValueError(
                f"state capacity {capacity} does not match this tree's capacity {self._capacity}"
            )
        values = np.asarray(state["values"], dtype=np.float64)
        if values.shape != (self._capacity,):
            raise ValueError(f"state values have shape {values.shape}, expected ({capacity},)")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("state values must be finite and non-negative")
        leaves = slice(self._size, 2 * self._size)
        self._sums[leaves] = 0.0
        self._sums[self._size : self._size + capacity] = values
        self._mins[leaves] = np.where(self._sums[leaves] > 0, self._sums[leaves], np.inf)
        # Rebuild all inner levels bottom-up, one vectorized step per level.
        level = self._size // 2
        while level >= 1:
            parents = np.arange(level, 2 * level)
            left = parents << 1
            self._sums[parents] = self._sums[left] + self._sums[left + 1]
            self._mins[parents] = np.minimum(self._mins[left], self._mins[left + 1])
            level //= 2
