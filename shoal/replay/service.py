"""A prioritized replay run as a service that several actors feed and one learner draws from.

In Ape-X the replay lives apart from both sides (a Ray actor in shoal's ray runner): actors
send batches of transitions with their own initial priorities, the learner draws batches
and later sends back new priorities. By the time those arrive, a slot may have been
overwritten by newer experience; its new item must keep its own priority, not inherit the
old item's TD error. The service counts the writes of every slot and returns the count with
each draw, and an update whose count no longer matches is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from shoal.replay.buffer import ReplayBuffer

__all__ = ["ReplayService"]


class ReplayService:
    """A :class:`~shoal.replay.buffer.ReplayBuffer` behind batch-sized calls, with stale
    priority updates dropped.

    Args:
        buffer: the buffer (usually prioritized) it serves.

    Example:
        >>> import numpy as np
        >>> service = ReplayService(ReplayBuffer(2, (1,), prioritized=True, seed=0))
        >>> items = {"obs": np.zeros((2, 1)), "action": np.zeros(2, np.int64),
        ...          "reward": np.zeros(2), "next_obs": np.zeros((2, 1)),
        ...          "discount": np.ones(2)}
        >>> service.add_batch(items, priorities=[1.0, 2.0])
        2
        >>> batch = service.sample(4)
        >>> service.add_batch({k: v[:1] for k, v in items.items()})  # overwrites slot 0
        1
        >>> drawn, generations = batch["indices"], batch["generations"]
        >>> applied = service.update_priorities(drawn, generations, np.ones(4))
        >>> applied + service.stale_updates, service.stale_updates == int((drawn == 0).sum())
        (4, True)
    """

    def __init__(self, buffer: ReplayBuffer) -> None:
        self.buffer = buffer
        self._writes = np.zeros(buffer.capacity, np.int64)
        self.stale_updates = 0
        """Priority updates dropped because their slot was rewritten after the draw."""

    def __len__(self) -> int:
        """Items held."""
        return len(self.buffer)

    def add_batch(
        self, batch: Mapping[str, np.ndarray], priorities: np.ndarray | None = None
    ) -> int:
        """Store items given as one array per field, with their initial ``|td_error|``
        (``None``: the largest priority so far); returns how many were stored."""
        indices = self.buffer.add_batch(batch, priorities)
        np.add.at(self._writes, indices, 1)  # a batch larger than capacity repeats slots
        return len(indices)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """A batch as :meth:`ReplayBuffer.sample` draws it, plus ``generations``: how
        often each drawn slot had been written (to pass back with the new priorities)."""
        batch = self.buffer.sample(batch_size)
        batch["generations"] = self._writes[batch["indices"]]
        return batch

    def update_priorities(
        self, indices: np.ndarray, generations: np.ndarray, td_errors: np.ndarray
    ) -> int:
        """New priorities for the drawn slots not rewritten since; returns how many were
        applied."""
        indices = np.asarray(indices, np.int64)
        fresh = self._writes[indices] == np.asarray(generations)
        self.buffer.update_priorities(indices[fresh], np.asarray(td_errors)[fresh])
        self.stale_updates += int((~fresh).sum())
        return int(fresh.sum())

    def update_and_sample(
        self,
        indices: np.ndarray,
        generations: np.ndarray,
        td_errors: np.ndarray,
        batch_size: int,
    ) -> dict[str, np.ndarray]:
        """:meth:`update_priorities` for the last batch, then :meth:`sample` the next: a
        learner's one call per update (a remote call costs as much as a small update)."""
        self.update_priorities(indices, generations, td_errors)
        return self.sample(batch_size)

    def state_dict(self) -> dict[str, Any]:
        """The buffer's state and the write counts."""
        return {
            "buffer": self.buffer.state_dict(),
            "writes": self._writes.copy(),
            "stale_updates": self.stale_updates,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        writes = np.asarray(state["writes"], np.int64)
        if writes.shape != self._writes.shape:
            raise ValueError(
                f"state writes has shape {writes.shape}, this service's capacity needs "
                f"{self._writes.shape}"
            )
        self.buffer.load_state_dict(state["buffer"])
        self._writes[:] = writes
        self.stale_updates = int(state["stale_updates"])
