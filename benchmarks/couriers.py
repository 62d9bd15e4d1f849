"""Couriers: a PettingZoo world with long episodes, the kind a user brings to the agents runner.

``env.id='pettingzoo:couriers'`` with this folder on ``sys.path`` (a script run from here
has it). K agents (default 8) on a walled ``size x size`` grid each carry parcels to a
target of their own: stepping onto it delivers (+1) and a new target appears on a random
cell no agent stands on. Episodes last ``max_turns`` turns (default 500) and never end
sooner. Each turn the agents move one at a time in a random order (a move into a wall or an
agent fails: the grid is crowded, so agents learn to go around each other).

**Actions** (``Discrete(5)``): 0 stay, 1 up, 2 down, 3 left, 4 right.

**Observations** (``Box(-1, 1, (view * view * 3 + 2,), float32)``): the egocentric
``view x view`` window (channels wall, other agent, own target; cells off the map read as
walls), then the target's offset (rows, columns) divided by ``size``, so an agent knows the
way even when its target is out of sight.

Uniformly random agents deliver about 2 parcels each in 500 turns; a lone agent walking
straight to each target about 78, eight that do so (with 10% random moves, or they jam)
about 24. ``step_us`` adds that many microseconds of Python work to every turn (GIL held),
for a world with more going on than this one (couriers itself takes about 0.18 ms a turn
with 8 agents). The world is deterministic given the reset seed.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)])
"""Row and column change of each action."""


class Couriers(ParallelEnv):
    """The couriers world (see the module docstring)."""

    metadata = {"name": "couriers_v0", "render_modes": []}

    def __init__(
        self,
        num_agents: int = 8,
        max_turns: int = 500,
        size: int = 9,
        view: int = 5,
        step_us: float = 0.0,
    ) -> None:
        if num_agents < 1 or num_agents > size * size // 2:
            raise ValueError(f"num_agents: {num_agents} is out of range 1..{size * size // 2}")
        if view % 2 == 0:
            raise ValueError(f"view: {view} must be odd (the agent sits at its centre)")
        self.size, self.view, self.max_turns = size, view, max_turns
        self.step_s = step_us * 1e-6
        self._observation_space = spaces.Box(-1.0, 1.0, (view * view * 3 + 2,), np.float32)
        self._action_space = spaces.Discrete(5)
        self.possible_agents = [f"courier_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._rng = np.random.default_rng()
        pad = view // 2
        # The map padded by view // 2 cells of wall, so every window is a plain slice.
        self._walls = np.ones((size + 2 * pad, size + 2 * pad), np.float32)
        self._walls[pad : pad + size, pad : pad + size] = 0.0
        self._pos = np.zeros((num_agents, 2), np.int64)
        self._target = np.zeros((num_agents, 2), np.int64)
        self._turn = 0

    def observation_space(self, agent: str) -> spaces.Box:
        """The window's three channels, flattened, then the target's offset."""
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        """Stay, up, down, left, right."""
        return self._action_space

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Agents on distinct random cells, each with a target no agent stands on."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        cells = self._rng.choice(self.size * self.size, len(self.agents), replace=False)
        self._pos[:] = np.stack(np.divmod(cells, self.size), axis=1)
        for i in range(len(self.agents)):
            self._target[i] = self._free_cell()
        self._turn = 0
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict[str, Any], ...]:
        """Move the agents one at a time in a random order; deliver on arrival."""
        if self.step_s:
            end = time.perf_counter() + self.step_s
            while time.perf_counter() < end:  # spins, as a heavier world's Python would
                pass
        rewards = {a: 0.0 for a in self.agents}
        occupied = {tuple(p) for p in self._pos}
        for i in self._rng.permutation(len(self.agents)):
            name = self.agents[i]
            here = tuple(self._pos[i])
            there = tuple(self._pos[i] + MOVES[int(actions[name])])
            inside = all(0 <= x < self.size for x in there)
            if there == here or not inside or there in occupied:
                continue
            occupied.discard(here)
            occupied.add(there)
            self._pos[i] = there
            if there == tuple(self._target[i]):
                rewards[name] = 1.0
                self._target[i] = self._free_cell()
        self._turn += 1
        over = self._turn >= self.max_turns
        observations = self._observations()
        terminations = {a: False for a in self.agents}
        truncations = {a: over for a in self.agents}
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        if over:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _free_cell(self) -> np.ndarray:
        occupied = set(map(tuple, self._pos))
        while True:
            cell = self._rng.integers(0, self.size, 2)
            if tuple(cell) not in occupied:
                return cell

    def _observations(self) -> dict[str, np.ndarray]:
        v, pad = self.view, self.view // 2
        agents = np.zeros_like(self._walls)
        agents[self._pos[:, 0] + pad, self._pos[:, 1] + pad] = 1.0
        obs = {}
        for i, name in enumerate(self.possible_agents[: len(self._pos)]):
            r, c = self._pos[i]
            window = np.zeros((v, v, 3), np.float32)
            window[..., 0] = self._walls[r : r + v, c : c + v]
            window[..., 1] = agents[r : r + v, c : c + v]
            window[pad, pad, 1] = 0.0  # itself is not another agent
            dr, dc = self._target[i] - self._pos[i]
            if abs(dr) <= pad and abs(dc) <= pad:
                window[pad + dr, pad + dc, 2] = 1.0
            offset = np.array([dr, dc], np.float32) / self.size
            obs[name] = np.concatenate([window.ravel(), offset])
        return obs


def parallel_env(**kwargs: Any) -> Couriers:
    """The world, PettingZoo's way (``env.kwargs`` are its arguments)."""
    return Couriers(**kwargs)
