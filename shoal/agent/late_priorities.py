"""New replay priorities from a learner on a GPU without waiting for it.

An update's TD errors are the sampled items' new priorities. Reading them back as soon as
the update is queued would make the host wait for the whole update, every update; instead
they are copied to pinned host memory without blocking, and handed to the replay one update
later, by when the copy is long done. The next batch is then sampled with priorities one
update old: the lag DQN-family learners already live with in Ape-X (where priorities come
back with the next request) and that the tests hold the serial oracle to.

On a CPU there is nothing to wait for, so the lag is 0 and priorities are exactly the
serial learner's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["LatePriorities"]


class LatePriorities:
    """Hands ``(key, td_errors)`` to ``apply`` ``lag`` updates after :meth:`push`.

    Args:
        apply: what takes the priorities (``replay.update_priorities(indices, td)``, say).
        lag: updates to wait (0: at once, reading the errors back, which waits for them).
    """

    def __init__(self, apply: Callable[[Any, np.ndarray], None], lag: int) -> None:
        self.apply = apply
        self.lag = lag
        self._queue: deque[tuple[Any, torch.Tensor, Any]] = deque()

    @classmethod
    def for_device(cls, apply: Callable[[Any, np.ndarray], None], device: Any) -> LatePriorities:
        """One update late on CUDA, at once elsewhere."""
        return cls(apply, 1 if torch.device(device).type == "cuda" else 0)

    def push(self, key: Any, td_errors: torch.Tensor) -> None:
        """An update's TD errors for the items ``key`` names; the oldest go to ``apply``
        once more than ``lag`` wait."""
        if self.lag == 0:
            self.apply(key, td_errors.detach().cpu().numpy())
            return
        td = td_errors.detach()
        if td.is_cuda:
            host = torch.empty(td.shape, dtype=td.dtype, pin_memory=True)
            host.copy_(td, non_blocking=True)
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(td.device))
        else:
            host, done = td.clone(), None
        self._queue.append((key, host, done))
        while len(self._queue) > self.lag:
            self._apply_oldest()

    def flush(self) -> None:
        """Hand over everything waiting (before a checkpoint, at the end)."""
        while self._queue:
            self._apply_oldest()

    def __len__(self) -> int:
        return len(self._queue)

    def _apply_oldest(self) -> None:
        key, host, done = self._queue.popleft()
        if done is not None:
            done.synchronize()
        self.apply(key, host.numpy())
