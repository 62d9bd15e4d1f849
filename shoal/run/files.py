"""Atomic file writes: a reader sees the old file or the new one, never half of one. And
:func:`read_text`, for the text files a user names: their text, or a one-line error. And
:func:`open_no_follow`, for files inside a run directory, which never follows a link.

Every file shoal writes as a whole (checkpoints, configs, saved Q-tables, puzzle sets, plots)
goes through :func:`atomic_write`: the content goes to a temporary file in the same
directory (a rename is atomic only within one file system), is flushed and fsynced, and is
then renamed over the target with ``os.replace``; the directory is fsynced too, so the
rename itself survives a power cut. If writing fails, or is interrupted by Ctrl-C, the temp
file is removed and the previous file is untouched.

The temp file is opened with ``open(..., "xb")`` rather than ``tempfile.mkstemp``: mkstemp
creates files readable by the owner only (0600), and the renamed file would keep that mode;
``open`` applies the usual umask, like a plain write. Both refuse a link planted under the
temp file's name, and the rename replaces a link at the target rather than writing through
it, so an atomic write never changes a file outside its directory.

A run directory is something people share, so a file in it may be a symbolic link planted
to make a writer cut or append to a file elsewhere (``metrics.csv`` -> ``~/.bashrc``).
:func:`open_no_follow` opens such files with ``O_NOFOLLOW``: a link is refused in one line.
So is what is not a regular file (a FIFO would block the reader forever) and, for a file
written in place (appended, cut, truncated), one with other hard links: the write would
change the file under its other names too (:func:`file_refusal`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "sub" / "note.txt"
    >>> _ = atomic_write_text(path, "hello\\n")
    >>> path.read_text()
    'hello\\n'
    >>> [p.name for p in path.parent.iterdir()]
    ['note.txt']
    >>> read_text(path, "note file", ShoalError, allowed="a plain-text note file in UTF-8")
    'hello\\n'
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO

from shoal.errors import RunDirError, ShoalError

__all__ = [
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_refusal",
    "open_no_follow",
    "read_text",
    "sweep_stale_temps",
]

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
        with contextlib.suppress(OSError):  # (a read-only file system refuses even this)
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


_MODES = {
    "r": os.O_RDONLY,
    "rb": os.O_RDONLY,
    "rb+": os.O_RDWR,
    "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
    "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
    "w": os.O_WRONLY | os.O_TRUNC | os.O_CREAT,
    "wb": os.O_WRONLY | os.O_TRUNC | os.O_CREAT,
}


_NO_WAIT = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
"""Flags of every open inside a run: no link followed, no wait on a FIFO (a regular file
ignores ``O_NONBLOCK``; the file is refused before anything waits on it)."""


def open_no_follow(path: str | os.PathLike[str], mode: str = "rb", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, **kwargs)`` for a file inside a run directory, which is refused
    (:class:`~shoal.errors.RunDirError`, one line) if it is a symbolic link, not a regular
    file, or (written in place: modes a, ab, w, wb, rb+) hard-linked elsewhere; other errors
    are the usual ``OSError``. ``mode`` is one of r, rb, rb+, a, ab, w, wb."""
    writing = mode not in ("r", "rb")
    try:
        fd = os.open(path, _MODES[mode] | _NO_WAIT, 0o666)
    except OSError:
        if os.path.islink(path):
            raise RunDirError(link_refused(path)) from None
        why = file_refusal(path, writing=writing)  # a FIFO no one reads: ENXIO
        if why:
            raise RunDirError(why) from None
        raise
    why = file_refusal(path, writing=writing, st=os.fstat(fd))
    if why:
        os.close(fd)
        raise RunDirError(why)
    return os.fdopen(fd, mode, **kwargs)


