"""The user's code, named in a config: ``"package.module:attribute"`` paths (a network
factory, a recipe) and modules imported for their side effects (a package that registers
its envs on import), loaded the same way in the driver, in spawned workers and in Ray
actors.

A name reaches those processes as text, never as a pickled object, so what a run trains is
written in its ``config.toml`` and ``shoal eval`` or ``--resume`` rebuild it. The working
directory is searched after ``sys.path`` (a console script, unlike ``python -m``, does not
put it there), and a Ray actor adopts the driver's search path
(:func:`search_path`, :meth:`DriverPath.adopt`), so a module beside the user's script
imports wherever the run's processes start on this machine.

Opening a run someone else made (``shoal eval``, ``--resume``) must run none of its code
unless the user consents (:mod:`shoal.run.consent`): while :func:`refusing_user_code` is in
force, only shoal's own modules import here, and the working directory is never searched.
Whatever a name resolves to is checked before it is called (:func:`check_factory`,
:func:`~shoal.recipes.contract.check_recipe_class`): a path that reaches a builtin (``os:abort``,
``builtins:breakpoint``) or another module's object is refused by name.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import inspect
import os
import reprlib
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

from shoal.errors import ConfigError, UntrustedCodeError, first_line

__all__ = [
    "LOCAL_OBJECTS",
    "DriverPath",
    "check_factory",
    "check_path_syntax",
    "import_modules",
    "importable_elsewhere",
    "is_builtin",
    "load_object",
    "local_name",
    "reading_imports_nothing",
    "refusing_user_code",
    "search_path",
    "shoals_own",
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
    path can be thousands), every character outside ASCII escaped: a module named with a
    look-alike letter (``sh\u03bfal``, a Greek omicron) must not read as shoal's own."""
    return _REPR.repr(value).encode("ascii", "backslashreplace").decode("ascii")


def check_path_syntax(key: str, value: str) -> None:
    """A ``"module:attribute"`` path's form (nothing is imported): one line naming the key."""
    module, colon, attr = value.partition(":")
    ok = colon and module and attr and all(p.isidentifier() for p in module.split("."))
    if not ok or not all(p.isidentifier() for p in attr.split(".")):
        raise ConfigError(
            f"config key {key!r}: {shown(value)} is not a 'package.module:attribute' path "
            "(e.g. 'my_pkg.nets:make_qnet')"
        )


_REFUSING: contextvars.ContextVar[tuple[str, bool] | None] = contextvars.ContextVar(
    "shoal_refusing_user_code", default=None
)
"""While set (to what is being opened or read, and whether an import there is a bug), a
module that is not shoal's own does not import here: the consent check
(:mod:`shoal.run.consent`) lists a config's code before anything runs, and this catches
any name it would have missed. A context variable, so a run this process trains in
another thread (``shoal tune``'s, a test's) is not affected."""


def shoals_own(module: str) -> bool:
    """Whether ``module`` is part of shoal itself (importing it runs no user code)."""
    return module == "shoal" or module.startswith("shoal.")


@contextlib.contextmanager
def refusing_user_code(run: str, refuse: bool = True) -> Iterator[None]:
    """Within the block, importing a module that is not shoal's own by a config's name
    raises :class:`~shoal.errors.UntrustedCodeError` naming ``run`` (no-op unless
    ``refuse``)."""
    with _refusing((run, False), refuse):
        yield


@contextlib.contextmanager
def reading_imports_nothing(what: str) -> Iterator[None]:
    """Within the block (reading and checking a config), importing a config's module is
    refused whatever the user trusts: checking a config must import nothing, since a
    received run's is checked before the user is asked (a check that needs the env is a
    section's ``check_env``). Refused here, it is a bug, said as one."""
    with _refusing((what, True)):
        yield


@contextlib.contextmanager
def _refusing(state: tuple[str, bool], refuse: bool = True) -> Iterator[None]:
    if not refuse:
        yield
        return
    token = _REFUSING.set(state)
    try:
        yield
    finally:
        _REFUSING.reset(token)


