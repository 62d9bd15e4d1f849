"""A multi-agent gridworld core: K agents on one map, egocentric windows, and turns whose
actions are applied one agent at a time in a random order.

A turn follows the independent-learners design note: non-agent entities transition
(:meth:`GridWorld.transition`, a hook), agents observe (:meth:`GridWorld.observe`), then
every agent's action is applied **sequentially**, in an order drawn afresh each turn from
the world's seeded generator (:meth:`GridWorld.step`, which calls the :meth:`GridWorld.act`
hook per agent). Actions affect each other: when two agents step toward the same cell, the
first in the order takes it and the second is blocked. In a step-based API the turn is
rotated so that ``step(actions)`` applies the actions, then runs the transition that opens
the next turn, after which the caller observes; the state at reset counts as already
transitioned.

State lives in numpy arrays built for the two hot paths:

* a **canvas**, float32 ``(H + 2p, W + 2p, C)`` with the observation channels ``wall,
  *layers, agent, self`` (self is all zeros here: each window marks its own centre),
  padded by ``p >= view // 2`` cells of wall on every side, so that all K windows are one
  ``np.take`` (out-of-map cells read as walls) with no bounds checks. Channels are
  innermost so a window cell is one contiguous row: the gather at K = 128 takes 6 us, where
  fancy indexing a channel-first canvas took 80 us;
* **flat cell indices** into that padded canvas for agent positions and the occupancy map,
  so the per-agent action loop (the one Python loop a sequential turn cannot avoid) moves
  an agent with a few integer operations. Padding cells are walls, so a move or a beam can
  never leave the map.

Games subclass :class:`GridWorld` and fill in :meth:`~GridWorld.act` (and
:meth:`~GridWorld.transition`); :mod:`shoal.envs.harvest` is one. This module is numpy
only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.errors import ConfigError

__all__ = ["DIRECTIONS", "DOWN", "LEFT", "RIGHT", "UP", "GridWorld"]

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
DIRECTIONS = ((-1, 0), (1, 0), (0, -1), (0, 1))
"""(row, column) steps for UP, DOWN, LEFT, RIGHT; row 0 is the top of the map."""


class GridWorld:
    """Walls, entity layers and K agents on an ``H x W`` grid (see the module docstring).

    Positions are ``(row, col)`` with row 0 at the top. An agent is *present* (on the board,
    occupying its cell) or *absent* (removed: it has no cell, its window is all zeros and
    :meth:`step` skips it). At most one agent stands on a cell.

    Args:
        walls: bool ``(H, W)``, True where a wall is.
        num_agents: K, the number of agents (all start absent; :meth:`place` them).
        view: side of the square egocentric window, odd (the agent sits at its centre).
        layers: names of the entity layers (one 0/1 channel each, e.g. ``("apple",)``).
        margin: least padding around the map, for games whose own neighbourhoods reach
            further than ``view // 2`` (harvest's regrowth radius).
        seed: seed of :attr:`rng`; :meth:`reset` reseeds it.

    Example:
        >>> walls = np.zeros((3, 4), bool)
        >>> world = GridWorld(walls, num_agents=2, view=3, layers=("apple",), seed=0)
        >>> world.place(0, 0, 0); world.place(1, 0, 1)
        >>> world.move(0, RIGHT)        # blocked by agent 1
        False
        >>> world.move(1, DOWN), world.position(1)
        (True, (1, 1))
        >>> world.layer("apple")[0, 2] = 1
        >>> obs = world.observe()       # (K, view, view, wall + apple + others + self)
        >>> obs.shape, obs[0, :, :, 0].tolist()  # out-of-map cells read as walls
        ((2, 3, 3, 4), [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
        >>> float(obs[0, 2, 2, 2]), float(obs[1, 0, 2, 1])  # agent 1 seen by 0, apple by 1
        (1.0, 1.0)
    """

    def __init__(
        self,
        walls: np.ndarray,
        *,
        num_agents: int,
        view: int,
        layers: Sequence[str] = (),
        margin: int = 1,
        seed: int | None = None,
    ) -> None:
        walls = np.asarray(walls, dtype=bool)
        if walls.ndim != 2 or walls.size == 0:
            raise ConfigError(f"GridWorld walls: shape {walls.shape} is not a 2-d map")
        if num_agents < 1:
            raise ConfigError(f"GridWorld num_agents: {num_agents!r} is out of range; >= 1")
        if view < 1 or view % 2 == 0:
            raise ConfigError(f"GridWorld view: {view!r} is not allowed; an odd number >= 1")
        self.height, self.width = walls.shape
        self.num_agents = int(num_agents)
        self.view = int(view)
        self.layer_names = tuple(layers)
        self.pad = max(self.view // 2, int(margin), 1)
        p = self.pad
        self.padded_width = self.width + 2 * p
        self.channels = 3 + len(self.layer_names)
        """Observation channels: wall, the layers, other agents, self."""
        self.canvas = np.zeros((self.height + 2 * p, self.padded_width, self.channels), np.float32)
        self.canvas[:, :, 0] = 1.0
        self.canvas[p : p + self.height, p : p + self.width, 0] = walls
        self._flat = self.canvas.reshape(-1, self.channels)
        self._agent_ch = self.canvas[:, :, -2].reshape(-1)  # a strided view, no copy
        # Python containers for the per-agent loop: indexing a list costs ~20 ns, a numpy
        # scalar ~100 ns, and a turn of 128 agents does several lookups per agent.
        self._blocked = self.canvas[:, :, 0].reshape(-1).astype(bool).tolist()
        self._occupant = [-1] * len(self._blocked)
        self._cell = [-1] * self.num_agents
        self.facing = [UP] * self.num_agents
        """Each agent's facing direction (UP, DOWN, LEFT, RIGHT); moves set it."""
        w = self.padded_width
        self._delta = [dr * w + dc for dr, dc in DIRECTIONS]
        h = self.view // 2
        rows, cols = np.meshgrid(np.arange(self.view), np.arange(self.view), indexing="ij")
        self._window = ((rows - h) * w + (cols - h)).reshape(-1)  # offsets from the centre
        self._centre = (self.view * self.view) // 2
        self.rng = np.random.default_rng(seed)
        """The world's generator: turn orders and every random event come from it."""

    # -- coordinates --------------------------------------------------------------------

    def flat(self, row: int, col: int) -> int:
        """The flat index of interior cell ``(row, col)`` in the padded canvas."""
        return (row + self.pad) * self.padded_width + col + self.pad

    def coords(self, index: int) -> tuple[int, int]:
        """The interior ``(row, col)`` of flat padded index ``index`` (inverse of flat)."""
        r, c = divmod(index, self.padded_width)
        return r - self.pad, c - self.pad

    def layer(self, name: str) -> np.ndarray:
        """A writable view, ``(H, W)`` float32 0/1, of entity layer ``name``."""
        ch = 1 + self.layer_names.index(name)
        p = self.pad
        return self.canvas[p : p + self.height, p : p + self.width, ch]

    def layer_flat(self, name: str) -> np.ndarray:
        """A writable 1-d view of layer ``name`` over the padded canvas (flat indices)."""
        return self.canvas[:, :, 1 + self.layer_names.index(name)].reshape(-1)

    @property
    def walls(self) -> np.ndarray:
        """bool ``(H, W)``: where the walls are."""
        p = self.pad
        return self.canvas[p : p + self.height, p : p + self.width, 0] > 0

    # -- agents -------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> None:
        """Remove every agent; reseed :attr:`rng` when ``seed`` is given (else its stream
        goes on, as in gymnasium). Layers are the game's to reset."""
        for i in range(self.num_agents):
            self.remove(i)
        self.facing = [UP] * self.num_agents
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def present(self, i: int) -> bool:
        """Whether agent ``i`` is on the board."""
        return self._cell[i] >= 0

    def position(self, i: int) -> tuple[int, int] | None:
        """Agent ``i``'s ``(row, col)``, or None when it is absent."""
        cell = self._cell[i]
        return None if cell < 0 else self.coords(cell)

    def positions(self) -> np.ndarray:
        """int ``(K, 2)`` positions, ``(-1, -1)`` for absent agents."""
        cells = np.asarray(self._cell)
        r, c = np.divmod(cells, self.padded_width)
        out = np.stack([r - self.pad, c - self.pad], axis=1)
        out[cells < 0] = -1
        return out

    def present_mask(self) -> np.ndarray:
        """bool ``(K,)``: which agents are on the board."""
        return np.asarray(self._cell) >= 0

    def occupant(self, row: int, col: int) -> int:
        """The agent on ``(row, col)``, or -1."""
        return self._occupant[self.flat(row, col)]

    def is_free(self, row: int, col: int) -> bool:
        """Whether ``(row, col)`` is inside the map, not a wall and has no agent on it."""
        if not (0 <= row < self.height and 0 <= col < self.width):
            return False
        f = self.flat(row, col)
        return not self._blocked[f] and self._occupant[f] < 0

    def place(self, i: int, row: int, col: int) -> None:
        """Put agent ``i`` on ``(row, col)`` (moving it if present); the cell must be free."""
        if not self.is_free(row, col):
            raise ValueError(f"cell {(row, col)} is a wall, outside the map or taken")
        self.remove(i)
        self._put(i, self.flat(row, col))

    def _put(self, i: int, f: int) -> None:
        self._cell[i] = f
        self._occupant[f] = i
        self._agent_ch[f] = 1.0

    def remove(self, i: int) -> None:
        """Take agent ``i`` off the board (a no-op when it is absent)."""
        f = self._cell[i]
        if f >= 0:
            self._cell[i] = -1
            self._occupant[f] = -1
            self._agent_ch[f] = 0.0

    def move(self, i: int, direction: int) -> bool:
        """Turn agent ``i`` to ``direction`` and step one cell that way unless a wall or an
        agent is there. Returns whether it moved (it turns either way, so an agent can aim
        by bumping into a wall)."""
        self.facing[i] = direction
        f = self._cell[i]
        g = f + self._delta[direction]
        if self._blocked[g] or self._occupant[g] >= 0:
            return False
        self._occupant[f] = -1
        self._agent_ch[f] = 0.0
        self._put(i, g)
        return True

    def cast(self, i: int, length: int) -> int:
        """The first present agent within ``length`` cells of agent ``i`` in its facing
        direction, or -1. Walls stop the beam."""
        d = self._delta[self.facing[i]]
        f = self._cell[i]
        for _ in range(length):
            f += d
            if self._blocked[f]:
                return -1
            j = self._occupant[f]
            if j >= 0:
                return j
        return -1

    # -- the turn -----------------------------------------------------------------------

    def observe(self) -> np.ndarray:
        """Every agent's egocentric window: float32 ``(K, view, view, C)`` with channels
        ``wall, *layers, other agents, self``. Out-of-map cells read as walls; the window
        is not rotated (row 0 is north). An absent agent's window is all zeros."""
        k, v, c = self.num_agents, self.view, self.channels
        cells = np.asarray(self._cell)
        here = cells >= 0
        # absent agents gather around a real cell (then zeroed) so every index is in range
        idx = np.where(here, cells, self.flat(0, 0))[:, None] + self._window[None, :]
        out = np.take(self._flat, idx, axis=0, mode="clip")
        out[:, self._centre, c - 2] = 0.0  # the agent channel shows the others only
        out[:, self._centre, c - 1] = 1.0
        if not here.all():
            out[~here] = 0.0
        return out.reshape(k, v, v, c)

    def act(self, i: int, action: int) -> float:
        """Apply present agent ``i``'s ``action`` and return its reward (the game's hook)."""
        raise NotImplementedError

    def transition(self) -> None:
        """Advance the non-agent entities by one turn (the game's hook; default: none)."""

    def step(self, actions: Sequence[int] | np.ndarray) -> np.ndarray:
        """Apply every present agent's action, one at a time in a random order, then run
        :meth:`transition`. Absent agents are skipped, also those removed earlier in this
        same order. Returns float64 ``(K,)`` rewards, each the sum of what :meth:`act`
        returned for that agent (zero for skipped ones)."""
        return np.asarray(self._step(np.asarray(actions).tolist()))

    def _step(self, acts: list[int]) -> list[float]:
        """:meth:`step` on a list of Python ints, returning a list (what envs use: lists
        are what the per-agent loop and PettingZoo's dicts want)."""
        rewards = [0.0] * self.num_agents
        cell = self._cell
        act = self.act
        # The permutation is drawn for all K agents, present or not, so that the stream of
        # random numbers (and so the whole run) depends on the seed and actions only.
        for i in self.rng.permutation(self.num_agents).tolist():
            if cell[i] >= 0:
                rewards[i] += act(i, acts[i])
        self.transition()
        return rewards
