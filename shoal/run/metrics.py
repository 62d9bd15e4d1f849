"""Metrics sinks: ``metrics.csv`` and a TensorBoard event file.

``metrics.csv`` has one header row and then one row per :meth:`MetricsWriter.log` call.
Any column name is accepted: a runner or an agent adds its own (``agent3_return``,
``efficiency``) just by logging it. A new file starts with :data:`METRIC_FIELDS` as its
header, so the common columns have fixed places; a column the header lacks is added at the
end the first time it is logged, by rewriting the file atomically with the wider header
(the earlier rows get empty cells). That happens once per new column, so the per-row cost
stays that of an append. A resumed run appends to the same file: its header is read back
and the columns keep their places.

Numbers are mirrored to TensorBoard as ``kind/name`` scalars by :class:`EventFileWriter`,
which writes the same bytes as ``torch.utils.tensorboard.SummaryWriter`` without importing
it (that import costs 0.15-0.3 s of start-up); the event file is opened when the first
number is mirrored.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "metrics.csv"
    >>> with MetricsWriter(path) as m:
    ...     m.log("episode", 10, episode=0, length=10, **{"return": 10.0})
    ...     m.log("tick", 20, agent3_return=1.5)
    >>> rows = read_metrics(path)
    >>> rows[0]["return"], rows[0]["agent3_return"], rows[1]["agent3_return"]
    ('10', '', '1.5')
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import socket
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from shoal.run.closing import Closing
from shoal.run.files import atomic_write_bytes, open_no_follow

__all__ = ["METRIC_FIELDS", "EventFileWriter", "MetricsWriter", "crc32c", "read_metrics"]

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
    "replay_ratio",
    "eval_share",
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
"""The leading columns of a new ``metrics.csv``, in this order; other columns follow in the
order they first appear. ``kind`` is 'episode', 'eval', 'confirm' (an evaluation confirming
a solve) or 'tick'; cells that do not apply are empty."""

_NOT_MIRRORED = frozenset({"episode", "wall_s"})
"""Columns that are numbers but not curves worth a TensorBoard scalar."""
_EPISODE_NOT_MIRRORED = _NOT_MIRRORED | {"epsilon", "updates"}
_LISTS = (list, tuple, range)
"""What :meth:`MetricsWriter.log_many` takes as a column of values (else one value)."""


def _cell(value: Any) -> Any:
    """A CSV cell: floats with 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else value


"""Episode rows leave out what tick rows already draw."""


