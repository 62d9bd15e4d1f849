"""Consent before code: a run directory (or a study) someone sends you is data until you
say you trust it.

A run's config can name code: modules its env needs (``env.imports``, ``module:Id``,
``pettingzoo:module``), a network factory or torso, a recipe (the config keys whose
``param`` carries ``code=``). Training a config the user wrote runs that code: the user
named it. Opening a run someone made (``shoal eval``, ``shoal export``,
``shoal.load_policy``, ``shoal mapf eval``, ``--resume``, ``shoal tune --resume``) lists it
first (:func:`named_code`) and stops with one line naming the modules unless the user
trusts the run (``--trust-code``, ``trust_code=True``), as Hugging Face's
``trust_remote_code`` does. Not the run's code: shoal's own modules, registered recipe
names, and objects this process was handed in Python (``shoal.train(network=f)`` records
``f``'s name; the same process opening that run finds ``f`` itself, imports nothing).

Example:
    >>> from shoal.config import load_config
    >>> cfg = load_config(None, ["env.imports=['my_envs']", "dqn.network='my_nets:make_q'"])
    >>> [(c.key, c.module) for c in named_code(cfg)]
    [('env.imports', 'my_envs'), ('dqn.network', 'my_nets')]
    >>> check_consent(cfg, "run 'r'", trust_code=False)
    Traceback (most recent call last):
    ...
    shoal.errors.UntrustedCodeError: run 'r' names code ... module 'my_envs' (env.imports), ...
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from shoal.errors import UntrustedCodeError
from shoal.run.imports import LOCAL_OBJECTS, shoals_own, shown

__all__ = ["TRUST_FLAG", "NamedCode", "check_consent", "code_in", "named_code"]

TRUST_FLAG = "--trust-code"
"""The command-line opt-in (``trust_code=True`` in Python)."""


@dataclasses.dataclass(frozen=True)
class NamedCode:
    """One piece of code a config names."""

    key: str
    """The config key (``env.imports``, ``dqn.network``, ...)."""
    value: str
    """What the key says (one module of a list)."""
    module: str
    """The module importing it would run."""


def named_code(cfg: Any) -> list[NamedCode]:
    """The code ``cfg`` names outside shoal, in section and key order: what opening a run
    with this config would import."""
    found: list[NamedCode] = []
    for name, section in cfg.sections():
        for f in dataclasses.fields(section):
            found += code_in(cfg, f"{name}.{f.name}", getattr(section, f.name))
    return found


def code_in(cfg: Any, key: str, value: Any) -> list[NamedCode]:
    """The code ``value`` would name as config key ``key`` of ``cfg`` (a value a study
    may search, say): none for a key that names no code."""
    section, _, name = key.partition(".")
    holder = dict(cfg.sections()).get(section)
    fields = {f.name: f for f in dataclasses.fields(holder)} if holder is not None else {}
    kind = fields[name].metadata.get("code") if name in fields else None
    if kind is None:
        return []
    found = []
    for one in value if kind == "modules" and isinstance(value, list) else [value]:
        module = _module_of(kind, one) if isinstance(one, str) else ""
        if module and not shoals_own(module) and one not in LOCAL_OBJECTS:
            found.append(NamedCode(key, one, module))
    return found


def _module_of(kind: str, value: str) -> str:
    """The module a ``kind`` key's ``value`` imports ('' for none)."""
    if kind == "modules":
        return value
    if kind == "env":
        if value.startswith("pettingzoo:"):
            return value.removeprefix("pettingzoo:")
        module, colon, _ = value.partition(":")
        return module if colon else ""
    if kind == "recipe":
        from shoal.registry import BUILTIN_RECIPES

        if value in BUILTIN_RECIPES:
            return ""
    return value.partition(":")[0]  # a path: "module:attribute"


def check_consent(
    cfg: Any,
    where: str,
    *,
    trust_code: bool,
    user_keys: frozenset[str] = frozenset(),
    also: Sequence[NamedCode] = (),
) -> None:
    """One line naming the modules unless ``cfg`` (and ``also``: code a study's space may
    pick) names no code outside shoal or the user trusts it (then the same modules are
    named on stderr, before any is imported). ``where`` names what is
    opened (``"run 'runs/x'"``); ``user_keys`` are keys the user gave values of their own
    (a resume's ``--set``), not the run's."""
    names = [c for c in [*named_code(cfg), *also] if c.key not in user_keys]
    if not names:
        return
    listed = ", ".join(
        f"{shown(c.module)} ({c.key}{'' if c.value == c.module else ' = ' + shown(c.value)})"
        for c in names
    )
    if trust_code:  # said before anything is imported, so the user sees what runs
        print(f"shoal: trusting {where}: importing its code, module {listed}", file=sys.stderr)
        return
    raise UntrustedCodeError(
        f"{where} names code of its own, which opening it would run: module {listed}; add "
        f"{TRUST_FLAG} (trust_code=True in Python) if you trust the run"
    )
