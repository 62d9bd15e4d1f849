"""Run directories: ``OUT/NAME-TIME/`` with the resolved config, metrics, TensorBoard
events, checkpoints and the learning curve.

A run directory is what people share, so an opened one is checked before use: none of its
files (nor ``checkpoints/`` or ``tb/``) may be a symbolic link, which a writer would follow
out of the directory (:meth:`RunDir.open`); and one process writes it at a time
(:meth:`RunDir.lock`, :mod:`shoal.run.lock`).
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shoal.errors import RunDirError, RunInUseError
from shoal.run.files import atomic_write_bytes, file_refusal, link_refused, sweep_stale_temps
from shoal.run.lock import LOCK_NAME, DirectoryLock

__all__ = ["RunDir"]


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # accept a str too

    @property
    def config(self) -> Path:
        """The resolved config, as TOML."""
        return self.path / "config.toml"

    @property
    def metrics(self) -> Path:
        """One CSV row per episode, evaluation and progress tick."""
        return self.path / "metrics.csv"

    @property
    def tensorboard(self) -> Path:
        """TensorBoard event files."""
        return self.path / "tb"

    @property
    def checkpoint(self) -> Path:
        """The latest checkpoint (``--resume`` continues from it)."""
        return self.path / "checkpoints" / "latest.pt"

    @property
    def error_checkpoint(self) -> Path:
        """The checkpoint written when a run failed (beside ``latest.pt``, which stays the
        last good one)."""
        return self.path / "checkpoints" / "error.pt"

    @property
    def best(self) -> Path:
        """Weights of the best greedy evaluation so far (``shoal eval`` uses them)."""
        return self.path / "checkpoints" / "best.pt"

    @property
    def curve(self) -> Path:
        """The learning-curve plot."""
        return self.path / "curve.png"

    def entries(self) -> list[Path]:
        """Every path of the run shoal reads or writes (the folders ``checkpoints/`` and
        ``tb/`` among them)."""
        folder = self.checkpoint.parent
        return [
            self.config,
            self.metrics,
            self.tensorboard,
            self.curve,
            self.path / LOCK_NAME,
            folder,
            self.checkpoint,
            self.best,
            self.error_checkpoint,
        ]

    def check_entries(self) -> None:
        """One line (:class:`~shoal.errors.RunDirError`) if any of :meth:`entries` is a
        symbolic link (a shared run could point one at any file, which writing the run, or
        cutting a torn last row of ``metrics.csv``, would change), a file that is not a
        regular one (a FIFO blocks its reader), or a file written in place (``metrics.csv``,
        the lock) with other hard links, before anything is read or written."""
        in_place = {self.metrics, self.path / LOCK_NAME}
        folders = {self.tensorboard, self.checkpoint.parent}
        for entry in self.entries():
            if entry.is_symlink():
                raise RunDirError(link_refused(entry))
            if entry in folders:
                if entry.exists() and not entry.is_dir():
                    raise RunDirError(f"'{entry}' is not a directory; shoal keeps one there")
            elif why := file_refusal(entry, writing=entry in in_place):
                raise RunDirError(why)

    def lock(self) -> DirectoryLock:
        """This process's exclusive lock on the run (one line if another holds it); held
        until released (``with run.lock():``)."""
        return DirectoryLock(self.path, "run directory").acquire()

    def check_writable(self, need_bytes: int = 0) -> None:
        """Check, before any training, that checkpoints can be written here: ``checkpoints/``
        exists or can be made, a file can be written and renamed in it, and the disk has
        ``need_bytes`` free. Otherwise a RunDirError says why, before work that a failed
        checkpoint would lose."""
        folder = self.checkpoint.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(folder / ".write-check", b"shoal")
            (folder / ".write-check").unlink()
            free = shutil.disk_usage(folder).free
        except OSError as e:
            raise RunDirError(
                f"run directory '{self.path}' cannot hold checkpoints: {e.strerror or e}"
            ) from None
        if free < need_bytes:
            raise RunDirError(
                f"run directory '{self.path}': {free / 2**20:.0f} MiB free on its disk, a "
                f"checkpoint of this run needs about {need_bytes / 2**20:.0f} MiB"
            )

    def sweep(self) -> list[Path]:
        """Remove temp files of writers killed mid-write (see
        :func:`~shoal.run.files.sweep_stale_temps`) from the run directory and
        ``checkpoints/``."""
        return [*sweep_stale_temps(self.path), *sweep_stale_temps(self.checkpoint.parent)]

    @classmethod
    def create(
        cls, out: str | Path, name: str, path: str | Path | None = None, *, resumable: bool = True
    ) -> RunDir:
        """Make a new run directory; never reuses (and so never overwrites) an existing one.

        ``path`` names the directory exactly; otherwise it is ``out/name-YYYYmmdd-HHMMSS``.
        ``resumable``: the error for an existing directory suggests ``--resume`` (off for
        commands that cannot resume, e.g. ``shoal sudoku train``). ``checkpoints/`` appears
        with the first checkpoint (checkpoint writes create their directory).
        """
        stem = Path(out) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        # Runs started in the same second get -2, -3, ...; an exact path gets no other name.
        names = (
            [Path(path)]
            if path is not None
            else (stem.with_name(f"{stem.name}-{n}") if n > 1 else stem for n in range(1, 10_000))
        )
        _make_parent(Path(path) if path is not None else stem)
        for target in names:
            try:
                target.mkdir()  # atomic: of two runs racing for one name, exactly one wins
                return cls(target)
            except FileExistsError:
                if path is not None and _left_by_a_dead_start(target) and _remove(target):
                    print(
                        f"shoal: removed '{target}', left by a start whose process died "
                        "before training began",
                        file=sys.stderr,
                    )
                    return cls.create(out, name, path, resumable=resumable)
                continue
            except OSError as e:
                raise RunDirError(f"cannot create run directory '{target}': {e.strerror}") from None
        if path is not None:
            hint = f", or continue it with --resume {path}" if resumable else ""
            raise RunDirError(
                f"run directory '{path}' already exists; pick another --run-dir{hint}"
            )
        raise RunDirError(f"no free run directory name under '{stem}-N'")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory (for resume, eval and plot), checked for links."""
        run = cls(Path(path))
        if not run.path.is_dir():
            raise RunDirError(f"run directory '{run.path}' does not exist")
        run.check_entries()
        if not run.config.is_file():
            raise RunDirError(f"'{run.path}' is not a shoal run directory (no config.toml)")
        return run


