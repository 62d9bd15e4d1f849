"""Every file shoal reads from a user (MovingAI ``.map`` and ``.scen`` files, Sudoku puzzle
files) either reads or fails with a one-line :class:`~shoal.errors.ShoalError` that names
the file, never with a traceback.

Hypothesis throws arbitrary bytes and near-valid texts at each reader (valid headers with
mutated numbers, wrong row lengths and field counts, other scripts' digits, odd
characters, truncated files, stray non-UTF-8 bytes); valid texts must still read as they
always did. Explicit regressions cover what used to escape: non-UTF-8 files
(UnicodeDecodeError), Unicode digits in a map header (accepted, or a ValueError for
``'²'``), empty puzzle files (a ZeroDivisionError in ``shoal sudoku solve``) and a
generated map too large to allocate (``shoal mapf eval --generate --size 100000``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.cli import main
from shoal.envs.movingai import BLOCKED, PASSABLE, ScenEntry, read_map, read_scen, write_map
from shoal.envs.sudoku_puzzles import format_puzzle, load_puzzles, parse_puzzle, save_puzzles
from shoal.errors import ConfigError, ShoalError
from shoal.mapf.evaluate import generated_instances, scenario_instances
from shoal.mapf.options import (
    MAX_AGENT_CELLS,
    MAX_INSTANCES,
    MAX_MAP_CELLS,
    MAX_SIZE,
    check_generation,
)

pytestmark = pytest.mark.timeout(120)

# Seed-stable (derandomize) so that CI runs are repeatable; no deadline, since a shared CI
# core can stall any single example. Every example rewrites one file under the test's
# tmp_path, so sharing that function-scoped fixture across examples is safe, and the
# health check that warns about it is suppressed (only here).
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
VALID = settings(FUZZ, max_examples=60)

# Digits Python's int() or str.isdigit() take that are not ASCII: fullwidth, Arabic-Indic,
# Extended Arabic-Indic, Devanagari, mathematical bold, superscript and circled (the last
# two are isdigit() but int() raises ValueError on them).
UNICODE_DIGITS = ["３２", "٣", "۴۲", "४", "𝟓", "²", "①"]
# Characters no valid file holds in that place: controls, a NUL, Unicode spaces and line
# separators (str.splitlines() breaks lines at some of them), a byte-order mark, an emoji.
ODD_CHARS = "x #\t\x00\x0b\x0c\x1c\x85\xa0\u2028\u200b\ufeff\U0001f600é"
NEWLINES = ["\n", "\r\n", "\r"]
# A number field as a mutation may leave it: fine, negative, huge (past int()'s
# 4300-digit limit too), signed, with an underscore or a dot, not a number, or in
# another script's digits.
NUMBERS = st.one_of(
    st.integers(-3, 40).map(str),
    st.integers(0, 10**30).map(str),
    st.sampled_from(
        [
            "",
            "+3",
            "-0",
            "1_0",
            "0x10",
            "3.0",
            "1e3",
            "inf",
            "nan",
            "9" * 5000,
            "0" * 5000 + "7",
            str(2**63),
            str(10**30),
        ]
    ),
    st.sampled_from(UNICODE_DIGITS),
    st.text(alphabet="0123456789３٣²-+._e", min_size=1, max_size=6),
)

SOLVED4 = "1234341221434321"
WIKI = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
PUZZLES = [SOLVED4, "." * 16, "1.3." + "." * 12, WIKI, "0" * 81]


def read_or_clean_error(read: Callable[[Path], object], path: Path) -> object | None:
    """``read(path)``'s result, or None after checking that it raised a ShoalError whose
    message is one non-empty line naming ``path`` (any other exception propagates and
    fails the test, and Hypothesis shrinks the file that caused it)."""
    try:
        return read(path)
    except ShoalError as e:
        message = str(e)
        # splitlines() also breaks at \x85, \u2028, \x0c...: none may reach the terminal
        assert message.splitlines() == [message], repr(message)
        assert str(path) in message, message
        return None


def write_and_read(read: Callable[[Path], object], path: Path, data: bytes) -> object | None:
    """``data`` written to ``path``, then read as :func:`read_or_clean_error` does."""
    path.write_bytes(data)
    return read_or_clean_error(read, path)


def one_error_line(err: str) -> str:
    """The single ``shoal: error:`` line the CLI wrote to stderr (asserted single)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shoal: error: "), err
    return lines[0]


