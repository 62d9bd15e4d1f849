"""The forms a multi-agent world ships in, made into the one form the agents runner steps.

The agents runner steps PettingZoo's parallel form: dicts by agent name, an agent leaving
when it is terminated or truncated. Two other things are done here so that no world has
to be adapted by its user:

- :class:`TupleWorld` takes gymnasium's multi-agent form, as Level-Based Foraging
  (``lbforaging``) and the multi-robot warehouse (``rware``) ship it: one ``Tuple`` entry
  per agent in both spaces, a list of rewards, one ``done`` for all, and the time limit
  reported as ``terminated=True``. Agents are named ``agent_0``, ``agent_1``, ...; an
  episode that ends at the world's own step limit is a truncation (its last transitions
  are bootstrapped, as EPyMARL's wrapper treats its ``episode_limit``).
- :class:`TurnCap` ends any world's episode after ``agents.max_turns`` turns, as a
  truncation, whatever the world would do.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from shoal.errors import EnvError

__all__ = ["LIMIT_ATTRIBUTES", "TupleWorld", "TurnCap", "make_gym_world", "world_limit"]

LIMIT_ATTRIBUTES = ("_max_episode_steps", "max_episode_steps", "max_steps", "max_cycles")
"""Where a world built without gymnasium's ``TimeLimit`` keeps its own step limit
(lbforaging: ``_max_episode_steps``, rware: ``max_steps``, MPE: ``max_cycles``)."""

FORMS = (
    "a PettingZoo ParallelEnv ('pettingzoo:PACKAGE.MODULE'), a gymnasium env whose "
    "observation and action spaces are Tuples of one space per agent (e.g. "
    "'lbforaging:Foraging-8x8-2p-2f-coop-v3') or 'shoal/Harvest-v0'"
)
"""The world forms the agents runner takes, for its errors."""


def world_limit(env: Any) -> int | None:
    """The world's own episode step limit, where it declares one (``None``: it has none
    that shoal can read, so each of its ends is taken as a termination)."""
    spec = getattr(env, "spec", None)
    if getattr(spec, "max_episode_steps", None):
        return int(spec.max_episode_steps)
    inner = getattr(env, "unwrapped", env)
    for name in LIMIT_ATTRIBUTES:
        value = getattr(inner, name, None)
        if isinstance(value, (int, np.integer)) and value > 0:
            return int(value)
    return None


class TupleWorld:
    """A gymnasium env whose spaces are per-agent ``Tuple`` s, stepped as a PettingZoo
    ``ParallelEnv``: dicts by agent name, truncation at the world's own step limit.

    Args:
        env: the gymnasium env (its spaces already checked by :func:`make_gym_world`).
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        n = len(env.observation_space.spaces)
        self.possible_agents = [f"agent_{i}" for i in range(n)]
        self.agents: list[str] = []
        self.limit = world_limit(env)
        """The world's step limit: an end there is a truncation."""
        self.turns = 0

    def observation_space(self, agent: str) -> Any:
        """Agent ``agent``'s own observation space."""
        return self.env.observation_space.spaces[self.possible_agents.index(agent)]

    def action_space(self, agent: str) -> Any:
        """Agent ``agent``'s own action space."""
        return self.env.action_space.spaces[self.possible_agents.index(agent)]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A new episode: every agent's first observation, and the world's info for each."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.agents, self.turns = list(self.possible_agents), 0
        return self._by_agent(obs), {a: info for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        """One turn of every agent (an agent given no action takes action 0)."""
        joint = tuple(int(actions.get(a, 0)) for a in self.possible_agents)
        obs, rewards, terminated, truncated, info = self.env.step(joint)
        self.turns += 1
        cut = _per_agent(truncated, self.agents)
        ended = {a: cut[a] or done for a, done in _per_agent(terminated, self.agents).items()}
        limit = self.limit is not None and self.turns >= self.limit
        trunc = {a: ended[a] and (limit or cut[a]) for a in ended}
        term = {a: bool(ended[a] and not trunc[a]) for a in ended}
        live = self.agents
        self.agents = [a for a in live if not ended[a]]
        rew = dict(zip(self.possible_agents, np.asarray(rewards, np.float64).tolist()))
        return (
            self._by_agent(obs),
            {a: rew[a] for a in live},
            term,
            trunc,
            {a: info for a in live},
        )

    def _by_agent(self, values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.possible_agents, values))

    def close(self) -> None:
        """Close the world."""
        self.env.close()


def _per_agent(flag: Any, agents: Sequence[str]) -> dict[str, bool]:
    """One flag for all agents, or a list with one per agent (some worlds end agents
    apart), as a dict over ``agents`` (names ``agent_<i>``)."""
    if np.ndim(flag) == 0:
        return {a: bool(flag) for a in agents}
    flags = list(flag)
    return {a: bool(flags[int(a.rsplit("_", 1)[1])]) for a in agents}


def make_gym_world(env_id: str, kwargs: dict[str, Any]) -> TupleWorld:
    """The gymnasium env ``env_id`` as a :class:`TupleWorld`; one-line ``EnvError`` when
    gymnasium cannot make it or its spaces are not per-agent Tuples."""
    import gymnasium as gym

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gym.make(env_id, disable_env_checker=True, **kwargs)
    except gym.error.Error as e:
        raise EnvError(
            f"env.id {env_id!r}: the agents runner needs a multi-agent world ({FORMS}); "
            f"gymnasium cannot make this one: {e}"
        ) from None
    except (ImportError, ModuleNotFoundError) as e:
        raise EnvError(f"env.id {env_id!r}: needs a package that is not installed: {e}") from None
    obs, act = env.observation_space, env.action_space
    if not (isinstance(obs, gym.spaces.Tuple) and isinstance(act, gym.spaces.Tuple)) or len(
        obs.spaces
    ) != len(act.spaces):
        env.close()
        raise EnvError(
            f"env.id {env_id!r}: the agents runner needs a multi-agent world ({FORMS}); "
            f"this gymnasium env observes {obs} and acts in {act}"
        )
    return TupleWorld(env)


class TurnCap:
    """Any parallel world whose episodes end after ``max_turns`` turns at most: every agent
    still in it is truncated then (bootstrapped), whatever the world would do.

    Args:
        env: a PettingZoo ``ParallelEnv`` (or a :class:`TupleWorld`).
        max_turns: turns per episode at most (``agents.max_turns``).
    """

    def __init__(self, env: Any, max_turns: int) -> None:
        self.env = env
        self.max_turns = max_turns
        self.turns = 0
        self._capped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    @property
    def agents(self) -> list[str]:
        """The agents still in the episode (none once it is capped)."""
        return [] if self._capped else list(self.env.agents)

    @property
    def possible_agents(self) -> list[str]:
        """The world's agents."""
        return list(self.env.possible_agents)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        """A new episode of the world."""
        self.turns, self._capped = 0, False
        return self.env.reset(*args, **kwargs)

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        """One turn; at the cap every agent still in is truncated."""
        obs, rew, term, trunc, info = self.env.step(actions)
        self.turns += 1
        if self.turns >= self.max_turns:
            self._capped = True
            trunc = {a: bool(trunc.get(a, False) or not term.get(a, False)) for a in actions}
            term = {a: bool(term.get(a, False)) for a in actions}
        return obs, rew, term, trunc, info

    def close(self) -> None:
        """Close the world."""
        self.env.close()
