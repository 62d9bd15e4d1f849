"""Run directories: ``OUT/NAME-TIME/`` with the resolved config, metrics, TensorBoard
events, checkpoints and the learning curve."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from shoal.errors import RunDirError

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
    def best(self) -> Path:
        """Weights of the best greedy evaluation so far (``shoal eval`` uses them)."""
        return self.path / "checkpoints" / "best.pt"

    @property
    def curve(self) -> Path:
        """The learning-curve plot."""
        return self.path / "curve.png"

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
        target = (
            Path(path)
            if path is not None
            else Path(out) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.mkdir()  # atomic: of two runs racing for one name, exactly one wins
        except FileExistsError:
            hint = f", or continue it with --resume {target}" if resumable else ""
            raise RunDirError(
                f"run directory '{target}' already exists; pick another --run-dir{hint}"
            ) from None
        return cls(target)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory (for resume, eval and plot)."""
        run = cls(Path(path))
        if not run.path.is_dir():
            raise RunDirError(f"run directory '{run.path}' does not exist")
        if not run.config.is_file():
            raise RunDirError(f"'{run.path}' is not a shoal run directory (no config.toml)")
        return run
