"""Fixed-size ring storage of transitions, one preallocated numpy array per field.

Storage only knows where items live; which items are drawn, and how often, is the job of a
sampler (see :mod:`shoal.replay.samplers`). Keeping the two apart lets uniform and
prioritized replay share one storage, as in TorchRL's storage × sampler split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["RingStorage", "check_keys"]


def check_keys(fields: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
    """A ``KeyError`` naming what is missing and unknown unless ``keys`` names exactly the
    ``fields`` (a typo in a field name would otherwise leave stale zeros there forever)."""
    missing = [k for k in fields if k not in keys]
    unknown = [k for k in keys if k not in fields]
    if missing or unknown:
        raise KeyError(
            f"transition keys must be exactly {sorted(fields)}; "
            f"missing {sorted(missing)}, unknown {sorted(map(str, unknown))}"
        )


class RingStorage:
    """A ring buffer of ``capacity`` items with named, fixed-shape numpy fields.

    Every field is allocated up front as an array of shape ``(capacity, *shape)`` so that
    adding never allocates and sampling is one fancy-index per field. When full, new items
    overwrite the oldest. Valid items always occupy indices ``[0, len(storage))``, because
    writing starts at index 0 and only wraps once the ring is full.

    Args:
        capacity: maximum number of items held.
        specs: field name -> ``(shape, dtype)`` of one item of that field.

    Example:
        >>> import numpy as np
        >>> storage = RingStorage(2, {"obs": ((3,), np.float32), "action": ((), np.int64)})
        >>> storage.add({"obs": np.ones(3), "action": 1})
        0
        >>> storage.add_batch({"obs": np.zeros((2, 3)), "action": np.array([2, 3])})
        array([1, 0])
        >>> len(storage), storage.cursor
        (2, 1)
        >>> storage.get(np.array([0, 1]))["action"]
        array([3, 2])
    """

    def __init__(
        self,
        capacity: int,
        specs: Mapping[str, tuple[tuple[int, ...], np.dtype | type]],
    ) -> None:
        if not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool):
            raise TypeError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity <= 0:
            raise ValueError(f"capacity must be a positive integer (>= 1), got {capacity}")
        if not specs:
            raise ValueError("specs must name at least one field, got an empty mapping")
        self._capacity = int(capacity)
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._data: dict[str, np.ndarray] = {}
        for name, (shape, dtype) in specs.items():
            shape = tuple(int(d) for d in shape)
            self._shapes[name] = shape
            self._data[name] = np.zeros((self._capacity, *shape), dtype=np.dtype(dtype))
        self._cursor = 0
        self._size = 0

    @property
    def capacity(self) -> int:
        """Maximum number of items held."""
        return self._capacity

    @property
    def cursor(self) -> int:
        """Index the next :meth:`add` will write to."""
        return self._cursor

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the stored fields, in the order given to the constructor."""
        return tuple(self._data)

    @property
    def specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Field name -> ``(shape, dtype)`` of one item, as given to the constructor."""
        return {name: (self._shapes[name], a.dtype) for name, a in self._data.items()}

    def __len__(self) -> int:
        """Number of valid items (at most ``capacity``)."""
        return self._size

    def _check_keys(self, keys: Mapping[str, Any]) -> None:
        check_keys(self._data, keys)

    def add(self, transition: Mapping[str, Any]) -> int:
        """Write one item at the cursor and return the index it was written to.

        Each value must have exactly its field's shape; values are cast to the field's dtype.
        """
        self._check_keys(transition)
        index = self._cursor
        for name, value in transition.items():
            value_shape = np.shape(value)
            if value_shape != self._shapes[name]:
                raise ValueError(
                    f"field {name!r} must have shape {self._shapes[name]}, got {value_shape}"
                )
        # Validate every field before writing any, so a bad item never lands half-written.
        for name, value in transition.items():
            self._data[name][index] = value
        self._cursor = (index + 1) % self._capacity
        self._size = min(self._size + 1, self._capacity)
        return index

    def add_batch(self, transitions: Mapping[str, np.ndarray]) -> np.ndarray:
        """Write ``B`` items (arrays with leading dimension ``B``); return their indices.

        Indices wrap around the ring. If ``B > capacity`` only the last ``capacity`` items
        survive, exactly as if they had been added one by one; the returned array still has
        one (possibly repeated) index per item, in order.
        """
        self._check_keys(transitions)
        arrays = {name: np.asarray(value) for name, value in transitions.items()}
        batch_sizes = {name: (a.shape[0] if a.ndim else None) for name, a in arrays.items()}
        if len(set(batch_sizes.values())) != 1 or None in batch_sizes.values():
            raise ValueError(f"all fields need the same leading batch dimension, got {batch_sizes}")
        batch = next(iter(batch_sizes.values()))
        for name, a in arrays.items():
            if a.shape[1:] != self._shapes[name]:
                raise ValueError(
                    f"field {name!r} must have shape (B, *{self._shapes[name]}), got {a.shape}"
                )
        indices = (self._cursor + np.arange(batch, dtype=np.int64)) % self._capacity
        if self._cursor + batch <= self._capacity:  # no wrap: slices, not fancy indices
            span = slice(self._cursor, self._cursor + batch)
            for name, a in arrays.items():
                self._data[name][span] = a
        else:
            # Writing only the surviving tail keeps the target indices unique, so the result
            # does not depend on how numpy orders repeated fancy-index writes.
            keep = min(batch, self._capacity)
            for name, a in arrays.items():
                self._data[name][indices[batch - keep :]] = a[batch - keep :]
        self._cursor = int((self._cursor + batch) % self._capacity)
        self._size = min(self._size + batch, self._capacity)
        return indices

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The field arrays themselves, ``(capacity, *shape)`` each (not copies)."""
        return dict(self._data)

    def rehome(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Keep the items in ``arrays`` from now on, one ``(capacity, *shape)`` array of the
        field's dtype per field (typically views into a block that holds several storages
        side by side); the items held so far are copied over (the slots past them are
        not: nothing reads them before an add writes them). Raises ``ValueError`` naming
        the field that does not fit, and then changes nothing."""
        self._check_keys(arrays)
        for name, a in arrays.items():
            want = (self._capacity, *self._shapes[name])
            if a.shape != want or a.dtype != self._data[name].dtype:
                raise ValueError(
                    f"field {name!r} needs an array of shape {want} and dtype "
                    f"{self._data[name].dtype}, got {a.shape} {a.dtype}"
                )
        for name, a in arrays.items():
            a[: self._size] = self._data[name][: self._size]  # slots past the items are unused
            self._data[name] = a

    def get(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Return copies of the items at ``indices``, one array per field.

        Raises ``IndexError`` for an index outside ``[0, len(self))``: slots past the valid
        items hold zeros, and reading them is always a bug.
        """
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self._size):
            raise IndexError(
                f"indices must lie in [0, {self._size}) (the valid items), "
                f"got values in [{indices.min()}, {indices.max()}]"
            )
        return {name: a[indices] for name, a in self._data.items()}

    def state_dict(self) -> dict[str, Any]:
        """Return a snapshot of the valid items plus the cursor, as plain numpy arrays and ints.

        Only ``[0, len(self))`` of each field is saved, so a barely-filled large buffer makes a
        small checkpoint. The arrays are copies; later writes do not change the snapshot.
        """
        return {
            "capacity": self._capacity,
            "cursor": self._cursor,
            "size": self._size,
            "fields": {name: a[: self._size].copy() for name, a in self._data.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`state_dict`.

        Raises ``ValueError`` naming what mismatched (capacity, field names, shapes, dtypes,
        cursor or size) and leaves this storage unchanged in that case.
        """
        capacity, cursor, size = int(state["capacity"]), int(state["cursor"]), int(state["size"])
        if capacity != self._capacity:
            raise ValueError(
                f"state capacity {capacity} does not match this storage's capacity {self._capacity}"
            )
        if not 0 <= size <= capacity:
            raise ValueError(f"state size must lie in [0, {capacity}], got {size}")
        if not 0 <= cursor < capacity:
            raise ValueError(f"state cursor must lie in [0, {capacity}), got {cursor}")
        if size < capacity and cursor != size:
            # Before the ring first fills, the cursor is always the item count.
            raise ValueError(f"state cursor {cursor} must equal size {size} while not full")
        fields = state["fields"]
        if set(fields) != set(self._data):
            raise ValueError(
                f"state fields {sorted(fields)} do not match this storage's fields "
                f"{sorted(self._data)}"
            )
        for name, a in fields.items():
            a = np.asarray(a)
            want_shape = (size, *self._shapes[name])
            if a.shape != want_shape:
                raise ValueError(f"state field {name!r} has shape {a.shape}, expected {want_shape}")
            if a.dtype != self._data[name].dtype:
                raise ValueError(
                    f"state field {name!r} has dtype {a.dtype}, expected {self._data[name].dtype}"
                )
        for name, a in fields.items():
            self._data[name][:size] = a
            # Zero the rest so the restored storage is identical to the saved one, not just
            # equal on its valid part.
            self._data[name][size:] = 0
        self._cursor = cursor
        self._size = size