@st.composite
def byte_mutations(draw: st.DrawFn, text: str) -> bytes:
    """``text`` as UTF-8, maybe with a byte-order mark, cut short, or with a stray byte
    (most of them are not UTF-8) spliced in."""
    if draw(st.integers(0, 7)) == 0:
        text = "\ufeff" + text
    if draw(st.integers(0, 4)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    data = text.encode("utf-8")
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at:]
    return data


def sometimes(draw: st.DrawFn, valid: str, mutated: st.SearchStrategy[str], odds: int = 6) -> str:
    """``valid``, or one time in ``odds`` a draw from ``mutated``: mostly-valid files reach
    the checks deep in a reader, not only its first line."""
    return draw(mutated) if draw(st.integers(1, odds)) == 1 else valid


@pytest.mark.parametrize(
    ("read", "name"), [(read_map, "fuzz.map"), (read_scen, "fuzz.scen"), (load_puzzles, "fuzz.txt")]
)
@FUZZ
@given(data=st.binary(max_size=300))
def test_readers_on_arbitrary_bytes(tmp_path, read, name, data):
    write_and_read(read, tmp_path / name, data)


# -- .map files --------------------------------------------------------------------------------


@st.composite
def near_valid_maps(draw: st.DrawFn) -> bytes:
    """A ``.map`` text with every part valid or mutated: header numbers and order, missing
    or extra header lines, row count, row lengths and characters, line breaks, encoding."""
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    header = [
        sometimes(draw, "type octile", st.sampled_from(["type", "type a b", "kind octile", ""])),
        "height " + sometimes(draw, str(h), NUMBERS, odds=3),
        "width " + sometimes(draw, str(w), NUMBERS, odds=3),
    ]
    header = draw(st.permutations(header))
    if draw(st.integers(0, 6)) == 0:
        del header[draw(st.integers(0, 2))]
    good_row = st.text(st.sampled_from(PASSABLE + BLOCKED), min_size=w, max_size=w)
    odd_row = st.text(st.sampled_from(PASSABLE + BLOCKED + ODD_CHARS), max_size=w + 2)
    count = sometimes(draw, str(h), st.integers(0, h + 2).map(str))
    rows = [draw(odd_row if draw(st.integers(0, 6)) == 0 else good_row) for _ in range(int(count))]
    newline = draw(st.sampled_from(NEWLINES))
    text = newline.join([*header, sometimes(draw, "map", st.just("map x")), *rows])
    return draw(byte_mutations(text + draw(st.sampled_from(["", newline]))))


@FUZZ
@given(data=near_valid_maps())
def test_map_reader_on_near_valid_maps(tmp_path, data):
    grid = write_and_read(read_map, tmp_path / "fuzz.map", data)
    if grid is not None:
        assert isinstance(grid, np.ndarray) and grid.dtype == bool and grid.ndim == 2
        assert grid.size >= 1


@VALID
@given(
    grid=st.integers(1, 6).flatmap(
        lambda w: st.lists(st.lists(st.booleans(), min_size=w, max_size=w), min_size=1, max_size=6)
    ),
    height_first=st.booleans(),
    newline=st.sampled_from(NEWLINES),
    bom=st.booleans(),
)
def test_valid_maps_still_read(tmp_path, grid, height_first, newline, bom):
    """Valid files read exactly as before the checks were tightened (either header order,
    any line break), and a byte-order mark is now skipped."""
    grid = np.array(grid, dtype=bool)
    h, w = grid.shape
    sizes = [f"height {h}", f"width {w}"]
    rows = ["".join("@" if cell else "." for cell in row) for row in grid]
    lines = ["type octile", *(sizes if height_first else sizes[::-1]), "map", *rows]
    path = tmp_path / "ok.map"
    path.write_bytes((("\ufeff" if bom else "") + newline.join(lines) + newline).encode())
    assert np.array_equal(read_map(path), grid)
    write_map(path, grid)
    assert np.array_equal(read_map(path), grid)


