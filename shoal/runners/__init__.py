"""Runners and their registry.

A runner wires the same parts (actor, learner, replay, weight store) with its own
transport, and supplies only how experience is collected and how learning is scheduled;
:class:`~shoal.run.loop.RunLoop` does the rest. The serial runner is the oracle the others
are tested against. Adding a runner is its own module plus one line in :data:`RUNNERS`
(or a :func:`register_runner` call); a runner owns its config section (its ``section``
class attribute) and its ``--help`` text (its docstring's first line).

Importing this package imports no runner: they load on first use. Sections are
registered by name apart from their runners (:data:`SECTIONS`, light modules with no
torch), so building a :class:`~shoal.config.Config` loads no runner either; a runner
module still imports its optional backends (Ray, say) where it uses them, never at the
top. Spawned workers receive the config object itself, so a runner registered only in the
parent process still reaches them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "PLUGIN_SECTIONS",
    "RUNNERS",
    "SECTIONS",
    "config_sections",
    "describe_runners",
    "register_runner",
    "runner_class",
    "runner_for",
    "runner_names",
]

RUNNERS: dict[str, Any] = {
    "serial": "shoal.runners.serial:SerialRunner",
    "threads": "shoal.runners.threads:ThreadsRunner",
    "processes": "shoal.runners.processes:ProcessesRunner",
    "agents": "shoal.runners.agents.runner:AgentsRunner",
    "ray": "shoal.runners.ray.runner:RayRunner",
}
"""``run.runner`` name -> runner class, or ``"module:Class"`` loaded on first use."""

SECTIONS: dict[str, Any] = {
    "threads": "shoal.runners.sections:ThreadsConfig",
    "processes": "shoal.runners.sections:ProcessesConfig",
    "agents": "shoal.runners.sections:AgentsConfig",
    "ray": "shoal.runners.sections:RayConfig",
}
"""The runners' own config sections: name -> dataclass, or ``"module:Class"`` in a module
that imports no runner and no torch (a runner's ``section`` attribute names the same)."""

PLUGIN_SECTIONS: dict[str, str] = {
    "selfplay": "shoal.games.selfplay:SelfPlayConfig",
    "mapf": "shoal.mapf.config:MapfConfig",
    "iqn": "shoal.recipes.config:IQNConfig",
    "r2d2": "shoal.recipes.config:R2D2Config",
}
"""Config sections owned by plug-ins rather than runners."""


def _load(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def register_runner(name: str, runner: Any, section: tuple[str, Any] | None = None) -> None:
    """Add (or replace) a runner under ``name``: a class or a ``"module:Class"`` string;
    ``section`` is its own config section as (name, dataclass or ``"module:Class"``), by
    default a class's ``section`` attribute."""
    RUNNERS[name] = runner
    if section is None and not isinstance(runner, str):
        section = getattr(runner, "section", None)
    if section is not None:
        SECTIONS[section[0]] = section[1]


def runner_names() -> list[str]:
    """Names ``run.runner`` accepts."""
    return list(RUNNERS)


def runner_class(name: str) -> Any:
    """The runner class registered as ``name``."""
    if name not in RUNNERS:
        from shoal.errors import ConfigError

        allowed = ", ".join(repr(n) for n in RUNNERS)
        raise ConfigError(f"config key 'run.runner': {name!r} is not one of {allowed}")
    cls = _load(RUNNERS[name])
    RUNNERS[name] = cls
    return cls


def runner_for(cfg: Any) -> Any:
    """The runner class a config trains with (``run.runner``'s: what the agent is, MAPF's
    included, is the config's recipe, which every runner takes)."""
    return runner_class(cfg.run.runner)


def config_sections() -> dict[str, type]:
    """Every registered runner's and plug-in's own config section, by section name (no
    runner is imported)."""
    return {name: _load(target) for name, target in {**SECTIONS, **PLUGIN_SECTIONS}.items()}


def describe_runners() -> str:
    """One line per runner: its name, config section and summary (for ``--help``)."""
    lines = []
    for name in RUNNERS:
        cls = runner_class(name)
        doc = (cls.__doc__ or "").strip().splitlines()
        section = getattr(cls, "section", None)
        where = f" [{section[0]}]" if section else ""
        lines.append(f"  {name}{where}: {doc[0] if doc else ''}")
    return "\n".join(lines)
