"""A Q-table with visit counts in shared memory, for many worker processes at once.

Why not ``multiprocessing.Manager().dict()``: every access is a round trip to a server
process (2k-8k updates/s measured, and two processes are no faster than one). Here the
table is three numpy arrays in one ``multiprocessing.shared_memory`` segment: uint64
keys (hashes of state-action pairs, 0 = empty), float64 Q-values and int64 visit counts,
an open-addressing hash table with linear probing. Every process maps the same memory;
reads are plain array reads and batched operations are vectorized numpy.

Locking (``lock=``):

* ``"global"``: one lock around every insert and update. Simple, exact.
* ``"striped"``: updates lock only the stripe (slot mod stripes) of the slots they touch,
  so processes updating different keys proceed in parallel. Inserts take a separate insert
  lock that covers the whole probe sequence: a probe can walk into slots of other stripes,
  and locking only the home slot's stripe lets two inserts claim the same empty slot
  (a forced race lost keys). Exact.
* ``"none"``: Hogwild. No locks at all; concurrent increments of hot keys lose updates and
  racing inserts can lose keys. Opt-in only, and the benchmark reports the losses.

A Q-learning step (increment N, compute alpha(N), move Q toward the target) happens in
one critical section per key, so counts and values stay consistent. Keys are never
deleted, so a slot, once claimed, keeps its key for the table's life; a key is published
after its slot's Q and N are zeroed, so lock-free readers never see a stale value for it.

Lifetime: the creating process owns the segment and unlinks it when the table is closed,
garbage-collected or the interpreter exits (Ctrl-C included). If the owner is killed
outright, Python's resource tracker unlinks the segment. Other processes attach through
:attr:`SharedQTable.handle` (pass it to a spawned process; it carries the segment's name
and the locks) and only detach.

Example:
    >>> import numpy as np
    >>> from shoal.agent.qlearning import inverse_count
    >>> from shoal.tabular.keys import pair_keys
    >>> with SharedQTable(1000, lock="striped") as table:
    ...     keys = pair_keys(np.uint64(42), np.arange(3))
    ...     table.update_many(keys, np.array([1.0, 2.0, 3.0]), inverse_count())
    ...     float(table.max_q(keys)), int(table.get_many(keys)[1].sum())
    (3.0, 3)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shoal.agent.qlearning import AlphaSchedule
from shoal.errors import ShoalError
from shoal.run.closing import Closing
from shoal.run.files import atomic_write
from shoal.sync.segments import Segment
from shoal.sync.workers import SPAWN
from shoal.tabular.keys import EMPTY

__all__ = ["LOCK_MODES", "SharedQTable", "TableFileError", "TableFullError", "TableHandle"]

LOCK_MODES = ("global", "striped", "none")
_HEADER = 8  # int64 words: [0] used slots
_FORMAT = "shoal-qtable-v1"


class TableFullError(ShoalError):
    """An insert would exceed the table's capacity; nothing was inserted."""


class TableFileError(ShoalError):
    """A saved table that is missing, truncated or not a shoal table."""


@dataclass(frozen=True)
class TableHandle:
    """What a process needs to attach to a table: pass it to a spawned process."""

    name: str
    capacity: int
    slots: int
    lock: str
    stripes: int
    lock_timeout: float
    locks: tuple[Any, ...]


def _slots_for(capacity: int, max_load: float) -> int:
    return 1 << max(4, int(np.ceil(np.log2(capacity / max_load))))


