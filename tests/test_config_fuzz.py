"""Every config input either loads or fails with a one-line :class:`~shoal.errors.ShoalError`
(the CLI prints it as ``shoal: error: ...`` and exits 2), never with a traceback; and a
config that loads satisfies every declared rule, so that no input slips past validation.

Hypothesis throws at :func:`~shoal.config.load_config` and
:func:`~shoal.config.load_section`: arbitrary bytes and TOML documents (real section and
key names mixed with wrong ones, values of every TOML type, then sometimes corrupted) as
config files; ``SECTION.KEY=VALUE`` overrides of every real key with arbitrary and
edge-case text (``1e5``, ``nan``, ``2**64``, huge integers, other scripts' digits, quotes,
control characters, lone surrogates); and arbitrary Python values through ``values=``.
The rules are re-checked here independently of ``shoal.config``'s own checker.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import typing
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.config import Config, load_config, load_section, param
from shoal.errors import ShoalError

pytestmark = pytest.mark.timeout(120)

# Seed-stable (derandomize) so that runs repeat; no deadline, since a shared core can stall
# any one example. Examples that write a file rewrite one file under the test's tmp_path,
# so sharing that function-scoped fixture across examples is safe.
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
SECTIONS: dict[str, Any] = dict(Config().sections())
KEYS: list[tuple[str, str]] = [
    (name, f.name) for name, section in SECTIONS.items() for f in dataclasses.fields(section)
]


def _hint(section: str, key: str) -> Any:
    return typing.get_type_hints(type(SECTIONS[section]))[key]


def _rules(section: str, key: str) -> typing.Mapping[str, Any]:
    return {f.name: f.metadata for f in dataclasses.fields(SECTIONS[section])}[key]


# --- What a loaded config must satisfy, checked without shoal.config's own checker.


def _scalar_ok(key: str, value: Any, tp: Any, rules: typing.Mapping[str, Any]) -> None:
    if tp is bool:
        assert type(value) is bool, (key, value)
        return
    if tp is int:
        assert type(value) is int and INT64_MIN <= value <= INT64_MAX, (key, value)
    elif tp is float:
        assert type(value) is float and math.isfinite(value), (key, value)
    elif tp is str:
        assert type(value) is str, (key, value)
        assert not any(unicodedata.category(c) in ("Cc", "Cs") for c in value), (key, value)
    else:  # pragma: no cover - a field type this test does not know
        raise AssertionError(f"{key}: unknown field type {tp}")
    for rule, holds in (
        ("ge", lambda v, b: v >= b),
        ("gt", lambda v, b: v > b),
        ("le", lambda v, b: v <= b),
        ("lt", lambda v, b: v < b),
    ):
        if rule in rules:
            assert holds(value, rules[rule]), (key, value, rule, rules[rule])
    if "choices" in rules:
        assert value in rules["choices"], (key, value)


def _field_ok(key: str, value: Any, tp: Any, rules: typing.Mapping[str, Any]) -> None:
    if typing.get_origin(tp) is dict:  # a table of names to any TOML values (env.kwargs)
        assert type(value) is dict and all(type(k) is str for k in value), (key, value)
        return
    if typing.get_origin(tp) is list:
        assert type(value) is list, (key, value)
        assert value or rules.get("allow_empty", False), key
        for i, v in enumerate(value):
            _scalar_ok(f"{key}[{i}]", v, typing.get_args(tp)[0], rules)
        return
    args = typing.get_args(tp)
    if type(None) in args:
        if value is None:
            return
        tp = next(a for a in args if a is not type(None))
    _scalar_ok(key, value, tp, rules)


def assert_section_ok(name: str, section: Any) -> None:
    """Every field of ``section`` has its declared type and keeps its declared rules."""
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        _field_ok(f"{name}.{f.name}", getattr(section, f.name), hints[f.name], f.metadata)


def assert_config_ok(cfg: Config) -> None:
    """A loaded config keeps every declared rule, and the core cross-field ones."""
    for name, section in cfg.sections():
        assert_section_ok(name, section)
    assert cfg.explore.eps_end <= cfg.explore.eps_start
    assert len(cfg.dqn.board) in (0, 3)


def outcome(load: Callable[[], Any]) -> Any:
    """``load()``'s result, or None when it raised a ShoalError with a one-line message;
    any other exception fails the test (it would be a traceback on the command line)."""
    try:
        return load()
    except ShoalError as e:
        message = str(e)
        assert message, "an empty error message"
        assert len(message.splitlines()) == 1, f"message of several lines: {message!r}"
        assert len(message) < 2000, f"message of {len(message)} characters"
        return None


# --- Strategies.

HUGE_INTS = [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**64 - 1, 10**30, -(10**30)]
EDGE_FLOATS = [1e5, 100000.0, 1.5, -0.0, 1e300, 1e400, -1e400, math.nan, 0.5, 1.0, 0.0]
toml_scalars = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.integers(min_value=-3, max_value=100_000),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EDGE_FLOATS),
    st.booleans(),
    st.text(max_size=20),
    st.sampled_from(["none", "null", "soft", "auto", "cpu", "serial", "CartPole-v1", "nope"]),
    st.datetimes(timezones=st.none() | st.just(datetime.timezone.utc)),
    st.dates(),
    st.times(),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def key_values(draw: st.DrawFn, section: str | None) -> dict[str, Any]:
    """A table for ``section``: mostly its real keys (each with a value of its own type
    half the time), some wrong ones."""
    real = [k for s, k in KEYS if s == section]
    keys = draw(
        st.lists(
            st.sampled_from(real) | st.text(max_size=12) if real else st.text(max_size=12),
            max_size=4,
            unique=True,
        )
    )
    table = {}
    for key in keys:
        if key in real and draw(st.booleans()):
            table[key] = draw(plausible(section, key))  # type: ignore[arg-type]
        else:
            table[key] = draw(toml_values)
    return table


def plausible(section: str, key: str) -> st.SearchStrategy[Any]:
    """Values of the key's own type, near its bounds, so that many documents load."""
    tp = _hint(section, key)
    rules = _rules(section, key)
    many = typing.get_origin(tp) is list
    if many:
        tp = typing.get_args(tp)[0]
    tp = next((a for a in typing.get_args(tp) if a is not type(None)), tp)
    if "choices" in rules:
        one: st.SearchStrategy[Any] = st.sampled_from(list(rules["choices"]))
    elif tp is bool:
        one = st.booleans()
    elif tp is int:
        one = st.integers(min_value=-2, max_value=1000) | st.sampled_from([1e3, 2.0, 2**63])
    elif tp is float:
        one = st.floats(min_value=-0.5, max_value=2.0) | st.sampled_from([1e9, 1e10, 10])
    else:
        one = st.text(max_size=12)
    return st.lists(one, max_size=4) if many else one


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A TOML document: mostly real sections (tables of mostly real keys), some wrong."""
    names = draw(
        st.lists(
            # Real names twice as often as wrong ones, so that many documents get far.
            st.sampled_from(list(SECTIONS)) | st.sampled_from(list(SECTIONS)) | st.text(max_size=8),
            max_size=3,
            unique=True,
        )
    )
    doc: dict[str, Any] = {}
    for name in names:
        doc[name] = draw(key_values(name) | toml_values if name in SECTIONS else toml_values)
    return doc


def _corrupt(data: bytes, draw: st.DrawFn) -> bytes:
    """``data`` cut short, or with a few bytes replaced by arbitrary ones."""
    how = draw(st.sampled_from(["keep", "keep", "cut", "splice"]))
    if how == "keep" or not data:
        return data
    at = draw(st.integers(min_value=0, max_value=len(data) - 1))
    if how == "cut":
        return data[:at]
    return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at + 1 :]


# --- (a) Config files.


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_as_a_config_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    cfg = outcome(lambda: load_config(path))
    if cfg is not None:
        assert_config_ok(cfg)


@FUZZ
@given(doc=documents(), tweak=st.data())
def test_toml_documents_as_a_config_file(
    tmp_path: Path, doc: dict[str, Any], tweak: st.DataObject
) -> None:
    path = tmp_path / "c.toml"
    data = tomli_w.dumps(doc).encode()
    path.write_bytes(_corrupt(data, tweak.draw))
    cfg = outcome(lambda: load_config(path))
    if cfg is not None:
        assert_config_ok(cfg)


def test_a_valid_document_loads_and_keeps_the_rules() -> None:
    """The checker above accepts what validation produces (so its passes mean something):
    exact-integer floats become ints, the largest seed stays."""
    doc = {"run": {"total_steps": 1e3, "seed": 2**63 - 1}, "dqn": {"hidden": [2.0, 64]}}
    cfg = outcome(lambda: load_config(None, values=doc))
    assert cfg is not None and cfg.dqn.hidden == [2, 64] and cfg.run.total_steps == 1000


# --- (b) Overrides, of every real key.

EDGE_TEXTS = [
    "1e5",
    "100000.0",
    "1.5",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "+inf",
    "-0",
    "-0.0",
    "0",
    "1",
    "-1",
    "2**64",
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    str(-(2**63) - 1),
    "9" * 400,
    "9" * 5000,
    "1e400",
    "١٢",  # Arabic-Indic digits
    "３２",  # fullwidth digits
    "²",
    "'1'",
    '"1e5"',
    "'",
    '"',
    '"""',
    "",
    " ",
    "[]",
    "[1e5, 2]",
    "[[1]]",
    "[" * 3000,
    "[" * 3000 + "]" * 3000,
    "{}",
    "{a = 1}",
    "true",
    "True",
    "none",
    "null",
    "1979-05-27",
    "1979-05-27T07:32:00Z",
    "07:32:00",
    "0x10",
    "0o17",
    "0b101",
    "1_000",
    "1\nrun.seed=5",
    "1 # comment",
    "\x00",
    "a\x00b",
    "\udcff",
    "\u2028",
    "tab\there",
    "soft",
    "auto",
    "serial",
    "CartPole-v1",
]
override_values = st.sampled_from(EDGE_TEXTS) | st.text(max_size=30)