_START_FILES = frozenset({"config.toml", "metrics.csv", "checkpoints", "tb", LOCK_NAME})
"""What a run directory holds before its first checkpoint."""


def _remove(target: Path) -> bool:
    """Remove a dead start's directory holding its lock (two retries at once: one wins,
    the other finds it taken); whether this process removed it."""
    try:
        with DirectoryLock(target):
            shutil.rmtree(target)
    except (RunInUseError, RunDirError, OSError):
        return False
    return True


def _left_by_a_dead_start(target: Path) -> bool:
    """Whether ``target`` is what a start that died before training began leaves (Ray can
    end a driver from C++ as its node dies, past any cleanup): a run's lock that no process
    holds, no checkpoint, no metrics row, nothing else. A retry may take its place."""
    try:
        names = {p.name for p in target.iterdir()}
        if LOCK_NAME not in names or not names <= _START_FILES or target.is_symlink():
            return False
        if any((target / n).is_symlink() for n in names):
            return False
        DirectoryLock(target).check_free()
        checkpoints = target / "checkpoints"
        if checkpoints.is_dir() and any(p.suffix == ".pt" for p in checkpoints.iterdir()):
            return False
        metrics = target / "metrics.csv"
        return not metrics.is_file() or metrics.read_bytes().count(b"\n") <= 1  # a header
    except (OSError, RunInUseError):
        return False


def _make_parent(target: Path) -> None:
    """The folder runs go in (``--out``): a file there is the user's mistake, not a bug."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RunDirError(
            f"cannot create run directory '{target}': '{target.parent}' (or a folder above it) "
            "is a file; give --out a directory"
        ) from None
    except OSError as e:
        raise RunDirError(f"cannot create run directory '{target}': {e.strerror}") from None
