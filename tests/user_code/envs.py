"""A user's package env, registered on import as ``UserCode/Guess-v0`` (the way a package
registers its envs with gymnasium): each step shows one of ``sides`` lights, and naming it
earns 1. Episodes last ``length`` steps. Random play earns ``length / sides``, reading the
light ``length``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Guess(gym.Env):
    def __init__(self, sides: int = 2, length: int = 10) -> None:
        self.sides, self.length = sides, length
        self.observation_space = spaces.Box(0.0, 1.0, (sides,), np.float32)
        self.action_space = spaces.Discrete(sides)
        self._light, self._t = 0, 0

    def _obs(self) -> np.ndarray:
        self._light = int(self.np_random.integers(self.sides))
        obs = np.zeros(self.sides, np.float32)
        obs[self._light] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple:
        reward = float(int(action) == self._light)
        self._t += 1
        return self._obs(), reward, False, self._t >= self.length, {}


gym.register("UserCode/Guess-v0", entry_point=Guess)
