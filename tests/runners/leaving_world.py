"""Tiny PettingZoo worlds for the agents runner's lifecycle tests (test_agents_lifecycle.py).

``env.id='pettingzoo:leaving_world'`` (with this folder on ``sys.path``) names the world
:func:`parallel_env` makes, as PettingZoo's convention has it: three agents, episodes of
:data:`TURNS` turns, and ``leaver`` leaves (``terminated``, then off ``env.agents``) after
:data:`LEAVE_AT` turns while the other two play on until the episode is truncated.

Every observation is ``[turn / TURNS, agent index, 1, 0]``, so a stored transition tells the
turn it was played in; every live agent earns 1 a turn. The world is strict: an action for
an agent that is not live fails the step, as a departed agent must not act.

The other factories make worlds the runner must reject (agent names that change between
resets, continuous actions), and :class:`CountingHarvest` is harvest with agents that leave
for good when tagged; the tests put each in a module of its own, since a ``pettingzoo:`` id
names a module.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from shoal.envs.harvest import HarvestEnv

TURNS = 8
"""Turns per episode (then every agent still live is truncated)."""
LEAVE_AT = 3
"""``leaver`` is terminated in this turn (its 3rd transition is its last)."""
AGENTS = ("agent_0", "agent_1", "leaver")


class ToyWorld(ParallelEnv):
    """The leaving world (see the module docstring); ``rename`` gives the agents new
    names at every reset, ``continuous`` gives them ``Box`` actions."""

    metadata = {"name": "leaving_world_v0"}

    def __init__(self, *, rename: bool = False, continuous: bool = False) -> None:
        self.rename = rename
        self.resets = 0
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.turn = 0
        self._obs = spaces.Box(0.0, 10.0, (4,), np.float32)
        self._act = spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else spaces.Discrete(3)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def _observe(self, agent: str) -> np.ndarray:
        index = self.possible_agents.index(agent)
        return np.array([self.turn / TURNS, index, 1.0, 0.0], np.float32)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if self.rename:  # a different cast every episode
            self.possible_agents = [f"{a}_v{self.resets}" for a in AGENTS]
        self.resets += 1
        self.turn = 0
        self.agents = list(self.possible_agents)
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        if not self.agents:
            raise RuntimeError("leaving_world: the episode is over; call reset() first")
        strays = set(actions) - set(self.agents)
        if strays:
            raise RuntimeError(f"leaving_world: actions for agents not live: {sorted(strays)}")
        self.turn += 1
        live = self.agents
        obs = {a: self._observe(a) for a in live}
        rewards = dict.fromkeys(live, 1.0)
        term = {a: a.startswith("leaver") and self.turn >= LEAVE_AT for a in live}
        trunc = dict.fromkeys(live, self.turn >= TURNS)
        infos: dict[str, dict[str, Any]] = {a: {} for a in live}
        self.agents = [a for a in live if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos


def parallel_env() -> ToyWorld:
    """The leaving world (PettingZoo's entry point)."""
    return ToyWorld()


def renaming_env() -> ToyWorld:
    """A world whose agents get new names at every reset."""
    return ToyWorld(rename=True)


def continuous_env() -> ToyWorld:
    """A world whose agents act in a continuous ``Box``."""
    return ToyWorld(continuous=True)


class CountingHarvest(HarvestEnv):
    """Commons harvest, 3 agents, 60-turn episodes, where a tagged agent leaves for good;
    every instance counts its turns and, per agent, the turns it played and its departures
    (and goes into :attr:`made`)."""

    made: list[CountingHarvest] = []

    def __init__(self) -> None:
        super().__init__(3, max_turns=60, leave_when_tagged=True)
        self.turns = 0
        self.live_turns: Counter[str] = Counter()
        self.left: Counter[str] = Counter()
        CountingHarvest.made.append(self)

    def step(self, actions: Any) -> Any:
        obs, rewards, term, trunc, infos = super().step(actions)
        self.turns += 1
        self.live_turns.update(rewards.keys())  # the agents live at the step's start
        self.left.update(a for a, gone in term.items() if gone)
        return obs, rewards, term, trunc, infos


class FailingWorld(ToyWorld):
    """The leaving world, failing in the third step of every episode after the first:
    a probe (a reset) and the first epoch pass, later epochs raise."""

    episodes = 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        FailingWorld.episodes += 1
        return super().reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> Any:
        if FailingWorld.episodes > 2 and self.turn == 2:
            raise RuntimeError("the world broke in turn 2")
        return super().step(actions)


def failing_env() -> ToyWorld:
    """A world whose epochs fail after the first (see :class:`FailingWorld`)."""
    return FailingWorld()