# -- .scen files -------------------------------------------------------------------------------


@st.composite
def near_valid_scens(draw: st.DrawFn) -> bytes:
    """A ``.scen`` text for a 4 x 3 map (the map of :func:`scen_map`) with every part
    valid or mutated: the version line, each field, the field count and separators,
    coordinates off the map, line breaks, encoding."""
    lines = [sometimes(draw, "version 1", st.sampled_from(["version", "version 1 2", "1", ""]))]
    for _ in range(draw(st.integers(0, 4))):
        x, gx = draw(st.integers(0, 4)), draw(st.integers(0, 4))  # 4: off the map
        y, gy = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        fields = ["1", "m.map", "4", "3", str(x), str(y), str(gx), str(gy), "5.41421356"]
        mutate = draw(st.sampled_from(["none", "one field", "any fields"]))
        if mutate == "one field":  # the others valid, so the line gets past them
            fields[draw(st.integers(0, 8))] = draw(NUMBERS)
        elif mutate == "any fields":
            fields = [sometimes(draw, field, NUMBERS) for field in fields]
        if draw(st.integers(0, 8)) == 0:
            del fields[draw(st.integers(0, 8))]
        if draw(st.integers(0, 8)) == 0:
            fields.append(draw(NUMBERS))
        lines.append(draw(st.sampled_from(["\t", " ", "  "])).join(fields))
        if draw(st.integers(0, 8)) == 0:
            lines.append(draw(st.sampled_from(["", "   ", "\t"])))
    newline = draw(st.sampled_from(NEWLINES))
    return draw(byte_mutations(newline.join(lines) + newline))


@pytest.fixture
def scen_map(tmp_path: Path) -> Path:
    """A 4 x 3 (width x height) map with one obstacle, for scenarios to be played on."""
    path = tmp_path / "m.map"
    path.write_text("type octile\nheight 3\nwidth 4\nmap\n....\n.@..\n....\n")
    return path


def check_scenario(path: Path, map_path: Path, agents: int) -> None:
    """Read ``path`` and, if it reads, build the evaluation's instances on ``map_path``
    from it (where numpy meets the numbers: a coordinate past int64 used to overflow
    there): every outcome is success or a clean error naming the file."""
    entries = read_or_clean_error(read_scen, path)
    if entries is None:
        return
    assert isinstance(entries, list)
    for e in entries:
        assert isinstance(e, ScenEntry)
        assert 0 <= e.start_x < e.width and 0 <= e.goal_x < e.width
        assert 0 <= e.start_y < e.height and 0 <= e.goal_y < e.height
        assert np.isfinite(e.optimal_length)
    read_or_clean_error(lambda p: scenario_instances(map_path, [p], agents), path)


@FUZZ
@given(data=near_valid_scens(), agents=st.integers(1, 3))
def test_scen_reader_and_scenarios_on_near_valid_scens(tmp_path, scen_map, data, agents):
    path = tmp_path / "fuzz.scen"
    path.write_bytes(data)
    check_scenario(path, scen_map, agents)


@FUZZ
@given(field=st.integers(0, 8), value=NUMBERS, tabs=st.booleans())
def test_scen_line_with_one_bad_field(tmp_path, scen_map, field, value, tabs):
    """One field of an otherwise valid line, whatever it holds: the mutations of
    :func:`near_valid_scens` seldom leave every other field valid, yet that is what it
    takes to reach the map's size checks and numpy (a start x of 10**30 on a 4-wide map
    used to raise OverflowError)."""
    fields = ["1", "m.map", "4", "3", "0", "0", "3", "2", "5.41421356"]
    fields[field] = value
    path = tmp_path / "fuzz.scen"
    path.write_text("version 1\n" + ("\t" if tabs else " ").join(fields) + "\n")
    check_scenario(path, scen_map, 1)


