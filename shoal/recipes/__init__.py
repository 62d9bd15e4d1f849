"""Recipes: what an agent is made of, apart from how a runner moves its experience.

A recipe builds an agent's parts from the config and the env's spaces (its network, its
learner with its pure loss, its actor, its replay items and their initial priorities);
every runner takes the recipe the config names (``run.recipe``) and never asks what kind
it is, so an algorithm is one module plus one line here (or a :func:`register_recipe`
call), and runs on every runner. This module imports no recipe (and no torch): they load
on first use.

``run.recipe`` is a registered name or a ``"module:Class"`` path. A name registered in
this process only is written into the run's config as its path when the config is
checked (:func:`resolve_recipe`), so spawned workers, Ray actors, ``shoal eval`` and
``--resume`` find the same recipe.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BUILTIN",
    "ENV_RECIPES",
    "RECIPES",
    "load_recipe",
    "recipe_for",
    "register_recipe",
    "resolve_recipe",
]

RECIPES: dict[str, Any] = {
    "dqn": "shoal.recipes.dqn:DQNRecipe",
    "iqn": "shoal.recipes.iqn:IQNRecipe",
    "r2d2": "shoal.recipes.r2d2:R2D2Recipe",
    "mapf": "shoal.mapf.recipe:MapfRecipe",
}
"""``run.recipe`` name -> recipe class, or ``"module:Class"`` loaded on first use."""

ENV_RECIPES: dict[str, str] = {"shoal/Mapf-v0": "mapf"}
"""``env.id`` -> the recipe ``run.recipe = "auto"`` (the default) picks for it; other envs
get ``"dqn"``."""

BUILTIN = frozenset(RECIPES)
"""Names every process knows."""


def register_recipe(name: str, recipe: Any) -> None:
    """Add (or replace) a recipe under ``name``: a class or a ``"module:Class"`` string."""
    RECIPES[name] = recipe


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
    if value in BUILTIN:
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
    from shoal.run.imports import check_recipe_class, load_object

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
