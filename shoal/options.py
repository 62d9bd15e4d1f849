"""Command options declared once: a dataclass whose fields carry their docstrings, read by
the command-line parser, by the command itself and by any benchmark that runs it.

As CleanRL's ``Args`` with tyro: a field's type gives the argument's type (``bool`` is a
flag, a list takes one or more values, ``X | None`` is optional), its default the
argument's default, its docstring the ``--help`` line; :func:`option` adds what a type
cannot say (a metavar, the choices, a positional argument).

Example (``shoal mapf eval``'s options, some of them in another parser):
    >>> import argparse
    >>> from shoal.mapf.options import MapfEvalOptions
    >>> parser = argparse.ArgumentParser()
    >>> add_options(parser, MapfEvalOptions, only=("seed", "no_baselines"))
    >>> args = parser.parse_args(["--seed", "3", "--no-baselines"])
    >>> opts = parse_options(MapfEvalOptions, args, run_dir="-", agents=4)
    >>> opts.seed, opts.no_baselines, opts.max_steps
    (3, True, 256)
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from shoal.config import INT64_MAX, INT64_MIN, field_docs

__all__ = [
    "add_options",
    "count_up_to",
    "finite_float",
    "integer",
    "non_negative_int",
    "option",
    "parse_options",
    "positive_int",
]

T = TypeVar("T")


def option(
    default: Any = dataclasses.MISSING,
    *,
    metavar: str | None = None,
    choices: Collection[Any] | None = None,
    positional: bool = False,
    type: Any = None,
) -> Any:
    """A field with what its type cannot say: ``metavar``, ``choices``, whether it is
    ``positional``, and the ``type`` that parses one value (when the annotation's is not)."""
    meta = {"metavar": metavar, "choices": choices, "positional": positional, "type": type}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _quote(text: str) -> str:
    """``text`` quoted for a message, cut short so that the message stays one line."""
    return repr(text if len(text) <= 60 else f"{text[:30]}...{text[-20:]}")


def _whole(text: str, lo: int, hi: int, what: str) -> int:
    """``text`` as an integer in [lo, hi]: written as one (``100000``, ``1_000``) or as a
    number that is one exactly (``1e5``, ``100000.0``), as ``--set`` allows; ``hi`` is at
    most the int64 range, since the value reaches numpy and torch."""
    s = text.strip()
    try:
        value = int(s)
    except ValueError:
        if re.fullmatch(r"[+-]?[0-9_]+", s):  # digits, but more than Python will read
            raise argparse.ArgumentTypeError(
                f"{_quote(text)} is out of range; allowed: {what} from {lo} to {hi}"
            ) from None
        try:
            number = float(s)
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number.is_integer()):
            raise argparse.ArgumentTypeError(
                f"expected {what} (a whole number, e.g. 1000 or 1e3), got {_quote(text)}"
            ) from None
        value = int(number)
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(
            f"{_quote(text)} is out of range; allowed: {what} from {lo} to {hi}"
        )
    return value


def integer(text: str) -> int:
    """An argument that must be an integer in the int64 range (argparse's ``type``; the
    default for ``int`` fields)."""
    return _whole(text, INT64_MIN, INT64_MAX, "an integer")


def positive_int(text: str) -> int:
    """An argument that must be a positive integer (argparse's ``type``)."""
    return _whole(text, 1, INT64_MAX, "a positive integer")


def count_up_to(most: int, what: str = "a positive integer") -> Callable[[str], int]:
    """An argument that must be an integer from 1 to ``most`` (argparse's ``type``): a
    count the command acts on at once (episodes, trials, puzzles), where a slip such as
    ``1e12`` would exhaust memory or run forever before saying anything."""

    def parse(text: str) -> int:
        return _whole(text, 1, most, what)

    parse.__name__ = f"count up to {most}"
    return parse


def non_negative_int(text: str) -> int:
    """An argument that must be an integer >= 0, e.g. a seed (argparse's ``type``)."""
    return _whole(text, 0, INT64_MAX, "a non-negative integer")


def finite_float(text: str) -> float:
    """An argument that must be a finite number (argparse's ``type``; the default for
    ``float`` fields): nan and inf would only fail later, far from the option."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_quote(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {_quote(text)}")
    return value


_DEFAULT_TYPES: dict[Any, Any] = {int: integer, float: finite_float}
"""The parser of one value of a field's type, where argparse's own (``int``, ``float``)
would take what a run cannot use: ``1e5`` refused, ``nan`` and 2**64 accepted."""


def _value_type(tp: Any) -> tuple[Any, bool]:
    """The type of one value and whether the option takes several (a list)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return _value_type(args[0])
    if typing.get_origin(tp) in (list, tuple):
        return args[0], True
    return tp, False


def add_options(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    only: Collection[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Add ``cls``'s fields (or those named in ``only``) to ``parser``, with ``defaults``
    replacing the dataclass's."""
    docs, hints = field_docs(cls), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        meta = f.metadata
        default = (defaults or {}).get(f.name, _default(f))
        tp, many = _value_type(hints[f.name])
        kwargs: dict[str, Any] = {"help": docs.get(f.name, "").replace("%", "%%")}
        if tp is bool:  # a flag; one that is on by default also gets --no-NAME
            kwargs["action"] = argparse.BooleanOptionalAction if default else "store_true"
        else:
            parse = meta.get("type") or _DEFAULT_TYPES.get(tp, tp)
            kwargs.update(type=parse, metavar=meta.get("metavar"))
            if meta.get("choices"):
                kwargs["choices"] = tuple(meta["choices"])
            if many:
                kwargs["nargs"] = "+"
        if meta.get("positional"):
            if default is not dataclasses.MISSING:
                kwargs.update(nargs="?", default=default)
            parser.add_argument(f.name, **kwargs)
            continue
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
            unset = default is None or default is False or default == []  # says nothing
            if not unset and "default" not in kwargs["help"]:
                kwargs["help"] = _with_default(kwargs["help"], default)
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, **kwargs)


def _with_default(doc: str, default: Any) -> str:
    end = "." if doc.endswith(".") else ""
    return f"{doc.removesuffix('.')} (default: {default}){end}"


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def parse_options(cls: type[T], args: argparse.Namespace, **values: Any) -> T:
    """``cls`` from the parsed ``args`` (fields the parser does not have keep their
    defaults), with ``values`` on top."""
    given = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)
    }
    return cls(**{**given, **values})
