"""Recipes: what an agent is made of, apart from how a runner moves its experience.

A recipe builds an agent's parts from the config and the env's spaces (its network, its
learner with its pure loss, its actor, its acting, its replay items and their initial
priorities, its tasks and evaluation), as :class:`~shoal.recipes.contract.Recipe`
declares; every runner takes the recipe the config names (``run.recipe``) and asks only
what the contract declares, so an algorithm is one module plus one line in
:data:`shoal.registry.RECIPES` (or a :func:`register_recipe` call, with its config
section), and runs on every runner it allows. Importing this package imports no recipe
(and no torch): they load on first use, by name, from the registry (``recipe_for``,
``register_recipe`` and the rest are :mod:`shoal.registry`'s).
"""
