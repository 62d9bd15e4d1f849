"""A config built from its sources: defaults, a preset or a TOML file (and the file it
``extends``), then values and ``--set`` overrides; the recipe it names resolved; a saved
run's config read back under the defaults of its time (:data:`CONFIG_VERSION`); a
section that lives on its own (:func:`load_section`)."""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

from shoal.config.presets import PRESET_DIR, preset_names
from shoal.config.schema import Config, config_to_dict, section_items
from shoal.config.values import hints, show, validate_fields
from shoal.errors import ConfigError
from shoal.run.files import read_text

__all__ = [
    "CONFIG_VERSION",
    "RENAMED_KEYS",
    "load_config",
    "load_run_config",
    "load_section",
    "parse_override",
    "parse_value",
    "read_toml",
    "save_config",
    "saved_config",
]


def _apply(cfg: Config, data: Mapping[str, Any], source: str) -> None:
    """Set ``data``'s ``{section: {key: value}}`` on ``cfg`` as given (checked later, by
    validation); ConfigError for an unknown section or key, naming ``source``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table of sections, got {show(data)}")
    sections = {name for name, _ in section_items(cfg)}
    for name, values in data.items():
        if name not in sections:
            raise ConfigError(
                f"{source}: unknown config section {show(name)}; "
                f"allowed: {', '.join(sorted(sections))}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: {show(name)} must be a table of keys, got {show(values)}")
        obj = getattr(cfg, name)
        keys = {f.name for f in dataclasses.fields(obj)}
        for key, value in values.items():
            if f"{name}.{key}" in RENAMED_KEYS:
                raise ConfigError(
                    f"{source}: config key {show(f'{name}.{key}')} is now "
                    f"{RENAMED_KEYS[f'{name}.{key}']!r} (one key for every runner and recipe)"
                )
            if key not in keys:
                raise ConfigError(
                    f"{source}: unknown config key {show(f'{name}.{key}')}; keys of [{name}]: "
                    f"{', '.join(sorted(keys))}"
                )
            setattr(obj, key, value)


def _apply_file(cfg: Config, path: Path, source: str, chain: tuple[Path, ...]) -> None:
    """Apply the TOML file at ``path``, after the config its top-level ``extends`` names (a
    preset, or a TOML file relative to this one), so a variant of a preset states only what
    it changes. ``chain`` holds the files that extend this one (a cycle is an error)."""
    data = read_toml(path)
    # A file the user writes is today's unless it says otherwise; a run's saved config
    # without a version is read by load_run_config (version 1).
    _migrate(data, _version(data, source, CONFIG_VERSION))
    base = data.pop("extends", None)
    if base is not None:
        if not isinstance(base, str) or not base:
            raise ConfigError(
                f"{source}: 'extends' must name a preset ({', '.join(preset_names())}) or a "
                f"TOML file, got {show(base)}"
            )
        named = f"{source}: 'extends' = {show(base)}"
        if base in preset_names():
            base_path, base_source = PRESET_DIR / f"{base}.toml", f"preset '{base}'"
        else:
            base_path = path.parent / base
            base_source = f"config file {str(base_path)!r}"
        try:
            here, there = path.resolve(), base_path.resolve()
            found = base_path.is_file()
        except (OSError, ValueError, RuntimeError) as e:  # a NUL, a loop of links
            raise ConfigError(f"{named}: not a path ({_one_line(str(e))})") from None
        if not found:
            raise ConfigError(
                f"{named}: no such preset ({', '.join(preset_names())}) or file {str(there)!r}"
            )
        if there in (*chain, here):
            raise ConfigError(f"{named} makes a cycle")
        _apply_file(cfg, base_path, base_source, (*chain, here))
        borrowed = (cfg.env.id, cfg.run.name) if base in preset_names() else None
    else:
        borrowed = None
    _apply(cfg, data, source)
    # A file extending a preset for another env (naming no run) names its runs after the
    # env, as a preset borrowed with --env does.
    if borrowed is not None and cfg.env.id != borrowed[0] and cfg.run.name == borrowed[1]:
        cfg.run.name = ""


def _apply_override(holder: Any, text: str, source: str) -> None:
    """Apply one ``SECTION.KEY=VALUE`` override to ``holder``, a :class:`Config` or a
    dataclass of sections; errors name ``source``."""
    section, key, raw = parse_override(text)
    value = parse_value(raw)
    if not isinstance(value, str) and _is_text_key(holder, section, key):
        # `--set run.name=2024` names a run "2024": TOML alone would read an integer (or a
        # date, nan, true), which a text key then rejects.
        value = raw.strip()
    _apply(holder, {section: {key: value}}, source)


def _is_text_key(holder: Any, section: str, key: str) -> bool:
    """Whether ``section.key`` exists in ``holder`` and holds text (``str`` or ``str | None``)."""
    obj = dict(section_items(holder)).get(section)
    if obj is None or key not in {f.name for f in dataclasses.fields(obj)}:
        return False
    tp = hints(type(obj))[key]
    return tp is str or (
        typing.get_origin(tp) in (typing.Union, types.UnionType)
        and set(typing.get_args(tp)) == {str, type(None)}
    )


def parse_override(text: str) -> tuple[str, str, str]:
    """``SECTION.KEY=VALUE`` as (section, key, the value's text)."""
    if not isinstance(text, str):
        raise ConfigError(f"override {show(text)}: expected a string SECTION.KEY=VALUE")
    if "=" not in text:
        raise ConfigError(f"override {show(text)}: expected SECTION.KEY=VALUE, e.g. dqn.lr=1e-3")
    path, raw = text.split("=", 1)
    parts = [p.strip() for p in path.split(".")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"override {show(text)}: the key must be SECTION.KEY, e.g. dqn.lr")
    return parts[0], parts[1], raw


def parse_value(raw: str) -> Any:
    """A command-line value parsed as TOML; a bare word (`soft`, `CartPole-v1`) is a string.

    Text that is not one TOML value stays a string, for validation to reject where a
    string does not belong: a second key smuggled in after a newline (``1\\nx = 2``, which
    TOML would read as 1 and drop the rest), an integer of more than 4300 digits (Python
    refuses to read one) and nesting deeper than the parser's recursion.
    """
    raw = raw.strip()
    try:
        doc = tomllib.loads(f"v = {raw}")
    except (ValueError, RecursionError):  # TOMLDecodeError is a ValueError
        return raw
    return doc["v"] if doc.keys() == {"v"} else raw


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in ``path``; ConfigError naming the file for one that is missing,
    unreadable, not UTF-8 or not TOML."""
    text = read_text(path, "config file", ConfigError, allowed="a TOML file in UTF-8")
    where = f"config file {str(path)!r}"  # repr: a newline in a name stays one line
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where} is not valid TOML: {_one_line(str(e))}") from None
    except RecursionError:
        raise ConfigError(f"{where} is not valid TOML: its values nest too deeply") from None
    except ValueError:  # Python will not read an integer of more than 4300 digits
        raise ConfigError(f"{where} is not valid TOML: it holds a number too long") from None


def _one_line(text: str) -> str:
    """``text`` with its lines joined, so a message is always one line."""
    return " ".join(text.split())


def _is_path(src: str) -> bool:
    """Whether ``src`` names an existing file, or one whose existence cannot be checked
    (a path too long, behind a directory that cannot be read, holding a NUL): reading it
    then says what is wrong with it."""
    try:
        return Path(src).exists()
    except (OSError, ValueError):
        return True


def load_config(
    source: str | Path | None = None,
    overrides: typing.Sequence[str] = (),
    values: typing.Mapping[str, typing.Mapping[str, Any]] | None = None,
) -> Config:
    """Build and validate a config.

    Every bad input (a missing, unreadable or malformed file, an unknown section or key, a
    value of the wrong type or out of range) raises a one-line
    :class:`~shoal.errors.ConfigError` naming the key or the file, the value and what is
    allowed.

    Args:
        source: a preset name (see :func:`preset_names`), a path to a TOML file, or None
            for the defaults.
        overrides: ``SECTION.KEY=VALUE`` strings; values are parsed as TOML (bare words
            are strings), applied after the source.
        values: nested ``{section: {key: value}}`` applied after the source and before the
            overrides.
    """
    if isinstance(overrides, str):  # a lone string would be applied character by character
        raise ConfigError(
            f"overrides {show(overrides)}: expected a list of SECTION.KEY=VALUE strings"
        )
    cfg = Config()
    borrowed: tuple[str, str] | None = None
    if source is not None:
        src = str(source)
        if src in preset_names():
            _apply_file(cfg, PRESET_DIR / f"{src}.toml", f"preset '{src}'", ())
            borrowed = (cfg.env.id, cfg.run.name)
        elif src.endswith(".toml") or _is_path(src):
            _apply_file(cfg, Path(src), f"config file {src!r}", ())
        else:
            raise ConfigError(
                f"{src!r} is neither a preset ({', '.join(preset_names())}) nor a TOML file"
            )
    if values:
        _apply(cfg, values, "config")
    for text in overrides:
        _apply_override(cfg, text, f"override {show(text)}")
    named = bool(values and "name" in values.get("run", {})) or any(
        parse_override(text)[:2] == ("run", "name") for text in overrides
    )
    if borrowed is not None and cfg.env.id != borrowed[0] and not named:
        # A preset borrowed for another env (`shoal train atari --env ALE/Pong-v5`): the
        # preset's run name would call Pong's runs "atari"; the env's id names them.
        cfg.run.name = ""
    _resolve_recipe(cfg)
    return cfg.validate()


def _resolve_recipe(cfg: Config) -> None:
    """``run.recipe`` as a name or path every process of the run (workers, ``shoal eval``,
    ``--resume``) can load: ``"auto"`` as the env's own recipe, a name registered only
    here as its path (a wrong type is left to validation)."""
    from shoal.registry import resolve_recipe

    if isinstance(cfg.run.recipe, str):
        env_id = cfg.env.id if isinstance(cfg.env.id, str) else ""
        cfg.run.recipe = resolve_recipe(cfg.run.recipe, env_id)


CONFIG_VERSION = 3
"""The defaults a saved run config was written under (its top-level ``config_version``;
none: 1). A run's config holds every key, so a default changed since reads there like a
choice; a section lists such changes in ``CHANGED_DEFAULTS`` and :func:`load_run_config`
reads an older run's old default as today's. 2: ``mapf.shield_guide`` 0 -> 3. 3: the Ape-X
spread's three keys are one, ``explore.spread``, and MAPF's sequences are ``[r2d2]``'s
(:data:`RENAMED_KEYS`)."""

RENAMED_KEYS = {
    "processes.eps_spread": "explore.spread",
    "ray.eps_alpha": "explore.spread",
    "mapf.eps_alpha": "explore.spread",
    "mapf.length": "r2d2.length",
    "mapf.burn_in": "r2d2.burn_in",
    "mapf.period": "r2d2.period",
    "mapf.eta": "r2d2.eta",
}
"""Keys gone in config_version 3 -> the key that holds their value now."""

_OLD_SPREADS = {"processes.eps_spread": 0.0, "ray.eps_alpha": 7.0, "mapf.eps_alpha": 7.0}
"""The old spread keys' defaults, which read as ``explore.spread``'s None today."""


def _move_renamed(data: dict[str, Any]) -> None:
    """A config written before version 3: each old key the run read (a ``[mapf]`` key in
    a MAPF run, a runner's spread in its runner's run) moves to its new key, unless it is
    an old spread at its default (``explore.spread``'s None resolves to the same); the keys
    it did not read had no effect and are dropped."""
    run = data.get("run") if isinstance(data.get("run"), Mapping) else {}
    env = data.get("env") if isinstance(data.get("env"), Mapping) else {}
    recipe = run.get("recipe", "auto")
    mapf = recipe == "mapf" or (recipe == "auto" and env.get("id") == "shoal/Mapf-v0")
    for old, new in RENAMED_KEYS.items():
        section, key = old.split(".")
        values = data.get(section)
        if not isinstance(values, dict) or key not in values:
            continue
        value = values.pop(key)
        read = mapf if section == "mapf" else (not mapf and run.get("runner") == section)
        if read and value != _OLD_SPREADS.get(old, object()):
            new_section, new_key = new.split(".")
            data.setdefault(new_section, {})[new_key] = value


def save_config(cfg: Any, path: Path, *, section: str | None = None) -> None:
    """Write a resolved config as TOML, atomically (temp file, fsync, rename), so a crash
    never leaves a run directory with half a config.

    ``cfg`` is a :class:`Config` (written with its :data:`CONFIG_VERSION`); with
    ``section``, it is one section dataclass written as the ``[section]`` table (read it
    back with :func:`load_section`).
    """
    import tomli_w

    from shoal.run.files import atomic_write_text

    if section is not None:
        data: dict[str, Any] = config_to_dict(sections_of(section, cfg))
    else:
        data = {"config_version": CONFIG_VERSION, **config_to_dict(cfg)}
    atomic_write_text(path, tomli_w.dumps(data))


def _version(data: dict[str, Any], source: str, missing: int) -> int:
    """The ``config_version`` ``data`` says (popped; ``missing`` when it says none)."""
    version = data.pop("config_version", missing)
    if type(version) is not int or not 1 <= version <= CONFIG_VERSION:
        raise ConfigError(
            f"{source}: 'config_version' is {show(version)}; allowed: 1 to {CONFIG_VERSION} "
            "(a config saved by a newer shoal?)"
        )
    return version


def _migrate(data: dict[str, Any], version: int) -> None:
    """Keys written under ``version`` as today's config names them."""
    if version < 3:
        _move_renamed(data)


def saved_config(data: Mapping[str, Any], source: str) -> Config:
    """The config a run or a study saved (``data``, as read from its TOML): a config
    without a ``config_version`` was saved before versions existed, version 1, and its keys
    are moved to today's names; where it was written under an older :data:`CONFIG_VERSION`,
    a key still at the default of its time that has changed since (a section's
    ``CHANGED_DEFAULTS``) takes today's, as if the run had been made today; a value the run
    chose stays. ``extends`` is refused: shoal never saves one, and in a received run it
    could name any file on disk. Imports nothing."""
    from shoal.run.imports import reading_imports_nothing

    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table of sections, got {show(data)}")
    data = dict(data)
    version = _version(data, source, 1)
    if "extends" in data:
        raise ConfigError(
            f"{source}: 'extends' = {show(data['extends'])} in a saved config, which shoal "
            "never writes (it may name any file on disk); remove the line to open it"
        )
    _migrate(data, version)
    with reading_imports_nothing(source):
        cfg = Config()
        _apply(cfg, data, source)
        _resolve_recipe(cfg)
        cfg.validate()
    for _, section in cfg.sections():
        changed = getattr(type(section), "CHANGED_DEFAULTS", {})
        defaults = {f.name: f for f in dataclasses.fields(section)}
        for key, (since, old) in changed.items():
            if version < since and getattr(section, key) == old:
                f = defaults[key]
                fresh = f.default_factory() if f.default is dataclasses.MISSING else f.default
                setattr(section, key, fresh)
    return cfg


def load_run_config(path: Path, overrides: typing.Sequence[str] = ()) -> Config:
    """A run directory's saved config (``overrides`` on top), read as
    :func:`saved_config` says. A link is refused, not followed (a run directory is shared
    data)."""
    from shoal.run.files import link_refused
    from shoal.run.imports import reading_imports_nothing

    if Path(path).is_symlink():
        raise ConfigError(link_refused(path))
    cfg = saved_config(read_toml(path), f"config file {str(path)!r}")
    if not overrides:
        return cfg
    with reading_imports_nothing(f"config '{path}'"):
        return load_config(None, overrides, values=config_to_dict(cfg))


@functools.cache
def _sections_class(name: str, cls: type) -> type:
    return dataclasses.make_dataclass(
        f"{cls.__name__}Sections", [(name, cls, field(default_factory=cls))]
    )


def sections_of(name: str, obj: Any) -> Any:
    """``obj`` as the one section ``name`` of a config, so that the machinery written for
    :class:`Config` (``_apply``, :func:`config_to_dict`, :func:`describe_config`) serves a
    section that lives on its own, with the same rules and messages."""
    return _sections_class(name, type(obj))(obj)


_Section = typing.TypeVar("_Section")


def load_section(
    cls: type[_Section],
    name: str,
    source: str | Path | None = None,
    overrides: typing.Sequence[str] = (),
    values: typing.Mapping[str, Any] | None = None,
) -> _Section:
    """Build and validate one config section that lives on its own (e.g. ``[sudoku]``).

    The same machinery as :func:`load_config`, so one config system with one set of rules
    and messages: ``source`` is a TOML file holding only the ``[name]`` table; ``values``
    (``{key: value}``) come next; ``overrides`` (``KEY=VALUE`` or ``NAME.KEY=VALUE``, the
    value parsed as TOML) come last. Unknown sections and keys, wrong types and out-of-range
    values raise ConfigError naming the key, the value and what is allowed. The section is
    checked by its own ``validate()`` when it has one, else by :func:`validate_fields`.

    Example:
        >>> from dataclasses import dataclass
        >>> from shoal.config import param
        >>> @dataclass
        ... class Demo:
        ...     lr: float = param(0.1, gt=0.0)
        >>> load_section(Demo, "demo", overrides=["lr=0.5"]).lr
        0.5
        >>> load_section(Demo, "demo", overrides=["demo.lr=-1"])
        Traceback (most recent call last):
        ...
        shoal.errors.ConfigError: config key 'demo.lr': -1 is out of range; allowed: > 0.0
        >>> load_section(Demo, "demo", overrides=["run.seed=1"])
        Traceback (most recent call last):
        ...
        shoal.errors.ConfigError: override 'run.seed=1': unknown config section 'run'; allowed: demo
    """
    if isinstance(overrides, str):  # a lone string would be applied character by character
        raise ConfigError(f"overrides {show(overrides)}: expected a list of KEY=VALUE strings")
    holder = sections_of(name, cls())
    if source is not None:
        _apply(holder, read_toml(Path(source)), f"config file {str(source)!r}")
    if values:
        _apply(holder, {name: values}, "config")
    for text in overrides:
        qualified = text
        if isinstance(text, str):
            key, eq, _ = text.partition("=")
            qualified = text if "." in key or not eq else f"{name}.{text.lstrip()}"
        _apply_override(holder, qualified, f"override {show(text)}")
    obj = getattr(holder, name)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    else:
        validate_fields(obj, f"{name}.")
    return obj
