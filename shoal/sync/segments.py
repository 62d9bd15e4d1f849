"""The lifecycle of a ``multiprocessing.shared_memory`` segment, written once.

Every shared-memory object in shoal (the Q-table, the weight store) holds a
:class:`Segment`: the process that creates it owns it and unlinks it when the segment is
closed, garbage-collected or the interpreter exits (Ctrl-C included); if the owner is
killed outright, Python's resource tracker unlinks it. Other processes attach by name and
only detach. Names are ``shoal_{prefix}_{pid}_{hex}``, so a leak is easy to spot in
``/dev/shm`` and the tests can check that none is left.

Why attaching needs care: before Python 3.13, attaching registers the segment with the
attaching process's resource tracker, which unlinks it when that process exits, so a
reader could delete the owner's memory. Spawned (and forked) children share their parent's
tracker, whose registry is a set, so registering twice is harmless and the owner's unlink
unregisters it; the same holds for a second handle in the owning process. Any other process
has a tracker of its own and must unregister. A child that attaches while it is still
unpickling its arguments is not yet marked as a child (``parent_process()`` is None), so
it is recognised by the ``_inheriting`` flag instead: unregistering there would remove the
owner's registration from the shared tracker and crash cleanup would be lost. From 3.13
``track=False`` says all this directly.

Example:
    >>> import numpy as np
    >>> seg = Segment.create("demo", 4 * 8)
    >>> seg.name.startswith("shoal_demo_"), seg.owner
    (True, True)
    >>> counts = seg.array((4,), np.int64)
    >>> counts[:] = 7
    >>> reader = Segment.attach(seg.name)  # in another process, usually
    >>> int(reader.array((4,), np.int64).sum()), reader.owner
    (28, False)
    >>> reader.close()
    >>> del counts
    >>> seg.close()  # unlinks; safe to call twice
    >>> seg.close()
"""

from __future__ import annotations

import multiprocessing
import os
import re
import secrets
import sys
import weakref
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

__all__ = [
    "Segment",
    "attach_segment",
    "create_segment",
    "release_segment",
    "sweep_dead_segments",
]

# Segments this process created and has not released yet: attaching to one of them again
# here must not unregister it (that would drop the owner's crash-cleanup registration).
_OWNED: set[str] = set()


class Segment:
    """One shared-memory segment and this process's responsibility for it: the owner
    (creator) unlinks on :meth:`close`, on garbage collection or at exit; others detach.

    Make one with :meth:`create` or :meth:`attach`; build numpy views with :meth:`array`.
    Closing while such views are alive is safe: the name is unlinked at once and the memory
    stays mapped until the last view is gone.
    """

    def __init__(self, shm: shared_memory.SharedMemory, *, owner: bool) -> None:
        self._shm = shm
        self._owner = owner
        self._finalizer = weakref.finalize(self, release_segment, shm, owner)

    @classmethod
    def create(cls, prefix: str, size: int) -> Segment:
        """A new segment of ``size`` bytes (zero-filled), owned by this process."""
        return cls(create_segment(prefix, size), owner=True)

    @classmethod
    def attach(cls, name: str) -> Segment:
        """Map the segment another process (or this one) created, without owning it."""
        return cls(attach_segment(name), owner=False)

    @property
    def name(self) -> str:
        """The segment's name: pass it to other processes so they can attach."""
        return self._shm.name

    @property
    def owner(self) -> bool:
        """Whether this process created the segment (and unlinks it on close)."""
        return self._owner

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run (explicitly or by garbage collection)."""
        return not self._finalizer.alive

    @property
    def buf(self) -> memoryview:
        """The segment's memory."""
        return self._shm.buf

    def array(self, shape: tuple[int, ...], dtype: Any, offset: int = 0) -> np.ndarray:
        """A numpy view of the segment's memory starting ``offset`` bytes in.

        The view holds a buffer export of the mapping (``np.ndarray(shape, dtype, buf)``
        keeps only a reference to the mmap, which closing then unmaps under it: a later
        access crashes the interpreter), so the memory outlives :meth:`close` while it lives.
        """
        count = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(self._shm.buf, dtype, count, offset).reshape(shape)

    def close(self) -> None:
        """Detach; the owner also unlinks. Safe to call twice."""
        self._finalizer()


def create_segment(prefix: str, size: int) -> shared_memory.SharedMemory:
    """A new zero-filled segment named ``shoal_{prefix}_{pid}_{hex}`` (at least one byte).

    The caller owns it and must :func:`release_segment` it with ``owner=True`` (a
    :class:`Segment` does that for you).
    """
    from shoal.sync.workers import start_resource_tracker

    start_resource_tracker()  # it is not started from the working directory's modules
    name = f"shoal_{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    shm = shared_memory.SharedMemory(name=name, create=True, size=max(int(size), 1))
    _OWNED.add(shm.name)
    return shm


def attach_segment(name: str) -> shared_memory.SharedMemory:
    """Map an existing segment without taking responsibility for unlinking it."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    shm = shared_memory.SharedMemory(name=name)
    if not _spawned_child() and shm.name not in _OWNED:  # a tracker of its own
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    return shm


def _spawned_child() -> bool:
    """Whether this process was started by multiprocessing (and so shares the parent's
    resource tracker). While a child unpickles its arguments, parent_process() is not set
    yet, but the current process is marked as inheriting."""
    current = multiprocessing.current_process()
    return multiprocessing.parent_process() is not None or bool(
        getattr(current, "_inheriting", False)
    )


def release_segment(shm: shared_memory.SharedMemory, owner: bool) -> None:
    """Detach; the owner also unlinks. Safe to call twice, and with array views still alive
    (e.g. at interpreter exit): their mapping then lives until they are gone."""
    try:
        shm.close()
    except BufferError:
        # Views hold the mapping: leave unmapping to them (the mmap unmaps when its last
        # view dies), close just the descriptor, and keep SharedMemory.__del__ from trying
        # again and printing an ignored BufferError.
        shm._mmap = None  # type: ignore[attr-defined]
        shm.close()
    if owner:
        _OWNED.discard(shm.name)
        try:
            shm.unlink()
        except FileNotFoundError:
            pass


_SHM_DIR = "/dev/shm"
_NAME = re.compile(r"^shoal_\w+?_(\d+)_[0-9a-f]{8}$")


def sweep_dead_segments(directory: str = _SHM_DIR) -> list[str]:
    """Unlink every ``shoal_*`` segment whose creating process is gone; returns their
    names. The owner's resource tracker unlinks a segment when the owner is killed, but a
    SIGKILL of the whole process group (the OOM killer, ``docker kill``) takes the tracker
    too, and the segments stay in memory until reboot. A segment of a live process (another
    run on the machine) is left alone; so is one whose pid was reused."""
    try:
        names = os.listdir(directory)
    except OSError:  # no /dev/shm (macOS, Windows): segments live elsewhere
        return []
    swept = []
    for name in names:
        match = _NAME.match(name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:  # another sweeper got there first, or not ours to remove
            continue
        swept.append(name)
    return swept


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True
