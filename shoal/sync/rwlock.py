"""A writer-preferring readers-writer lock for threads, with deadlock checks and telemetry.

Many actor threads read shared state (network weights, a replay table) while one learner
thread occasionally replaces it. A plain ``threading.Lock`` serialises the readers for no
reason; a naive readers-writer lock lets a steady stream of overlapping readers keep the
writer out forever. :class:`RWLock` admits any number of readers at once, but as soon as a
writer is waiting, new readers queue behind it, so a writer waits at most for the readers
already inside to leave.

The lock is strict rather than clever, because a concurrency bug that raises at once is
cheap and one that hangs a training run overnight is not:

* every acquisition can time out (a per-lock default, overridable per call), and the
  ``TimeoutError`` says who holds the lock;
* a thread that asks for the lock while already holding it (either side) gets a
  :class:`LockReentryError` immediately instead of a deadlock;
* releasing a side the calling thread does not hold raises ``RuntimeError``.
"""

from __future__ import annotations

import contextlib
import enum
import math
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from time import perf_counter

__all__ = ["LockReentryError", "LockSideStats", "RWLock", "RWLockStats"]


class LockReentryError(RuntimeError):
    """A thread asked for a lock it (partly) holds already: re-entry, upgrade, or a nested read.

    Raised at once, because waiting would deadlock (or, for a nested read, would deadlock as
    soon as a writer arrives between the two reads).
    """


class _Default(enum.Enum):
    """Type of the "use the lock's default timeout" sentinel (an enum so type checkers see it)."""

    TIMEOUT = "default"

    def __repr__(self) -> str:
        return "<lock default>"


_DEFAULT = _Default.TIMEOUT


@dataclass(frozen=True)
class LockSideStats:
    """Counters for one side (read or write) of an :class:`RWLock`; times are in seconds.

    Wait and hold times cover successful acquisitions only; a timed-out attempt counts in
    ``timeouts`` and nowhere else, so ``mean_wait`` is the wait of those who got in.
    """

    acquisitions: int = 0
    """Successful acquisitions."""
    timeouts: int = 0
    """Attempts that gave up with ``TimeoutError``."""
    total_wait: float = 0.0
    """Sum over acquisitions of the time from asking to holding."""
    max_wait: float = 0.0
    """Longest time from asking to holding."""
    total_hold: float = 0.0
    """Sum over releases of the time from holding to releasing."""
    max_hold: float = 0.0
    """Longest time from holding to releasing."""
    releases: int = 0
    """Releases so far; ``acquisitions - releases`` are still held (mean_hold divides by it)."""

    @property
    def mean_wait(self) -> float:
        """Mean seconds from asking to holding (0.0 before any acquisition)."""
        return self.total_wait / self.acquisitions if self.acquisitions else 0.0

    @property
    def mean_hold(self) -> float:
        """Mean seconds from holding to releasing (0.0 before any release)."""
        return self.total_hold / self.releases if self.releases else 0.0


@dataclass(frozen=True)
class RWLockStats:
    """A snapshot of an :class:`RWLock`'s counters, one :class:`LockSideStats` per side."""

    read: LockSideStats = field(default_factory=LockSideStats)
    """Counters of the shared (read) side."""
    write: LockSideStats = field(default_factory=LockSideStats)
    """Counters of the exclusive (write) side."""

    def as_dict(self) -> dict[str, float]:
        """Flat ``{"read_acquisitions": ..., "write_mean_wait": ...}`` for metrics sinks."""
        out: dict[str, float] = {}
        for side_name, side in (("read", self.read), ("write", self.write)):
            for key in (
                "acquisitions",
                "timeouts",
                "total_wait",
                "max_wait",
                "mean_wait",
                "total_hold",
                "max_hold",
                "mean_hold",
            ):
                out[f"{side_name}_{key}"] = getattr(side, key)
        return out


