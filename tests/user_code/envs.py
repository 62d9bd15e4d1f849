"""A user's package envs, registered on import (the way a package registers its envs with
gymnasium).

``UserCode/Guess-v0``: each step shows one of ``sides`` lights, and naming it earns 1.
Episodes last ``length`` steps. Random play earns ``length / sides``, reading the light
``length``.

``UserCode/Recall-v0``: a memory probe. The first step shows one of two cues, ``delay``
blank steps follow, then a query; naming the first cue there earns 1 and ends the episode.
Without memory the query is a coin toss (0.5); remembering the cue earns 1.
"""

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


class Recall(gym.Env):
    def __init__(self, delay: int = 4) -> None:
        self.delay = delay
        self.observation_space = spaces.Box(0.0, 1.0, (3,), np.float32)  # cue 0, cue 1, query
        self.action_space = spaces.Discrete(2)
        self._cue, self._t = 0, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        super().reset(seed=seed)
        self._cue, self._t = int(self.np_random.integers(2)), 0
        obs = np.zeros(3, np.float32)
        obs[self._cue] = 1.0
        return obs, {}

    def step(self, action: Any) -> tuple:
        self._t += 1
        if self._t > self.delay:  # the query was shown: this action answers it
            return np.zeros(3, np.float32), float(int(action) == self._cue), True, False, {}
        obs = np.zeros(3, np.float32)
        obs[2] = float(self._t == self.delay)
        return obs, 0.0, False, False, {}


gym.register("UserCode/Recall-v0", entry_point=Recall)


class Poisoned(Guess):
    """``UserCode/Poisoned-v0``: Guess whose observations hold NaN from the
    ``poison_after``-th step this env takes (a sensor that broke): a learner trained on
    them diverges."""

    def __init__(self, sides: int = 2, length: int = 10, poison_after: int = 100) -> None:
        super().__init__(sides, length)
        self.poison_after, self._taken = poison_after, 0

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        self._taken += 1
        if self._taken >= self.poison_after:
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info


gym.register("UserCode/Poisoned-v0", entry_point=Poisoned)
