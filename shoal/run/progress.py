"""The training progress bar (rich): steps, steps/s and the latest learning figures.

rich is imported only when a bar is shown, so a run with ``run.progress=false`` (tests,
benchmarks, scripts) does not pay for it.

Example:
    >>> with TrainProgress(100, enabled=False) as bar:
    ...     bar.update(50, loss=0.25)
"""

from __future__ import annotations

from typing import Any

from shoal.run.closing import Closing

__all__ = ["TrainProgress"]


class TrainProgress(Closing):
    """A context manager showing a bar over env steps with a line of live stats.

    Disabled, it does nothing (and loads nothing), so runners call it unconditionally.
    """

    def __init__(self, total: int, *, enabled: bool, description: str = "train") -> None:
        self.enabled = enabled
        self._progress: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
        )
        self._task = self._progress.add_task(description, total=total, stats="")

    def __enter__(self) -> TrainProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def close(self) -> None:
        """Stop drawing the bar (it stays on screen as last drawn); safe to call twice."""
        if self._progress is not None:
            self._progress.stop()

    def line(self, text: str) -> None:
        """Print a line above the bar (a plain line when the bar is hidden)."""
        if self._progress is None:
            print(text, flush=True)
        else:
            self._progress.console.print(text, highlight=False, markup=False)

    def update(self, completed: int, **stats: Any) -> None:
        """Move the bar to ``completed`` steps and show ``stats`` as ``name value`` pairs."""
        if self._progress is None:
            return
        if not stats:
            self._progress.update(self._task, completed=completed)
            return
        text = "  ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in stats.items()
        )
        self._progress.update(self._task, completed=completed, stats=text)
