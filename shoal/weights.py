"""Versioned weight stores: a learner publishes, actors pull when something newer exists.

One interface, several transports. :class:`LocalWeightStore` serves threads of one process;
it hands out copies taken at publish time, so an actor never sees weights half-way through
an optimizer step (``Queue.put(model.state_dict())`` sends live tensors, which can).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import torch

__all__ = ["LocalWeightStore"]


class LocalWeightStore:
    """Weights shared between threads of one process, with a version that only goes up.

    Example:
        >>> store = LocalWeightStore()
        >>> store.publish({"w": torch.zeros(2)}, version=3)
        3
        >>> store.pull(if_newer_than=3) is None
        True
        >>> store.pull(if_newer_than=0)[0]
        3
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = -1
        self._state: dict[str, torch.Tensor] = {}

    @property
    def version(self) -> int:
        """Version of the latest weights (-1 before the first publish)."""
        return self._version

    def publish(self, state: Mapping[str, torch.Tensor], version: int | None = None) -> int:
        """Store a copy of ``state``; returns its version (``version`` if given and newer,
        else the previous version + 1). An older version than the stored one is ignored."""
        copy = {k: v.detach().clone() for k, v in state.items()}
        with self._lock:
            new = self._version + 1 if version is None else version
            if new <= self._version:
                return self._version
            self._version, self._state = new, copy
            return new

    def pull(self, if_newer_than: int = -1) -> tuple[int, dict[str, torch.Tensor]] | None:
        """(version, weights) if the stored version is newer than ``if_newer_than``, else
        None. The weights are the published copy: load them, do not modify them."""
        with self._lock:
            if self._version <= if_newer_than:
                return None
            return self._version, self._state
