"""The one registry: runners, recipes and the config sections they own, by name.

A runner or recipe is registered as a class or as ``"module:Class"`` loaded on first use,
with its config section (a dataclass, or ``"module:Class"`` in a module that imports no
torch and no runner), so building a :class:`~shoal.config.Config` loads no runner and no
recipe. Adding a runner is its module plus one line in :data:`RUNNERS` (or
:func:`register_runner`); adding an algorithm is its recipe module plus one line in
:data:`RECIPES` (or :func:`register_recipe`), its section beside it. Spawned workers
receive the config object itself, so a section registered only in the parent process
still reaches them; a recipe registered only here is written into the run's config as its
path (:func:`resolve_recipe`), so workers, Ray actors, ``shoal eval`` and ``--resume``
find it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BUILTIN_RECIPES",
    "ENV_RECIPES",
    "RECIPES",
    "RUNNERS",
    "SECTIONS",
    "config_sections",
    "load_recipe",
    "recipe_for",
    "register_recipe",
    "register_runner",
    "resolve_recipe",
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

RECIPES: dict[str, Any] = {
    "dqn": "shoal.recipes.dqn:DQNRecipe",
    "iqn": "shoal.recipes.iqn:IQNRecipe",
    "r2d2": "shoal.recipes.r2d2:R2D2Recipe",
    "c51": "shoal.recipes.c51:C51Recipe",
    "hybrid": "shoal.recipes.hybrid:HybridRecipe",
    "mapf": "shoal.mapf.recipe:MapfRecipe",
}
"""``run.recipe`` name -> recipe class, or ``"module:Class"`` loaded on first use."""

SECTIONS: dict[str, Any] = {
    # the runners'
    "threads": "shoal.runners.sections:ThreadsConfig",
    "processes": "shoal.runners.sections:ProcessesConfig",
    "agents": "shoal.runners.sections:AgentsConfig",
    "ray": "shoal.runners.sections:RayConfig",
    # the recipes'
    "iqn": "shoal.recipes.config:IQNConfig",
    "r2d2": "shoal.recipes.config:R2D2Config",
    "c51": "shoal.recipes.config:C51Config",
    "mapf": "shoal.mapf.config:MapfConfig",
    # plug-ins'
    "selfplay": "shoal.games.selfplay:SelfPlayConfig",
}
"""Config sections owned by runners, recipes and plug-ins: name -> dataclass, or
``"module:Class"``."""

ENV_RECIPES: dict[str, str] = {"shoal/Mapf-v0": "mapf", "shoal/HybridTarget-v0": "hybrid"}
"""``env.id`` -> the recipe ``run.recipe = "auto"`` (the default) picks for it; other envs
get ``"dqn"``."""

BUILTIN_RECIPES = frozenset(RECIPES)
"""Recipe names every process knows."""


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


def register_recipe(name: str, recipe: Any, section: tuple[str, Any] | None = None) -> None:
    """Add (or replace) a recipe under ``name``: a class or a ``"module:Class"`` string;
    ``section`` is its own config section as (name, dataclass or ``"module:Class"``)."""
    RECIPES[name] = recipe
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
    """Every registered runner's, recipe's and plug-in's own config section, by section
    name (no runner or recipe is imported)."""
    return {name: _load(target) for name, target in SECTIONS.items()}


def _path_of(recipe: Any) -> str:
    return recipe if isinstance(recipe, str) else f"{recipe.__module__}:{recipe.__qualname__}"


def resolve_recipe(value: str, env_id: str = "") -> str:
    """What a config keeps for ``run.recipe``: ``"auto"`` as the env's own recipe (else
    ``"dqn"``), a built-in name as it is, a name registered here as its ``"module:Class"``
    path, a path as it is; a ConfigError for anything else."""
    from shoal.errors import ConfigError
    from shoal.run.imports import check_path_syntax, shown

    if value == "auto":
        return ENV_RECIPES.get(env_id, "dqn")
    if value in BUILTIN_RECIPES:
        return value
    if value in RECIPES:
        return _path_of(RECIPES[value])
    if ":" in value:
        check_path_syntax("run.recipe", value)
        return value
    allowed = ", ".join(repr(n) for n in RECIPES)
    raise ConfigError(
        f"config key 'run.recipe': {shown(value)} is not one of {allowed} nor a 'module:Class' path"
    )


def load_recipe(value: str) -> Any:
    """The recipe class ``run.recipe`` names."""
    from shoal.recipes.contract import check_recipe_class
    from shoal.run.imports import load_object

    target = RECIPES.get(value, value)
    if not isinstance(target, str):
        return target
    cls = load_object(target, "run.recipe", "the recipe's")
    check_recipe_class(cls, target)  # before anything calls it
    if value in RECIPES:
        RECIPES[value] = cls
    return cls


def recipe_for(cfg: Any) -> Any:
    """The recipe (an instance) a config trains."""
    return load_recipe(cfg.run.recipe)()
