"""Every config value checked against its field's type and rules: a wrong type or an
out-of-range value is one line naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import functools
import math
import reprlib
import types
import typing
import unicodedata
from collections.abc import Mapping
from typing import Any

from shoal.errors import ConfigError

__all__ = ["INT64_MAX", "INT64_MIN", "hints", "show", "validate_fields"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Every integer key is also held to the int64 range, whatever its own rules say: the
values reach numpy and torch (array sizes, seeds, counters), where a larger one overflows
with a traceback deep in a run instead of a message naming the key."""


def validate_fields(obj: Any, prefix: str = "") -> None:
    """Check (and losslessly convert, e.g. int -> float, 1e5 -> 100000) every field of a
    config dataclass against its type and ``param`` rules; ConfigError names
    ``prefix + field``, the bad value and what is allowed."""
    types_of = hints(type(obj))
    for f in dataclasses.fields(obj):
        key = f"{prefix}{f.name}"
        setattr(obj, f.name, _check_value(key, getattr(obj, f.name), types_of[f.name], f.metadata))


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """A section dataclass's field types, resolved."""
    return typing.get_type_hints(cls)


class _ShortRepr(reprlib.Repr):
    """repr() cut short, so that a huge or deeply nested value gives a one-line message
    (reprlib also keeps repr's escapes: a newline in a value never splits the line)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, 8, 8, 6
        self.maxstring, self.maxother, self.maxlong = 80, 80, 60

    def repr_int(self, x: int, level: int) -> str:
        # Python refuses to print an int of more than 4300 digits (ValueError).
        if x.bit_length() > 14_000:
            return f"<an integer of about {int(x.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(x, level)


_short_repr = _ShortRepr()


def show(value: Any) -> str:
    """``value`` as a message shows it: its repr, cut short."""
    return _short_repr.repr(value)


_SINGULAR = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_PLURAL = {int: "integers", float: "numbers", bool: "true/false values", str: "strings"}


def _type_name(tp: Any, rules: Mapping[str, Any] | None = None) -> str:
    """What a value of type ``tp`` must be, in words (with a key's choices, if any)."""
    origin = typing.get_origin(tp)
    if origin is dict:
        return "a table of names to values (e.g. {size = 8})"
    if origin is list:
        inner = typing.get_args(tp)[0]
        return f"a list of {_PLURAL.get(inner) or _type_name(inner)}"
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(_type_name(a, rules) for a in args) + " or none"
    if rules and "choices" in rules:
        return "one of " + ", ".join(show(c) for c in rules["choices"])
    return _SINGULAR.get(tp) or f"a {getattr(tp, '__name__', tp)}"


def _check_value(key: str, value: Any, tp: Any, rules: Mapping[str, Any]) -> Any:
    """``value`` checked against type ``tp`` and ``rules`` and converted where lossless;
    ConfigError names the key, the value and what is allowed."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"config key '{key}': expected {_type_name(tp)}, got {show(value)}")
        return dict(value)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}': expected {_type_name(tp)}, got {show(value)}")
        if not value and not rules.get("allow_empty", False):
            raise ConfigError(
                f"config key '{key}': must not be empty; allowed: {_type_name(tp)}, at least one"
            )
        return [_check_value(f"{key}[{i}]", v, args[0], rules) for i, v in enumerate(value)]
    if type(None) in args:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        inner = next(a for a in args if a is not type(None))
        converted = _convert(key, value, inner, rules, or_none=True)
        _check_bounds(key, converted, value, rules)
        return converted
    converted = _convert(key, value, tp, rules)
    _check_bounds(key, converted, value, rules)
    return converted


def _convert(
    key: str, value: Any, tp: Any, rules: Mapping[str, Any], *, or_none: bool = False
) -> Any:
    """``value`` as a scalar of type ``tp`` where that is lossless, else ConfigError
    (saying that none would do too, for an optional key)."""

    def wrong(what: str = "") -> ConfigError:
        expected = (what or _type_name(tp, rules)) + (" or none" if or_none else "")
        return ConfigError(f"config key '{key}': expected {expected}, got {show(value)}")

    if tp is bool:
        if not isinstance(value, bool):
            raise wrong()
        return value
    if tp is int:
        # bool is an int subclass, but `true` for a count is a slip, not a number.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float):
            # 1e5 and 100000.0 are written as floats but name an integer exactly; 1.5,
            # inf and nan name none.
            if math.isfinite(value) and value.is_integer():
                return int(value)
            raise wrong("an integer (a whole number, e.g. 1000 or 1e3)")
        raise wrong()
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong()
        try:
            number = float(value)
        except OverflowError:  # an int beyond float's range (~1.8e308)
            number = math.inf
        if not math.isfinite(number):
            raise wrong("a finite number")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise wrong()
        # A NUL, a newline or an escape sequence in a name or path breaks the run
        # directory and the logs, and a lone surrogate (undecodable command-line bytes)
        # cannot even be written out as UTF-8.
        bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
        if bad is not None:
            raise ConfigError(
                f"config key '{key}': {show(value)} holds the character {bad!r}; "
                "allowed: UTF-8 text without control characters"
            )
        return value
    if isinstance(tp, type) and isinstance(value, tp):  # a field type without rules here
        return value
    raise wrong()


_OPS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _bounds(value: Any, rules: Mapping[str, Any]) -> tuple[Any, str | None, Any, str | None]:
    """(lower, "gt"/"ge", upper, "lt"/"le") in force for ``value``: the tightest of the
    declared ones, and for an integer the int64 range too (None where there is none)."""
    lower: tuple[Any, str | None] = (None, None)
    upper: tuple[Any, str | None] = (None, None)
    if isinstance(value, int) and not isinstance(value, bool):
        lower, upper = (INT64_MIN, "ge"), (INT64_MAX, "le")
    for op in ("ge", "gt"):
        if op in rules:
            b = rules[op]
            # A higher bound is tighter; at the same bound, "gt" (open) is tighter.
            if lower[0] is None or b > lower[0] or (b == lower[0] and op == "gt"):
                lower = (b, op)
    for op in ("le", "lt"):
        if op in rules:
            b = rules[op]
            if upper[0] is None or b < upper[0] or (b == upper[0] and op == "lt"):
                upper = (b, op)
    return lower[0], lower[1], upper[0], upper[1]


def _allowed_range(lo: Any, lo_op: str | None, hi: Any, hi_op: str | None) -> str:
    """Bounds in words: ``0.0 <= value <= 1.0``, ``> 0`` or ``< 1``."""
    if lo_op and hi_op:
        return f"{lo} {'<' if lo_op == 'gt' else '<='} value {_OPS[hi_op]} {hi}"
    if lo_op:
        return f"{_OPS[lo_op]} {lo}"
    if hi_op:
        return f"{_OPS[hi_op]} {hi}"
    return "any value"


def _check_bounds(key: str, value: Any, shown: Any, rules: Mapping[str, Any]) -> None:
    """ConfigError unless ``value`` (shown as the ``shown`` the user gave) is within the
    bounds and choices of ``rules``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, lo_op, hi, hi_op = _bounds(value, rules)
        ok = (lo_op is None or (value > lo if lo_op == "gt" else value >= lo)) and (
            hi_op is None or (value < hi if hi_op == "lt" else value <= hi)
        )
        if not ok:
            raise ConfigError(
                f"config key '{key}': {show(shown)} is out of range; "
                f"allowed: {_allowed_range(lo, lo_op, hi, hi_op)}"
            )
    if "choices" in rules and value not in rules["choices"]:
        allowed = ", ".join(show(c) for c in rules["choices"])
        raise ConfigError(f"config key '{key}': {show(shown)} is not one of {allowed}")