def _refused(module: str, key: str) -> UntrustedCodeError:
    """The line for an import :func:`refusing_user_code` or :func:`reading_imports_nothing`
    refuses."""
    where, bug = _REFUSING.get() or ("", False)
    if bug:
        return UntrustedCodeError(
            f"checking {where} imported module {shown(module)} (config key {key!r}): "
            "checking a config must import nothing, a bug of shoal's or of a plug-in's "
            "config check (please report it)"
        )
    return UntrustedCodeError(
        f"{where} names module {shown(module)} (config key {key!r}), code that opening it "
        "would run; add --trust-code (trust_code=True in Python) if you trust the run"
    )


def _import(module: str, key: str, what: str) -> Any:
    """Import ``module`` (retrying with the working directory searched, unless a run is
    open untrusted); one line on failure."""
    refusing = _REFUSING.get() is not None
    if refusing and not shoals_own(module):
        raise _refused(module, key)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise ConfigError(
                f"config key {key!r}: importing {shown(module)} failed: {e}"
            ) from None
        cwd = os.getcwd()
        if cwd not in sys.path and not refusing:
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
        if isinstance(obj, types.ModuleType) and obj.__name__ != module_name:
            # 'shoal.api:os.abort' would reach os through shoal: a path names its object
            # in the module that holds it.
            raise ConfigError(
                f"config key {key!r}: {shown(path)} reaches module {obj.__name__!r} through "
                f"{module_name!r}; name the object in its own module ('{obj.__name__}:...'); "
                "it was not called"
            )
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"config key {key!r}: module {shown(module_name)} has no attribute {shown(attr)}"
            ) from None
    return obj


def is_builtin(obj: Any, path: str) -> bool:
    """Whether ``obj`` (what ``path`` names) is Python's or a C extension's own callable
    (``print``, ``os.abort``, ``breakpoint``, ``type``), never a factory or recipe a user
    writes. By its path too: a library may have put its own function in ``builtins``
    (Ray's driver replaces ``print``)."""
    wrappers = (types.MethodWrapperType, types.WrapperDescriptorType)
    if inspect.isbuiltin(obj) or isinstance(obj, wrappers):
        return True
    return "builtins" in (getattr(obj, "__module__", None), path.partition(":")[0])


def check_factory(obj: Any, path: str, key: str, signature: str) -> None:
    """One line naming ``key`` unless ``obj`` (what ``path`` names) is a callable a user
    could have written as a factory (``signature`` says what it is called with): not a
    builtin such as ``os:abort`` or ``builtins:print``, checked before it is called."""
    if not callable(obj):
        raise ConfigError(
            f"config key {key!r}: {shown(path)} is a {type(obj).__name__}, not a callable "
            f"factory{signature}"
        )
    if is_builtin(obj, path):
        raise ConfigError(
            f"config key {key!r}: {shown(path)} is Python's built-in "
            f"{path.rpartition(':')[2].rpartition('.')[2]!r}, not a factory{signature}; "
            "it was not called"
        )


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


@dataclasses.dataclass(frozen=True)
class DriverPath:
    """What a worker on this machine needs to import what the driver imports and to read
    what it reads (:func:`search_path`), handed to Ray's actors and tasks."""

    modules: tuple[str, ...]
    """The driver's module search path."""
    directory: str | None
    """The driver's working directory, where a worker runs (relative paths in a config
    mean the same there); None while a run is opened untrusted."""

    def adopt(self) -> None:
        """Append the entries this process lacks and can see (a Ray worker starts with
        Ray's own), and move into the driver's directory (a Ray worker starts in an empty
        one: :mod:`shoal.runners.ray.local`)."""
        for entry in self.modules:
            if entry and entry not in sys.path and os.path.isdir(entry):
                sys.path.append(entry)
        if self.directory is not None and os.path.isdir(self.directory):
            os.chdir(self.directory)


def search_path() -> DriverPath:
    """This process's module search path with the working directory. While a run or study
    is open untrusted (:func:`refusing_user_code`) the working directory is left out, as
    an entry of ``sys.path`` too, and workers stay where Ray started them: it may be the
    received run's own folder (``cd RUN && shoal train --resume .``), and a ``pynvml.py``
    there would run in every worker that imports it."""
    cwd = os.getcwd()
    if _REFUSING.get() is None:
        return DriverPath((*sys.path, cwd), cwd)
    real = os.path.realpath(cwd)
    return DriverPath(tuple(p for p in sys.path if p and os.path.realpath(p) != real), None)
