"""Multi-agent worlds for the agents runner: PettingZoo ``ParallelEnv`` s, checked up front.

``env.id`` names one: ``shoal/Harvest-v0`` (shoal's commons harvest, sized by the runner's
agent count), ``pettingzoo:PACKAGE.MODULE`` for any module exposing ``parallel_env()``
(PettingZoo's own convention), e.g. ``pettingzoo:mpe2.simple_spread_v3``, or any gymnasium
id whose spaces are per-agent ``Tuple`` s, e.g. ``lbforaging:Foraging-8x8-2p-2f-coop-v3``
or ``rware:rware-tiny-4ag-v2`` (stepped as a parallel world,
:mod:`shoal.envs.world_forms`). Every world's episodes end after ``agents.max_turns``.

Every agent must act in a ``Discrete`` space and observe a ``Box``. Agents whose sizes
differ are padded to one shape so that K agents' networks stack: observations with zeros
in front, actions to the most any agent has, the extra ones masked by a legal-action mask
at the end of each observation (:class:`MultiAgentSpec`). With ``agents.share`` each
observation begins with the agent's one-hot id. Byte images (either channel order, one
shape for all) are read by the image encoders, channels first.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from shoal.envs.gym_env import EnvSpec, import_id_module
from shoal.envs.pixels import channels_last
from shoal.envs.world_forms import FORMS, TurnCap, make_gym_world
from shoal.errors import ConfigError, EnvError, ShoalError

__all__ = [
    "HARVEST_ID",
    "MultiAgentSpec",
    "StepResult",
    "check_padding",
    "check_same_agents",
    "check_world",
    "joint_actions",
    "make_parallel_env",
    "probe_parallel_env",
]

StepResult = tuple[
    dict[str, np.ndarray],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]
"""observations, rewards, terminations, truncations, infos (PettingZoo's parallel step)."""

HARVEST_ID = "shoal/Harvest-v0"
"""The id of shoal's commons harvest."""

WORLDS: dict[str, str] = {HARVEST_ID: "shoal.envs.harvest:make_harvest"}
"""shoal's own worlds: ``env.id`` -> ``"module:function"`` making one from
``(num_agents, max_turns)`` (loaded on first use, so this module imports no world)."""


@dataclass(frozen=True)
class MultiAgentSpec:
    """What K stacked learners need to know about a world: the one observation row and
    action count every agent is given, and how each agent's own fit in them."""

    agents: tuple[str, ...]
    """``possible_agents``, in the order of the learners' stack."""
    obs_dim: int
    """The length of every agent's observation row: ``[one-hot id][zeros][own
    observation][legal-action mask]`` (the id with ``share``, the mask when ``masked``)."""
    n_actions: int
    """The most actions any agent has."""
    image: tuple[int, int, int] | None = None
    """``(channels, height, width)`` when agents observe images (bytes), else None."""
    image_high: float = 1.0
    """The images' largest pixel value."""
    channels_last: bool = False
    """Whether the world gives images height x width x channels (turned channels first
    before the networks see them)."""
    obs_sizes: tuple[int, ...] = ()
    """Each agent's own observation size (flattened)."""
    action_counts: tuple[int, ...] = ()
    """Each agent's own action count."""
    share: bool = False
    """Each row begins with the agent's one-hot id (one network for all agents)."""

    @property
    def masked(self) -> bool:
        """Agents differ in action count: rows end with a mask of each one's own."""
        return len(set(self.action_counts)) > 1

    @property
    def padded(self) -> bool:
        """Agents differ in observation or action size."""
        return self.masked or len(set(self.obs_sizes)) > 1

    @functools.cached_property
    def base_rows(self) -> np.ndarray:
        """The rows' fixed parts ``(K, obs_dim)``: ids and legal-action masks, zeros where
        each agent's observation goes."""
        k, rows = len(self.agents), np.zeros((len(self.agents), self.obs_dim), np.float32)
        if self.share:
            rows[:, :k] = np.eye(k, dtype=np.float32)
        if self.masked:
            for i, n in enumerate(self.action_counts):
                rows[i, self.obs_dim - self.n_actions + np.arange(n)] = 1.0
        return rows

    @property
    def obs_end(self) -> int:
        """Where each agent's own observation ends in its row."""
        return self.obs_dim - (self.n_actions if self.masked else 0)

    def env_spec(self) -> EnvSpec:
        """One agent's view as the single-agent parts take it."""
        return EnvSpec(self.obs_dim, self.n_actions, image=self.image, image_high=self.image_high)


def make_parallel_env(env: Any, *, num_agents: int, max_turns: int) -> Any:
    """Create the world ``env`` (an :class:`~shoal.config.EnvConfig`, or its id) names:
    harvest with ``num_agents`` agents, a PettingZoo module's ``parallel_env(**env.kwargs)``
    or a gymnasium multi-agent env, after importing ``env.imports``; its episodes end after
    ``max_turns`` turns at most."""
    env_id, kwargs = (env, {}) if isinstance(env, str) else (env.id, dict(env.kwargs))
    if not isinstance(env, str):
        from shoal.run.imports import import_modules

        import_modules(env.imports, "env.imports")
    try:
        return TurnCap(_make_world(env_id, num_agents, max_turns, kwargs), max_turns)
    except TypeError as e:  # a constructor argument the world does not take
        if not kwargs:
            raise
        raise EnvError(f"env.id {env_id!r} with env.kwargs {kwargs}: {e}") from None


def _make_world(env_id: str, num_agents: int, max_turns: int, kwargs: dict[str, Any]) -> Any:
    if env_id in WORLDS:
        module, _, name = WORLDS[env_id].partition(":")
        return getattr(importlib.import_module(module), name)(num_agents, max_turns, **kwargs)
    if env_id.startswith("pettingzoo:"):
        from shoal.run.imports import import_module

        name = env_id.split(":", 1)[1]
        try:  # from the working directory too, as 'module:Id' envs are
            module = import_module(name, "env.id", "the world's")
        except ConfigError as e:
            why = str(e).removeprefix("config key 'env.id': ")
            raise EnvError(f"env.id {env_id!r}: cannot import {name!r}: {why}") from None
        if not hasattr(module, "parallel_env"):
            raise EnvError(f"env.id {env_id!r}: module {name!r} has no parallel_env()")
        return module.parallel_env(**kwargs)
    if env_id.startswith("shoal/"):
        raise EnvError(f"env.id {env_id!r}: the agents runner needs a multi-agent world ({FORMS})")
    import_id_module(env_id)
    return make_gym_world(env_id, kwargs)


def probe_parallel_env(env: Any, env_id: str, *, share: bool = False) -> MultiAgentSpec:
    """Check the world's spaces (Discrete actions, Box observations; images of one shape
    for every agent) and read the sizes every agent's row is padded to (``share``: an id
    in front); a one-line EnvError otherwise."""
    from gymnasium import spaces

    agents = tuple(env.possible_agents)
    if not agents:
        raise EnvError(f"env.id {env_id!r}: the world has no agents")
    shapes, actions = [], []
    for agent in agents:
        act, obs = env.action_space(agent), env.observation_space(agent)
        if not isinstance(act, spaces.Discrete):
            raise EnvError(
                f"env.id {env_id!r}: agent {agent!r} acts in {act}; the agents runner needs a "
                "Discrete action space"
            )
        if not isinstance(obs, spaces.Box):
            raise EnvError(
                f"env.id {env_id!r}: agent {agent!r} observes {obs}; the agents runner needs "
                "a Box observation space"
            )
        shapes.append(tuple(obs.shape))
        actions.append(int(act.n))
    space = env.observation_space(agents[0])
    image = _image(space)
    if image is not None and len(set(shapes)) > 1:
        raise EnvError(
            f"env.id {env_id!r}: agents observe images of different shapes {sorted(set(shapes))};"
            " stacked image encoders need one shape"
        )
    if image is not None and share:
        raise ConfigError(
            f"config key 'agents.share': env.id {env_id!r}'s agents observe images, which an"
            " agent id cannot be appended to; leave it false"
        )
    sizes = tuple(int(np.prod(s)) for s in shapes)
    n_actions = max(actions)
    obs_dim = max(sizes) + (len(agents) if share else 0)
    obs_dim += n_actions if len(set(actions)) > 1 else 0
    return MultiAgentSpec(
        agents,
        obs_dim,
        n_actions,
        image=image,
        image_high=1.0 if image is None else float(np.max(space.high)),
        channels_last=image is not None and channels_last(space),
        obs_sizes=sizes,
        action_counts=tuple(actions),
        share=share,
    )


def _image(space: Any) -> tuple[int, int, int] | None:
    """The ``(channels, height, width)`` of a 3-D byte observation, else None."""
    if len(space.shape) != 3 or space.dtype not in (np.uint8, np.bool_):
        return None
    h, w, c = space.shape if channels_last(space) else np.roll(space.shape, -1)
    return int(c), int(h), int(w)


def check_padding(cfg: Any, spec: MultiAgentSpec, recipe_masks: bool) -> None:
    """Refuse, in one line, padding a run cannot do: agents that differ in action count
    need a recipe that honours legal-action masks (``recipe_masks``), and their rows end
    with shoal's masks, not the world's (``dqn.action_mask``)."""
    if not spec.masked:
        return
    counts = dict(zip(spec.agents, spec.action_counts))
    if cfg.dqn.action_mask:
        raise ConfigError(
            f"config key 'dqn.action_mask': env.id {cfg.env.id!r}'s agents differ in action"
            f" count {counts}, so their observations end with shoal's masks of each one's own"
            " actions, not the world's; leave it false"
        )
    if not recipe_masks:
        raise ConfigError(
            f"config key 'run.recipe': {cfg.run.recipe!r} cannot mask actions, and env.id"
            f" {cfg.env.id!r}'s agents differ in action count {counts}: the smaller ones"
            " would take actions they do not have; use 'dqn', 'iqn' or 'c51'"
        )


def check_same_agents(env: Any, env_id: str, agents: tuple[str, ...]) -> None:
    """Raise ``EnvError`` if the world's ``possible_agents`` (after a reset) are no longer
    ``agents``: each name owns a learner and a buffer, so names cannot change."""
    if tuple(env.possible_agents) != agents:
        raise EnvError(
            f"env.id {env_id!r}: the agent list changed at reset "
            f"({list(agents)} -> {list(env.possible_agents)})"
        )


def check_world(env: Any, num_agents: int, *, share: bool = False) -> MultiAgentSpec:
    """Make the world ``env`` names once (one-turn episodes), read its spaces (``share``:
    rows with ids) and check that a reset keeps its agents; a one-line EnvError otherwise.
    Closed after."""
    env_id = env if isinstance(env, str) else env.id
    world = make_parallel_env(env, num_agents=num_agents, max_turns=1)
    try:
        spec = probe_parallel_env(world, env_id, share=share)
        world.reset(seed=0)
        check_same_agents(world, env_id, spec.agents)
    finally:
        world.close()
    return spec


def joint_actions(
    world: str, actions: Any, index: dict[str, int], n_agents: int, n_actions: int
) -> np.ndarray:
    """A ``ParallelEnv.step`` 's action dict as one action per agent slot (``index``:
    name -> slot; a missing agent stays, action 0), with an unknown agent or an action out
    of ``range(n_actions)`` named in the error (``world`` prefixes it)."""
    acts = np.zeros(n_agents, np.intp)
    for name, action in actions.items():
        i = index.get(name)
        if i is None:
            raise ShoalError(f"{world} step: unknown agent {name!r}")
        act = int(action)
        if not 0 <= act < n_actions:
            raise ShoalError(
                f"{world} step: action {action!r} of {name} is out of range; "
                f"allowed: 0..{n_actions - 1}"
            )
        acts[i] = act
    return acts
