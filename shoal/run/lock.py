"""One process per run directory: an exclusive lock held for the whole run.

Two ``shoal train --resume RUN`` at once would both append to ``metrics.csv`` and take
turns replacing ``latest.pt``, so one run's work is silently lost (TensorBoard's and
Orbax's rule is the same: one writer per directory). Every process that writes a run or
study directory holds :class:`DirectoryLock` on it, from before it reads the directory's
state to its end; a second one stops with one line naming the holder's pid.

The lock is ``flock`` on ``DIR/.lock``: the kernel drops it when its holder's file is
closed or the process dies, however it dies, so a lock left by a killed run never blocks
the next start. The file itself stays (removing it would let a third process lock a new
file while a second still holds the old one); it holds the holder's pid, for the message.
Spawned workers do not inherit it (Python's descriptors are not inheritable).

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with DirectoryLock(folder, "run directory"):
    ...     DirectoryLock(folder, "run directory").acquire()
    Traceback (most recent call last):
    ...
    shoal.errors.RunInUseError: run directory '...' is in use by process ...
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from shoal.errors import RunDirError, RunInUseError
from shoal.run.files import file_refusal

__all__ = ["LOCK_NAME", "DirectoryLock"]

LOCK_NAME = ".lock"
"""The lock file's name inside the directory."""

_HOLDER_WAIT_S = 0.5
"""How long to wait for a holder that has just taken the lock to write its pid."""


class DirectoryLock:
    """An exclusive lock on ``directory`` for this process (``what`` names the directory
    in messages: ``"run directory"``, ``"study directory"``)."""

    def __init__(self, directory: str | os.PathLike[str], what: str = "run directory") -> None:
        self.directory = Path(directory)
        self.what = what
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.directory / LOCK_NAME

    def acquire(self) -> DirectoryLock:
        """Take the lock, or raise :class:`~shoal.errors.RunInUseError` naming the process
        that holds it (at once: a second run never waits for the first)."""
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            why = "it is a symbolic link" if self.path.is_symlink() else e.strerror or str(e)
            raise RunDirError(f"{self.what} '{self.directory}': cannot lock it ({why})") from None
        self._check_file(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise self._in_use(holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def check_free(self) -> None:
        """Raise as :meth:`acquire` would if another process holds the lock, without
        creating or writing anything (a check before a command that must leave the
        directory untouched when it refuses)."""
        import fcntl

        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags)
        except OSError:
            return  # none yet, or a link: acquire says so
        self._check_file(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._in_use(_holder(fd)) from None
        finally:
            os.close(fd)

    def _check_file(self, fd: int) -> None:
        """One line, ``fd`` closed, unless the lock file is a regular file of its own: it
        is cut and rewritten in place (a hard link to another file would cut that one), and
        a FIFO would not lock."""
        why = file_refusal(self.path, writing=True, st=os.fstat(fd))
        if why:
            os.close(fd)
            raise RunDirError(f"{self.what} '{self.directory}': cannot lock it: {why}")

    def _in_use(self, holder: str) -> RunInUseError:
        return RunInUseError(
            f"{self.what} '{self.directory}' is in use by process {holder} (a run or "
            "study writing it); one process writes it at a time: wait for that one to "
            "end or stop it, then try again"
        )

    def release(self) -> None:
        """Let the lock go (safe to call twice)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> DirectoryLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    """The pid the holder wrote (it may be writing it just now), or words for none."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return text
        if time.monotonic() > deadline:
            return "(pid unknown)"
        time.sleep(0.02)
