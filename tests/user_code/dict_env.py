"""A user's env with Dict observations, registered on import: ``UserCode/DictWorld-v0``.

Each step shows a 5 x 5 x 3 byte image (height x width x channels, as MiniGrid's), a
``direction`` (Discrete(4)), a ``position`` Box of 2 (float32, or bytes with
``box_dtype="uint8"``) and a ``mission`` (Text). Naming ``direction % 2`` earns 1; episodes
last ``length`` steps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class DictWorld(gym.Env):
    def __init__(self, box_dtype: str = "float32", length: int = 8) -> None:
        self.length = length
        self.box_dtype = np.dtype(box_dtype)
        high = 1 if self.box_dtype == np.uint8 else 1.0
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (5, 5, 3), np.uint8),
                "direction": spaces.Discrete(4),
                "position": spaces.Box(0, high, (2,), self.box_dtype),
                "mission": spaces.Text(max_length=20, charset="abcdefghijklmnopqrstuvwxyz "),
            }
        )
        self.action_space = spaces.Discrete(2)
        self._direction, self._t = 0, 0

    def _obs(self) -> dict[str, Any]:
        rng = self.np_random
        self._direction = int(rng.integers(4))
        position = rng.integers(0, 2, 2) if self.box_dtype == np.uint8 else rng.random(2)
        return {
            "image": rng.integers(0, 11, (5, 5, 3), dtype=np.uint8),  # object codes, as MiniGrid's
            "direction": self._direction,
            "position": position.astype(self.box_dtype),
            "mission": "name the direction",
        }

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple:
        reward = float(int(action) == self._direction % 2)
        self._t += 1
        return self._obs(), reward, False, self._t >= self.length, {}


gym.register("UserCode/DictWorld-v0", entry_point=DictWorld)
