"""Attaching to and releasing ``multiprocessing.shared_memory`` segments safely.

Before Python 3.13, attaching to a segment registers it with the attaching process's
resource tracker, which unlinks it when that process exits: a reader could delete the
owner's memory. Spawned children share their parent's tracker (whose registry is a set, so
registering twice is harmless and the owner's unlink unregisters it); any other process
has a tracker of its own and must unregister. From 3.13 ``track=False`` says it directly.
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing import resource_tracker, shared_memory

__all__ = ["attach_segment", "release_segment"]


def attach_segment(name: str) -> shared_memory.SharedMemory:
    """Map an existing segment without taking responsibility for unlinking it."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    shm = shared_memory.SharedMemory(name=name)
    if not _spawned_child():  # a process with a tracker of its own
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
    """Detach; the owner also unlinks. Tolerates live array views (at interpreter exit)."""
    try:
        shm.close()
    except BufferError:  # numpy views still alive: unlinking is what frees the memory
        pass
    if owner:
        try:
            shm.unlink()
        except FileNotFoundError:
            pass