class MetricsWriter(Closing):
    """Appends rows to ``metrics.csv`` and mirrors numbers to TensorBoard as ``kind/name``.

    Appending (not truncating) is what lets a resumed run continue the same file. One
    thread writes (the runner's main loop); the writer takes no lock.

    Args:
        csv_path: the CSV file, created with a header if missing or empty.
        tb_dir: TensorBoard log directory, or None for no mirror.
    """

    def __init__(self, csv_path: Path, tb_dir: Path | None = None) -> None:
        self._path = Path(csv_path)
        self._tb_dir = tb_dir
        self._tb: EventFileWriter | None = None  # made when the first number is mirrored
        self._episodes: dict[str, list[float]] = {}  # episode numbers awaiting their mean
        self._episodes_step = 0
        header = _existing_header(self._path)
        if header is None:
            header = list(METRIC_FIELDS)
            with open_no_follow(self._path, "w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(header)
        self._columns = header
        self._index = {name: i for i, name in enumerate(header)}
        self._file = open_no_follow(self._path, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        self.add_columns(("kind", "step"))  # a no-op unless the file came from elsewhere

    @property
    def columns(self) -> tuple[str, ...]:
        """The file's columns in order (the header row)."""
        return tuple(self._columns)

    def log(self, kind: str, step: int, **values: Any) -> None:
        """Write one row; every number except ``episode`` and ``wall_s`` (and NaN) also goes
        to TensorBoard as ``kind/name`` at ``step`` (episode rows: their return and length,
        as the mean over the episodes between two other rows).

        Floats are written with 6 significant digits. A name the header lacks widens the
        file first (see :meth:`add_columns`).
        """
        index = self._index
        row = [""] * len(index)
        row[index["kind"]] = kind
        row[index["step"]] = step
        try:
            for key, value in values.items():
                row[index[key]] = _cell(value)
        except KeyError:  # a new column: widen the file once, then write the row
            self.add_columns(values)
            self.log(kind, step, **values)
            return
        self._csv.writerow(row)
        if self._tb_dir is not None:
            self._mirror(kind, step, values)

    def log_many(self, kind: str, steps: Sequence[int], **columns: Any) -> None:
        """One row per entry of ``steps``, as :meth:`log` would write them one by one: each
        column a list (a value per row) or one value for every row. A batch of envs ends
        thousands of episodes a second; this writes them in one go."""
        if not steps:
            return
        self.add_columns(columns)
        cells: dict[str, Iterable[Any]] = {"kind": itertools.repeat(kind), "step": steps}
        for key, value in columns.items():  # a value for every row is formatted once
            if isinstance(value, _LISTS):
                cells[key] = [_cell(v) for v in value]
            else:
                cells[key] = itertools.repeat(_cell(value))
        empty = itertools.repeat("")
        self._csv.writerows(zip(*(cells.get(name, empty) for name in self._columns)))
        if self._tb_dir is None:
            return
        lists = {k: v if isinstance(v, _LISTS) else [v] * len(steps) for k, v in columns.items()}
        if kind == "episode":
            self._pend(steps[-1], lists)
            return
        for j, step in enumerate(steps):
            self._mirror(kind, step, {key: values[j] for key, values in lists.items()})

    def add_columns(self, names: Iterable[str]) -> None:
        """Add columns at the end of the header (names already there are skipped).

        Rows written so far are flushed, and the file is rewritten with the wider header
        and empty cells in the new columns, atomically: if that fails the old file is left
        as it was, the writer keeps its old columns, and the error propagates.
        """
        new = [n for n in dict.fromkeys(names) if n not in self._index]
        if not new:
            return
        columns = self._columns + new
        self._file.flush()
        _rewrite_with_columns(self._path, columns)
        self._file.close()  # the handle points at the replaced file
        self._file = open_no_follow(self._path, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        self._columns = columns
        self._index = {name: i for i, name in enumerate(columns)}

    def _mirror(self, kind: str, step: int, values: dict[str, Any]) -> None:
        """Send the row's numbers to TensorBoard, opening the event file on first use.
        Episode rows are averaged until the next other row (see :meth:`_pend`)."""
        if kind == "episode":
            self._pend(step, {key: [value] for key, value in values.items()})
            return
        self._mirror_episodes()
        self._send(kind, step, values, _NOT_MIRRORED)

    def _send(self, kind: str, step: int, values: dict[str, Any], skip: frozenset[str]) -> None:
        for key, value in values.items():
            if key in skip or not isinstance(value, (int, float)):
                continue
            if value != value:  # NaN: no point on the curve
                continue
            if self._tb is None:
                self._tb = EventFileWriter(self._tb_dir)
            self._tb.add_scalar(f"{kind}/{key}", value, step)

    def _pend(self, step: int, columns: dict[str, list[Any]]) -> None:
        """Add episode rows (``columns``: a list of values each) to the mean TensorBoard gets
        at the next tick, evaluation or flush: batched actors end thousands of short
        episodes a second, and a scalar per episode cost more than the episode's steps
        (the CSV keeps every row)."""
        for key, values in columns.items():
            if key in _EPISODE_NOT_MIRRORED:
                continue
            numbers = [v for v in values if isinstance(v, (int, float)) and v == v]
            if numbers:
                total = self._episodes.setdefault(key, [0.0, 0])
                total[0] += sum(numbers)
                total[1] += len(numbers)
        self._episodes_step = step

    def _mirror_episodes(self) -> None:
        """The pending episodes' mean of each number, at the step the last of them ended."""
        if self._episodes:
            means = {key: total / count for key, (total, count) in self._episodes.items()}
            self._episodes = {}
            self._send("episode", self._episodes_step, means, _EPISODE_NOT_MIRRORED)

    def flush(self) -> None:
        """Push buffered rows to disk (called at checkpoints and at the end)."""
        self._mirror_episodes()
        self._file.flush()
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Flush and close both sinks; safe to call twice."""
        if not self._file.closed:
            self._file.close()
        if self._tb_dir is not None:
            self._mirror_episodes()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        self._tb_dir = None


class EventFileWriter:
    """Writes TensorBoard scalars to an event file, byte for byte as
    ``torch.utils.tensorboard.SummaryWriter(log_dir).add_scalar`` does, without importing
    TensorBoard.

    Importing ``torch.utils.tensorboard`` loads ``tensorboard.summary`` and through it
    protobuf, absl, fsspec and a TensorFlow stub: 0.15-0.3 s of every run's start-up. The
    format is small and stable, so it is written here with ``struct``: a TFRecord file
    (``events.out.tfevents.TIME.HOST.PID.N``) of ``Event`` protobufs, a ``file_version``
    event first and then one event per scalar, each record framed by its length and masked
    CRC32C checksums. ``tests/run/test_metrics.py`` checks the bytes against SummaryWriter.

    Like SummaryWriter, events are buffered and flushed on :meth:`flush`, on
    :meth:`close`, and when 120 s have passed since the last flush.

    Example:
        >>> import tempfile
        >>> w = EventFileWriter(tempfile.mkdtemp())
        >>> w.add_scalar("episode/return", 21.0, step=300)
        >>> w.close()
        >>> w.path.name.startswith("events.out.tfevents.")
        True
    """

    FLUSH_SECS = 120.0
    """Longest time events wait in the buffer (SummaryWriter's ``flush_secs``)."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}"
        self.path = log_dir / f"{name}.{next(_event_file_ids)}"
        self._file = open(self.path, "xb")  # a new name: never through a planted link
        self._last_flush = now
        source = _pb_bytes(1, b"tensorboard.summary.writer.event_file_writer")
        self._write(_pb_double(1, now) + _pb_bytes(3, b"brain.Event:2") + _pb_bytes(10, source))
        self.flush()

    def add_scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """Append one scalar point (``value`` as a float32, as TensorBoard stores it)."""
        now = time.time()
        value = float(value)
        if abs(value) > _FLOAT32_MAX and value == value:  # what a float32 field keeps
            value = math.copysign(math.inf, value)
        summary_value = _pb_bytes(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
        event = _pb_double(1, now if wall_time is None else wall_time)
        if step:  # proto3 leaves a zero step out
            event += b"\x10" + _varint(int(step))
        self._write(event + _pb_bytes(5, _pb_bytes(1, summary_value)))
        if now - self._last_flush > self.FLUSH_SECS:
            self.flush()

    def _write(self, data: bytes) -> None:
        """One TFRecord: length, its masked CRC32C, the data, the data's masked CRC32C."""
        header = struct.pack("<Q", len(data))
        self._file.write(
            header
            + struct.pack("<I", _masked_crc32c(header))
            + data
            + struct.pack("<I", _masked_crc32c(data))
        )

    def flush(self) -> None:
        """Push buffered events to disk."""
        if not self._file.closed:
            self._file.flush()
            self._last_flush = time.time()

    def close(self) -> None:
        """Flush and close the file; safe to call twice."""
        if not self._file.closed:
            self._file.close()


_event_file_ids = itertools.count()
"""Numbers the event files of this process, as TensorBoard's own writer does."""

_FLOAT32_MAX = 3.4028234663852886e38


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint; a negative int64 as its 64-bit two's complement."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _pb_bytes(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (string, bytes or sub-message)."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _pb_double(field: int, value: float) -> bytes:
    """A protobuf ``double`` field."""
    return _varint(field << 3 | 1) + struct.pack("<d", value)


def _crc32c_table() -> list[int]:
    """Lookup table of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data``, the checksum TFRecord files use.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    table = _CRC32C
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's masked checksum: the CRC rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _existing_header(path: Path) -> list[str] | None:
    """The header of ``path``, or None if it is missing or empty (or holds only a header
    cut short).

    A last row cut short by a crash (no final newline) is cut off, so that the next row
    appended starts on a line of its own.
    """
    try:
        with open_no_follow(path, "rb+") as f:
            end = f.seek(0, os.SEEK_END)
            if end == 0:
                return None
            f.seek(end - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                keep = f.read().rfind(b"\n") + 1
                f.truncate(keep)
                if keep == 0:
                    return None
    except FileNotFoundError:
        return None
    with open_no_follow(path, "r", newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    if not header:
        raise ValueError(f"{path}: the first line is empty; expected the CSV header")
    return header


def _rewrite_with_columns(path: Path, columns: Sequence[str]) -> None:
    """Replace the CSV at ``path`` with one whose header is ``columns``, keeping every row.

    ``columns`` must start with the file's current header; rows get empty cells for the
    added columns. The new file is written with :func:`~shoal.run.files.atomic_write_bytes`
    (temp file beside it, fsync, ``os.replace``, directory fsync): a reader sees the old
    file or the new one, and if anything fails the old file is untouched and no temp file
    is left.
    """
    path = Path(path)
    with open_no_follow(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")
    header = next(csv.reader(io.StringIO(text[: text.find("\n") + 1])), [])
    if list(columns[: len(header)]) != header:
        raise ValueError(f"{path}: columns {list(columns)} do not extend {header}")
    out = io.StringIO(newline="")
    csv.writer(out).writerow(columns)
    if b'"' not in data and data.count(b"\n") == data.count(b"\r\n"):
        # No quoted cells, so every line is one row: pad each by text replacement
        # (about 20x faster than parsing; a short row gains empty cells all the same).
        pad = b"," * (len(columns) - len(header))
        body = data[data.find(b"\n") + 1 :].replace(b"\r\n", pad + b"\r\n")
        content = out.getvalue().encode("utf-8") + body
    else:
        writer = csv.writer(out)
        width = len(columns)
        rows = csv.reader(io.StringIO(text, newline=""))
        next(rows, None)
        for row in rows:
            writer.writerow(row + [""] * (width - len(row)))
        content = out.getvalue().encode("utf-8")
    atomic_write_bytes(path, content)


def read_metrics(csv_path: Path) -> list[dict[str, str]]:
    """All rows of a run's ``metrics.csv`` as dicts over the header's columns; a cell that
    does not apply is ''."""
    with open_no_follow(csv_path, "r", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, restval=""))
