"""Versioned weight stores: a learner publishes, actors pull when something newer exists.

One protocol, several transports: ``publish(state, meta) -> version`` and
``pull(if_newer_than) -> Versioned | None``, where ``meta`` holds named floats published
with the weights (epsilon, opponent id, ...) and versions only go up. A new transport (a
Ray object-store one, say) is one more class with these two methods.
:class:`LocalWeightStore` serves threads of one process; it hands out copies taken at
publish time, so an actor never sees weights half-way through an optimizer step
(``Queue.put(model.state_dict())`` sends live tensors, which can).
:class:`SharedWeightStore` serves processes: one shared-memory buffer behind a seqlock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from shoal.sync.segments import Segment

__all__ = [
    "Meta",
    "Weights",
    "LocalWeightStore",
    "SharedWeightStore",
    "SharedWeightsHandle",
    "Versioned",
    "WeightStore",
]

Weights = Mapping[str, torch.Tensor]
"""Weights by ``state_dict`` name: what a store publishes."""
Meta = Mapping[str, float]
"""Named values published with the weights (``epsilon``, ``opponent``)."""


@dataclass(frozen=True)
class Versioned:
    """Weights as a store hands them out: load or read them, do not modify them."""

    version: int
    """Only goes up: a reader keeps it and asks for anything newer."""
    state: Weights
    """The weights by ``state_dict`` name."""
    meta: Meta = field(default_factory=dict)
    """Named values published with the weights (e.g. ``epsilon``, ``opponent``)."""


@runtime_checkable
class WeightStore(Protocol):
    """What every weight transport offers (in-process, shared memory, Ray object store)."""

    def publish(self, state: Weights, meta: Meta = ...) -> int:
        """Store a copy of ``state`` with ``meta``; returns the new version."""
        ...

    def pull(self, if_newer_than: int = -1) -> Versioned | None:
        """The latest weights if newer than ``if_newer_than``, else None."""
        ...


class LocalWeightStore:
    """Weights shared between threads of one process, with a version that only goes up.

    Example:
        >>> store = LocalWeightStore()
        >>> store.publish({"w": torch.zeros(2)}, {"epsilon": 0.1}, version=3)
        3
        >>> store.pull(if_newer_than=3) is None
        True
        >>> got = store.pull(if_newer_than=0)
        >>> got.version, got.meta["epsilon"]
        (3, 0.1)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: Versioned | None = None

    @property
    def version(self) -> int:
        """Version of the latest weights (-1 before the first publish)."""
        latest = self._latest
        return -1 if latest is None else latest.version

    def publish(
        self, state: Weights, meta: Meta | None = None, *, version: int | None = None
    ) -> int:
        """Store a copy of ``state``; returns its version (``version`` if given and newer,
        else the previous version + 1). An older version than the stored one is ignored."""
        copy = {k: v.detach().clone() for k, v in state.items()}
        with self._lock:
            new = self.version + 1 if version is None else version
            if new <= self.version:
                return self.version
            self._latest = Versioned(new, copy, dict(meta or {}))
            return new

    def pull(self, if_newer_than: int = -1) -> Versioned | None:
        """The published copy if its version is newer than ``if_newer_than``, else None."""
        latest = self._latest  # one reference read: publish swaps whole Versioned objects
        if latest is None or latest.version <= if_newer_than:
            return None
        return latest


@dataclass(frozen=True)
class SharedWeightsHandle:
    """What a process needs to attach to a :class:`SharedWeightStore`."""

    name: str
    spec: tuple[tuple[str, tuple[int, ...]], ...]
    meta_keys: tuple[str, ...]


class SharedWeightStore:
    """Weights in shared memory for many processes: one writer, any number of readers.

    A seqlock keeps readers from ever using torn weights: the writer makes the sequence
    number odd, writes, then makes it even again; a reader copies the weights between two
    reads of the sequence number and retries if it was odd or changed. Readers never block
    the writer. The version (publishes so far) is half the sequence number, so it only goes
    up. Like any seqlock it favours the writer: a writer publishing back to back with no gap
    can starve readers (``pull`` then times out); the learner publishes once per batch.
    ``meta_keys`` name a few float64 values published with the weights (e.g. epsilon);
    a publish that leaves one out keeps its previous value.

    Example:
        >>> store = SharedWeightStore({"w": torch.zeros(3)}, meta_keys=("epsilon",))
        >>> store.publish({"w": torch.ones(3)}, {"epsilon": 0.5})
        1
        >>> got = store.pull(if_newer_than=0)
        >>> got.version, got.state["w"].tolist(), got.meta
        (1, [1.0, 1.0, 1.0], {'epsilon': 0.5})
        >>> store.close()
    """

    def __init__(
        self,
        template: Mapping[str, torch.Tensor] | None = None,
        *,
        meta_keys: Sequence[str] = (),
        _handle: SharedWeightsHandle | None = None,
    ) -> None:
        if _handle is None:
            if template is None:
                raise ValueError("SharedWeightStore needs a template state_dict")
            spec = tuple((k, tuple(v.shape)) for k, v in template.items())
            size = sum(int(np.prod(s)) for _, s in spec)
            segment = Segment.create("w", 8 * (1 + len(meta_keys)) + 4 * max(size, 1))
            _handle = SharedWeightsHandle(segment.name, spec, tuple(meta_keys))
        else:
            segment = Segment.attach(_handle.name)
        self._segment, self._h = segment, _handle
        n_meta = len(_handle.meta_keys)
        self._seq = segment.array((1,), np.int64)
        self._meta = segment.array((n_meta,), np.float64, 8)
        size = sum(int(np.prod(s)) for _, s in _handle.spec)
        self._flat = segment.array((size,), np.float32, 8 * (1 + n_meta))

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

    def publish(self, state: Weights, meta: Meta | None = None) -> int:
        """Write ``state`` (same keys and shapes as the template) and ``meta`` (keys from
        ``meta_keys``); returns the new version. One writer only: the learner."""
        meta = dict(meta or {})
        unknown = set(meta) - set(self._h.meta_keys)
        if unknown:
            raise KeyError(
                f"SharedWeightStore.publish: unknown meta keys {sorted(unknown)}; "
                f"allowed: {list(self._h.meta_keys)}"
            )
        parts = [state[k].detach().to("cpu", torch.float32).reshape(-1) for k, _ in self._h.spec]
        self._seq[0] += 1  # odd: writing
        i = 0
        for part in parts:  # straight into shared memory: one copy per tensor
            n = part.numel()
            self._flat[i : i + n] = part.numpy()
            i += n
        for i, key in enumerate(self._h.meta_keys):
            if key in meta:
                self._meta[i] = meta[key]
        self._seq[0] += 1  # even: consistent again
        return self.version

    def pull(self, if_newer_than: int = -1, timeout: float = 10.0) -> Versioned | None:
        """The weights and meta if newer than ``if_newer_than``, else None. Copies,
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
            meta = self._meta.copy()
            if int(self._seq[0]) == s1:
                out, i = {}, 0
                for k, shape in self._h.spec:
                    n = int(np.prod(shape))
                    out[k] = torch.from_numpy(flat[i : i + n].reshape(shape))
                    i += n
                return Versioned(s1 // 2, out, dict(zip(self._h.meta_keys, meta.tolist())))
        raise TimeoutError(f"SharedWeightStore {self._h.name}: no consistent read in {timeout} s")

    def close(self) -> None:
        """Detach; the owner also unlinks the segment. Safe to call twice."""
        self._seq = self._meta = self._flat = None  # type: ignore[assignment]
        self._segment.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedWeightStore.attach, (self._h,))
