"""Metrics sinks: ``metrics.csv`` (always) and TensorBoard (when installed)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

__all__ = ["METRIC_FIELDS", "MetricsWriter", "read_metrics"]

METRIC_FIELDS = (
    "kind",
    "step",
    "wall_s",
    "episode",
    "return",
    "length",
    "epsilon",
    "loss",
    "updates",
    "steps_per_s",
    "updates_per_s",
    "samples_per_s",
    "read_wait_ms",
    "write_wait_ms",
    "staleness_mean",
    "staleness_max",
    "eval_mean",
    "eval_std",
    "restarts",
    "pool_size",
    "win_random_first",
    "win_random_second",
    "win_heuristic_first",
    "win_heuristic_second",
)
"""CSV columns. ``kind`` is 'episode', 'eval' or 'tick'; cells that do not apply are empty."""


class MetricsWriter:
    """Appends rows to ``metrics.csv`` and mirrors numbers to TensorBoard as ``kind/name``.

    Appending (not truncating) is what lets a resumed run continue the same file.
    """

    def __init__(self, csv_path: Path, tb_dir: Path | None = None) -> None:
        new = not csv_path.exists() or csv_path.stat().st_size == 0
        self._file = open(csv_path, "a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=METRIC_FIELDS)
        if new:
            self._csv.writeheader()
        self._tb = None
        if tb_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is a core dependency; tolerate its absence
                self._tb = None
            else:
                self._tb = SummaryWriter(str(tb_dir))

    def log(self, kind: str, step: int, **values: Any) -> None:
        """Write one row; every number also goes to TensorBoard at ``step``."""
        row = {"kind": kind, "step": step}
        for key, value in values.items():
            if key not in METRIC_FIELDS:
                raise KeyError(f"unknown metric {key!r}; add it to METRIC_FIELDS")
            row[key] = f"{value:.6g}" if isinstance(value, float) else value
        self._csv.writerow(row)
        if self._tb is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and key not in ("episode", "wall_s"):
                    if not (isinstance(value, float) and math.isnan(value)):
                        self._tb.add_scalar(f"{kind}/{key}", value, step)

    def flush(self) -> None:
        """Push buffered rows to disk (called at checkpoints and at the end)."""
        self._file.flush()
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Flush and close both sinks; safe to call twice."""
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(csv_path: Path) -> list[dict[str, str]]:
    """All rows of a run's ``metrics.csv``."""
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))
