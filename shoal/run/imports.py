"""The user's code, named in a config: ``"package.module:attribute"`` paths (a network
factory, a recipe) and modules imported for their side effects (a package that registers
its envs on import), loaded the same way in the driver, in spawned workers and in Ray
actors.

A name reaches those processes as text, never as a pickled object, so what a run trains is
written in its ``config.toml`` and ``shoal eval`` or ``--resume`` rebuild it. The working
directory is searched after ``sys.path`` (a console script, unlike ``python -m``, does not
put it there), and a Ray actor adopts the driver's search path
(:func:`search_path` / :func:`adopt_search_path`), so a module beside the user's script
imports wherever the run's processes start on this machine.
"""

from __future__ import annotations

import importlib
import os
import reprlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from shoal.errors import ConfigError, first_line

__all__ = [
    "LOCAL_OBJECTS",
    "adopt_search_path",
    "check_path_syntax",
    "import_modules",
    "importable_elsewhere",
    "load_object",
    "local_name",
    "search_path",
    "shown",
]

LOCAL_OBJECTS: dict[str, Any] = {}
"""Objects handed over in Python (``shoal.train(network=factory)``) under the name a config
records for them, for the processes that cannot import them (a factory defined in
``__main__``): found here first in the process that was given them."""


_REPR = reprlib.Repr()
_REPR.maxstring = 80  # keyword arguments to Repr need Python 3.12


def shown(value: object) -> str:
    """``value`` as a message quotes it: its repr, cut to 80 characters (a fuzzed or pasted
    path can be thousands)."""
    return _REPR.repr(value)


def check_path_syntax(key: str, value: str) -> None:
    """A ``"module:attribute"`` path's form (nothing is imported): one line naming the key."""
    module, colon, attr = value.partition(":")
    ok = colon and module and attr and all(p.isidentifier() for p in module.split("."))
    if not ok or not all(p.isidentifier() for p in attr.split(".")):
        raise ConfigError(
            f"config key {key!r}: {shown(value)} is not a 'package.module:attribute' path "
            "(e.g. 'my_pkg.nets:make_qnet')"
        )


def _import(module: str, key: str, what: str) -> Any:
    """Import ``module`` (retrying with the working directory searched); one line on failure."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise ConfigError(
                f"config key {key!r}: importing {shown(module)} failed: {e}"
            ) from None
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.append(cwd)
            return _import(module, key, what)
        raise ConfigError(
            f"config key {key!r}: {what} module {shown(module)} is not importable from here "
            f"({e}); install it, or run from the directory that holds it"
        ) from None
    except ConfigError:
        raise
    except Exception as e:  # the user's module failed while importing
        raise ConfigError(
            f"config key {key!r}: importing {shown(module)} raised {first_line(e)}"
        ) from e


def import_module(module: str, key: str, what: str = "the") -> Any:
    """The module ``module``, imported as the user's code is (the working directory searched
    too); a :class:`~shoal.errors.ConfigError` naming ``key`` on failure."""
    return _import(module, key, what)


def load_object(path: str, key: str, what: str = "the") -> Any:
    """The object ``"module:attribute"`` names (``attribute`` may be dotted), from
    :data:`LOCAL_OBJECTS` when this process was handed it; one line naming ``key`` when the
    module does not import or has no such attribute."""
    if path in LOCAL_OBJECTS:
        return LOCAL_OBJECTS[path]
    check_path_syntax(key, path)
    module_name, _, attr = path.partition(":")
    obj = _import(module_name, key, what)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"config key {key!r}: module {shown(module_name)} has no attribute {shown(attr)}"
            ) from None
    return obj


def local_name(obj: Any) -> str:
    """The ``"module:qualname"`` a config records for ``obj`` (handed over in Python); it
    is also kept in :data:`LOCAL_OBJECTS`, so this process finds it even when other
    processes could not import it (``__main__``, a function defined inside another)."""
    module = getattr(obj, "__module__", None) or "__main__"
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    name = f"{module}:{qualname}"
    LOCAL_OBJECTS[name] = obj
    return name


def importable_elsewhere(path: str) -> bool:
    """Whether a spawned process can import ``path`` by its name (not the main script, not
    a function defined inside another)."""
    module, _, attr = path.partition(":")
    return module != "__main__" and "<locals>" not in attr


def import_modules(modules: Iterable[str], key: str) -> None:
    """Import each module for its side effects (registering envs or worlds)."""
    for module in modules:
        _import(module, key, "the")


def search_path() -> list[str]:
    """This process's module search path, with the working directory (what a worker on this
    machine needs to import what the driver imports)."""
    return [*sys.path, os.getcwd()]


def adopt_search_path(paths: Sequence[str]) -> None:
    """Append the driver's search-path entries this process lacks and can see (a Ray
    actor starts with Ray's own)."""
    for entry in paths:
        if entry and entry not in sys.path and os.path.isdir(entry):
            sys.path.append(entry)
