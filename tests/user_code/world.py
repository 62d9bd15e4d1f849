"""A user's PettingZoo world (``env.id = 'pettingzoo:user_code.world'``), with constructor
arguments: ``agents`` agents each see one of two lights and earn 1 for naming it, for
``turns`` turns."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class LightsWorld(ParallelEnv):
    metadata = {"name": "lights_v0"}

    def __init__(self, agents: int = 2, turns: int = 10) -> None:
        self.possible_agents = [f"agent_{i}" for i in range(agents)]
        self.agents: list[str] = []
        self.turns = turns
        self._obs = spaces.Box(0.0, 1.0, (2,), np.float32)
        self._act = spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._lights: dict[str, int] = {}
        self.turn = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def _observe(self) -> dict[str, np.ndarray]:
        out = {}
        for agent in self.agents:
            light = int(self._rng.integers(2))
            self._lights[agent] = light
            out[agent] = np.eye(2, dtype=np.float32)[light]
        return out

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.turn = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple:
        rewards = {a: float(int(actions[a]) == self._lights[a]) for a in self.agents}
        self.turn += 1
        done = self.turn >= self.turns
        obs = self._observe()
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        terms = {a: False for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


def parallel_env(agents: int = 2, turns: int = 10) -> LightsWorld:
    return LightsWorld(agents, turns)
