"""Ring storage that keeps each frame of stacked observations once.

An Atari transition's ``obs`` and ``next_obs`` are stacks of the last 4 screens, and
consecutive transitions of an episode share all but one of them: stored whole, 1M
transitions hold 8M screens (56 GB at 84 x 84); stored once, about 1M (7 GB). The
storage splits every incoming stack into frames and keeps one copy of each distinct frame
in a frame pool, found by a 128-bit BLAKE2 digest of its bytes; an item keeps the pool
slots of its frames, and sampling gathers them back into stacks. The stacks that come out
are exactly the stacks that went in (padding at episode starts, never a stack across
episodes: whatever the env's frame stack made), so the n-step writer, the samplers and
the learner are unchanged, and nothing upstream needs to say which env or episode a
transition came from (Dopamine and SB3 rely on item order instead, which the runners'
interleaved envs and whole-episode batches would break). A frame lives while some item
refers to it: overwriting an item releases its frames, and freed slots are reused first,
so the pool's touched memory stays near the distinct frames held.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.replay.storage import RingStorage, check_keys

__all__ = ["FrameStorage"]

_CHUNK = 4096
"""Frames per compressed block of a checkpoint."""


class FramePool:
    """Distinct frames with reference counts, found by digest; slots grow on demand."""

    def __init__(self, slots: int, frame_size: int) -> None:
        self.frames = np.zeros((slots, frame_size), np.uint8)  # pages touched only when used
        self.refs = np.zeros(slots, np.int64)
        self.digests: list[bytes | None] = [None] * slots
        self.index: dict[bytes, int] = {}
        # A stack of free slots, lowest on top, so the pool fills (and touches) from slot 0.
        self._free = np.arange(slots - 1, -1, -1, dtype=np.int64)
        self._nfree = slots

    def __len__(self) -> int:
        """Distinct frames held."""
        return len(self.index)

    def acquire(self, frames: np.ndarray) -> np.ndarray:
        """The slots of ``frames`` (one per row), storing the ones not held yet; each row
        gains a reference."""
        slots = np.empty(len(frames), np.int64)
        for i, row in enumerate(frames):
            digest = hashlib.blake2b(row, digest_size=16).digest()
            slot = self.index.get(digest)
            if slot is None:
                slot = self._pop()
                self.frames[slot] = row
                self.index[digest] = slot
                self.digests[slot] = digest
            slots[i] = slot
        np.add.at(self.refs, slots, 1)
        return slots

    def release(self, slots: np.ndarray) -> None:
        """Drop one reference per entry of ``slots``; frames left unreferenced are freed."""
        np.subtract.at(self.refs, slots, 1)
        for slot in np.unique(slots[self.refs[slots] == 0]):
            del self.index[self.digests[slot]]
            self.digests[slot] = None
            self._free[self._nfree] = slot
            self._nfree += 1

    def _pop(self) -> int:
        if self._nfree == 0:
            self._grow()
        self._nfree -= 1
        return int(self._free[self._nfree])

    def _grow(self) -> None:
        """A quarter more slots (rare: more distinct frames than items plus headroom)."""
        old = len(self.refs)
        new = old + max(old // 4, 64)
        frames = np.zeros((new, self.frames.shape[1]), np.uint8)
        frames[:old] = self.frames
        self.frames = frames
        self.refs = np.concatenate([self.refs, np.zeros(new - old, np.int64)])
        self.digests.extend([None] * (new - old))
        self._free = np.concatenate([np.arange(new - 1, old - 1, -1), self._free])
        self._nfree = new - old


class FrameStorage:
    """A :class:`~shoal.replay.storage.RingStorage` whose stacked-frame fields keep each
    distinct frame once (see the module docstring); same methods, same items back.

    Args:
        capacity: maximum number of items held.
        specs: field name -> ``(shape, dtype)``; each of ``stacked`` must be flat uint8 of
            ``stack`` frames (``(stack * frame_size,)``).
        stack: frames per stacked observation.
        stacked: the fields that hold frame stacks.
    """

    def __init__(
        self,
        capacity: int,
        specs: Mapping[str, tuple[tuple[int, ...], np.dtype | type]],
        stack: int,
        stacked: Sequence[str] = ("obs", "next_obs"),
    ) -> None:
        if stack < 2:
            raise ValueError(
                f"stack must be >= 2 frames (a FrameStorage of 1 saves nothing), got {stack}"
            )
        self._specs = {
            name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in specs.items()
        }
        for name in stacked:
            shape, dtype = self._specs[name]
            if dtype != np.uint8 or len(shape) != 1 or shape[0] % stack:
                raise ValueError(
                    f"field {name!r} must be flat uint8 of {stack} frames, got {shape} {dtype}"
                )
        self._stack = stack
        self._stacked = tuple(stacked)
        self._frame_size = self._specs[self._stacked[0]][0][0] // stack
        inner = {n: s for n, s in self._specs.items() if n not in self._stacked}
        inner.update({_ref(n): ((stack,), np.int64) for n in self._stacked})
        self._items = RingStorage(capacity, inner)
        # Distinct frames: about one per item plus an episode's last; a quarter more as
        # headroom for short episodes before the pool has to grow.
        self._pool = FramePool(capacity + capacity // 4 + 64, self._frame_size)

    @property
    def capacity(self) -> int:
        """Maximum number of items held."""
        return self._items.capacity

    @property
    def cursor(self) -> int:
        """Index the next add will write to."""
        return self._items.cursor

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the stored fields, as given to the constructor."""
        return tuple(self._specs)

    @property
    def specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Field name -> ``(shape, dtype)`` of one item, as given to the constructor."""
        return dict(self._specs)

    @property
    def frames_held(self) -> int:
        """Distinct frames in the pool."""
        return len(self._pool)

    @property
    def nbytes(self) -> int:
        """Bytes of the frames held plus the items' other fields and frame slots."""
        items = sum(a.nbytes for a in self._items.arrays.values())
        return len(self._pool) * self._frame_size + items

    def __len__(self) -> int:
        """Number of valid items (at most ``capacity``)."""
        return len(self._items)

    def add(self, transition: Mapping[str, Any]) -> int:
        """Write one item; the index it was written to."""
        batch = {name: np.asarray(value)[None] for name, value in transition.items()}
        return int(self.add_batch(batch)[0])

    def add_batch(self, transitions: Mapping[str, np.ndarray]) -> np.ndarray:
        """Write ``B`` items (one array per field, leading dimension ``B``); their indices,
        wrapping as :meth:`RingStorage.add_batch` does."""
        self._check(transitions)
        arrays = {name: np.asarray(value) for name, value in transitions.items()}
        batch = len(arrays[self._stacked[0]])
        keep = min(batch, self.capacity)  # only the last ``capacity`` items would survive
        # Items about to be overwritten give their frames back first.
        size, cursor = len(self._items), self.cursor
        targets = (cursor + np.arange(batch - keep, batch)) % self.capacity
        old = targets[targets < size]
        if old.size:
            refs = self._items.get(old)
            self._pool.release(np.concatenate([refs[_ref(n)].ravel() for n in self._stacked]))
        items = {n: a for n, a in arrays.items() if n not in self._stacked}
        for name in self._stacked:
            frames = np.ascontiguousarray(arrays[name][batch - keep :], np.uint8)
            slots = self._pool.acquire(frames.reshape(-1, self._frame_size))
            items[_ref(name)] = np.concatenate(
                [np.zeros((batch - keep, self._stack), np.int64), slots.reshape(keep, -1)]
            )
        return self._items.add_batch(items)

    def get(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of the items at ``indices``, stacks rebuilt from their frames."""
        items = self._items.get(indices)
        out: dict[str, np.ndarray] = {}
        for name in self._specs:
            if name in self._stacked:
                slots = items[_ref(name)]
                out[name] = self._pool.frames[slots.ravel()].reshape(len(slots), -1)
            else:
                out[name] = items[name]
        return out

    def state_dict(self) -> dict[str, Any]:
        """The items and the frames they use (compressed blocks), compacted to slots
        ``0..frames-1``: enough to restore every item exactly."""
        state = self._items.state_dict()
        live = np.flatnonzero(self._pool.refs > 0)
        renumber = np.zeros(len(self._pool.refs), np.int64)
        renumber[live] = np.arange(len(live))
        for name in self._stacked:
            state["fields"][_ref(name)] = renumber[state["fields"][_ref(name)]]
        frames = self._pool.frames
        state["frames"] = [
            zlib.compress(frames[live[i : i + _CHUNK]].tobytes(), 1)
            for i in range(0, len(live), _CHUNK)
        ]
        state["frame_count"] = len(live)
        state["stack"] = self._stack
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot; ``ValueError`` naming what does not fit,
        this storage unchanged then."""
        if int(state.get("stack", 0)) != self._stack:
            raise ValueError(
                f"state stack {state.get('stack')} does not match this storage's {self._stack}"
            )
        count = int(state["frame_count"])
        frames = np.frombuffer(b"".join(zlib.decompress(b) for b in state["frames"]), np.uint8)
        if frames.size != count * self._frame_size:
            raise ValueError(
                f"state frames hold {frames.size} bytes, expected {count} x {self._frame_size}"
            )
        items = RingStorage(self.capacity, self._items.specs)
        items.load_state_dict(
            {k: v for k, v in state.items() if k in ("capacity", "cursor", "size", "fields")}
        )
        pool = FramePool(max(len(self._pool.refs), count), self._frame_size)
        slots = pool.acquire(frames.reshape(count, self._frame_size))
        pool.refs[:] = 0  # the items' references, counted below, are the real ones
        held = items.get(np.arange(len(items)))
        for name in self._stacked:
            held[_ref(name)] = slots[held[_ref(name)]]
            np.add.at(pool.refs, held[_ref(name)].ravel(), 1)
        items.load_state_dict(
            {
                "capacity": self.capacity,
                "cursor": items.cursor,
                "size": len(items),
                "fields": held,
            }
        )
        self._items, self._pool = items, pool

    def _check(self, transitions: Mapping[str, Any]) -> None:
        check_keys(self._specs, transitions)
        # Every field is checked before the pool changes: a rejected batch changes nothing.
        sizes = set()
        for name, (want, _) in self._specs.items():
            shape = np.shape(transitions[name])
            if len(shape) != 1 + len(want) or shape[1:] != want:
                raise ValueError(f"field {name!r} must have shape (B, *{want}), got {shape}")
            sizes.add(shape[0])
        if len(sizes) != 1:
            raise ValueError(
                f"all fields need the same leading batch dimension, got {sorted(sizes)}"
            )


def _ref(name: str) -> str:
    """The item field holding the frame slots of stacked field ``name``."""
    return f"{name}_frames"
