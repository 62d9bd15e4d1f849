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
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from shoal.envs.mapf import UNREACHABLE, MapfEnv, bfs_distances
from shoal.errors import ConfigError

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


def _lines(path: PathLike) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _bad(path: PathLike, line: int, message: str) -> ConfigError:
    return ConfigError(f"{os.fspath(path)} line {line}: {message}")


def read_map(path: PathLike) -> np.ndarray:
    """The bool obstacle grid ``(H, W)`` (True: blocked) of a MovingAI ``.map`` file.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.map"
        >>> _ = path.write_text("type octile\\nheight 2\\nwidth 3\\nmap\\n.@.\\nT..\\n")
        >>> read_map(path).astype(int).tolist()
        [[0, 1, 0], [1, 0, 0]]
    """
    lines = _lines(path)
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
                path, n, f"expected 'type T', 'height H', 'width W' or 'map', got {lines[n - 1]!r}"
            )
        header[words[0]] = words[1]
    size = {}
    for key in ("type", "height", "width"):
        if key not in header:
            raise _bad(path, n, f"the header has no '{key}' line before 'map'")
        if key != "type":
            value = header[key]
            if not value.isdigit() or int(value) < 1:
                raise _bad(path, n, f"{key} {value!r} is not a whole number >= 1")
            size[key] = int(value)
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
                f"map row {r} has {sorted(bad)}; allowed: {PASSABLE!r} (free), {BLOCKED!r}"
                " (blocked)",
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
    lines = _lines(path)
    first = lines[0].split() if lines else []
    if len(first) != 2 or first[0] != "version":
        got = lines[0] if lines else "an empty file"
        raise _bad(path, 1, f"expected 'version 1', got {got!r}")
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
    """One parsed scenario line, or an error naming the field that is not a number."""
    values: list[Any] = []
    for i, (name, text) in enumerate(zip(SCEN_FIELDS, fields)):
        try:
            value = fields[1] if i == 1 else float(text) if i == 8 else int(text)
        except ValueError:
            kind = "a number" if i == 8 else "a whole number"
            raise _bad(path, n, f"field {i + 1} ({name}) {text!r} is not {kind}") from None
        if i not in (1, 8) and value < 0:
            raise _bad(path, n, f"field {i + 1} ({name}) {text!r} is negative")
        values.append(value)
    return ScenEntry(*values)


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
