"""The one interface every replay in shoal offers, whatever its storage, sampler or sharing.

Learners and runners talk to replay only through these six methods (``add`` and
``add_many`` are :class:`~shoal.replay.buffer.ReplayBuffer`'s conveniences for one item and
for a list of them; no runner calls them), so the plain
:class:`~shoal.replay.buffer.ReplayBuffer`, the thread-safe
:class:`~shoal.sync.locked_replay.LockedReplay` and a future Ray proxy are interchangeable
(TorchRL's "the Ray buffer is a thin proxy over the ordinary buffer").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Replay"]


@runtime_checkable
class Replay(Protocol):
    """What a replay offers: add a batch of items (optionally with priorities), sample,
    reprioritize, save.

    ``isinstance(obj, Replay)`` checks only that the methods exist (that is all a
    ``runtime_checkable`` protocol can check); the semantics below are the contract.

    Example:
        >>> from shoal.replay import ReplayBuffer
        >>> isinstance(ReplayBuffer(8, (2,)), Replay)
        True
        >>> isinstance([], Replay)
        False
    """

    def __len__(self) -> int:
        """Number of items held."""
        ...

    def add_batch(
        self,
        batch: Mapping[str, np.ndarray],
        /,
        priorities: Sequence[float] | np.ndarray | None = None,
    ) -> Any:
        """Store items given as one array per field (leading dimension: the items), in
        order, with optional initial ``|td_error|`` values."""
        ...

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw a batch: the stored fields plus ``weights`` and ``indices``."""
        ...

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of sampled ``indices`` from their TD errors (no-op if uniform)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Return a snapshot of plain data that resumes sampling exactly."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot."""
        ...
