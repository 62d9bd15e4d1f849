"""K agents' replay buffers side by side: separate buffers, batches drawn in one go.

Independent agents never share or pool experience: each has its own buffer with its own
cursor, sampler, priorities and generator. What K buffers of one layout can share is where
their items sit in memory. :class:`StackedReplay` keeps agent k's items in row k of one
``(K, capacity, ...)`` array per field, so drawing every agent's batch is one fancy index
per field, already in the ``(K, B, ...)`` layout a stacked learner trains on, instead of K
samples and a stack (measured at K = 128: about 150 us per agent in Python before).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from shoal.replay.buffer import ReplayBuffer

__all__ = ["StackedReplay"]


class StackedReplay:
    """K :class:`~shoal.replay.buffer.ReplayBuffer` s of one layout whose items live in
    one block, sampled together.

    The buffers stay ordinary, separate objects (add to them, checkpoint them, sample one
    alone); their storages are moved into the block when the group is made. Drawing from
    the group draws from each buffer exactly what its own :meth:`ReplayBuffer.sample`
    would have drawn (its sampler, its generator), stacked.

    Args:
        buffers: the K buffers; same capacity and fields.

    Example:
        >>> import numpy as np
        >>> buffers = [ReplayBuffer(10, (2,), seed=k) for k in range(3)]
        >>> group = StackedReplay(buffers)
        >>> for k, b in enumerate(buffers):
        ...     b.add({"obs": [k, k], "action": k, "reward": 0.0, "next_obs": [k, k],
        ...            "discount": 0.9})
        0
        0
        0
        >>> batch = group.sample(4)
        >>> batch["obs"].shape, batch["action"][:, 0].tolist()
        ((3, 4, 2), [0, 1, 2])
    """

    def __init__(self, buffers: Sequence[ReplayBuffer]) -> None:
        if not buffers:
            raise ValueError("StackedReplay needs at least one buffer, got none")
        first = buffers[0]
        for k, b in enumerate(buffers):
            if b.capacity != first.capacity or b.specs != first.specs:
                raise ValueError(
                    f"buffer {k} holds {b.capacity} items of {b.specs}; buffer 0 holds "
                    f"{first.capacity} of {first.specs}: a stacked replay needs one layout"
                )
        self.buffers = list(buffers)
        k = len(self.buffers)
        self.block = {
            name: np.zeros((k, first.capacity, *shape), dtype)
            for name, (shape, dtype) in first.specs.items()
        }
        for i, b in enumerate(self.buffers):
            b.storage.rehome({name: a[i] for name, a in self.block.items()})
        self._rows = np.arange(k)[:, None]

    def __len__(self) -> int:
        """The number of buffers (K)."""
        return len(self.buffers)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Every buffer's batch, stacked: each field ``(K, batch_size, ...)``, plus
        ``weights`` and ``indices`` ``(K, batch_size)``. Raises ``ValueError`` naming an
        empty buffer."""
        drawn = []
        for k, b in enumerate(self.buffers):
            if len(b) == 0:
                raise ValueError(f"cannot sample: buffer {k} of {len(self)} is empty")
            drawn.append(b.sample_indices(batch_size))
        indices = np.stack([i for i, _ in drawn])
        batch = {name: a[self._rows, indices] for name, a in self.block.items()}
        batch["weights"] = np.stack([w for _, w in drawn])
        batch["indices"] = indices
        return batch

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Agent k's row of ``indices`` / ``td_errors`` ``(K, B)`` goes to buffer k."""
        for b, i, td in zip(self.buffers, indices, td_errors):
            b.update_priorities(i, td)

    def copy(self) -> StackedReplay:
        """An independent copy: copied buffers (cursors, priorities, generators) in a
        block of their own. Only the items held are copied, not the empty slots of a
        large, part-filled block."""
        new = StackedReplay.__new__(StackedReplay)
        new.block = {name: np.zeros(a.shape, a.dtype) for name, a in self.block.items()}
        new.buffers, new._rows = [], self._rows
        for i, b in enumerate(self.buffers):
            rows = {name: a[i] for name, a in new.block.items()}
            # The deep copy takes the new block's rows in place of the storage's arrays.
            old = b.storage.arrays
            clone = copy.deepcopy(b, {id(old[name]): row for name, row in rows.items()})
            for name, row in rows.items():
                row[: len(b)] = old[name][: len(b)]
            new.buffers.append(clone)
        return new
