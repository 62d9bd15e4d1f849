"""Options declared once: argparse built from a dataclass's fields and docstrings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from shoal.options import add_options, option, parse_options, positive_int


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


def parse(argv: list[str]) -> Opts:
    parser = argparse.ArgumentParser()
    add_options(parser, Opts)
    return parse_options(Opts, parser.parse_args(argv))


def test_types_defaults_flags_lists_and_positionals() -> None:
    assert parse([]) == Opts()
    got = parse(["there", "--count", "5", "--fast", "--no-plot", "--sizes", "1", "2"])
    assert got == Opts("there", 5, True, False, [1, 2], None)
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