class _SideCounters:
    """Mutable counters behind :class:`LockSideStats`, only touched under the condition."""

    __slots__ = (
        "acquisitions",
        "timeouts",
        "total_wait",
        "max_wait",
        "total_hold",
        "max_hold",
        "releases",
    )

    def __init__(self) -> None:
        self.acquisitions = 0
        self.timeouts = 0
        self.total_wait = 0.0
        self.max_wait = 0.0
        self.total_hold = 0.0
        self.max_hold = 0.0
        self.releases = 0

    def acquired(self, wait: float) -> None:
        self.acquisitions += 1
        self.total_wait += wait
        if wait > self.max_wait:
            self.max_wait = wait

    def released(self, hold: float) -> None:
        self.releases += 1
        self.total_hold += hold
        if hold > self.max_hold:
            self.max_hold = hold

    def snapshot(self) -> LockSideStats:
        return LockSideStats(
            acquisitions=self.acquisitions,
            timeouts=self.timeouts,
            total_wait=self.total_wait,
            max_wait=self.max_wait,
            total_hold=self.total_hold,
            max_hold=self.max_hold,
            releases=self.releases,
        )


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    value = float(timeout)
    # `not value >= 0` also rejects NaN, which would otherwise wait a surprising amount.
    if not value >= 0 or math.isinf(value):
        raise ValueError(
            f"timeout must be None (wait forever) or a finite number of seconds >= 0, "
            f"got {timeout!r}"
        )
    return value


