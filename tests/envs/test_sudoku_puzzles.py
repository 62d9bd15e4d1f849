"""Sudoku puzzle tools: parsing and its errors, candidates, solver, generator, puzzle files."""

from __future__ import annotations

import re
import time
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.envs import sudoku_puzzles as sp
from shoal.envs.sudoku_puzzles import (
    SudokuError,
    as_board,
    bundled_names,
    bundled_puzzles,
    candidates,
    format_puzzle,
    generate,
    load_puzzles,
    parse_puzzle,
    save_puzzles,
    solve,
)
from shoal.errors import ShoalError

# The puzzle from Wikipedia's "Sudoku" article, and its (unique) solution.
WIKI = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
WIKI_SOLUTION = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"
# "AI Escargot", a famously hard 9x9 with a unique solution.
ESCARGOT = "1....7.9..3..2...8..96..5....53..9...1..8...26....4...3......1..4......7..7...3.."
SOLVED4 = "1234341221434321"


def is_solution(grid: np.ndarray, puzzle: np.ndarray) -> bool:
    """A complete grid, every row/column/box a permutation, agreeing with the givens."""
    n = grid.shape[0]
    b = sp.SIZES[n]
    want = set(range(1, n + 1))
    units = [grid[i] for i in range(n)] + [grid[:, i] for i in range(n)]
    units += [grid[r : r + b, c : c + b].ravel() for r in range(0, n, b) for c in range(0, n, b)]
    agrees = bool(np.all((puzzle == 0) | (puzzle == grid)))
    return agrees and all(set(u.tolist()) == want for u in units)


def slow_candidates(board: np.ndarray) -> np.ndarray:
    """Reference: loop over every cell and digit."""
    n = board.shape[0]
    b = sp.SIZES[n]
    out = np.zeros((n * n, n), dtype=bool)
    for r in range(n):
        for c in range(n):
            if board[r, c]:
                continue
            br, bc = r // b * b, c // b * b
            seen = set(board[r].tolist()) | set(board[:, c].tolist())
            seen |= set(board[br : br + b, bc : bc + b].ravel().tolist())
            for d in range(1, n + 1):
                out[r * n + c, d - 1] = d not in seen
    return out


# ---------------------------------------------------------------- parsing


def test_parse_81_chars_with_dots_and_zeros():
    board = parse_puzzle(WIKI)
    assert board.dtype == np.int8 and board.shape == (9, 9)
    assert board[0].tolist() == [5, 3, 0, 0, 7, 0, 0, 0, 0]
    assert np.array_equal(parse_puzzle(WIKI.replace(".", "0")), board)


def test_parse_grid_with_newlines_and_spaces():
    grid = "\n".join(" ".join(WIKI[r * 9 : r * 9 + 9]) for r in range(9)) + "\n"
    assert np.array_equal(parse_puzzle(grid), parse_puzzle(WIKI))


def test_parse_16_chars():
    board = parse_puzzle("12..\n34.0\n....\n...1")
    assert board.shape == (4, 4)
    assert board.tolist() == [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]


@pytest.mark.parametrize("text", [WIKI, WIKI_SOLUTION, ".2..1...3......4", SOLVED4])
def test_format_round_trip(text):
    board = parse_puzzle(text)
    line = format_puzzle(board)
    assert line == text.replace(".", "0")
    assert np.array_equal(parse_puzzle(line), board)


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        (WIKI[:-1], ["80 characters", "81", "16"]),
        ("123", ["3 characters", "81", "16"]),
        ("", ["0 characters"]),
        (WIKI[:4] + "x" + WIKI[5:], ["'x'", "position 5", "r1c5", "digits 1-9", "'.'"]),
        ("12..34..-.......", ["'-'", "position 9", "r3c1", "digits 1-4"]),
        ("1...5...........", ["digit 5", "position 5", "r2c1", "4x4", "1-4"]),
        ("5....5" + "." * 75, ["digit 5 appears twice in row 1 (cells r1c1 and r1c6)"]),
        (
            "." * 9 + "7" + "." * 62 + "7" + "." * 8,
            ["digit 7 appears twice in column 1 (cells r2c1 and r9c1)"],
        ),
        ("......1.......1.", ["digit 1 appears twice in column 3 (cells r2c3 and r4c3)"]),
    ],
)
def test_parse_errors_say_what_is_wrong(text, pieces):
    with pytest.raises(SudokuError) as info:
        parse_puzzle(text)
    for piece in pieces:
        assert piece in str(info.value)