class SharedQTable(Closing):
    """Q-values and visit counts N(s, a) in shared memory (see the module docstring).

    Args:
        capacity: the most state-action pairs the table will hold; a full table raises
            :class:`TableFullError` and never overwrites.
        lock: ``"global"``, ``"striped"`` or ``"none"`` (Hogwild, loses updates).
        stripes: number of stripe locks in striped mode.
        max_load: fraction of slots that may be used; slots = capacity / max_load rounded
            up to a power of two (linear probing slows sharply past ~0.8).
        lock_timeout: seconds to wait for a lock before raising ``TimeoutError`` (a worker
            killed while holding a lock would otherwise hang every other worker).
    """

    def __init__(
        self,
        capacity: int,
        *,
        lock: str = "striped",
        stripes: int = 64,
        max_load: float = 0.7,
        lock_timeout: float = 60.0,
        _handle: TableHandle | None = None,
    ) -> None:
        if _handle is None:
            _check_args(capacity, lock, stripes, max_load, lock_timeout)
            slots = _slots_for(capacity, max_load)
            n_locks = {"global": 1, "striped": 1 + stripes, "none": 0}[lock]
            locks = tuple(SPAWN.Lock() for _ in range(n_locks))
            seg = Segment.create("qt", 8 * (_HEADER + 3 * slots))
            _handle = TableHandle(seg.name, capacity, slots, lock, stripes, lock_timeout, locks)
        else:
            seg = Segment.attach(_handle.name)
        self._seg = seg
        self._h = _handle
        self._mask = np.uint64(_handle.slots - 1)
        s = _handle.slots
        self._header = seg.array((_HEADER,), np.int64, 0)
        self._keys = seg.array((s,), np.uint64, 8 * _HEADER)
        self._q = seg.array((s,), np.float64, 8 * (_HEADER + s))
        self._n = seg.array((s,), np.int64, 8 * (_HEADER + 2 * s))

    # --- lifetime ---------------------------------------------------------------------------
    @property
    def handle(self) -> TableHandle:
        """Pass this to a spawned process and call :meth:`attach` there."""
        return self._h

    @classmethod
    def attach(cls, handle: TableHandle) -> SharedQTable:
        """Map an existing table (created by another process) into this process."""
        return cls(handle.capacity, _handle=handle)

    @property
    def name(self) -> str:
        """The shared-memory segment's name."""
        return self._h.name

    @property
    def owner(self) -> bool:
        """Whether this process created the table (and unlinks it on close)."""
        return self._seg.owner

    def close(self) -> None:
        """Detach; the owner also unlinks the segment. Safe to call twice."""
        self._header = self._keys = self._q = self._n = None  # type: ignore[assignment]
        self._seg.close()

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickling (e.g. as a spawned Process's argument) sends the handle; the child
        # attaches. Locks refuse to pickle outside process spawning, which is intended.
        return (SharedQTable.attach, (self._h,))

    # --- properties ------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """The most state-action pairs the table holds."""
        return self._h.capacity

    @property
    def lock_mode(self) -> str:
        """'global', 'striped' or 'none'."""
        return self._h.lock

    def __len__(self) -> int:
        """Number of state-action pairs stored."""
        return int(self._header[0])

    # --- locking ---------------------------------------------------------------------------
    @contextmanager
    def _locked(self, index: int) -> Iterator[None]:
        lock = self._h.locks[index]
        if not lock.acquire(timeout=self._h.lock_timeout):
            raise TimeoutError(
                f"SharedQTable {self.name}: lock {index} not acquired in "
                f"{self._h.lock_timeout} s (a worker may have died holding it)"
            )
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def _insert_lock(self) -> Iterator[None]:
        if self._h.lock == "none":
            yield
        else:
            with self._locked(0):  # the global lock, or the insert lock in striped mode
                yield

    @contextmanager
    def _all_locks(self) -> Iterator[None]:
        """Every lock, in index order (the one order everybody uses: no deadlock)."""
        held = []
        try:
            for i in range(len(self._h.locks)):
                cm = self._locked(i)
                cm.__enter__()
                held.append(cm)
            yield
        finally:
            for cm in reversed(held):
                cm.__exit__(None, None, None)

    # --- lookup and insert -----------------------------------------------------------------
    def _find(self, keys: np.ndarray) -> np.ndarray:
        """Slot of each key, or -1 where absent. Lock-free: keys are never moved."""
        slots = np.full(len(keys), -1, np.int64)
        idx = np.arange(len(keys))
        want = keys
        pos = (keys & self._mask).astype(np.int64)
        mask = int(self._mask)
        while idx.size:
            found = self._keys[pos]
            hit = found == want
            slots[idx[hit]] = pos[hit]
            go_on = ~hit & (found != EMPTY)
            idx, want, pos = idx[go_on], want[go_on], (pos[go_on] + 1) & mask
        return slots

    def _insert(self, keys: np.ndarray) -> None:
        """Claim slots for ``keys`` (unique, absent). Caller holds the insert lock."""
        used = int(self._header[0])
        if used + len(keys) > self._h.capacity:
            raise TableFullError(
                f"SharedQTable {self.name} is full: {used} of {self._h.capacity} pairs stored, "
                f"{len(keys)} more requested; create it with a larger capacity"
            )
        mask = int(self._mask)
        idx = np.arange(len(keys))
        pos = (keys & self._mask).astype(np.int64)
        while idx.size:
            empty = self._keys[pos] == EMPTY
            cand_pos, cand_idx = pos[empty], idx[empty]
            won_pos, first = np.unique(cand_pos, return_index=True)
            won_idx = cand_idx[first]
            self._q[won_pos] = 0.0
            self._n[won_pos] = 0
            self._keys[won_pos] = keys[won_idx]  # publish last
            done = np.zeros(len(idx), bool)
            done[np.flatnonzero(empty)[first]] = True
            # Slots that were full move on; losers of a tie re-read the same slot.
            step = (~empty).astype(np.int64)
            keep = ~done
            idx, pos = idx[keep], (pos[keep] + step[keep]) & mask
        self._header[0] = used + len(keys)

    def _find_or_insert(self, keys: np.ndarray, *, lock: bool = True) -> np.ndarray:
        """Slots of ``keys``, inserting absent ones; ``lock=False`` when the caller already
        holds the insert (or global) lock."""
        slots = self._find(keys)
        missing = slots < 0
        if missing.any():
            with self._insert_lock() if lock else nullcontext():
                slots[missing] = self._find(keys[missing])  # someone may have inserted them
                still = slots < 0
                if still.any():
                    new = np.unique(keys[still])
                    self._insert(new)
                    slots[still] = self._find(keys[still])
        return slots

    # --- reads ------------------------------------------------------------------------------
    def get_many(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q, N) for each key; (0.0, 0) for keys never updated. Lock-free."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        slots = self._find(keys)
        present = slots >= 0
        q = np.zeros(len(keys))
        n = np.zeros(len(keys), np.int64)
        q[present] = self._q[slots[present]]
        n[present] = self._n[slots[present]]
        return q, n

    def get(self, key: int | np.uint64) -> float:
        """Q of one key (0.0 if never updated)."""
        slot = self._find_one(int(key))
        return float(self._q[slot]) if slot >= 0 else 0.0

    def max_q(self, keys: np.ndarray) -> float:
        """max over ``keys`` of Q (0.0 for unseen keys; -inf for no keys)."""
        q, _ = self.get_many(keys)
        return float(q.max()) if len(q) else float("-inf")

    def _find_one(self, key: int) -> int:
        keys, mask = self._keys, int(self._mask)
        pos = key & mask
        while True:
            k = int(keys[pos])
            if k == key:
                return pos
            if k == 0:
                return -1
            pos = (pos + 1) & mask

    # --- the Q-learning step ---------------------------------------------------------------
    def update(self, key: int | np.uint64, target: float, alpha: AlphaSchedule) -> float:
        """One atomic Q-learning step on one key: N += 1, Q += alpha(N) * (target - Q).

        Returns the new Q.
        """
        k = int(key)
        slot = self._find_one(k)
        if slot < 0:
            slot = int(self._find_or_insert(np.array([k], np.uint64))[0])
        mode = self._h.lock
        if mode == "none":
            return self._step_one(slot, target, alpha)
        index = 0 if mode == "global" else 1 + slot % self._h.stripes
        with self._locked(index):
            return self._step_one(slot, target, alpha)

    def _step_one(self, slot: int, target: float, alpha: AlphaSchedule) -> float:
        n = int(self._n[slot]) + 1
        self._n[slot] = n
        q = float(self._q[slot])
        q += float(alpha(np.array(n))) * (target - q)
        self._q[slot] = q
        return q

    def update_many(self, keys: np.ndarray, targets: np.ndarray, alpha: AlphaSchedule) -> None:
        """Q-learning steps for many keys, each atomic; repeated keys are applied in order,
        exactly as the same sequence of :meth:`update` calls would be."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        targets = np.asarray(targets, dtype=np.float64).reshape(-1)
        if len(keys) != len(targets):
            raise ValueError(f"update_many: {len(keys)} keys but {len(targets)} targets")
        mode = self._h.lock
        if mode == "global":
            with self._locked(0):
                self._apply(self._find_or_insert(keys, lock=False), targets, alpha)
            return
        slots = self._find_or_insert(keys)
        if mode == "none":
            self._apply(slots, targets, alpha)
            return
        stripe = slots % self._h.stripes
        order = np.argsort(stripe, kind="stable")
        stripe_sorted = stripe[order]
        bounds = np.flatnonzero(np.diff(stripe_sorted)) + 1
        for group in np.split(order, bounds):
            with self._locked(1 + int(stripe[group[0]])):
                self._apply(slots[group], targets[group], alpha)

    def _apply(self, slots: np.ndarray, targets: np.ndarray, alpha: AlphaSchedule) -> None:
        """Vectorized steps; caller holds the locks of these slots."""
        order = np.argsort(slots, kind="stable")
        s_sorted = slots[order]
        dup = s_sorted[1:] == s_sorted[:-1]
        if not dup.any():
            self._apply_unique(slots, targets, alpha)
            return
        # Rank of each occurrence among equal slots; round r applies every r-th occurrence,
        # so each round touches distinct slots and the rounds keep the call order.
        starts = np.flatnonzero(np.concatenate(([True], ~dup)))
        group_start = np.repeat(starts, np.diff(np.append(starts, len(s_sorted))))
        rank = np.empty(len(slots), np.int64)
        rank[order] = np.arange(len(slots)) - group_start
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            self._apply_unique(slots[sel], targets[sel], alpha)

    def _apply_unique(self, slots: np.ndarray, targets: np.ndarray, alpha: AlphaSchedule) -> None:
        n = self._n[slots] + 1
        self._n[slots] = n
        q = self._q[slots]
        self._q[slots] = q + alpha(n) * (targets - q)

    # --- bulk access, save and load ----------------------------------------------------------
    def snapshot(self, *, locked: bool = True) -> dict[str, np.ndarray]:
        """Copies of the stored keys, Q-values and counts, taken under every lock.

        ``locked=False`` reads without the locks: for saving what was learned after the
        workers were killed, when nobody writes any more but a killed worker may still
        "hold" a lock (it is never released, so waiting for it would only time out). That
        worker's last update may be half applied (N counted, Q not yet moved).
        """
        with self._all_locks() if locked else nullcontext():
            used = self._keys != EMPTY
            return {
                "keys": self._keys[used].copy(),
                "q": self._q[used].copy(),
                "n": self._n[used].copy(),
            }

    def total_visits(self) -> int:
        """Sum of all visit counts: with exact locking, the number of updates applied."""
        return int(self._n.sum())

    def save(self, path: str | Path, *, locked: bool = True) -> None:
        """Write the table to ``path`` (.npz) atomically: temp file, fsync, rename.
        ``locked`` as in :meth:`snapshot`."""
        snap = self.snapshot(locked=locked)
        atomic_write(path, lambda f: np.savez(f, format=np.array(_FORMAT), **snap))

    @staticmethod
    def read(path: str | Path) -> dict[str, np.ndarray]:
        """The arrays of a saved table, validated; damage raises TableFileError."""
        path = Path(path)
        if not path.is_file():
            raise TableFileError(f"table file '{path}' does not exist")
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as e:  # any failure to read means a damaged or foreign file
            raise TableFileError(f"table file '{path}' is corrupt or truncated ({e})") from None
        if str(arrays.get("format", "")) != _FORMAT or not {"keys", "q", "n"} <= set(arrays):
            raise TableFileError(f"table file '{path}' is not a shoal Q-table ({_FORMAT})")
        keys, q, n = arrays["keys"], arrays["q"], arrays["n"]
        ok = (
            keys.dtype == np.uint64
            and q.dtype == np.float64
            and n.dtype == np.int64
            and keys.ndim == q.ndim == n.ndim == 1
            and len(keys) == len(q) == len(n)
            and not (keys == EMPTY).any()
            and len(np.unique(keys)) == len(keys)
            and bool(np.isfinite(q).all())
            and bool((n >= 0).all())
        )
        if not ok:
            raise TableFileError(f"table file '{path}' has inconsistent arrays")
        return {"keys": keys, "q": q, "n": n}

    @classmethod
    def load(cls, path: str | Path, *, capacity: int | None = None, **kwargs: Any) -> SharedQTable:
        """A new shared table holding a saved table's contents (capacity at least its size)."""
        data = cls.read(path)
        table = cls(max(capacity or 0, len(data["keys"]), 1), **kwargs)
        table.load_arrays(data)
        return table

    def load_arrays(self, data: dict[str, np.ndarray]) -> None:
        """Insert saved (keys, q, n) into this table (keys must be new to it)."""
        with self._all_locks():
            keys = data["keys"]
            if (self._find(keys) >= 0).any():
                raise ValueError("load_arrays: some keys are already in the table")
            self._insert(keys)
            slots = self._find(keys)
            self._q[slots] = data["q"]
            self._n[slots] = data["n"]


def _check_args(capacity: int, lock: str, stripes: int, max_load: float, timeout: float) -> None:
    if not isinstance(capacity, (int, np.integer)) or capacity <= 0:
        raise ValueError(f"SharedQTable capacity: {capacity!r} is out of range; allowed: > 0")
    if lock not in LOCK_MODES:
        raise ValueError(f"SharedQTable lock: {lock!r} is not one of {', '.join(LOCK_MODES)}")
    if not isinstance(stripes, int) or stripes <= 0:
        raise ValueError(f"SharedQTable stripes: {stripes!r} is out of range; allowed: > 0")
    if not 0 < max_load < 1:
        raise ValueError(f"SharedQTable max_load: {max_load!r} is out of range; allowed: (0, 1)")
    if not timeout > 0:
        raise ValueError(f"SharedQTable lock_timeout: {timeout!r} is out of range; allowed: > 0")