@VALID
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.floats(0, 1e6)), max_size=5
    ),
    tabs=st.booleans(),
)
def test_valid_scens_still_read(tmp_path, rows, tabs):
    """Valid lines read as before, tab- or space-separated."""
    sep = "\t" if tabs else " "
    entries = [
        ScenEntry(bucket, "any.map", w + 1, w + 2, w, w + 1, w // 2, w // 3, length)
        for bucket, w, length in rows
    ]
    lines = ["version 1"]
    for e in entries:
        fields = (e.bucket, e.map_name, e.width, e.height, e.start_x, e.start_y, e.goal_x)
        lines.append(sep.join(map(str, (*fields, e.goal_y, repr(e.optimal_length)))))
    path = tmp_path / "ok.scen"
    path.write_text("\n".join(lines) + "\n")
    assert read_scen(path) == entries


# -- puzzle files ------------------------------------------------------------------------------


@st.composite
def near_valid_puzzle_files(draw: st.DrawFn) -> bytes:
    """A puzzle file of valid puzzles (4x4 and 9x9, so sizes may mix), comments, blank
    lines and mutated puzzles: a character swapped for another script's digit or an odd
    character, cut short or lengthened."""
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["puzzle", "puzzle", "comment", "blank", "mutated"]))
        puzzle = draw(st.sampled_from(PUZZLES))
        if kind == "comment":
            lines.append(draw(st.sampled_from(["# a comment", "  # indented", "#"])))
        elif kind == "blank":
            lines.append(draw(st.sampled_from(["", "   ", "\t"])))
        elif kind == "mutated":
            at = draw(st.integers(0, len(puzzle) - 1))
            new = draw(st.sampled_from([*UNICODE_DIGITS, *ODD_CHARS, "5", "9", "", "..", "-"]))
            lines.append(puzzle[:at] + new + puzzle[at + 1 :])
        else:
            lines.append(puzzle)
    newline = draw(st.sampled_from(NEWLINES))
    return draw(byte_mutations(newline.join(lines) + newline))


@FUZZ
@given(data=near_valid_puzzle_files())
def test_puzzle_reader_on_near_valid_files(tmp_path, data):
    boards = write_and_read(load_puzzles, tmp_path / "fuzz.txt", data)
    if boards is not None:
        assert isinstance(boards, list) and boards  # never an empty list: that is an error
        assert len({b.shape for b in boards}) == 1
        assert all(b.dtype == np.int8 and b.shape in ((4, 4), (9, 9)) for b in boards)


@VALID
@given(
    puzzles=st.lists(st.sampled_from(PUZZLES[:3]), min_size=1, max_size=6),
    header=st.sampled_from([None, "a header", "two\nlines"]),
    bom=st.booleans(),
)
def test_valid_puzzle_files_still_read(tmp_path, puzzles, header, bom):
    path = tmp_path / "ok.txt"
    save_puzzles(path, [parse_puzzle(p) for p in puzzles], header=header)
    expected = [format_puzzle(parse_puzzle(p)) for p in puzzles]
    assert [format_puzzle(b) for b in load_puzzles(path)] == expected
    if bom:  # as some editors save it: now skipped rather than a bad character
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        assert [format_puzzle(b) for b in load_puzzles(path)] == expected


# -- regressions: non-UTF-8 files (1) ----------------------------------------------------------

NOT_UTF8 = b"\xff\xfe\x00t\x00y\x00p\x00e"  # UTF-16 with its byte-order mark


@pytest.mark.parametrize(
    ("read", "name", "prefix"),
    [
        (read_map, "bad.map", b""),
        (read_scen, "bad.scen", b"version 1\n"),
        (load_puzzles, "bad.txt", b"# puzzles\n"),
    ],
)
def test_non_utf8_files_are_one_line_errors(tmp_path, read, name, prefix):
    path = tmp_path / name
    path.write_bytes(prefix + NOT_UTF8)
    with pytest.raises(ShoalError) as e:
        read(path)
    message = str(e.value)
    assert message.splitlines() == [message]
    line = 2 if prefix else 1
    assert f"{path}" in message and f"line {line}" in message, message
    assert "not UTF-8 text (byte 0xff at offset" in message and "allowed:" in message, message