def override_lists(names: list[str], min_size: int = 0) -> st.SearchStrategy[list[str]]:
    """Lists of up to three ``NAME=VALUE`` overrides: NAME one of ``names``, VALUE drawn
    from :data:`override_values`."""
    return st.lists(
        st.tuples(st.sampled_from(names), override_values).map(lambda kv: f"{kv[0]}={kv[1]}"),
        min_size=min_size,
        max_size=3,
    )


@FUZZ
@given(overrides=override_lists([f"{section}.{key}" for section, key in KEYS], min_size=1))
def test_overrides_of_every_key(overrides: list[str]) -> None:
    cfg = outcome(lambda: load_config(None, overrides))
    if cfg is not None:
        assert_config_ok(cfg)


@pytest.mark.parametrize(("section", "key"), KEYS, ids=[f"{s}.{k}" for s, k in KEYS])
def test_every_key_with_every_edge_value(section: str, key: str) -> None:
    """All of EDGE_TEXTS, for each key: the fuzzing above samples only some pairs."""
    for text in EDGE_TEXTS:
        override = f"{section}.{key}={text}"
        cfg = outcome(lambda override=override: load_config(None, [override]))
        if cfg is not None:
            assert_config_ok(cfg)


@FUZZ
@given(
    text=st.text(max_size=40) | st.sampled_from(["=", ".=", "a.b.c=1", "dqn.=1", " run . seed = 3"])
)
def test_arbitrary_override_text(text: str) -> None:
    cfg = outcome(lambda: load_config(None, [text]))
    if cfg is not None:
        assert_config_ok(cfg)


