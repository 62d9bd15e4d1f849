"""The MovingAI benchmark formats (Sturtevant 2012; Stern et al. 2019's MAPF benchmark) for
:class:`shoal.envs.mapf.MapfEnv`: ``.map`` grids and ``.scen`` start/goal scenarios.

A ``.map`` file is a header, then the grid::

    type octile
    height H
    width W
    map
    <H rows of W characters>

``.``, ``G`` and ``S`` are passable; ``@``, ``O``, ``T`` and ``W`` are blocked (trees and
water count as obstacles, as in MAPF). The ``height`` and ``width`` lines may come in either
order; any ``type`` is read.

A ``.scen`` file is ``version 1`` (or ``version 1.0``), then one line per start/goal pair of
nine tab-separated fields: bucket, map file name, map width, map height, start x, start y,
goal x, goal y, optimal length. **x is the column and y the row**, both from 0 at the top
left. MAPF papers take the first N lines as the N agents. The lengths in the published files
are octile (8-neighbourhood, diagonals ``sqrt(2)``); :func:`write_scen` writes
4-neighbourhood lengths, the ones :class:`~shoal.envs.mapf.MapfEnv` agents walk, and the
reader ignores the column. Every malformed line is reported with its file and line number
and what was expected there.

Both readers take UTF-8 text (a leading byte-order mark is skipped) and read numbers in
ASCII digits only: Python's ``int()`` also takes other scripts' digits (``"３２"``,
``"٣٢"``) and ``1_000``, none of which a MovingAI file holds, so they are errors, as are
bytes that are not UTF-8 and files that cannot be read. Every error is a one-line
:class:`~shoal.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from shoal.envs.mapf import UNREACHABLE, MapfEnv, bfs_distances
from shoal.errors import ConfigError
from shoal.run.files import read_text

__all__ = [
    "BLOCKED",
    "PASSABLE",
    "ScenEntry",
    "env_from_scenario",
    "read_map",
    "read_scen",
    "write_map",
    "write_scen",
]

PASSABLE = ".GS"
"""Map characters of free cells."""
BLOCKED = "@OTW"
"""Map characters of obstacles."""
SCEN_FIELDS = (
    "bucket",
    "map file name",
    "map width",
    "map height",
    "start x",
    "start y",
    "goal x",
    "goal y",
    "optimal length",
)
PathLike = str | os.PathLike

# Numbers as MovingAI files write them, ASCII only ([0-9], not \d, which matches every
# script's digits). A .scen field may have a sign, so that a negative one is reported as
# negative; a .map size may not (as before: it is a count of rows or columns).
_SIGNED = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+")
# Significant digits a whole number may have. More cannot be a map size or a cell (no file
# holds 10**18 rows), and int() refuses strings of over 4300 digits with a ValueError.
_MAX_DIGITS = 18
# The optimal length: a decimal, ASCII only (float() also takes '１.５', '1_0.5', 'nan').
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Characters of a bad line quoted in an error message: enough to recognise it, short
# enough that a huge garbage line does not flood the terminal.
_QUOTE_CHARS = 60


@dataclasses.dataclass(frozen=True)
class ScenEntry:
    """One line of a ``.scen`` file, with the file's x (column) and y (row) fields;
    :attr:`start` and :attr:`goal` give them as ``(row, col)``."""

    bucket: int
    map_name: str
    width: int
    height: int
    start_x: int
    start_y: int
    goal_x: int
    goal_y: int
    optimal_length: float

    @property
    def start(self) -> tuple[int, int]:
        """``(row, col)`` of the start."""
        return self.start_y, self.start_x

    @property
    def goal(self) -> tuple[int, int]:
        """``(row, col)`` of the goal."""
        return self.goal_y, self.goal_x


def _name(path: PathLike) -> str:
    """The path as messages show it: as given, or quoted when it holds a line break or
    another unprintable character (every message is one line)."""
    name = os.fsdecode(path)
    return name if name.isprintable() else repr(name)


def _quote(text: str) -> str:
    """``repr`` of a bad line or field, cut to :data:`_QUOTE_CHARS` characters."""
    if len(text) <= _QUOTE_CHARS:
        return repr(text)
    return f"{text[:_QUOTE_CHARS]!r}... ({len(text)} characters)"


def _first(chars: list[str], most: int = 10) -> str:
    """The list ``chars`` as a message shows it: its first ``most`` items, then a count."""
    if len(chars) <= most:
        return str(chars)
    return f"{chars[:most]} and {len(chars) - most} more"


def _lines(path: PathLike, kind: str) -> list[str]:
    """The lines of ``path``, a ``kind`` (``.map`` or ``.scen``) file, or a one-line
    error: a file that cannot be read, or one that is not UTF-8 text."""
    text = read_text(
        path,
        f"{kind} file",
        ConfigError,
        allowed=f"a plain-text {kind} file in UTF-8 (MovingAI's are ASCII)",
        at_line=lambda line: f"{_name(path)} line {line}",
    )
    return text.splitlines()


def _bad(path: PathLike, line: int, message: str) -> ConfigError:
    return ConfigError(f"{_name(path)} line {line}: {message}")


def _whole(path: PathLike, line: int, what: str, text: str, *, signed: bool) -> int:
    """``text``, the field ``what`` on ``line``, as an int, or an error: not ASCII digits
    (with a sign where ``signed``), or more than :data:`_MAX_DIGITS` of them."""
    pattern = _SIGNED if signed else _UNSIGNED
    if not pattern.fullmatch(text):
        sign = "an optional sign and " if signed else ""
        raise _bad(
            path,
            line,
            f"{what} {_quote(text)} is not a whole number; allowed: {sign}ASCII digits 0-9",
        )
    # int() counts leading zeros towards its 4300-digit limit, so they go first
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > _MAX_DIGITS:
        raise _bad(
            path, line, f"{what} {_quote(text)} is too large; allowed: at most {_MAX_DIGITS} digits"
        )
    value = int(digits or "0")
    return -value if text.startswith("-") else value


def read_map(path: PathLike) -> np.ndarray:
    """The bool obstacle grid ``(H, W)`` (True: blocked) of a MovingAI ``.map`` file.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.map"
        >>> _ = path.write_text("type octile\\nheight 2\\nwidth 3\\nmap\\n.@.\\nT..\\n")
        >>> read_map(path).astype(int).tolist()
        [[0, 1, 0], [1, 0, 0]]
    """
    lines = _lines(path, ".map")
    header: dict[str, str] = {}
    n = 0
    while True:
        if n >= len(lines):
            raise _bad(path, n + 1, "the file ends before the 'map' line")
        words = lines[n].split()
        n += 1
        if words == ["map"]:
            break
        if len(words) != 2 or words[0] not in ("type", "height", "width"):
            raise _bad(
                path,
                n,
                f"expected 'type T', 'height H', 'width W' or 'map', got {_quote(lines[n - 1])}",
            )
        header[words[0]] = words[1]
    size = {}
    for key in ("type", "height", "width"):
        if key not in header:
            raise _bad(path, n, f"the header has no '{key}' line before 'map'")
        if key != "type":
            # ASCII only: str.isdigit() and int() also take '３２' and '٣٢' (isdigit even '²')
            size[key] = _whole(path, n, key, header[key], signed=False)
            if size[key] < 1:
                raise _bad(path, n, f"{key} {size[key]} is not >= 1")
    h, w = size["height"], size["width"]
    rows = lines[n : n + h]
    if len(rows) < h or any(line.strip() for line in lines[n + h :]):
        got = len([line for line in lines[n:] if line.strip()])
        raise _bad(path, n + 1, f"expected {h} map rows (height {h}), got {got}")
    for r, row in enumerate(rows):
        if len(row) != w:
            raise _bad(path, n + 1 + r, f"map row {r} has {len(row)} characters, width is {w}")
        bad = set(row) - set(PASSABLE + BLOCKED)
        if bad:
            raise _bad(
                path,
                n + 1 + r,
                f"map row {r} has {_first(sorted(bad))}; allowed: {PASSABLE!r} (free),"
                f" {BLOCKED!r} (blocked)",
            )
    chars = np.array([list(row) for row in rows])
    return np.isin(chars, list(BLOCKED))


def write_map(path: PathLike, grid: np.ndarray) -> None:
    """Write bool obstacle grid ``grid`` as a MovingAI ``.map`` file (``@`` for obstacles,
    ``.`` for free cells)."""
    grid = np.asarray(grid, dtype=bool)
    if grid.ndim != 2 or grid.size == 0:
        raise ConfigError(f"write_map grid: shape {grid.shape} is not a non-empty 2-d map")
    h, w = grid.shape
    rows = ["".join(row) for row in np.where(grid, "@", ".").tolist()]
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"type octile\nheight {h}\nwidth {w}\nmap\n" + "\n".join(rows) + "\n")


def read_scen(path: PathLike) -> list[ScenEntry]:
    """The entries of a MovingAI ``.scen`` file, in file order (blank lines skipped).
    Fields are tab-separated; a line without tabs is split on whitespace."""
    lines = _lines(path, ".scen")
    first = lines[0].split() if lines else []
    if len(first) != 2 or first[0] != "version":
        got = _quote(lines[0]) if lines else "an empty file"
        raise _bad(path, 1, f"expected 'version 1', got {got}")
    entries = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) != len(SCEN_FIELDS):
            raise _bad(
                path,
                n,
                f"expected {len(SCEN_FIELDS)} tab-separated fields ({', '.join(SCEN_FIELDS)}),"
                f" got {len(fields)}",
            )
        entries.append(_entry(path, n, [f.strip() for f in fields]))
    return entries


def _entry(path: PathLike, n: int, fields: list[str]) -> ScenEntry:
    """One parsed scenario line, or an error naming the field that is not a number, is
    negative, or puts a start or goal outside the map the line gives (a huge coordinate
    would otherwise overflow numpy's integers later, far from the file)."""
    values: list[Any] = []
    for i, (name, text) in enumerate(zip(SCEN_FIELDS, fields)):
        if i == 1:
            values.append(text)
            continue
        if i == 8:
            value: Any = float(text) if _DECIMAL.fullmatch(text) else math.nan
            if not math.isfinite(value):  # not a decimal, or one too large for a float
                raise _bad(
                    path,
                    n,
                    f"field 9 ({name}) {_quote(text)} is not a number; allowed: a finite"
                    " decimal in ASCII digits such as 13.65685425",
                )
        else:
            value = _whole(path, n, f"field {i + 1} ({name})", text, signed=True)
            if value < 0:
                raise _bad(path, n, f"field {i + 1} ({name}) {_quote(text)} is negative")
        values.append(value)
    entry = ScenEntry(*values)
    for i in (2, 3):
        if values[i] < 1:
            raise _bad(path, n, f"field {i + 1} ({SCEN_FIELDS[i]}) {values[i]} is not >= 1")
    for i in range(4, 8):
        limit, side = (entry.width, "width") if i % 2 == 0 else (entry.height, "height")
        if values[i] >= limit:
            raise _bad(
                path,
                n,
                f"field {i + 1} ({SCEN_FIELDS[i]}) {values[i]} is outside the map of {side}"
                f" {limit}; allowed: 0..{limit - 1}",
            )
    return entry


def write_scen(
    path: PathLike,
    map_name: str,
    grid: np.ndarray,
    starts: Sequence[Sequence[int]] | np.ndarray,
    goals: Sequence[Sequence[int]] | np.ndarray,
) -> list[ScenEntry]:
    """Write a ``.scen`` file for ``(row, col)`` starts and goals on ``grid``, each line's
    optimal length the 4-neighbourhood BFS distance and its bucket that length // 4.
    Returns the entries written."""
    grid = np.asarray(grid, dtype=bool)
    h, w = grid.shape
    starts = np.asarray(starts, dtype=np.intp).reshape(-1, 2).tolist()
    goals = np.asarray(goals, dtype=np.intp).reshape(-1, 2).tolist()
    if len(starts) != len(goals):
        raise ConfigError(f"write_scen: {len(starts)} starts but {len(goals)} goals")
    if any(ch in map_name for ch in "\t\n"):
        raise ConfigError(f"write_scen map_name: {map_name!r} has a tab or a line break")
    entries = []
    for i, ((sr, sc), (gr, gc)) in enumerate(zip(starts, goals)):
        for what, (r, c) in (("start", (sr, sc)), ("goal", (gr, gc))):
            if not (0 <= r < h and 0 <= c < w) or grid[r, c]:
                raise ConfigError(f"write_scen: entry {i}'s {what} {(r, c)} is outside or blocked")
        length = int(bfs_distances(grid, (gr, gc))[sr, sc])
        if length >= UNREACHABLE:
            raise ConfigError(
                f"write_scen: entry {i}'s goal {(gr, gc)} is unreachable from {(sr, sc)}"
            )
        entries.append(ScenEntry(length // 4, map_name, w, h, sc, sr, gc, gr, float(length)))
    with open(path, "w", encoding="utf-8") as f:
        f.write("version 1\n")
        for e in entries:
            fields = (e.bucket, e.map_name, e.width, e.height)
            fields += (e.start_x, e.start_y, e.goal_x, e.goal_y)
            f.write("\t".join(map(str, fields)) + f"\t{e.optimal_length:.8f}\n")
    return entries


def env_from_scenario(
    map_path: PathLike, scen_path: PathLike, num_agents: int, **env_kwargs: Any
) -> MapfEnv:
    """A :class:`~shoal.envs.mapf.MapfEnv` on the map of ``map_path`` with the starts and
    goals of the first ``num_agents`` entries of ``scen_path`` (the MAPF benchmark
    convention). ``env_kwargs`` go to the env (``fov``, ``max_steps``, ...)."""
    grid = read_map(map_path)
    entries = read_scen(scen_path)
    if not 1 <= num_agents <= len(entries):
        raise ConfigError(
            f"env_from_scenario num_agents: {num_agents!r} is out of range; {os.fspath(scen_path)}"
            f" has {len(entries)} entries"
        )
    h, w = grid.shape
    for i, e in enumerate(entries[:num_agents]):
        if (e.height, e.width) != (h, w):
            raise ConfigError(
                f"env_from_scenario: entry {i} of {os.fspath(scen_path)} is for a"
                f" {e.width} x {e.height} (width x height) map; {os.fspath(map_path)} is"
                f" {w} x {h}"
            )
    starts = [e.start for e in entries[:num_agents]]
    goals = [e.goal for e in entries[:num_agents]]
    return MapfEnv(num_agents, grid=grid, starts=starts, goals=goals, **env_kwargs)
