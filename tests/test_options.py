"""Options declared once: argparse built from a dataclass's fields and docstrings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from shoal.options import (
    add_options,
    finite_float,
    integer,
    non_negative_int,
    option,
    parse_options,
    positive_int,
)


@dataclass
class Opts:
    """Options of a test command."""

    target: str = option("here", positional=True, metavar="WHERE")
    """Where to go."""
    count: int = option(3, type=positive_int, metavar="N")
    """How many, at 100% effort."""
    fast: bool = False
    """Skip the slow part."""
    plot: bool = True
    """Draw the curve."""
    sizes: list[int] = option([], metavar="S")
    """Sizes to try."""
    mode: str | None = option(None, choices=("a", "b"))
    """A mode, or none."""
    seed: int = 0
    """A seed (a bare int: parsed by ``integer``)."""
    weight: float | None = None
    """A weight (a bare float: parsed by ``finite_float``)."""


def parse(argv: list[str]) -> Opts:
    parser = argparse.ArgumentParser()
    add_options(parser, Opts)
    return parse_options(Opts, parser.parse_args(argv))


def test_types_defaults_flags_lists_and_positionals() -> None:
    assert parse([]) == Opts()
    got = parse(["there", "--count", "5", "--fast", "--no-plot", "--sizes", "1", "2"])
    assert got == Opts("there", 5, True, False, [1, 2], None, 0, None)
    assert parse(["--mode", "b"]).mode == "b"


def test_bad_values_are_argparse_errors() -> None:
    for argv in (["--count", "0"], ["--mode", "c"], ["--sizes", "x"]):
        with pytest.raises(SystemExit):
            parse(argv)


def test_help_is_the_field_docstrings_with_their_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        parse(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "How many, at 100% effort (default: 3)." in out and "Skip the slow part." in out
    assert "--plot, --no-plot" in out and "WHERE" in out


@pytest.mark.parametrize(
    ("parse_one", "text", "value"),
    [
        (positive_int, "1e5", 100_000),
        (positive_int, "100000.0", 100_000),
        (positive_int, " 7 ", 7),
        (positive_int, "1_000", 1000),
        (positive_int, str(2**63 - 1), 2**63 - 1),
        (non_negative_int, "0", 0),
        (integer, "-3", -3),
        (integer, "-1e3", -1000),
        (finite_float, "1e-3", 1e-3),
    ],
)
def test_numbers_parse_as_the_config_parses_them(parse_one, text, value) -> None:
    got = parse_one(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("parse_one", "text", "message"),
    [
        (positive_int, "0", "'0' is out of range; allowed: a positive integer from 1 to"),
        (positive_int, "1.5", "expected a positive integer (a whole number, e.g. 1000 or 1e3)"),
        (positive_int, "nan", "expected a positive integer"),
        (positive_int, "1e400", "expected a positive integer"),
        (positive_int, "x", "expected a positive integer"),
        (positive_int, str(2**63), f"allowed: a positive integer from 1 to {2**63 - 1}"),
        (positive_int, "9" * 5000, "'999999999999999999999999999999...99999999999999999999'"),
        (non_negative_int, "-1", "allowed: a non-negative integer from 0 to"),
        (integer, str(-(2**63) - 1), f"allowed: an integer from {-(2**63)} to"),
        (finite_float, "nan", "expected a finite number, got 'nan'"),
        (finite_float, "-inf", "expected a finite number"),
        (finite_float, "1e400", "expected a finite number"),
        (finite_float, "one", "expected a number, got 'one'"),
    ],
)
def test_bad_numbers_are_one_line_argparse_errors(parse_one, text, message) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse_one(text)
    assert message in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 200


def test_bare_int_and_float_fields_get_the_checked_parsers(capsys) -> None:
    got = parse(["--seed", "1e3", "--weight", "0.5", "--count", "2e1"])
    assert (got.seed, got.weight, got.count) == (1000, 0.5, 20)
    for argv in (["--seed", str(2**64)], ["--weight", "nan"], ["--count", "1.5"]):
        with pytest.raises(SystemExit):
            parse(argv)
        err = capsys.readouterr().err
        assert "error: argument --" in err and "Traceback" not in err