def _thread_names(idents: list[int]) -> list[str]:
    """Names of the threads with these idents (only called on error paths: enumerate is slow)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return [repr(names.get(i, f"<ident {i}>")) for i in idents]


class RWLock:
    """Many readers or one writer, writer-preferring, with timeouts and re-entry checks.

    Readers share the lock; a writer holds it alone. Once a writer is waiting, new readers
    wait too, so a writer waits only for the readers already inside (a stream of readers
    cannot starve it). The price is the usual one: a steady stream of writers starves
    readers, which is the right trade where writes are rare and must land (publishing new
    weights). Waiting writers get the lock in arrival order.

    The lock is **not re-entrant** on either side, and says so loudly: a thread that holds
    the write lock and asks for either side, holds a read lock and asks for the write lock
    (an upgrade), or holds a read lock and asks for another read lock gets a
    :class:`LockReentryError` at once. Nested reads are refused even when no writer is
    waiting, because whether they would deadlock depends on timing (a writer arriving
    between the two reads blocks the second read behind itself, while it waits for the
    first); refusing always turns a rare hang into a bug that shows up in the first test.
    Holders are tracked per thread, so a thread that dies holding the lock leaks it.

    Args:
        timeout: default seconds every acquisition may wait before raising
            ``TimeoutError``; ``None`` waits forever. Each call may override it.
        name: shown in error messages and ``repr``, to tell locks apart.

    Example:
        >>> lock = RWLock(timeout=5.0, name="weights")
        >>> with lock.read():
        ...     lock.readers
        1
        >>> with lock.write(timeout=None):
        ...     lock.writer_active
        True
        >>> s = lock.stats()
        >>> (s.read.acquisitions, s.write.acquisitions, s.write.timeouts)
        (1, 1, 0)
    """

    def __init__(self, *, timeout: float | None = None, name: str = "rwlock") -> None:
        self.name = name
        self.timeout = _check_timeout(timeout)
        # A plain Lock under the Condition: nothing here re-enters it, and it is faster than
        # the default RLock.
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, float] = {}  # thread ident -> perf_counter at acquisition
        self._writer: int | None = None
        self._write_since = 0.0
        # Waiting writers in arrival order. Writers enter only from the head, so a writer
        # that releases and asks again cannot overtake one that was already waiting.
        self._write_queue: deque[int] = deque()
        self._read_stats = _SideCounters()
        self._write_stats = _SideCounters()

    # -- acquisition --------------------------------------------------------------------

    def acquire_read(self, timeout: float | None | _Default = _DEFAULT) -> None:
        """Take a shared (read) lock, waiting while a writer holds the lock or waits for it.

        Args:
            timeout: seconds to wait; omitted uses the lock's default, ``None`` waits forever,
                0 tries once without waiting.

        Raises:
            TimeoutError: not acquired in time; the lock is left as it was.
            LockReentryError: this thread already holds either side.
        """
        asked = perf_counter()
        limit = self.timeout if timeout is _DEFAULT else _check_timeout(timeout)
        me = threading.get_ident()
        with self._cond:
            if me in self._readers or self._writer == me:
                raise LockReentryError(self._reentry_message(me, "read"))
            if self._writer is not None or self._write_queue:
                if not self._cond.wait_for(self._read_ready, limit):
                    self._read_stats.timeouts += 1
                    raise TimeoutError(self._timeout_message("read", limit))
            now = perf_counter()
            self._readers[me] = now
            self._read_stats.acquired(now - asked)

    def acquire_write(self, timeout: float | None | _Default = _DEFAULT) -> None:
        """Take the exclusive (write) lock, waiting for current readers and earlier writers.

        From the moment this call starts waiting, new readers wait behind it.

        Args:
            timeout: seconds to wait; omitted uses the lock's default, ``None`` waits forever,
                0 tries once without waiting.

        Raises:
            TimeoutError: not acquired in time; the lock is left as it was (readers held back
                only by this writer are woken).
            LockReentryError: this thread already holds either side (there is no upgrade).
        """
        asked = perf_counter()
        limit = self.timeout if timeout is _DEFAULT else _check_timeout(timeout)
        me = threading.get_ident()
        with self._cond:
            if me in self._readers or self._writer == me:
                raise LockReentryError(self._reentry_message(me, "write"))
            if self._writer is not None or self._readers or self._write_queue:
                self._write_queue.append(me)
                granted = False
                try:
                    granted = self._cond.wait_for(lambda: self._write_ready(me), limit)
                finally:
                    # Runs on timeout and on anything raised while waiting (KeyboardInterrupt):
                    # a writer that gives up must leave the queue, or readers would wait for
                    # it forever.
                    self._write_queue.remove(me)
                    if not granted:
                        # Readers blocked only by this writer, and the writer behind it, may
                        # now go ahead.
                        self._cond.notify_all()
                if not granted:
                    self._write_stats.timeouts += 1
                    raise TimeoutError(self._timeout_message("write", limit))
            now = perf_counter()
            self._writer = me
            self._write_since = now
            self._write_stats.acquired(now - asked)

    def release_read(self) -> None:
        """Give back this thread's read lock.

        Raises:
            RuntimeError: this thread holds no read lock.
        """
        me = threading.get_ident()
        with self._cond:
            since = self._readers.pop(me, None)
            if since is None:
                raise RuntimeError(self._release_message(me, "read"))
            self._read_stats.released(perf_counter() - since)
            # Readers never wait for readers, so only a waiting writer cares, and only once
            # the last reader is out.
            if not self._readers and self._write_queue:
                self._cond.notify_all()

    def release_write(self) -> None:
        """Give back this thread's write lock.

        Raises:
            RuntimeError: this thread does not hold the write lock.
        """
        me = threading.get_ident()
        with self._cond:
            if self._writer != me:
                raise RuntimeError(self._release_message(me, "write"))
            self._writer = None
            self._write_stats.released(perf_counter() - self._write_since)
            self._cond.notify_all()

    @contextlib.contextmanager
    def read(self, timeout: float | None | _Default = _DEFAULT) -> Iterator[None]:
        """``with lock.read():`` holds a read lock for the block, released even on exceptions.

        ``timeout`` is as for :meth:`acquire_read`.
        """
        self.acquire_read(timeout)
        try:
            yield
        finally:
            self.release_read()

    @contextlib.contextmanager
    def write(self, timeout: float | None | _Default = _DEFAULT) -> Iterator[None]:
        """``with lock.write():`` holds the write lock for the block, released even on exceptions.

        ``timeout`` is as for :meth:`acquire_write`.
        """
        self.acquire_write(timeout)
        try:
            yield
        finally:
            self.release_write()

    # -- state and telemetry ------------------------------------------------------------

    @property
    def readers(self) -> int:
        """Number of threads holding a read lock now."""
        return len(self._readers)

    @property
    def writer_active(self) -> bool:
        """Whether some thread holds the write lock now."""
        return self._writer is not None

    @property
    def writers_waiting(self) -> int:
        """Number of threads waiting for the write lock now (new readers wait while > 0)."""
        return len(self._write_queue)

    def stats(self) -> RWLockStats:
        """A consistent snapshot of the counters (taken under the lock's internal mutex)."""
        with self._cond:
            return RWLockStats(read=self._read_stats.snapshot(), write=self._write_stats.snapshot())

    def reset_stats(self) -> None:
        """Zero the counters. A lock held across the reset counts its hold on release only."""
        with self._cond:
            self._read_stats = _SideCounters()
            self._write_stats = _SideCounters()

    def __repr__(self) -> str:
        return (
            f"<RWLock {self.name!r} readers={self.readers} writer_active={self.writer_active}"
            f" writers_waiting={self.writers_waiting}>"
        )

    # -- internals (all called with self._cond held) ------------------------------------

    def _read_ready(self) -> bool:
        return self._writer is None and not self._write_queue

    def _write_ready(self, me: int) -> bool:
        return self._writer is None and not self._readers and self._write_queue[0] == me

    def _holders(self, side: str) -> str:
        parts = []
        if self._writer is not None:
            parts.append(f"held by a writer (thread {_thread_names([self._writer])[0]})")
        elif self._readers:
            idents = list(self._readers)
            shown = ", ".join(_thread_names(idents[:4])) + (", ..." if len(idents) > 4 else "")
            parts.append(f"held by {len(idents)} reader(s) (threads {shown}), no writer")
        else:
            parts.append("not held now (0 readers, no writer)")
        # A timed-out writer has already left the queue: the rest are the others.
        other = " other" if side == "write" else ""
        parts.append(f"{len(self._write_queue)}{other} writer(s) waiting")
        return "; ".join(parts)

    def _timeout_message(self, side: str, limit: float | None) -> str:
        where = f"rwlock {self.name!r}: {side} lock not acquired within {limit:g} s"
        return f"{where}; {self._holders(side)}"

    def _reentry_message(self, me: int, asked: str) -> str:
        who = f"thread {_thread_names([me])[0]}"
        lock = f"rwlock {self.name!r}"
        if self._writer == me:
            return (
                f"{who} holds the write lock of {lock} and asked for the {asked} lock; the lock "
                f"is not re-entrant (the write lock already gives exclusive access)"
            )
        if asked == "write":
            return (
                f"{who} holds a read lock of {lock} and asked for the write lock; upgrading is "
                f"not supported (two upgrading readers would wait for each other): release the "
                f"read lock, acquire the write lock, then re-check what was read"
            )
        waiting = len(self._write_queue)
        now = f" ({waiting} writer(s) waiting now)" if waiting else ""
        return (
            f"{who} holds a read lock of {lock} and asked for another read lock; nested reads "
            f"are refused because with a writer waiting{now} the second read would wait for "
            f"the writer, which waits for the first read: a deadlock"
        )

    def _release_message(self, me: int, side: str) -> str:
        holds = (
            "the write lock"
            if self._writer == me
            else "a read lock"
            if me in self._readers
            else "nothing"
        )
        return (
            f"thread {_thread_names([me])[0]} released the {side} lock of rwlock {self.name!r} "
            f"but does not hold it (it holds {holds})"
        )