def test_unreadable_files_are_one_line_errors(tmp_path):
    for read in (read_map, read_scen, load_puzzles):
        with pytest.raises(ShoalError, match="cannot read .* file .*missing"):
            read(tmp_path / "missing")
        with pytest.raises(ShoalError, match="cannot read"):
            read(tmp_path)  # a directory
        with pytest.raises(ShoalError, match=r"cannot read .* file '.*\\x00.*': it has a NUL"):
            read(f"{tmp_path}/a\0b")  # only from Python: no command line holds a NUL


def test_cli_non_utf8_files_exit_2(tmp_path, capsys):
    (tmp_path / "bad.txt").write_bytes(NOT_UTF8)
    rc = main(["sudoku", "solve", "--file", str(tmp_path / "bad.txt"), "--table", "X"])
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2 and "bad.txt, line 1: not UTF-8 text (byte 0xff at offset 0)" in line
    (tmp_path / "m.map").write_bytes(b"type octile\nheight 1\nwidth 2\nmap\n.\xff\n")
    (tmp_path / "a.scen").write_text("version 1\n0\tm.map\t2\t1\t0\t0\t1\t0\t1\n")
    argv = ["--map", str(tmp_path / "m.map"), "--scen", str(tmp_path / "a.scen"), "--agents", "1"]
    rc = main(["mapf", "eval", "-", *argv])
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2 and "m.map line 5: not UTF-8 text (byte 0xff at offset 34)" in line, line


# -- regressions: digits of other scripts (2) --------------------------------------------------


@pytest.mark.parametrize("digits", [*UNICODE_DIGITS, "1_0", "+2", "9" * 5000])
def test_map_sizes_take_ascii_digits_only(tmp_path, digits):
    path = tmp_path / "u.map"
    path.write_text(f"type octile\nheight {digits}\nwidth 2\nmap\n..\n..\n")
    with pytest.raises(ConfigError) as e:
        read_map(path)
    message = str(e.value)
    assert message.startswith(f"{path} line 4: height ") and "allowed:" in message, message
    assert "ASCII digits 0-9" in message or "at most 18 digits" in message, message


def test_map_size_zero_and_leading_zeros(tmp_path):
    path = tmp_path / "z.map"
    path.write_text("type octile\nheight 0\nwidth 2\nmap\n")
    with pytest.raises(ConfigError, match="line 4: height 0 is not >= 1"):
        read_map(path)
    path.write_text(f"type octile\nheight {'0' * 5000}2\nwidth 02\nmap\n..\n..\n")
    assert read_map(path).shape == (2, 2)  # leading zeros are digits too, however many


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (4, "٣", r"field 5 \(start x\) '٣' is not a whole number; allowed: an optional sign"),
        (2, "４", r"field 3 \(map width\) '４' is not a whole number"),
        (0, "1_0", r"field 1 \(bucket\) '1_0' is not a whole number"),
        (5, "9" * 30, r"field 6 \(start y\) '9{30}' is too large; allowed: at most 18 digits"),
        (8, "１.５", r"field 9 \(optimal length\) '１.５' is not a number; allowed: a finite"),
        (8, "nan", "field 9 .* is not a number"),
        (8, "1e999", "field 9 .* is not a number"),
        (8, "1_0.5", "field 9 .* is not a number"),
        (4, "4", r"field 5 \(start x\) 4 is outside the map of width 4; allowed: 0..3"),
        (7, "3", r"field 8 \(goal y\) 3 is outside the map of height 3; allowed: 0..2"),
        (3, "0", r"field 4 \(map height\) 0 is not >= 1"),
    ],
)
def test_scen_numbers_take_ascii_digits_only(tmp_path, field, value, match):
    fields = ["1", "m.map", "4", "3", "0", "0", "3", "2", "5.4"]
    fields[field] = value
    path = tmp_path / "u.scen"
    path.write_text("version 1\n" + "\t".join(fields) + "\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))} line 2: {match}"):
        read_scen(path)


