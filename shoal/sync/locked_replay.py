"""A replay buffer that several threads may add to, sample from and reprioritize at once.

The replay package itself is single-threaded by design; this wrapper adds one lock around
every call, which is enough because each call is short (a few vectorized numpy ops). It
offers the same :class:`~shoal.replay.Replay` protocol as the buffer it wraps, so learners
and actors cannot tell the two apart.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.replay import Replay

__all__ = ["LockedReplay"]


class LockedReplay:
    """A replay with every method under one mutex, so several threads may share it.

    Wraps any :class:`~shoal.replay.Replay`, usually a :class:`~shoal.replay.ReplayBuffer`,
    and is itself a :class:`~shoal.replay.Replay`.

    Example:
        >>> from shoal.replay import ReplayBuffer
        >>> buf = LockedReplay(ReplayBuffer(10, (2,), prioritized=True, seed=0))
        >>> buf.add({"obs": [0, 0], "action": 1, "reward": 1.0, "next_obs": [0, 1],
        ...          "discount": 0.9}, priority=0.5)
        0
        >>> len(buf), isinstance(buf, Replay)
        (1, True)
    """

    def __init__(self, buffer: Replay, lock: threading.Lock | None = None) -> None:
        self.buffer = buffer
        self._lock = lock if lock is not None else threading.Lock()
        """One mutex; several wrappers may share one (e.g. buffers whose items sit in one
        block that a reader gathers from all at once)."""

    def __len__(self) -> int:
        """Number of items held."""
        with self._lock:
            return len(self.buffer)

    def add(self, transition: Mapping[str, Any], priority: float | None = None) -> int:
        """Store one item, with an optional initial ``|td_error|``; returns its index."""
        with self._lock:
            return self.buffer.add(transition, priority=priority)

    def add_many(
        self,
        transitions: Sequence[Mapping[str, Any]],
        priorities: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        """Store several items (optionally with initial priorities) under one acquisition."""
        with self._lock:
            self.buffer.add_many(transitions, priorities=priorities)

    def add_batch(
        self,
        batch: Mapping[str, np.ndarray],
        priorities: Sequence[float] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Store items given as one array per field under one acquisition."""
        with self._lock:
            return self.buffer.add_batch(batch, priorities=priorities)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """A batch (copies: safe to use after the lock is released)."""
        with self._lock:
            return self.buffer.sample(batch_size)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities from TD errors (no-op for uniform replay)."""
        with self._lock:
            self.buffer.update_priorities(indices, td_errors)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped buffer's state, taken atomically."""
        with self._lock:
            return self.buffer.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the wrapped buffer's state."""
        with self._lock:
            self.buffer.load_state_dict(state)
