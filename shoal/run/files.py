"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file shoal writes as a whole (checkpoints, configs, saved Q-tables, puzzle sets, plots)
goes through :func:`atomic_write`: the content goes to a temporary file in the same
directory (a rename is atomic only within one file system), is flushed and fsynced, and is
then renamed over the target with ``os.replace``; the directory is fsynced too, so the
rename itself survives a power cut. If writing fails, or is interrupted by Ctrl-C, the temp
file is removed and the previous file is untouched.

The temp file is opened with ``open(..., "xb")`` rather than ``tempfile.mkstemp``: mkstemp
creates files readable by the owner only (0600), and the renamed file would keep that mode;
``open`` applies the usual umask, like a plain write.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "sub" / "note.txt"
    >>> _ = atomic_write_text(path, "hello\\n")
    >>> path.read_text()
    'hello\\n'
    >>> [p.name for p in path.parent.iterdir()]
    ['note.txt']
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "sweep_stale_temps"]

_TEMP = re.compile(r"^\..+\.(\d+)-[0-9a-f]{8}\.tmp$")


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` with what ``write`` writes into the binary file it is given.

    The parent directory is created if missing. ``write`` may raise (or be interrupted):
    then the temp file is removed, the exception propagates and ``path`` keeps its old
    content. Returns ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # pid + random suffix: writers in several processes or threads never share a temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_write`)."""
    return atomic_write_bytes(path, text.encode(encoding))


def sweep_stale_temps(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files that writers killed mid-write left in ``directory`` (a temp
    file is removed on any error or Ctrl-C, but not on SIGKILL, and one of a checkpoint can
    be gigabytes); those of live processes are kept. Returns what was removed."""
    from shoal.sync.segments import pid_alive

    removed = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return []
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None or pid_alive(int(match.group(1))) or not entry.is_file():
            continue
        try:
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable. Best effort: some platforms and file systems
    (Windows, some network mounts) cannot open or fsync a directory; the file itself is
    already on disk by then."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