def test_conflict_in_box_names_the_box_and_cells():
    text = "9" + "." * 9 + "9" + "." * 70  # r1c1 and r2c2
    with pytest.raises(
        SudokuError, match=r"digit 9 appears twice in box 1 \(cells r1c1 and r2c2\)"
    ):
        parse_puzzle(text)


def test_sudoku_error_is_a_shoal_error_and_a_value_error():
    with pytest.raises(ShoalError):
        parse_puzzle("1")
    with pytest.raises(ValueError):
        parse_puzzle("1")
    with pytest.raises(SudokuError, match="must be a string"):
        parse_puzzle(123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("board", "message"),
    [
        (np.zeros((3, 3), np.int8), r"shape \(3, 3\); expected \(9, 9\) or \(4, 4\)"),
        (np.zeros(81, np.int8), r"shape \(81,\)"),
        (np.zeros((4, 4)), "dtype float64"),
        (np.full((4, 4), 5), "value 5 at r1c1 is outside 0..4"),
        (np.array([[0] * 4, [0, -1, 0, 0], [0] * 4, [0] * 4]), "value -1 at r2c2"),
        (np.array([[1, 1, 0, 0]] + [[0] * 4] * 3), "digit 1 appears twice in row 1"),
    ],
)
def test_as_board_rejects_bad_arrays(board, message):
    with pytest.raises(SudokuError, match=message):
        as_board(board)


def test_as_board_copies_and_converts():
    src = [[1, 2, 0, 0], [0] * 4, [0] * 4, [0] * 4]
    board = as_board(src)
    assert board.dtype == np.int8 and board.tolist() == src
    arr = parse_puzzle(SOLVED4)
    assert as_board(arr) is not arr


# ---------------------------------------------------------------- candidates


def boards(n: int) -> st.SearchStrategy[np.ndarray]:
    """Random boards, conflicts allowed, mostly from a solved grid with cells blanked."""
    solved = parse_puzzle(WIKI_SOLUTION if n == 9 else SOLVED4)
    blanked = st.lists(st.booleans(), min_size=n * n, max_size=n * n).map(
        lambda keep: np.where(np.array(keep).reshape(n, n), solved, 0).astype(np.int8)
    )
    noise = st.lists(st.integers(0, n), min_size=n * n, max_size=n * n).map(
        lambda v: np.array(v, dtype=np.int8).reshape(n, n)
    )
    return st.one_of(blanked, noise)


@settings(max_examples=150, deadline=None)
@given(st.one_of(boards(9), boards(4)))
def test_candidates_match_slow_reference(board):
    got = candidates(board)
    n = board.shape[0]
    assert got.shape == (n * n, n) and got.dtype == bool
    assert np.array_equal(got, slow_candidates(board))
    # Any integer dtype gives the same answer (it takes the validated path).
    assert np.array_equal(candidates(board.astype(np.int64)), got)


def test_candidates_of_known_cells():
    cand = candidates(parse_puzzle(WIKI))
    assert not cand[0].any()  # r1c1 is given
    assert np.flatnonzero(cand[2]).tolist() == [0, 1, 3]  # r1c3 may be 1, 2 or 4
    assert not candidates(parse_puzzle(WIKI_SOLUTION)).any()
    assert candidates(np.zeros((4, 4), np.int8)).all()


@pytest.mark.parametrize("bad", [5, -1, 100])
def test_candidates_reject_out_of_range_values(bad):
    board = np.zeros((4, 4), np.int8)
    board[1, 2] = bad
    with pytest.raises(SudokuError, match=f"value {bad} at r2c3"):
        candidates(board)


def test_candidates_reject_bad_shape():
    with pytest.raises(SudokuError, match="shape"):
        candidates(np.zeros((5, 5), np.int8))


