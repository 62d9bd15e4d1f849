"""A replay buffer that several threads may add to, sample from and reprioritize at once.

The replay package itself is single-threaded by design; this wrapper adds one lock around
every call, which is enough because each call is short (a few vectorized numpy ops).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.replay import ReplayBuffer

__all__ = ["LockedReplay"]


class LockedReplay:
    """:class:`~shoal.replay.ReplayBuffer` with every method under one mutex.

    Example:
        >>> buf = LockedReplay(ReplayBuffer(10, (2,), seed=0))
        >>> buf.add({"obs": [0, 0], "action": 1, "reward": 1.0, "next_obs": [0, 1],
        ...          "discount": 0.9})
        0
        >>> len(buf)
        1
    """

    def __init__(self, buffer: ReplayBuffer) -> None:
        self.buffer = buffer
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self.buffer)

    def add(self, transition: Mapping[str, Any]) -> int:
        """Store one transition; returns its index."""
        with self._lock:
            return self.buffer.add(transition)

    def add_many(self, transitions: Sequence[Mapping[str, Any]]) -> None:
        """Store several transitions under one lock acquisition."""
        with self._lock:
            self.buffer.add_many(transitions)

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
