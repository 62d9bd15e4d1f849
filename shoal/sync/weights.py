"""Versioned weight stores: a learner publishes, actors pull when something newer exists.

One interface, several transports. :class:`LocalWeightStore` serves threads of one process;
it hands out copies taken at publish time, so an actor never sees weights half-way through
an optimizer step (``Queue.put(model.state_dict())`` sends live tensors, which can).
:class:`SharedWeightStore` serves processes: one shared-memory buffer behind a seqlock.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import torch

from shoal.sync.segments import attach_segment, release_segment

__all__ = ["LocalWeightStore", "SharedWeightStore", "SharedWeightsHandle"]


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


@dataclass(frozen=True)
class SharedWeightsHandle:
    """What a process needs to attach to a :class:`SharedWeightStore`."""

    name: str
    spec: tuple[tuple[str, tuple[int, ...]], ...]
    extras: int


class SharedWeightStore:
    """Weights in shared memory for many processes: one writer, any number of readers.

    A seqlock keeps readers from ever using torn weights: the writer makes the sequence
    number odd, writes, then makes it even again; a reader copies the weights between two
    reads of the sequence number and retries if it was odd or changed. Readers never block
    the writer. The version (publishes so far) is half the sequence number, so it only goes
    up. Like any seqlock it favours the writer: a writer publishing back to back with no gap
    can starve readers (``pull`` then times out); the learner publishes once per batch.
    ``extras`` are a few float64 values published with the weights (e.g. epsilon).

    Example:
        >>> store = SharedWeightStore({"w": torch.zeros(3)}, extras=1)
        >>> store.publish({"w": torch.ones(3)}, extras=[0.5])
        1
        >>> version, weights, extras = store.pull(if_newer_than=0)
        >>> version, weights["w"].tolist(), extras.tolist()
        (1, [1.0, 1.0, 1.0], [0.5])
        >>> store.close()
    """

    def __init__(
        self,
        template: Mapping[str, torch.Tensor] | None = None,
        *,
        extras: int = 0,
        _handle: SharedWeightsHandle | None = None,
    ) -> None:
        if _handle is None:
            if template is None:
                raise ValueError("SharedWeightStore needs a template state_dict")
            spec = tuple((k, tuple(v.shape)) for k, v in template.items())
            size = sum(int(np.prod(s)) for _, s in spec)
            name = f"shoal_w_{os.getpid()}_{secrets.token_hex(4)}"
            shm = shared_memory.SharedMemory(
                name=name, create=True, size=8 * (1 + extras) + 4 * max(size, 1)
            )
            _handle = SharedWeightsHandle(name, spec, extras)
            self._owner = True
        else:
            shm = attach_segment(_handle.name)
            self._owner = False
        self._shm, self._h = shm, _handle
        self._seq = np.ndarray((1,), np.int64, shm.buf, 0)
        self._extras = np.ndarray((_handle.extras,), np.float64, shm.buf, 8)
        size = sum(int(np.prod(s)) for _, s in _handle.spec)
        self._flat = np.ndarray((size,), np.float32, shm.buf, 8 * (1 + _handle.extras))
        self._finalizer = weakref.finalize(self, release_segment, shm, self._owner)

    @property
    def handle(self) -> SharedWeightsHandle:
        """Pass to a spawned process; attach there with :meth:`attach`."""
        return self._h

    @classmethod
    def attach(cls, handle: SharedWeightsHandle) -> SharedWeightStore:
        """Map a store created by another process."""
        return cls(_handle=handle)

    @property
    def version(self) -> int:
        """Publishes so far (0: nothing published yet)."""
        return int(self._seq[0]) // 2

    def publish(self, state: Mapping[str, torch.Tensor], extras: Sequence[float] = ()) -> int:
        """Write ``state`` (same keys and shapes as the template) and ``extras``; returns
        the new version. One writer only: the learner."""
        parts = [state[k].detach().to("cpu", torch.float32).reshape(-1) for k, _ in self._h.spec]
        self._seq[0] += 1  # odd: writing
        i = 0
        for part in parts:  # straight into shared memory: one copy per tensor
            n = part.numel()
            self._flat[i : i + n] = part.numpy()
            i += n
        if len(extras):
            self._extras[:] = extras
        self._seq[0] += 1  # even: consistent again
        return self.version

    def pull(
        self, if_newer_than: int = -1, timeout: float = 10.0
    ) -> tuple[int, dict[str, torch.Tensor], np.ndarray] | None:
        """(version, weights, extras) if newer than ``if_newer_than``, else None. Copies,
        retrying while a publish is under way; never returns a torn copy."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s1 = int(self._seq[0])
            if s1 % 2:
                time.sleep(0)  # a publish is under way: let the writer finish
                continue
            if s1 // 2 <= if_newer_than:
                return None
            flat = self._flat.copy()
            extras = self._extras.copy()
            if int(self._seq[0]) == s1:
                out, i = {}, 0
                for k, shape in self._h.spec:
                    n = int(np.prod(shape))
                    out[k] = torch.from_numpy(flat[i : i + n].reshape(shape))
                    i += n
                return s1 // 2, out, extras
        raise TimeoutError(f"SharedWeightStore {self._h.name}: no consistent read in {timeout} s")

    def close(self) -> None:
        """Detach; the owner also unlinks the segment. Safe to call twice."""
        self._seq = self._extras = self._flat = None  # type: ignore[assignment]
        self._finalizer()

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedWeightStore.attach, (self._h,))
