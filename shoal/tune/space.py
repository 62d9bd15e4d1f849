"""Search spaces: which config keys ``shoal tune`` samples, and from what.

A space maps config keys to a range (``{low, high}``, ``log = true`` to sample on a log
scale; integers when both ends are) or a list (``{choices = [...]}``, any TOML values, lists
too). The run's recipe gives a default space (:meth:`DQNRecipe.search_space`); a space file
adds or replaces keys, and names default keys to leave at the config's value:

.. code-block:: toml

    keep = ["dqn.n_step"]          # not searched: the config's value

    [space.dqn]
    lr = { low = 1e-4, high = 1e-2, log = true }
    hidden = { choices = [[64, 64], [256, 256]] }

    [space.run]
    replay_ratio = { choices = [0.25, 1.0] }

Keys the user sets on the command line (``--set``) are kept fixed too. Every bound and
choice is checked against the key's own rules before the first trial, so a bad one is
a one-line error, not a failed trial an hour in.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.config import Config, config_to_dict, load_config, read_toml
from shoal.errors import ConfigError

__all__ = ["Dimension", "SearchSpace", "apply_values", "read_space_file"]

_SPEC_KEYS = {"low", "high", "log", "choices"}


@dataclass(frozen=True)
class Dimension:
    """One searched config key: a range or a list of choices."""

    key: str
    """The config key, ``section.name``."""
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None

    def suggest(self, trial: Any) -> Any:
        """This key's value for an Optuna trial."""
        if self.choices is not None:
            picked = trial.suggest_categorical(self.key, self.shown_choices())
            return picked if picked in self.choices else json.loads(picked)
        if isinstance(self.low, int) and isinstance(self.high, int):
            return trial.suggest_int(self.key, self.low, self.high, log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)

    def distribution(self) -> Any:
        """The Optuna distribution :meth:`suggest` samples (what a study's journal records
        of each trial's value)."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        if self.choices is not None:
            return CategoricalDistribution(self.shown_choices())
        assert self.low is not None and self.high is not None
        if isinstance(self.low, int) and isinstance(self.high, int):
            return IntDistribution(self.low, self.high, log=self.log)
        return FloatDistribution(float(self.low), float(self.high), log=self.log)

    def shown_choices(self) -> list[Any]:
        """The choices as Optuna takes them: scalars, a list (a layer list) as its JSON
        text."""
        assert self.choices is not None
        return [c if _scalar(c) else json.dumps(c) for c in self.choices]

    def startup_value(self, k: int, count: int, seed: int) -> Any:
        """This key's value (as Optuna takes it) at point ``k`` of a start-up design of
        ``count`` points: the choices dealt in a shuffled order, so that the first
        ``min(count, len(choices))`` points draw distinct ones; a range cut into ``count``
        equal strata of its scale, a shuffled one for each point, a uniform draw in it."""
        rng = random.Random(f"shoal tune {seed} {self.key}")  # the same in every process
        if self.choices is not None:
            order = self.shown_choices()
            rng.shuffle(order)
            return order[k % len(order)]
        strata = list(range(count))
        rng.shuffle(strata)
        jitter = [rng.random() for _ in range(count)]
        return self._at((strata[k % count] + jitter[k % count]) / count)

    def _at(self, u: float) -> float | int:
        """The range's value at the share ``u`` (0 to 1) of its scale; an integer range
        gives each integer an equal share."""
        assert self.low is not None and self.high is not None
        integer = isinstance(self.low, int) and isinstance(self.high, int)
        low, top = self.low, self.high + 1 if integer else self.high
        if self.log:
            x = math.exp(math.log(low) + u * (math.log(top) - math.log(low)))
        else:
            x = low + u * (top - low)
        if integer:
            return min(max(math.floor(x), self.low), self.high)
        return min(max(x, self.low), self.high)

    def as_toml(self) -> dict[str, Any]:
        """The dimension as a space file writes it."""
        if self.choices is not None:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, "log": self.log}


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


class SearchSpace:
    """The searched keys of one study, checked against the base config."""

    def __init__(self, dimensions: Iterable[Dimension]) -> None:
        self.dimensions = {d.key: d for d in dimensions}

    @classmethod
    def build(
        cls,
        base: Config,
        file: Mapping[str, Any] | None = None,
        fixed: Iterable[str] = (),
        *,
        exact: bool = False,
    ) -> SearchSpace:
        """The recipe's default space for ``base``, with a space file's ``[space]`` on top,
        less its ``keep`` keys and the ``fixed`` ones (set by the user); every bound and
        choice checked as a value of its key. ``exact``: the file's space alone (a study
        resumed from the space it wrote)."""
        from shoal.registry import recipe_for

        file = dict(file or {})
        unknown = set(file) - {"space", "keep"}
        if unknown:
            raise ConfigError(
                f"search space: unknown table {sorted(unknown)[0]!r}; a space file has "
                "[space] (the keys searched) and keep = [...] (default keys not searched)"
            )
        specs = {} if exact else dict(recipe_for(base).search_space(base))
        specs.update(_flatten(file.get("space", {})))
        keep = file.get("keep", [])
        if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
            raise ConfigError(f"search space: keep must be a list of config keys, got {keep!r}")
        for key in [*keep, *fixed]:
            _check_key(base, key, "keep" if key in keep else "--set")
            specs.pop(key, None)
        if not specs:
            raise ConfigError("search space: no key left to search")
        return cls(_dimension(base, key, spec) for key, spec in specs.items())

    def sample(self, trial: Any) -> dict[str, Any]:
        """Every key's value for an Optuna trial, as ``{config key: value}``."""
        return {key: d.suggest(trial) for key, d in self.dimensions.items()}

    def startup_point(self, k: int, count: int, seed: int) -> dict[str, Any]:
        """Point ``k`` of the study's start-up design of ``count`` points (seeded by
        ``seed``), as Optuna's parameters: every choice of a list of at most ``count``
        choices is drawn once in the design, and each range is sampled once in each of
        ``count`` strata (a Latin hypercube). Independent random draws, Optuna's start-up,
        leave choices out: 5 draws of 5 choices draw all of them 4% of the time."""
        return {key: d.startup_value(k, count, seed) for key, d in self.dimensions.items()}

    def as_toml(self) -> dict[str, Any]:
        """The space as a space file's ``[space]`` table (nested by section)."""
        out: dict[str, dict[str, Any]] = {}
        for key, d in self.dimensions.items():
            section, name = key.split(".", 1)
            out.setdefault(section, {})[name] = d.as_toml()
        return out


