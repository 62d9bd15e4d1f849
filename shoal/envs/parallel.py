"""Multi-agent worlds for the agents runner: PettingZoo ``ParallelEnv`` s, checked up front.

``env.id`` names one: ``shoal/Harvest-v0`` (shoal's commons harvest, sized by the runner's
agent count) or ``pettingzoo:PACKAGE.MODULE`` for any module exposing ``parallel_env()``
(PettingZoo's own convention), e.g. ``pettingzoo:pettingzoo.butterfly.pistonball_v6``.
Every agent must act in a ``Discrete`` space and observe a ``Box`` of one common shape, so
that K agents' networks stack; agents may leave mid-episode. Byte images (either channel
order) are read by the image encoders, channels first.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from shoal.envs.gym_env import EnvSpec
from shoal.envs.pixels import channels_last
from shoal.errors import ConfigError, EnvError, ShoalError

__all__ = [
    "HARVEST_ID",
    "MultiAgentSpec",
    "StepResult",
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
    """What K stacked learners need to know about a world."""

    agents: tuple[str, ...]
    """``possible_agents``, in the order of the learners' stack."""
    obs_dim: int
    n_actions: int
    image: tuple[int, int, int] | None = None
    """``(channels, height, width)`` when agents observe images (bytes), else None."""
    image_high: float = 1.0
    """The images' largest pixel value."""
    channels_last: bool = False
    """Whether the world gives images height x width x channels (turned channels first
    before the networks see them)."""

    def env_spec(self) -> EnvSpec:
        """One agent's view as the single-agent parts take it."""
        return EnvSpec(self.obs_dim, self.n_actions, image=self.image, image_high=self.image_high)


def make_parallel_env(env: Any, *, num_agents: int, max_turns: int) -> Any:
    """Create the world ``env`` (an :class:`~shoal.config.EnvConfig`, or its id) names:
    harvest with ``num_agents`` agents and episodes of ``max_turns`` turns, or a PettingZoo
    module's ``parallel_env(**env.kwargs)``, after importing ``env.imports``."""
    env_id, kwargs = (env, {}) if isinstance(env, str) else (env.id, dict(env.kwargs))
    if not isinstance(env, str):
        from shoal.run.imports import import_modules

        import_modules(env.imports, "env.imports")
    try:
        return _make_world(env_id, num_agents, max_turns, kwargs)
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
    raise EnvError(
        f"env.id {env_id!r}: the agents runner needs a multi-agent world: "
        f"{', '.join(map(repr, WORLDS))} or 'pettingzoo:PACKAGE.MODULE'"
    )


def probe_parallel_env(env: Any, env_id: str) -> MultiAgentSpec:
    """Check the world's spaces (Discrete actions, Box observations of one shape for every
    agent) and read the sizes; a one-line EnvError otherwise."""
    from gymnasium import spaces

    agents = tuple(env.possible_agents)
    if not agents:
        raise EnvError(f"env.id {env_id!r}: the world has no agents")
    shapes, actions = set(), set()
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
        shapes.add(obs.shape)
        actions.add(int(act.n))
    if len(shapes) > 1 or len(actions) > 1:
        raise EnvError(
            f"env.id {env_id!r}: agents differ in observation shapes {sorted(shapes)} or "
            f"action counts {sorted(actions)}; stacked learners need one of each"
        )
    space = env.observation_space(agents[0])
    image = _image(space)
    return MultiAgentSpec(
        agents,
        int(np.prod(shapes.pop())),
        actions.pop(),
        image=image,
        image_high=1.0 if image is None else float(np.max(space.high)),
        channels_last=image is not None and channels_last(space),
    )


def _image(space: Any) -> tuple[int, int, int] | None:
    """The ``(channels, height, width)`` of a 3-D byte observation, else None."""
    if len(space.shape) != 3 or space.dtype not in (np.uint8, np.bool_):
        return None
    h, w, c = space.shape if channels_last(space) else np.roll(space.shape, -1)
    return int(c), int(h), int(w)


def check_same_agents(env: Any, env_id: str, agents: tuple[str, ...]) -> None:
    """Raise ``EnvError`` if the world's ``possible_agents`` (after a reset) are no longer
    ``agents``: each name owns a learner and a buffer, so names cannot change."""
    if tuple(env.possible_agents) != agents:
        raise EnvError(
            f"env.id {env_id!r}: the agent list changed at reset "
            f"({list(agents)} -> {list(env.possible_agents)})"
        )


def check_world(env: Any, num_agents: int) -> MultiAgentSpec:
    """Make the world ``env`` names once (one-turn episodes), read its spaces and check
    that a reset keeps its agents; a one-line EnvError otherwise. Closed after."""
    env_id = env if isinstance(env, str) else env.id
    world = make_parallel_env(env, num_agents=num_agents, max_turns=1)
    try:
        spec = probe_parallel_env(world, env_id)
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
