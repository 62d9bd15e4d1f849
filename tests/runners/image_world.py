"""A tiny PettingZoo world of image observations for the agents runner
(``env.id='pettingzoo:image_world'``, this folder on ``sys.path``).

Two agents each see their own 8 x 8 x 2 byte image, height x width x channels as
PettingZoo's image worlds give them: channel 0 lights one pixel in the left or the right
half, channel 1 is empty. An agent earns 1 for the action naming that half (0 left, 1
right), 0 otherwise; episodes last :data:`TURNS` turns. Random agents earn half a point
a turn, agents that read the image one.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

TURNS = 10
SIDE = 8
AGENTS = ("agent_0", "agent_1")


class ImageWorld(ParallelEnv):
    metadata = {"name": "image_world_v0"}

    def __init__(self) -> None:
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self._obs = spaces.Box(0, 255, (SIDE, SIDE, 2), np.uint8)
        self._act = spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._sides: dict[str, int] = {}
        self.turn = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def _observe(self) -> dict[str, np.ndarray]:
        out = {}
        for agent in self.agents:
            side = int(self._rng.integers(2))
            self._sides[agent] = side
            image = np.zeros((SIDE, SIDE, 2), np.uint8)
            row, col = self._rng.integers(SIDE), self._rng.integers(SIDE // 2)
            image[row, col + side * SIDE // 2, 0] = 255
            out[agent] = image
        return out

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(AGENTS)
        self.turn = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple:
        rewards = {a: float(int(actions[a]) == self._sides[a]) for a in self.agents}
        self.turn += 1
        done = self.turn >= TURNS
        obs = self._observe()
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


def parallel_env() -> ImageWorld:
    return ImageWorld()