def read_space_file(path: str | Path) -> dict[str, Any]:
    """A space file's contents (one-line ConfigError for a missing or malformed one)."""
    return read_toml(Path(path))


def apply_values(base: Config, values: Mapping[str, Any]) -> Config:
    """``base`` with ``{config key: value}`` set, validated as a whole."""
    data = config_to_dict(base)
    for key, value in values.items():
        section, name = key.split(".", 1)
        data.setdefault(section, {})[name] = value
    return load_config(None, values=data)


def _flatten(space: Any) -> dict[str, Any]:
    """``[space]`` as ``{config key: spec}``: nested section tables (``[space.dqn]``) or
    quoted dotted keys (``"dqn.lr" = {...}``)."""
    if not isinstance(space, Mapping):
        raise ConfigError(f"search space: [space] must be a table of keys, got {space!r}")
    out: dict[str, Any] = {}
    for name, value in space.items():
        if "." in name:
            out[name] = value
        elif isinstance(value, Mapping) and not (_SPEC_KEYS & set(value)):
            out.update({f"{name}.{key}": spec for key, spec in value.items()})
        else:
            raise ConfigError(
                f"search space key {name!r}: not SECTION.KEY; write [space.SECTION] tables "
                'or quoted keys like "dqn.lr"'
            )
    return out


def _check_key(base: Config, key: str, where: str) -> None:
    """ConfigError unless ``key`` names a config key."""
    import dataclasses

    section, _, name = key.partition(".")
    sections = dict(base.sections())
    if section not in sections or not name:
        raise ConfigError(
            f"search space key {key!r} ({where}): not a config key; sections: "
            f"{', '.join(sorted(sections))}"
        )
    keys = {f.name for f in dataclasses.fields(sections[section])}
    if name not in keys:
        raise ConfigError(
            f"search space key {key!r} ({where}): not a config key; keys of [{section}]: "
            f"{', '.join(sorted(keys))}"
        )


def _dimension(base: Config, key: str, spec: Any) -> Dimension:
    """One key's spec checked: its shape, its ends, and each value as a value of the key."""
    _check_key(base, key, "space")
    what = f"search space key {key!r}"
    if not isinstance(spec, Mapping) or not set(spec) <= _SPEC_KEYS or not spec:
        raise ConfigError(
            f"{what}: expected {{low = ..., high = ...[, log = true]}} or "
            f"{{choices = [...]}}, got {spec!r}"
        )
    if "choices" in spec:
        choices = spec["choices"]
        if set(spec) != {"choices"} or not isinstance(choices, list) or not choices:
            raise ConfigError(f"{what}: choices must be a non-empty list, alone; got {spec!r}")
        for choice in choices:
            _check_value(base, key, choice, f"{what}: choice {choice!r}")
        return Dimension(key, choices=tuple(choices))
    low, high, log = spec.get("low"), spec.get("high"), spec.get("log", False)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
    if not numbers or not isinstance(log, bool):
        raise ConfigError(f"{what}: low and high must be numbers, log true or false; got {spec!r}")
    if not low < high:
        raise ConfigError(f"{what}: low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise ConfigError(f"{what}: a log scale needs low > 0, got {low}")
    for name, value in (("low", low), ("high", high)):
        _check_value(base, key, value, f"{what}: {name} = {value!r}")
    if _integer_key(base, key):  # 1e3 in TOML is a float; the key takes whole numbers
        low, high = int(low), int(high)
    return Dimension(key, low=low, high=high, log=log)


def _integer_key(base: Config, key: str) -> bool:
    """Whether ``key`` holds an integer (or an optional one)."""
    import typing

    section, name = key.split(".", 1)
    tp = typing.get_type_hints(type(dict(base.sections())[section]))[name]
    return tp is int or (typing.get_origin(tp) is not None and int in typing.get_args(tp))


def _check_value(base: Config, key: str, value: Any, what: str) -> None:
    try:
        apply_values(base, {key: value})
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from None