python_values = st.one_of(
    toml_values,
    st.sampled_from([10**5000, -(10**5000), [[[[[[1]]]]]], (1, 2), object(), b"bytes", 1j]),
)


@FUZZ
@given(key=st.sampled_from(KEYS), value=python_values)
def test_python_values_of_every_key(key: tuple[str, str], value: Any) -> None:
    cfg = outcome(lambda: load_config(None, values={key[0]: {key[1]: value}}))
    if cfg is not None:
        assert_config_ok(cfg)


# --- A section on its own (load_section), with every bound combination.


@dataclass
class Standalone:
    """A section of every field type and bound combination that ``param`` supports."""

    ratio: float = param(0.5, ge=0.0, le=1.0)
    open_ratio: float = param(0.5, gt=0.0, lt=1.0)
    rate: float = param(0.1, gt=0.0)
    cap: float = param(0.0, le=0.0)
    count: int = param(1, gt=0)
    small: int = param(0, ge=-5, lt=5)
    maybe: int | None = param(None, ge=0)
    sizes: list[int] = param([1], gt=0, le=100)
    weights: list[float] = param([], ge=0.0, allow_empty=True)
    mode: str = param("a", choices=("a", "b"))
    label: str | None = None
    flag: bool = False


STANDALONE_KEYS = [f.name for f in dataclasses.fields(Standalone)]


@FUZZ
@given(
    overrides=override_lists(STANDALONE_KEYS),
    values=st.dictionaries(st.sampled_from(STANDALONE_KEYS), toml_values, max_size=2),
)
def test_load_section_with_every_bound_combination(
    overrides: list[str], values: dict[str, Any]
) -> None:
    got = outcome(lambda: load_section(Standalone, "s", values=values, overrides=overrides))
    if got is not None:
        assert_section_ok("s", got)


@FUZZ
@given(doc=st.dictionaries(st.just("s") | st.text(max_size=4), toml_values, max_size=2))
def test_load_section_files(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "s.toml"
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    got = outcome(lambda: load_section(Standalone, "s", path))
    if got is not None:
        assert_section_ok("s", got)
