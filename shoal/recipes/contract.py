"""The recipe contract: what every runner may ask of a recipe, declared once.

A recipe is what an agent is made of (its network, learner and loss, actor, acting, replay
items, tasks and evaluation); a runner is how its experience moves. Runners call only the
members of :class:`Recipe` and read only its :class:`RecipeTraits`, and
``tests/test_layout.py`` fails a runner that reaches for anything else, so a new algorithm
cannot be asked for something it never declared, nor silently drop what it is handed: a
recipe's methods take named arguments and records (:class:`ActorWeights`, the acting's
``ActingRequest``), never ``**kwargs``.

What a recipe cannot do it refuses in :meth:`Recipe.check`, by name, on every runner
(:attr:`RecipeTraits.runners` first).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from shoal.errors import ConfigError
from shoal.run.imports import is_builtin, shown

if TYPE_CHECKING:
    import numpy as np
    from torch import nn

    from shoal.agent.acting import Acting, ActingRequest
    from shoal.config import Config
    from shoal.envs import EnvSpec

__all__ = ["RECIPE_MEMBERS", "ActorWeights", "Recipe", "RecipeTraits", "check_recipe_class"]


@dataclass(frozen=True)
class RecipeTraits:
    """What a recipe says of itself, read by runners before they build anything."""

    runners: tuple[str, ...] | None = None
    """The runners it trains on (None: every one); any other is refused in one line."""
    batches_envs: bool = True
    """Its acting steps ``env.num_envs`` envs on the ``env.vector`` engine (False: it
    batches its own worlds, and env.num_envs stays 1)."""
    serves_after: Literal["item", "batch"] = "item"
    """What replay holds before it serves an update: one item, or a whole batch
    (sequences: no burst of updates on the first few); updates owed before are dropped."""
    flush_on_finish: bool = False
    """A finished run flushes its running episodes to replay (its episodes cannot be
    re-created from a checkpoint); else they stay in the checkpoint for ``--resume``."""
    recurrent: bool = False
    """Its network carries a memory from step to step: whatever plays it outside its own
    acting must carry one too (a self-play opponent pool, which plays snapshots one
    observation at a time, refuses it)."""
    action_masks: bool = False
    """Its losses and actors honour ``dqn.action_mask`` (observations ending with a mask of
    legal actions): the agents runner pads agents with fewer actions with masked ones."""
    spread: float = 0.0
    """Ape-X's exploration spread over its envs when ``explore.spread`` is not set (MAPF's
    many worlds: 7); the larger of this and the runner's is taken."""


@dataclass(frozen=True)
class ActorWeights:
    """Where an actor's weights come from, for :meth:`Recipe.make_actor`: ``params`` it
    reads live (the learner's own, or a copy of them) or a ``source`` it pulls newer
    versions from; applied by ``network`` (None: the recipe builds an inference copy), on
    ``device`` (None: the CPU)."""

    params: Any = None
    source: Any = None
    network: Any = None
    device: Any = None


@runtime_checkable
class Recipe(Protocol):
    """What every runner calls on a recipe (``run.recipe``). Implementations:
    :class:`~shoal.recipes.dqn.DQNRecipe`, IQN's, R2D2's, C51's, the hybrid-action one and
    MAPF's; the parts most share live in :class:`~shoal.recipes.base.ActionValueRecipe`."""

    traits: RecipeTraits

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """What ``shoal tune`` searches by default: keys this recipe reads."""
        ...

    def user_factories(self, cfg: Config) -> dict[str, str]:
        """The user's factories its networks are built from, by config key."""
        ...

    def probe(self, cfg: Config) -> EnvSpec:
        """What its parts need to know of the (single-agent) env."""
        ...

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """Refuse, in one line naming the key, what it cannot train (``spec``: the env as
        the runner reads it; a multi-agent world's agent on the agents runner)."""
        ...

    def make_learner(self, cfg: Config, spec: EnvSpec) -> Any:
        """Its learner (an :class:`~shoal.agent.update_steps.UpdateSteps`), weights from
        torch's generator as the caller seeded it."""
        ...

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only network of the learner's shape."""
        ...

    def make_actor(
        self, cfg: Config, spec: EnvSpec, rng: np.random.Generator, weights: ActorWeights
    ) -> Any:
        """An actor acting with the weights ``weights`` names, exploring with ``rng``."""
        ...

    def learner_actor(self, cfg: Config, spec: EnvSpec, learner: Any) -> Any:
        """An actor on ``learner``'s own live weights."""
        ...

    def replay_fields(self, cfg: Config, spec: EnvSpec) -> dict[str, Any]:
        """One replay item's fields: name -> (shape, dtype)."""
        ...

    def initial_priorities(
        self, cfg: Config, actor: Any, items: dict[str, np.ndarray]
    ) -> np.ndarray:
        """Ape-X's initial priorities of items ``actor`` made, under its weights."""
        ...

    def make_acting(self, cfg: Config, spec: EnvSpec, actor: Any, request: ActingRequest) -> Acting:
        """The acting one collection point plays (the serial loop's, a worker's, an
        actor's)."""
        ...

    def make_tasks(self, cfg: Config) -> Any:
        """The learner's side of episodes: what actings play next, their metrics rows."""
        ...

    def make_evaluator(self, cfg: Config) -> Any:
        """Its greedy evaluation during training."""
        ...

    def eval_policy(self, actor: Any, n: int) -> Any:
        """What plays ``n`` evaluation envs side by side (a recurrent recipe's keeps one
        memory per env)."""
        ...

    def evaluate_checkpoint(
        self, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Greedy returns of a checkpoint's weights (``shoal eval``)."""
        ...


RECIPE_MEMBERS: tuple[str, ...] = tuple(
    name for name in Recipe.__dict__ if not name.startswith("_") and callable(Recipe.__dict__[name])
) + ("traits",)
"""Every member :class:`Recipe` declares (methods and ``traits``)."""


def check_recipe_class(obj: Any, path: str) -> None:
    """One line naming ``run.recipe`` unless ``obj`` (what ``path`` names) is a recipe
    class (one with every member :class:`Recipe` declares), checked before it is
    instantiated: the registry asks it for any class a config names."""
    if not inspect.isclass(obj) or is_builtin(obj, path):
        what = "a class" if inspect.isclass(obj) else f"a {type(obj).__name__}"
        raise ConfigError(
            f"config key 'run.recipe': {shown(path)} is {what}, not a recipe class (e.g. a "
            "subclass of shoal.recipes.dqn.DQNRecipe); it was not called"
        )
    missing = [
        m
        for m in RECIPE_MEMBERS
        if not (
            isinstance(getattr(obj, m, None), RecipeTraits)
            if m == "traits"
            else callable(getattr(obj, m, None))
        )
    ]
    if missing:
        raise ConfigError(
            f"config key 'run.recipe': class {shown(path)} is not a recipe: it has no "
            f"{', '.join(missing)} (e.g. subclass shoal.recipes.dqn.DQNRecipe); it was not "
            "called"
        )