def test_candidates_are_fast():
    board = parse_puzzle(WIKI)
    candidates(board)
    reps = 2000
    start = time.perf_counter()
    for _ in range(reps):
        candidates(board)
    per_call = (time.perf_counter() - start) / reps
    # Measured ~7 us; the bound is loose so a busy CI machine does not fail it.
    assert per_call < 200e-6


# ---------------------------------------------------------------- solver


def test_solve_known_puzzle():
    count, solution = solve(WIKI)
    assert count == 1
    assert format_puzzle(solution) == WIKI_SOLUTION
    assert solution.dtype == np.int8 and solution.shape == (9, 9)


def test_solve_hard_puzzle_quickly():
    start = time.perf_counter()
    count, solution = solve(ESCARGOT)
    assert time.perf_counter() - start < 1.0
    assert count == 1 and is_solution(solution, parse_puzzle(ESCARGOT))


def test_solve_counts_two_solutions_and_stops_at_limit():
    puzzle = parse_puzzle("12..34..........")
    count, first = solve(puzzle)
    assert count == 2 and is_solution(first, puzzle)
    assert solve(puzzle, limit=1)[0] == 1
    assert solve(np.zeros((4, 4), np.int8), limit=10)[0] == 10
    assert solve(np.zeros((4, 4), np.int8), limit=1000)[0] == 288  # all 4x4 grids


def test_solve_unsolvable_and_conflicting():
    # r1c3 sees 1, 2 in its row and 3, 4 in its column: no digit fits.
    assert solve("12....3...4.....") == (0, None)
    conflicting = np.zeros((4, 4), np.int8)
    conflicting[0, :2] = 1
    assert solve(conflicting) == (0, None)


def test_solve_full_grid_and_bad_limit():
    count, solution = solve(SOLVED4)
    assert count == 1 and format_puzzle(solution) == SOLVED4
    for bad in (0, -1, 1.5, True):
        with pytest.raises(SudokuError, match="limit"):
            solve(SOLVED4, limit=bad)


# ---------------------------------------------------------------- generator


@pytest.mark.parametrize(
    ("size", "givens", "seed"),
    [(9, 45, 0), (9, 45, 1), (9, 34, 0), (9, 34, 1), (9, 34, 2), (9, 30, 3)]
    + [(4, 8, s) for s in range(5)]
    + [(4, 6, s) for s in range(5)],
)
def test_generate_unique_with_exact_givens(size, givens, seed):
    puzzle = generate(givens, size=size, rng=np.random.default_rng(seed))
    assert puzzle.dtype == np.int8 and puzzle.shape == (size, size)
    assert int(np.count_nonzero(puzzle)) == givens
    count, solution = solve(puzzle)
    assert count == 1 and is_solution(solution, puzzle)


def test_generate_is_deterministic_per_seed():
    a = generate(34, rng=np.random.default_rng(7))
    b = generate(34, rng=np.random.default_rng(7))
    c = generate(34, rng=np.random.default_rng(8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"givens": 0}, r"givens must be in 1\.\.81"),
        ({"givens": 82}, r"givens must be in 1\.\.81"),
        ({"givens": 17, "size": 4}, r"1\.\.16"),
        ({"givens": 16}, "fewer than 17"),
        ({"givens": 3, "size": 4}, "fewer than 4"),
        ({"givens": 30, "size": 5}, "size must be 9 or 4"),
        ({"givens": 30.0}, "givens must be an integer"),
    ],
)
def test_generate_validates_arguments(kwargs, message):
    with pytest.raises(SudokuError, match=message):
        generate(rng=np.random.default_rng(0), **kwargs)


def test_generate_requires_a_generator():
    with pytest.raises(SudokuError, match="numpy Generator"):
        generate(30, rng=0)  # type: ignore[arg-type]


def test_generate_gives_up_after_bounded_attempts(monkeypatch):
    # 17 givens is possible in principle but a random removal pass practically never
    # gets there, so one attempt must end in the "too few" error.
    monkeypatch.setattr(sp, "_GENERATE_ATTEMPTS", 1)
    with pytest.raises(SudokuError, match="may be too few"):
        generate(17, rng=np.random.default_rng(0))