def test_long_bad_lines_are_quoted_short(tmp_path):
    path = tmp_path / "long.map"
    path.write_text("type octile\n" + "x" * 100_000 + "\n")
    with pytest.raises(ConfigError) as e:
        read_map(path)
    assert len(str(e.value)) < 300 and "(100000 characters)" in str(e.value)
    row = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 5000))  # 5000 distinct bad ones
    path.write_text(f"type octile\nheight 1\nwidth 5000\nmap\n{row}\n")
    with pytest.raises(ConfigError, match=r"line 5: map row 0 has \[.*\] and 4990 more;"):
        read_map(path)


# -- regressions: empty puzzle files (3) -------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n\n   \n  # another\n"])
def test_puzzle_files_without_puzzles_are_errors(tmp_path, text):
    path = tmp_path / "none.txt"
    path.write_text(text)
    with pytest.raises(ShoalError, match=f"^puzzle file {re.escape(str(path))} holds no puzzles"):
        load_puzzles(path)


@pytest.mark.parametrize("text", ["", "# header only\n\n"])
def test_cli_empty_puzzle_file_exits_2(tmp_path, capsys, text):
    path = tmp_path / "empty.txt"
    path.write_text(text)
    run_dir = tmp_path / "run"
    rc = main(
        ["sudoku", "train", "--puzzles", str(path), "--run-dir", str(run_dir), "--no-progress"]
    )
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2 and f"puzzle file {path} holds no puzzles" in line, line
    assert not run_dir.exists()  # checked before the run directory is made
    # solve used to divide by the zero puzzles it solved; the table is never reached
    rc = main(["sudoku", "solve", "--file", str(path), "--table", str(tmp_path / "no-run")])
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2 and f"puzzle file {path} holds no puzzles" in line, line


# -- regressions: unbounded generated instances (4) --------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--size", "100000"), "mapf size: 100000 is out of range; allowed: 2..1024"),
        (("--size", "1"), "mapf size: 1 is out of range; allowed: 2..1024"),
        (("--size", "4", "--agents", "17"), "mapf agents: 17 is out of range for 4 x 4 maps"),
        (("--size", "1024", "--agents", "129"), "allowed: agents x size x size <= 134217728"),
        (("--size", "8", "--instances", "10001"), "mapf instances: 10001 is out of range"),
        (("--size", "1024", "--instances", "1025"), "instances x size x size <= 1073741824"),
    ],
)
def test_cli_generation_bounds_exit_2_before_any_work(tmp_path, capsys, argv, needle):
    args = ["mapf", "eval", "-", "--generate", "--agents", "4", "--out", str(tmp_path / "r.json")]
    rc = main([*args, *argv])
    line = one_error_line(capsys.readouterr().err)
    assert rc == 2 and needle in line, line
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_generation_bounds_are_inclusive():
    check_generation(1, 2, 1)
    check_generation(MAX_AGENT_CELLS // MAX_SIZE**2, MAX_SIZE, MAX_MAP_CELLS // MAX_SIZE**2)
    check_generation(4, 8, MAX_INSTANCES)
    check_generation(np.int64(4), np.int64(8), np.int64(2))  # numpy integers count
    for bad in (True, 8.0, "8", None):
        with pytest.raises(ConfigError, match="mapf size: .* is not a whole number"):
            check_generation(4, bad, 1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="mapf agents: 0 is out of range"):
        check_generation(0, 8, 1)


def test_generated_instances_check_the_bounds_first():
    with pytest.raises(ConfigError, match="mapf size: 100000 is out of range"):
        generated_instances(4, 100_000, 1, seed=0)
    assert len(generated_instances(2, 2, 1, density=0.0, seed=0)) == 1  # the smallest map
