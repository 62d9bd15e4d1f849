"""A user's gymnasium multi-agent env in the form lbforaging and rware ship
(``env.id = 'user_code.tuple_world:Signals-v0'``): per-agent ``Tuple`` spaces, a list of
rewards, one ``done`` for all, and the step limit reported as ``terminated=True``.

Agent i has ``actions[i]`` actions and sees a one-hot light of that many entries, then
``extra[i]`` zeros; naming its light earns it 1. Episodes end at ``limit`` steps (kept in
``_max_episode_steps``, as lbforaging keeps it), or earlier, a true end, when every agent
names its light on the same step and ``stop_when_all_right`` is set.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Signals(gym.Env):
    def __init__(
        self,
        actions: tuple[int, ...] = (2, 2),
        extra: tuple[int, ...] | None = None,
        limit: int = 10,
        stop_when_all_right: bool = False,
    ) -> None:
        self.actions = tuple(actions)
        self.extra = tuple(extra or (0,) * len(self.actions))
        self._max_episode_steps = limit
        self.stop_when_all_right = stop_when_all_right
        self.observation_space = spaces.Tuple(
            [spaces.Box(0.0, 1.0, (n + e,), np.float32) for n, e in zip(self.actions, self.extra)]
        )
        self.action_space = spaces.Tuple([spaces.Discrete(n) for n in self.actions])
        self._lights = np.zeros(len(self.actions), np.int64)
        self._t = 0

    def _obs(self) -> tuple[np.ndarray, ...]:
        self._lights = np.array([self.np_random.integers(n) for n in self.actions])
        out = []
        for light, n, e in zip(self._lights, self.actions, self.extra):
            row = np.zeros(n + e, np.float32)
            row[light] = 1.0
            out.append(row)
        return tuple(out)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, actions: Any) -> tuple:
        right = [int(a) == int(light) for a, light in zip(actions, self._lights)]
        for a, n in zip(actions, self.actions):
            if not 0 <= int(a) < n:
                raise ValueError(f"action {a} out of range({n})")
        self._t += 1
        done = self._t >= self._max_episode_steps or (self.stop_when_all_right and all(right))
        return self._obs(), [float(r) for r in right], done, False, {}


gym.register("Signals-v0", entry_point=Signals)