def file_refusal(
    path: str | os.PathLike[str], *, writing: bool, st: os.stat_result | None = None
) -> str:
    """Why the file at ``path`` (its ``st``, else its lstat) may not be used inside a run
    directory ('' if it may, or if it does not exist): not a regular file, or, when
    ``writing`` in place, one with other hard links."""
    if st is None:
        try:
            st = os.lstat(path)
        except (OSError, ValueError):
            return ""
    where = f"'{os.fspath(path)}'"
    if not stat.S_ISREG(st.st_mode):
        kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISDIR: "a directory"}
        kind = next((k for test, k in kinds.items() if test(st.st_mode)), "a device")
        return (
            f"{where} is {kind}, not a regular file; shoal reads and writes only regular "
            "files inside a run directory"
        )
    if writing and st.st_nlink > 1:
        return (
            f"{where} has {st.st_nlink} hard links; writing it in place would change the file"
            " under its other names too: put a copy of it there (cp), not a link"
        )
    return ""


def link_refused(path: str | os.PathLike[str]) -> str:
    """The one line for a symbolic link found where a run's file should be."""
    return (
        f"'{os.fspath(path)}' is a symbolic link; shoal does not follow links inside a run "
        "directory (a shared run could point one at any file): put the file itself there"
    )


def read_text(
    path: str | os.PathLike[str],
    what: str,
    error: type[ShoalError],
    *,
    allowed: str,
    at_line: Callable[[int], str] | None = None,
) -> str:
    """The text of ``path``, a file the user names (a config, a ``.map``, a puzzle set), or
    a one-line ``error`` naming it.

    Why one function: every such file must fail the same way, as a
    :class:`~shoal.errors.ShoalError` the CLI prints as one line with exit code 2, never a
    traceback. The file is read as bytes and decoded as UTF-8, dropping the byte-order mark
    some editors write (it is not part of the first line); a byte that is not UTF-8 is
    reported with its line and offset (a ``UnicodeDecodeError`` would escape otherwise), and
    so is a path that cannot be read: missing, a directory, not permitted, too long, or
    holding a NUL character (a ``ValueError``, not an ``OSError``).

    ``what`` names the kind of file (``"config file"``, ``".map file"``, ``"puzzle file"``),
    ``allowed`` what a good one is (``"a TOML file in UTF-8"``), and ``error`` is the
    ShoalError subclass the caller's other errors are. The file is named by its ``repr``,
    so a line break in a name cannot break the message.

    Messages take the form of the caller's others. Without ``at_line`` the file is their
    subject, as for a file read whole: ``config file 'c.toml' does not exist`` (likewise
    ``is a directory``, ``cannot be read: Permission denied``, ``is not UTF-8 text (byte
    0xff on line 2, at offset 17); allowed: ...``). ``at_line(n)`` is how the caller names
    line ``n`` of a file it reports line by line (``"m.map line 5"``): then a path that
    cannot be read is ``cannot read .map file 'm.map': No such file or directory`` and a bad
    byte ``m.map line 5: not UTF-8 text (byte 0xff at offset 34); allowed: ...``.
    """
    where = f"{what} {os.fsdecode(path)!r}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path, which no OS path can
        raise error(_unreadable(what, where, e, by_line=at_line is not None)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line, byte = data.count(b"\n", 0, e.start) + 1, f"byte {data[e.start]:#04x}"
        if at_line is None:
            problem = f"{where} is not UTF-8 text ({byte} on line {line}, at offset {e.start})"
        else:
            problem = f"{at_line(line)}: not UTF-8 text ({byte} at offset {e.start})"
        raise error(f"{problem}; allowed: {allowed}") from None


def _unreadable(what: str, where: str, e: OSError | ValueError, *, by_line: bool) -> str:
    """Why ``where``, a ``what``, could not be read, in the form :func:`read_text` says."""
    nul = isinstance(e, ValueError)
    reason = getattr(e, "strerror", None) or str(e)
    if by_line:
        return f"cannot read {where}: {'it has a NUL' if nul else reason}"
    if nul:
        return f"{where} cannot be read: the path holds a NUL character"
    if isinstance(e, FileNotFoundError):
        return f"{where} does not exist"
    if isinstance(e, IsADirectoryError):
        return f"{where} is a directory, not a {what}"
    return f"{where} cannot be read: {reason}"


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
