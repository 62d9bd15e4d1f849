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
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from shoal.config import field_docs

__all__ = ["add_options", "option", "parse_options", "positive_int"]

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


def positive_int(text: str) -> int:
    """An argument that must be a positive integer (argparse's ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


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
            kwargs.update(type=meta.get("type") or tp, metavar=meta.get("metavar"))
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
