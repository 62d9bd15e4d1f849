"""Sudoku boards: parse, format, candidates, solve, generate, and bundled puzzle sets.

A board is an ``int8`` array of shape ``(N, N)``, ``N = 9`` (3x3 boxes) or ``N = 4`` (2x2
boxes), with 0 for a blank. Everything here is plain numpy and Python, so the puzzle tools
can be used (and tested) without gymnasium; :mod:`shoal.envs.sudoku` wraps them in an env.

:func:`candidates` is on an agent's hot path (the env calls it every step), so it is a few
vectorized numpy calls over precomputed per-size tables. :func:`solve` and :func:`generate`
are pure-Python bitmask backtracking: fast enough to check uniqueness thousands of times
while generating puzzles, and they need no compiled extension.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shoal.errors import ShoalError
from shoal.run.files import atomic_write_text, read_text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "unit_tables",
    "SIZES",
    "SudokuError",
    "as_board",
    "bundled_names",
    "bundled_puzzles",
    "candidates",
    "format_puzzle",
    "generate",
    "load_puzzles",
    "parse_puzzle",
    "save_puzzles",
    "solve",
]

#: Board sizes supported, mapped to their box size.
SIZES: dict[int, int] = {4: 2, 9: 3}

# Fewest givens a puzzle with a unique solution can have: 17 for 9x9 (McGuire et al., 2012,
# exhaustive search), 4 for 4x4. Asking for fewer can never succeed, so fail at once rather
# than after many doomed attempts.
_MIN_UNIQUE_GIVENS = {4: 4, 9: 17}

# Whole fresh grids tried before generate() gives up on reaching the requested givens.
_GENERATE_ATTEMPTS = 50


class SudokuError(ShoalError, ValueError):
    """A sudoku puzzle, board, action or puzzle file that cannot be used."""


def _cell(index: int, n: int) -> str:
    """1-based ``r{row}c{col}`` name of a flat cell index, as used in every message."""
    r, c = divmod(index, n)
    return f"r{r + 1}c{c + 1}"


@functools.cache
def _tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-size lookup tables, built once: units, peer matrix, one-hot digits, cell units.

    Returns ``(units, peers, one_hot, cell_units)`` where ``units`` is ``(3N, N)`` flat cell
    indices of the N rows, N columns and N boxes (in that order); ``peers[i, j]`` is 1.0 when
    cells i and j share a row, column or box (i included); ``one_hot[d]`` is the row vector
    of digit d over digits 1..N (all zeros for a blank); ``cell_units[i]`` lists the unit
    numbers (row, 9 + col, 18 + box for 9x9) of cell i.
    """
    b = SIZES[n]
    cells = np.arange(n * n)
    row, col = divmod(cells, n)
    box = (row // b) * b + col // b
    units = np.concatenate(
        [
            cells.reshape(n, n),
            cells.reshape(n, n).T,
            np.stack([cells[box == k] for k in range(n)]),
        ]
    )
    same = (row[:, None] == row) | (col[:, None] == col) | (box[:, None] == box)
    # float32 so that peers @ one_hot is one small BLAS call: it counts, for every cell, how
    # often each digit occurs among its peers, in a single vectorized step.
    peers = same.astype(np.float32)
    one_hot = np.eye(n + 1, dtype=np.float32)[:, 1:]
    cell_units = np.stack([row, n + col, 2 * n + box], axis=1)
    for t in (units, peers, one_hot, cell_units):
        t.setflags(write=False)
    return units, peers, one_hot, cell_units


def unit_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(units, cell_units)`` for an n x n board: the (3n, n) flat cells of every row,
    column and box, and the three unit numbers of each cell (read-only, cached)."""
    units, _, _, cell_units = _tables(n)
    return units, cell_units


def _candidates_flat(flat: np.ndarray, n: int) -> np.ndarray:
    """:func:`candidates` on a flat, already valid ``int8`` board (no checks: hot path)."""
    _, peers, one_hot, _ = _tables(n)
    # A blank's own row of one_hot is zero, so a cell counts digits among its peers only;
    # a filled cell sees its own digit, but it is masked out below anyway.
    cand = (peers @ one_hot[flat]) == 0
    cand &= (flat == 0)[:, None]
    return cand


def _board_size(shape: tuple[int, ...]) -> int:
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] not in SIZES:
        raise SudokuError(f"board has shape {shape}; expected (9, 9) or (4, 4)")
    return shape[0]


def _check_values(board: np.ndarray) -> np.ndarray:
    """Shape, dtype and range check; returns a fresh ``int8`` copy of ``board``."""
    arr = np.asarray(board)
    n = _board_size(arr.shape)
    if arr.dtype.kind not in "iub":
        raise SudokuError(f"board has dtype {arr.dtype}; expected integers 0..{n}")
    bad = np.flatnonzero((arr < 0) | (arr > n))
    if bad.size:
        i = int(bad[0])
        raise SudokuError(
            f"board value {arr.flat[i]} at {_cell(i, n)} is outside 0..{n} (0 = blank)"
        )
    return arr.astype(np.int8, copy=True)


def _check_conflicts(board: np.ndarray) -> None:
    """Raise if a digit occurs twice in a row, column or box, naming the digit and cells."""
    n = board.shape[0]
    units, _, _, _ = _tables(n)
    flat = board.reshape(-1)
    vals = flat[units]  # (3N, N): the digits of every unit
    counts = (vals[:, :, None] == np.arange(1, n + 1)).sum(axis=1)  # (3N, N digits)
    bad_units, bad_digits = np.nonzero(counts > 1)
    if bad_units.size == 0:
        return
    u, d = int(bad_units[0]), int(bad_digits[0]) + 1
    first, second = units[u][vals[u] == d][:2]
    kind = ("row", "column", "box")[u // n]
    raise SudokuError(
        f"digit {d} appears twice in {kind} {u % n + 1} "
        f"(cells {_cell(int(first), n)} and {_cell(int(second), n)})"
    )


def as_board(puzzle: np.ndarray | str) -> np.ndarray:
    """A validated ``int8`` board (a fresh copy) from a puzzle string or an array.

    Strings go through :func:`parse_puzzle`; arrays must be ``(9, 9)`` or ``(4, 4)``
    integers in ``0..N`` whose given digits do not already conflict.

    Example:
        >>> as_board("1234" "3412" "2143" "4321").shape
        (4, 4)
    """
    if isinstance(puzzle, str):
        return parse_puzzle(puzzle)
    board = _check_values(puzzle)
    _check_conflicts(board)
    return board


def parse_puzzle(text: str) -> np.ndarray:
    """Parse 81 (9x9) or 16 (4x4) characters, row by row, into an ``int8`` board.

    Blanks are ``'0'`` or ``'.'``; whitespace and newlines are ignored, so a one-line string
    and a grid of N lines both parse. Raises :class:`SudokuError` naming the problem: the
    wrong length, a bad character (and where), a digit too big for a 4x4, or two givens that
    already conflict.

    Example:
        >>> parse_puzzle("12..\\n34..\\n....\\n....")[0]
        array([1, 2, 0, 0], dtype=int8)
    """
    if not isinstance(text, str):
        raise SudokuError(f"puzzle must be a string, got {type(text).__name__}")
    chars = "".join(text.split())
    if len(chars) not in (16, 81):
        raise SudokuError(
            f"puzzle has {len(chars)} characters (ignoring whitespace); expected 81 for a "
            "9x9 or 16 for a 4x4"
        )
    n = 9 if len(chars) == 81 else 4
    values = []
    for i, ch in enumerate(chars):
        if ch == ".":
            values.append(0)
        elif ch in "0123456789":
            d = ord(ch) - 48
            if d > n:
                raise SudokuError(
                    f"digit {d} at position {i + 1} ({_cell(i, n)}) is too large for a "
                    f"{n}x{n} puzzle; allowed: digits 1-{n}, '0' or '.' for a blank"
                )
            values.append(d)
        else:
            raise SudokuError(
                f"bad character {ch!r} at position {i + 1} ({_cell(i, n)}); allowed: "
                f"digits 1-{n}, '0' or '.' for a blank"
            )
    board = np.array(values, dtype=np.int8).reshape(n, n)
    _check_conflicts(board)
    return board


def format_puzzle(board: np.ndarray) -> str:
    """The board as one line of 81 or 16 characters, row by row, ``'0'`` for blanks.

    The inverse of :func:`parse_puzzle` for any board without conflicts.

    Example:
        >>> format_puzzle(parse_puzzle("1.3." "...." "...." "...2"))
        '1030000000000002'
    """
    flat = _check_values(board).reshape(-1)
    return "".join(map(str, flat.tolist()))


def candidates(board: np.ndarray) -> np.ndarray:
    """Which digits each cell may still take: bool ``(N*N, N)``, row per cell, column per digit.

    ``candidates(board)[cell, d - 1]`` is True iff the cell (``row * N + col``) is blank and
    digit ``d`` does not occur in its row, column or box. Filled cells have no candidates.
    Boards with conflicting digits are allowed (a conflicting digit simply rules itself out).

    Vectorized (one lookup, one small matrix product); about 7 us for a 9x9. An ``int8``
    board only has its shape checked, to stay cheap; other dtypes are fully validated.

    Example:
        >>> candidates(parse_puzzle("12.." "34.." "...." "...."))[2]
        array([False, False,  True,  True])
    """
    arr = np.asarray(board)
    if arr.dtype != np.int8:
        arr = _check_values(arr)
    n = _board_size(arr.shape)
    # Viewed as uint8, a negative value becomes >= 128 and fails the lookup like one > N.
    flat = arr.reshape(-1).view(np.uint8)
    try:
        return _candidates_flat(flat, n)
    except IndexError:
        _check_values(arr)  # raises, naming the bad value and its cell
        raise


# ---------------------------------------------------------------- solving (bitmasks)

_POPCOUNT = [bin(m).count("1") for m in range(1 << 9)]


def _search(
    grid: list[int],
    n: int,
    limit: int,
    rng: np.random.Generator | None = None,
) -> tuple[int, list[int] | None]:
    """Count solutions of ``grid`` (flat, 0 = blank) up to ``limit``; first one filled in.

    Digits are bitmasks (bit d-1 for digit d) per row, column and box; each step fills the
    blank with the fewest candidates (so forced cells go first and dead ends show at once).
    With ``rng`` the candidate digits are tried in random order (to build random grids).
    """
    search = _Search(grid, n, limit, rng)
    if search.conflict:
        return 0, None  # givens already conflict
    search.fill(0)
    return search.count, (search.first[0] if search.first else None)


class _Search:
    """The state of one :func:`_search`: unit bitmasks, the blanks left, solutions found."""

    def __init__(
        self, grid: list[int], n: int, limit: int, rng: np.random.Generator | None
    ) -> None:
        b = SIZES[n]
        self.n, self.limit, self.rng = n, limit, rng
        self.full = (1 << n) - 1
        self.rows, self.cols, self.boxes = [0] * n, [0] * n, [0] * n
        self.blanks: list[tuple[int, int, int, int]] = []
        self.conflict = False
        for i, v in enumerate(grid):
            r, c = divmod(i, n)
            k = (r // b) * b + c // b
            if not v:
                self.blanks.append((i, r, c, k))
                continue
            bit = 1 << (v - 1)
            if (self.rows[r] | self.cols[c] | self.boxes[k]) & bit:
                self.conflict = True
            self.rows[r] |= bit
            self.cols[c] |= bit
            self.boxes[k] |= bit
        self.work = list(grid)
        self.first: list[list[int]] = []
        self.count = 0

    def fill(self, depth: int) -> bool:
        """Fill ``blanks[depth:]``; True when ``limit`` solutions are found (stop)."""
        blanks = self.blanks
        if depth == len(blanks):
            self.count += 1
            if not self.first:
                self.first.append(list(self.work))
            return self.count >= self.limit
        best, best_free = self._choose(depth)
        if best < 0:
            return False
        blanks[depth], blanks[best] = blanks[best], blanks[depth]
        i, r, c, k = blanks[depth]
        digits = [d for d in range(self.n) if best_free >> d & 1]
        if self.rng is not None and len(digits) > 1:
            digits = [digits[j] for j in self.rng.permutation(len(digits))]
        rows, cols, boxes, work = self.rows, self.cols, self.boxes, self.work
        for d in digits:
            bit = 1 << d
            rows[r] |= bit
            cols[c] |= bit
            boxes[k] |= bit
            work[i] = d + 1
            stop = self.fill(depth + 1)
            rows[r] &= ~bit
            cols[c] &= ~bit
            boxes[k] &= ~bit
            if stop:
                work[i] = 0
                return True
        work[i] = 0
        return False

    def _choose(self, depth: int) -> tuple[int, int]:
        """The blank to fill next and its candidate digits: the most-constrained one (a
        forced cell ends the scan early), else a hidden single. (-1, 0): a dead end."""
        best, best_free, best_pop = depth, 0, self.n + 1
        frees = []
        for j in range(depth, len(self.blanks)):
            _, r, c, k = self.blanks[j]
            free = self.full & ~(self.rows[r] | self.cols[c] | self.boxes[k])
            p = _POPCOUNT[free]
            if p < best_pop:
                best, best_free, best_pop = j, free, p
                if p <= 1:
                    break
            frees.append(free)
        if best_pop == 0:
            return -1, 0
        if best_pop > 1:
            return self._hidden_single(depth, frees, best, best_free)
        return best, best_free

    def _hidden_single(
        self, depth: int, frees: list[int], best: int, best_free: int
    ) -> tuple[int, int]:
        """No cell is forced: look for a digit that fits in only one cell of some row,
        column or box (forced too), or in none (dead end: (-1, 0)). This cuts the search on
        hard puzzles by orders of magnitude for the price of one more pass."""
        n, blanks = self.n, self.blanks
        once, twice = [0] * (3 * n), [0] * (3 * n)
        for j in range(depth, len(blanks)):
            f = frees[j - depth]
            _, r, c, k = blanks[j]
            for u in (r, c + n, k + 2 * n):
                twice[u] |= once[u] & f
                once[u] |= f
        used = self.rows + self.cols + self.boxes
        for u in range(3 * n):
            if once[u] | used[u] != self.full:
                return -1, 0  # some missing digit fits nowhere in unit u
            single = once[u] & ~twice[u]
            if single:
                digit = single & -single
                slot, unit = divmod(u, n)  # slot 0: row, 1: col, 2: box
                for j in range(depth, len(blanks)):
                    if blanks[j][slot + 1] == unit and frees[j - depth] & digit:
                        return j, digit
                return best, digit
        return best, best_free


def solve(board: np.ndarray | str, limit: int = 2) -> tuple[int, np.ndarray | None]:
    """Count the board's solutions, stopping at ``limit``; return ``(count, first or None)``.

    ``limit=2`` (the default) is the cheap uniqueness test: ``count == 1`` means unique.
    Givens that already conflict give ``(0, None)``. Backtracking with bitmasks, filling the
    most constrained blank first; even very hard 9x9 puzzles take well under a second.

    Example:
        >>> count, solution = solve("12.." "34.." "...." "....")
        >>> count
        2
    """
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise SudokuError(f"limit must be an integer >= 1, got {limit!r}")
    arr = parse_puzzle(board) if isinstance(board, str) else _check_values(board)
    n = arr.shape[0]
    count, first = _search(arr.reshape(-1).tolist(), n, int(limit))
    if first is None:
        return count, None
    return count, np.array(first, dtype=np.int8).reshape(n, n)


def generate(givens: int, *, size: int = 9, rng: np.random.Generator) -> np.ndarray:
    """A random puzzle with exactly ``givens`` givens and a unique solution.

    Builds a random full grid (randomized backtracking), then blanks cells in random order,
    keeping a blank only if the solution stays unique, until ``givens`` remain. A grid that
    gets stuck with more givens is thrown away for a fresh one; after a bounded number of
    grids a :class:`SudokuError` says the request may be too few givens. 9x9 with >= 30 and
    4x4 with >= 6 givens succeed reliably; fewer get slower and may fail. Deterministic for
    a given ``rng`` state.

    Example:
        >>> import numpy as np
        >>> puzzle = generate(8, size=4, rng=np.random.default_rng(0))
        >>> int((puzzle > 0).sum()), solve(puzzle)[0]
        (8, 1)
    """
    if size not in SIZES:
        raise SudokuError(f"size must be 9 or 4, got {size!r}")
    cells = size * size
    if isinstance(givens, bool) or not isinstance(givens, (int, np.integer)):
        raise SudokuError(f"givens must be an integer, got {givens!r}")
    if not 1 <= givens <= cells:
        raise SudokuError(f"givens must be in 1..{cells} for a {size}x{size}, got {givens}")
    least = _MIN_UNIQUE_GIVENS[size]
    if givens < least:
        raise SudokuError(
            f"givens={givens} is too few: no {size}x{size} sudoku with a unique solution has "
            f"fewer than {least} givens"
        )
    if not isinstance(rng, np.random.Generator):
        raise SudokuError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    for _ in range(_GENERATE_ATTEMPTS):
        _, grid = _search([0] * cells, size, 1, rng)
        assert grid is not None  # an empty board always has a solution
        puzzle = list(grid)
        left = cells
        for i in rng.permutation(cells).tolist():
            if left == givens:
                break
            digit, puzzle[i] = puzzle[i], 0
            if _search(puzzle, size, 2)[0] == 1:
                left -= 1
            else:
                puzzle[i] = digit
        if left == givens:
            return np.array(puzzle, dtype=np.int8).reshape(size, size)
    raise SudokuError(
        f"could not reach {givens} givens with a unique solution in {_GENERATE_ATTEMPTS} "
        f"random {size}x{size} grids; the requested givens may be too few (9x9 with >= 30 "
        "and 4x4 with >= 6 work reliably)"
    )


# ---------------------------------------------------------------- puzzle files


def load_puzzles(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """Read puzzles, one per line; blank lines and lines starting with ``#`` are skipped.

    Errors name the file and the 1-based line number. All puzzles in a file must be the
    same size. The file must be UTF-8 text (a leading byte-order mark is skipped) and hold
    at least one puzzle: an empty one is an error here, where the file can be named,
    rather than a division by zero wherever its puzzles are counted.
    """
    path = Path(path)
    text = read_text(
        path,
        "puzzle file",
        SudokuError,
        allowed="a plain-text puzzle file in UTF-8, one puzzle per line",
        at_line=lambda line: f"{_shown(path)}, line {line}",
    )
    boards = _parse_lines(text, _shown(path))
    if not boards:
        raise SudokuError(
            f"puzzle file {_shown(path)} holds no puzzles; expected one puzzle per line (81"
            " characters for a 9x9, 16 for a 4x4; blank lines and '#' comments are skipped)"
        )
    return boards


def _shown(path: Path) -> str:
    """The path as messages show it: as given, or quoted when it holds a line break or
    another unprintable character (every message is one line)."""
    name = str(path)
    return name if name.isprintable() else repr(name)


def _parse_lines(text: str, source: str) -> list[np.ndarray]:
    boards: list[np.ndarray] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            board = parse_puzzle(line)
        except SudokuError as e:
            raise SudokuError(f"{source}, line {lineno}: {e}") from None
        if boards and board.shape != boards[0].shape:
            n, m = board.shape[0], boards[0].shape[0]
            raise SudokuError(
                f"{source}, line {lineno}: a {n}x{n} puzzle, but earlier lines hold {m}x{m}"
            )
        boards.append(board)
    return boards


def save_puzzles(
    path: str | os.PathLike[str], boards: Iterable[np.ndarray], *, header: str | None = None
) -> None:
    """Write puzzles one per line (as :func:`format_puzzle`), atomically.

    The file is written with :func:`~shoal.run.files.atomic_write` (temp file in the same
    directory, fsync, rename), so a reader never sees half a file. ``header`` lines are
    written first, each prefixed with ``# `` (so :func:`load_puzzles` skips them).
    """
    lines = [f"# {h}".rstrip() for h in header.splitlines()] if header else []
    lines += [format_puzzle(b) for b in boards]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _data_dir() -> Traversable:
    return resources.files("shoal.envs") / "data"


def bundled_names() -> list[str]:
    """Names of the puzzle sets shipped with shoal (for :func:`bundled_puzzles`)."""
    return sorted(p.name[:-4] for p in _data_dir().iterdir() if p.name.endswith(".txt"))


@functools.cache
def _bundled(name: str) -> tuple[np.ndarray, ...]:
    text = (_data_dir() / f"{name}.txt").read_text(encoding="utf-8")
    boards = _parse_lines(text, f"bundled puzzle set {name!r}")
    for b in boards:
        b.setflags(write=False)
    return tuple(boards)


def bundled_puzzles(name: str) -> list[np.ndarray]:
    """The puzzles of a set shipped with shoal: ``easy9``, ``medium9`` or ``easy4``.

    Each set was made by :func:`generate` with a fixed seed (the file's header says how), so
    every puzzle has a unique solution. Returns fresh, writable copies.

    Example:
        >>> puzzles = bundled_puzzles("easy4")
        >>> len(puzzles), puzzles[0].shape
        (100, (4, 4))
    """
    names = bundled_names()
    if name not in names:
        raise SudokuError(f"no bundled puzzle set {name!r}; available: {', '.join(names)}")
    return [b.copy() for b in _bundled(name)]