# ---------------------------------------------------------------- puzzle files


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "set.txt"
    puzzles = [parse_puzzle(WIKI), parse_puzzle(ESCARGOT)]
    save_puzzles(path, puzzles, header="two puzzles\nsecond line")
    lines = path.read_text().splitlines()
    assert lines[:2] == ["# two puzzles", "# second line"]
    assert lines[2] == format_puzzle(puzzles[0])
    loaded = load_puzzles(path)
    assert len(loaded) == 2 and all(map(np.array_equal, loaded, puzzles))
    assert [p.name for p in tmp_path.iterdir()] == ["set.txt"]  # no temp file left


def test_save_replaces_existing_file(tmp_path):
    path = tmp_path / "set.txt"
    save_puzzles(path, [parse_puzzle(WIKI)] * 3)
    save_puzzles(path, [parse_puzzle(SOLVED4)])
    assert [format_puzzle(p) for p in load_puzzles(path)] == [SOLVED4]


def test_save_failure_leaves_no_temp_file(tmp_path):
    path = tmp_path / "set.txt"
    with pytest.raises(SudokuError):
        save_puzzles(path, [np.zeros((3, 3), np.int8)])
    assert list(tmp_path.iterdir()) == []


def test_load_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "set.txt"
    path.write_text(f"# comment\n\n   \n{SOLVED4}\n  # indented comment\n{'.' * 16}\n")
    assert [format_puzzle(p) for p in load_puzzles(path)] == [SOLVED4, "0" * 16]


def test_load_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text(f"# header\n{SOLVED4}\n\n12345\n")
    with pytest.raises(SudokuError, match=re.escape(f"{path}, line 4: puzzle has 5 characters")):
        load_puzzles(path)
    path.write_text(f"{SOLVED4}\n{WIKI}\n")
    with pytest.raises(SudokuError, match=r"line 2: a 9x9 puzzle, but earlier lines hold 4x4"):
        load_puzzles(path)
    with pytest.raises(SudokuError, match="cannot read puzzle file"):
        load_puzzles(tmp_path / "missing.txt")


# ---------------------------------------------------------------- bundled sets

BUNDLED = {"easy9": (200, 9, 45, 9045), "medium9": (200, 9, 34, 9034), "easy4": (100, 4, 8, 4008)}


def test_bundled_names():
    assert bundled_names() == sorted(BUNDLED)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_set_sizes_givens_and_uniqueness(name):
    count, size, givens, _ = BUNDLED[name]
    puzzles = bundled_puzzles(name)
    assert len(puzzles) == count
    assert all(p.shape == (size, size) and p.dtype == np.int8 for p in puzzles)
    assert all(int(np.count_nonzero(p)) == givens for p in puzzles)
    assert len({format_puzzle(p) for p in puzzles}) == count  # no duplicates
    for i in np.random.default_rng(0).choice(count, 10, replace=False):
        assert solve(puzzles[i])[0] == 1


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_header_documents_the_exact_call(name):
    count, size, givens, seed = BUNDLED[name]
    text = (resources.files("shoal.envs") / "data" / f"{name}.txt").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    call = (
        f"rng = numpy.random.default_rng({seed}); "
        f"[shoal.envs.sudoku_puzzles.generate({givens}, size={size}, rng=rng) "
        f"for _ in range({count})]"
    )
    assert text.startswith(f"# {name}: {count} {size}x{size} sudoku puzzles with {givens} givens")
    assert any(call in line for line in header)
    # The documented call reproduces the file exactly (regenerate the files if the
    # generator changes on purpose).
    rng = np.random.default_rng(seed)
    again = [generate(givens, size=size, rng=rng) for _ in range(count)]
    assert [format_puzzle(p) for p in again] == [format_puzzle(p) for p in bundled_puzzles(name)]


def test_bundled_returns_fresh_copies():
    a = bundled_puzzles("easy4")
    a[0][0, 0] = 9
    assert bundled_puzzles("easy4")[0][0, 0] != 9


def test_bundled_unknown_name_lists_available():
    with pytest.raises(SudokuError, match="no bundled puzzle set 'hard9'; available: easy4, easy9"):
        bundled_puzzles("hard9")
