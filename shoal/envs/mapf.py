"""Multi-agent path finding (MAPF): K agents on a grid with obstacles, each walking to its own
goal, as a PettingZoo ``ParallelEnv`` for distributed-heuristic learners with communication
(DHC, Ma et al. 2021). Pure numpy.

**Map**: a bool obstacle grid, row 0 at the top, 4-neighbourhood. It is either *given*
(``grid``, with ``starts`` and ``goals`` fixed, or without them to draw new ones each
episode) or *generated* each episode: every cell is an obstacle with probability
``density`` (None: a density drawn per episode from triangular(0, 0.33, 0.5)), the free
cells are split into connected components once, and each agent gets a start and a goal,
two distinct cells of one component. Starts are distinct across agents, so are goals (an
agent's goal may be another's start). A map without room for that is redrawn, up to
:data:`MAX_MAP_ATTEMPTS` times. Everything random comes from the env's generator, which
``reset(seed=...)`` reseeds.

**Actions** (``Discrete(5)``): 0 stay, 1 up (row - 1), 2 down, 3 left (column - 1),
4 right. **Moves** are simultaneous and resolved by :func:`resolve_moves`, deterministic and
independent of agent order:

1. a move out of the map or into an obstacle fails;
2. then, in rounds, every still-moving agent that is in a *vertex conflict* (its target
   cell is also the target of another agent, moving there or staying there) or a *swap
   conflict* (it and another agent move into each other's cells) is sent back to its cell;
   an agent sent back now stays, so it can put the agents moving into its cell into
   conflict in the next round. Rounds go on until one sends nobody back (at most K).

So an agent moving into the cell of one that stays (or is sent back) stays, down a whole
chain; an agent following another into the cell it leaves moves, and so does a rotation
of four agents round a 2 x 2 block (each follows one that really leaves). Every failed
move is a **collision** of the mover; the agent it bumped into is not charged.

**Rewards** per agent and step: -0.075 for a move, -0.075 for staying off its goal
(``stay_off_goal``), 0 for staying on its goal, -0.5 for a collision. When every agent is
on its goal after a step the episode is *terminated* for all and each agent's reward for
that step is +3 **instead of** the above (as in DHC: the finishing step pays exactly +3
whatever happened in it). Otherwise the episode is *truncated* after ``max_steps`` steps
(never both).

**Observations** (``Box(0, 1, (6, fov, fov), float32)``): a ``fov x fov`` window centred
on the agent, channels first (:data:`OBS_CHANNELS`): 0 other agents (not self), 1
obstacles (cells outside the map read as obstacles), 2-5 the agent's *heuristic* maps: 1
where stepping up / down / left / right from that cell shortens the BFS distance to this
agent's own goal (0 on obstacles and outside the map, and all four 0 on the goal). The
heuristic maps come from one BFS per agent from its goal per episode; each step only slices
windows. Observation dicts hold rows of one fresh ``(K, 6, fov, fov)`` array per step
(:attr:`MapfEnv.last_obs`).

**Communication** (:meth:`MapfEnv.comm_mask`): agents i and j talk iff each is in the
other's view (Chebyshev distance <= ``fov // 2``) and each is among the other's ``k_comm``
nearest agents in view (Euclidean distance, ties by agent index, self included and
counted): a symmetric mask with a True diagonal and at most ``k_comm`` per row. Infos
carry each agent's row (``comm``), ``pos`` and ``goal`` (``(row, col)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

from shoal.envs.parallel import StepResult, joint_actions
from shoal.errors import ConfigError, ShoalError

__all__ = [
    "ACTIONS",
    "MAX_MAP_ATTEMPTS",
    "MOVES",
    "OBS_CHANNELS",
    "UNREACHABLE",
    "MapfEnv",
    "bfs_distances",
    "heuristic_maps",
    "label_components",
    "place_agents",
    "resolve_moves",
    "room",
    "shortest_path_action",
]

ACTIONS = ("stay", "up", "down", "left", "right")
"""Action names by index."""
STAY = 0
MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)], dtype=np.intp)
"""(row, column) step of each action."""
OBS_CHANNELS = ("agents", "obstacles", "up", "down", "left", "right")
"""Observation channels, the first axis of an observation."""
UNREACHABLE = 2**30
"""Distance of obstacles and of cells that cannot reach the goal (large, yet safe to add to)."""
MAX_MAP_ATTEMPTS = 100
"""Generated maps drawn per episode before giving up on placing the agents."""
DENSITY_TRIANGLE = (0.0, 0.33, 0.5)
"""(left, mode, right) of the per-episode obstacle density when ``density`` is None."""
REWARD_MOVE = -0.075
REWARD_STAY_OFF_GOAL = -0.075
REWARD_STAY_ON_GOAL = 0.0
REWARD_COLLISION = -0.5
REWARD_FINISH = 3.0


# -- graph search ------------------------------------------------------------------------------


def _bfs_layers(open_: np.ndarray, steps: np.ndarray, source: int) -> Iterator[np.ndarray]:
    """Flat cells by BFS layer from ``source`` (layer 0 is ``[source]``) over the cells
    where ``open_`` is True; each cell yielded is closed in ``open_``. ``open_`` is a flat
    grid with a closed border, so ``cell + step`` never leaves it. Every cell enters one
    layer once, so a walk costs O(cells reached) plus the sort of each layer."""
    open_[source] = False
    layer = np.array([source], dtype=np.intp)
    while layer.size:
        yield layer
        nxt = (layer[:, None] + steps[None, :]).ravel()
        nxt = np.unique(nxt[open_[nxt]])  # a cell reached from two sides enters once
        open_[nxt] = False
        layer = nxt


def _open_padded(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Free cells as a flat bool array with a closed one-cell border, the four neighbour
    offsets in it, and its row length."""
    width = grid.shape[1] + 2
    open_ = np.pad(~grid, 1, constant_values=False).ravel()
    return open_, np.array([-width, width, -1, 1], dtype=np.intp), width


def _as_grid(grid: np.ndarray) -> np.ndarray:
    grid = np.asarray(grid, dtype=bool)
    if grid.ndim != 2 or grid.size == 0:
        raise ConfigError(f"mapf grid: shape {grid.shape} is not a non-empty 2-d map")
    return grid


def bfs_distances(grid: np.ndarray, source: tuple[int, int]) -> np.ndarray:
    """int32 ``(H, W)``: the number of moves from ``source`` to each cell over free cells
    (4-neighbourhood), :data:`UNREACHABLE` on obstacles and on cells of other components.
    One breadth-first search: O(cells reached), up to sorting each BFS layer.

    Example:
        >>> grid = np.array([[0, 0, 0], [1, 1, 0], [0, 0, 0]], bool)
        >>> bfs_distances(grid, (0, 0)).tolist()
        [[0, 1, 2], [1073741824, 1073741824, 3], [6, 5, 4]]
    """
    grid = _as_grid(grid)
    h, w = grid.shape
    r, c = source
    if not (0 <= r < h and 0 <= c < w) or grid[r, c]:
        raise ConfigError(f"mapf bfs: source {(r, c)} is outside the map or an obstacle")
    open_, steps, width = _open_padded(grid)
    dist = np.full(open_.shape, UNREACHABLE, dtype=np.int32)
    for d, layer in enumerate(_bfs_layers(open_, steps, (r + 1) * width + c + 1)):
        dist[layer] = d
    return dist.reshape(h + 2, width)[1:-1, 1:-1].copy()


def label_components(grid: np.ndarray) -> np.ndarray:
    """int32 ``(H, W)``: the connected component (4-neighbourhood) of each free cell,
    numbered from 0 in reading order of their first cells; -1 on obstacles. One flood
    fill per component over a shared visited map: each cell is visited once.

    Example:
        >>> label_components(np.array([[0, 1, 0], [0, 1, 1]], bool)).tolist()
        [[0, -1, 1], [0, -1, -1]]
    """
    grid = _as_grid(grid)
    h, w = grid.shape
    open_, steps, width = _open_padded(grid)
    labels = np.full(open_.shape, -1, dtype=np.int32)
    n = 0
    for seed in np.flatnonzero(open_).tolist():
        if not open_[seed]:  # filled from an earlier seed
            continue
        for layer in _bfs_layers(open_, steps, seed):
            labels[layer] = n
        n += 1
    return labels.reshape(h + 2, width)[1:-1, 1:-1].copy()


def heuristic_maps(grid: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """bool ``(..., 4, H, W)`` for goal distance maps ``(..., H, W)``: whether stepping up,
    down, left, right from each free cell lowers the distance (False on obstacles, and in
    every direction on the goal and on cells that cannot reach it)."""
    lead = [(0, 0)] * (distance.ndim - 2)
    d = np.pad(distance, [*lead, (1, 1), (1, 1)], constant_values=UNREACHABLE)
    here = d[..., 1:-1, 1:-1]
    neighbours = (d[..., :-2, 1:-1], d[..., 2:, 1:-1], d[..., 1:-1, :-2], d[..., 1:-1, 2:])
    # an obstacle's own distance is UNREACHABLE, so any free neighbour would "lower" it
    return np.stack([n < here for n in neighbours], axis=-3) & ~grid


def room(labels: np.ndarray) -> int:
    """How many agents a map labelled by :func:`label_components` can hold: its free cells
    in components of two or more cells (each agent needs a start and another cell of the
    same component as its goal)."""
    flat = labels.ravel()
    flat = flat[flat >= 0]
    if not flat.size:
        return 0
    sizes = np.bincount(flat)
    return int(sizes[sizes >= 2].sum())


def place_agents(
    labels: np.ndarray, num_agents: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray] | None:
    """Random starts and goals, int ``(K, 2)`` each, on a map labelled by
    :func:`label_components`: each agent's start and goal are two distinct cells of one
    component, starts are distinct, goals are distinct. None when the components of two or
    more cells hold fewer than K cells (:func:`room`; then no placement exists).

    Starts are drawn uniformly among those cells; the agents starting in one component get
    the first cells of a shuffle of it as goals, an agent whose goal came out as its own
    start swapping goals with the next agent of the component (or, alone there, taking the
    shuffle's next cell)."""
    flat = labels.ravel()
    free = np.flatnonzero(flat >= 0)
    sizes = np.bincount(flat[free]) if free.size else np.zeros(0, np.intp)
    usable = free[sizes[flat[free]] >= 2]
    if usable.size < num_agents:
        return None
    starts = rng.choice(usable, size=num_agents, replace=False)
    comp = flat[starts]
    by_comp = free[np.argsort(flat[free], kind="stable")]  # free cells grouped by component
    first = np.concatenate([[0], np.cumsum(sizes)])
    goals = np.empty_like(starts)
    for c in np.unique(comp).tolist():
        mine = np.flatnonzero(comp == c)
        cells = rng.permutation(by_comp[first[c] : first[c + 1]])
        goals[mine] = _goals_apart(starts[mine], cells)
    width = labels.shape[1]
    return np.stack(np.divmod(starts, width), 1), np.stack(np.divmod(goals, width), 1)


def _goals_apart(starts: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Distinct goals from shuffled ``cells`` (at least 2, at least one per agent) for agents
    with distinct ``starts``, none on its own start."""
    n = len(starts)
    goals = cells[:n].copy()
    if n == 1:
        return cells[1:2] if goals[0] == starts[0] else goals
    for i in range(n):
        if goals[i] == starts[i]:
            # j's goal is not i's start (goals are distinct) and i's start is not j's
            # start, so the swap fixes i and cannot break j
            j = (i + 1) % n
            goals[i], goals[j] = goals[j], goals[i]
    return goals


# -- moves -------------------------------------------------------------------------------------


def resolve_moves(
    grid: np.ndarray, positions: np.ndarray, actions: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """New positions (int ``(K, 2)``) and collisions (bool ``(K,)``: whose move failed) for
    agents on distinct free cells of ``grid`` taking ``actions`` at once, by the rules of
    the module docstring.

    Example:
        >>> grid = np.zeros((1, 4), bool)
        >>> new, hit = resolve_moves(grid, np.array([[0, 0], [0, 1]]), [4, 4])  # follow
        >>> new.tolist(), hit.tolist()
        ([[0, 1], [0, 2]], [False, False])
        >>> new, hit = resolve_moves(grid, np.array([[0, 0], [0, 1], [0, 3]]), [4, 4, 3])
        >>> new.tolist(), hit.tolist()  # 1 and 2 both want (0, 2); 0 runs into 1
        ([[0, 0], [0, 1], [0, 3]], [True, True, True])
    """
    h, w = grid.shape
    pos = np.asarray(positions, dtype=np.intp)
    acts = np.asarray(actions, dtype=np.intp)
    target = pos + MOVES[acts]
    inside = (target >= 0).all(axis=1) & (target[:, 0] < h) & (target[:, 1] < w)
    legal = inside.copy()
    legal[inside] = ~grid[target[inside, 0], target[inside, 1]]
    moving = (acts != STAY) & legal
    collided = (acts != STAY) & ~legal
    here = pos[:, 0] * w + pos[:, 1]
    there = np.where(moving, target[:, 0] * w + target[:, 1], here)
    # who stands where now, to find swaps: the agent on cell x is by_cell[searchsorted(x)]
    by_cell = np.argsort(here)
    sorted_here = here[by_cell]
    while moving.any():
        _, which, counts = np.unique(there, return_inverse=True, return_counts=True)
        vertex = counts[which.ravel()] > 1
        slot = np.minimum(np.searchsorted(sorted_here, there), len(here) - 1)
        other = by_cell[slot]
        swap = (sorted_here[slot] == there) & (there[other] == here) & moving[other]
        back = moving & (vertex | swap)
        if not back.any():
            break
        moving &= ~back
        collided |= back
        there = np.where(back, here, there)
    return np.stack(np.divmod(there, w), 1), collided


# -- the environment ---------------------------------------------------------------------------


class MapfEnv(ParallelEnv):
    """Multi-agent path finding as a PettingZoo ``ParallelEnv`` (rules, observations and
    communication in the module docstring). Generated maps by default; pass ``grid`` (and
    ``starts`` with ``goals``) for a given one, e.g. a MovingAI benchmark scenario
    (:func:`shoal.envs.movingai.env_from_scenario`).

    Args:
        num_agents: K; agents are named ``agent_0 .. agent_{K-1}``. Default: as many as
            ``starts`` when given, else 4.
        size: side of a generated square map (default 10 when neither it nor ``shape``
            is given).
        shape: ``(height, width)`` of a generated map, instead of ``size``.
        density: obstacle probability per cell of a generated map, in [0, 1); None draws
            one per episode from triangular(0, 0.33, 0.5).
        grid: a given bool obstacle map (True: obstacle) instead of generated ones.
        starts, goals: ``(row, col)`` of each agent on ``grid``, both or neither (neither:
            drawn each episode as for generated maps). Given ones must be free cells,
            starts distinct, goals distinct, each goal reachable from its start (an agent
            may start on its goal).
        fov: side of the square observation window (odd).
        k_comm: most agents, self included, each agent talks to.
        max_steps: steps before the episode is truncated.
        stay_off_goal: reward of staying off its goal (DHC's -0.075, a move's; lower makes
            idling cost more than moving, as PRIMAL's rewards do).
        render_mode: None or ``"rgb_array"`` (uint8 image, 8 pixels per cell).

    Example:
        >>> env = MapfEnv(num_agents=3, size=8, density=0.2)
        >>> obs, infos = env.reset(seed=0)
        >>> obs["agent_0"].shape, env.grid.shape, int(env.action_space("agent_0").n)
        ((6, 9, 9), (8, 8), 5)
        >>> env.comm_mask().shape, sorted(infos["agent_1"])
        ((3, 3), ['comm', 'goal', 'pos'])
        >>> env = MapfEnv(grid=np.zeros((1, 3), bool), starts=[(0, 0)], goals=[(0, 2)])
        >>> _ = env.reset(seed=0)
        >>> [env.step({"agent_0": shortest_path_action(env, 0)})[1:3] for _ in range(2)]
        [({'agent_0': -0.075}, {'agent_0': False}), ({'agent_0': 3.0}, {'agent_0': True})]
    """

    metadata = {
        "name": "shoal_mapf_v0",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 5,
    }

    def __init__(
        self,
        num_agents: int | None = None,
        *,
        size: int | None = None,
        shape: tuple[int, int] | None = None,
        density: float | None = 0.3,
        grid: np.ndarray | None = None,
        starts: Sequence[Sequence[int]] | np.ndarray | None = None,
        goals: Sequence[Sequence[int]] | np.ndarray | None = None,
        fov: int = 9,
        k_comm: int = 3,
        max_steps: int = 256,
        stay_off_goal: float = REWARD_STAY_OFF_GOAL,
        render_mode: str | None = None,
    ) -> None:
        if (starts is None) != (goals is None):
            raise ConfigError("mapf starts, goals: give both or neither")
        if starts is not None and grid is None:
            raise ConfigError("mapf starts, goals: they need a given grid")
        if num_agents is None:
            num_agents = len(starts) if starts is not None else 4
        checks = {
            "num_agents": (num_agents, num_agents >= 1, ">= 1"),
            "fov": (fov, fov >= 1 and fov % 2 == 1, "an odd number >= 1"),
            "k_comm": (k_comm, k_comm >= 1, ">= 1"),
            "max_steps": (max_steps, max_steps >= 1, ">= 1"),
            "stay_off_goal": (
                stay_off_goal,
                math.isfinite(stay_off_goal) and stay_off_goal <= 0.0,
                "a finite reward <= 0",
            ),
            "density": (
                density,
                density is None or 0.0 <= density < 1.0,
                "None or a probability in [0, 1)",
            ),
        }
        for key, (value, ok, allowed) in checks.items():
            if not ok:
                raise ConfigError(f"mapf {key}: {value!r} is out of range; allowed: {allowed}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(f"mapf render_mode: {render_mode!r} is not one of None, 'rgb_array'")
        self.fov, self.k_comm, self.max_steps = int(fov), int(k_comm), int(max_steps)
        self.density = density
        """The obstacle density asked for (None: drawn per episode)."""
        self.stay_off_goal = float(stay_off_goal)
        """Reward of an agent's step spent off its goal without trying to move."""
        self.render_mode = render_mode
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._rows = np.arange(num_agents)
        space = spaces.Box(0.0, 1.0, (len(OBS_CHANNELS), fov, fov), np.float32)
        self._obs_space = dict.fromkeys(self.possible_agents, space)
        self._act_space = {a: spaces.Discrete(len(ACTIONS)) for a in self.possible_agents}
        self.rng = np.random.default_rng()
        """The env's generator: maps, starts and goals come from it; reset(seed) reseeds it."""
        self.steps = 0
        """Steps taken since reset."""
        self.episode_density: float | None = None
        """The obstacle density of this episode's generated map (None for a given map)."""
        self.grid: np.ndarray | None = None
        """bool ``(H, W)`` obstacles of the current map (a generated one from reset on)."""
        self.starts = np.zeros((num_agents, 2), np.intp)
        self.goals = self.starts.copy()
        self.positions = self.starts.copy()
        """int ``(K, 2)`` ``(row, col)``: starts and goals of the episode, positions now."""
        self._mode = "generated"  # or "drawn" (given grid), "fixed" (given grid and placement)
        self._labels: np.ndarray | None = None
        self.last_obs = np.zeros((num_agents, *space.shape), np.float32)
        """float32 ``(K, 6, fov, fov)``: the latest observations in ``possible_agents``
        order, the array whose rows the obs dicts hold (fresh every step)."""
        self._comm = np.eye(num_agents, dtype=bool)
        if grid is None:
            self._shape = _generated_shape(size, shape, num_agents)
            return
        if size is not None or shape is not None:
            raise ConfigError("mapf size, shape: not with a given grid")
        self._use_grid(_as_grid(grid))
        if starts is None:
            self._mode = "drawn"
            self._labels = label_components(self.grid)
            if room(self._labels) < num_agents:
                raise ConfigError(
                    f"mapf grid: no room for {num_agents} agents (each needs a start and a"
                    " goal in one component, starts distinct, goals distinct)"
                )
            return
        self.starts, self.goals = _checked_placement(self.grid, starts, goals, num_agents)
        self._mode = "fixed"
        self._plan()  # the same distance maps serve every episode

    # PettingZoo's tests require the very same space object on every call.
    def observation_space(self, agent: str) -> spaces.Box:
        """The agent's observation space (the same object on every call)."""
        return self._obs_space[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        """The agent's action space (the same object on every call)."""
        return self._act_space[agent]

    # -- episode set-up ----------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode: a new map (generated mode), new starts and goals (unless
        given), agents on their starts. ``seed`` reseeds the env's generator (None: its
        stream goes on). ``options`` is ignored."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        k = self.max_num_agents
        if self._mode == "generated":
            self._generate()
        elif self._mode == "drawn":
            # place_agents returns None only when there is no room, ruled out at __init__
            self.starts, self.goals = place_agents(self._labels, k, self.rng)
        if self._mode != "fixed":
            self._plan()
        self.positions = self.starts.copy()
        self.steps = 0
        self.agents = list(self.possible_agents)
        obs = self._observe()
        infos = self._infos()
        return {a: obs[i] for i, a in enumerate(self.possible_agents)}, infos

    def _generate(self) -> None:
        """A generated map with room for the agents, and their starts and goals on it."""
        rng = self.rng
        density = self.density
        if density is None:
            density = float(rng.triangular(*DENSITY_TRIANGLE))
        k = self.max_num_agents
        for _ in range(MAX_MAP_ATTEMPTS):
            grid = rng.random(self._shape) < density
            placed = place_agents(label_components(grid), k, rng)
            if placed is not None:
                self._use_grid(grid)
                self.starts, self.goals = placed
                self.episode_density = density
                return
        h, w = self._shape
        raise ConfigError(
            f"mapf: none of {MAX_MAP_ATTEMPTS} maps of {h} x {w} cells at obstacle density"
            f" {density:.3f} had room for {k} agents (start and goal in one component);"
            " use fewer agents, a bigger map or a lower density"
        )

    def _use_grid(self, grid: np.ndarray) -> None:
        """Make ``grid`` the map, with its padded obstacle channel and window views."""
        self.grid = grid
        r = self.fov // 2
        h, w = grid.shape
        # the padding reads as obstacles, so windows at the edge need no bounds checks
        self._obstacles = np.pad(grid.astype(np.float32), r, constant_values=1.0)
        self._occupied = np.zeros((h + 2 * r, w + 2 * r), np.float32)
        view = (self.fov, self.fov)
        # window (row, col) of these views is the fov x fov block centred on that map cell
        self._obstacle_windows = np.lib.stride_tricks.sliding_window_view(self._obstacles, view)
        self._occupied_windows = np.lib.stride_tricks.sliding_window_view(self._occupied, view)

    def _plan(self) -> None:
        """Goal distance maps (one BFS per agent) and padded heuristic maps for the episode."""
        dist = np.stack([bfs_distances(self.grid, (int(r), int(c))) for r, c in self.goals])
        dist.flags.writeable = False
        self._dist = dist
        r = self.fov // 2
        heur = np.pad(heuristic_maps(self.grid, dist), [(0, 0), (0, 0), (r, r), (r, r)])
        self._heuristic_windows = np.lib.stride_tricks.sliding_window_view(
            heur, (self.fov, self.fov), axis=(2, 3)
        )

    # -- stepping ----------------------------------------------------------------------------

    def step(self, actions: Mapping[str, int]) -> StepResult:
        """Apply the agents' actions at once (a missing one means stay) and return
        PettingZoo's five dicts."""
        if not self.agents:
            raise ShoalError("mapf step: the episode is over; call reset() first")
        acts = joint_actions("mapf", actions, self._index, self.max_num_agents, len(ACTIONS))
        new, collided = resolve_moves(self.grid, self.positions, acts)
        moved = (new != self.positions).any(axis=1)
        self.positions = new
        self.steps += 1
        on = self.on_goal()
        finished = bool(on.all())
        if finished:
            rewards = np.full(len(acts), REWARD_FINISH)
        else:
            stay = np.where(on, REWARD_STAY_ON_GOAL, self.stay_off_goal)
            rewards = np.where(collided, REWARD_COLLISION, np.where(moved, REWARD_MOVE, stay))
        truncated = not finished and self.steps >= self.max_steps
        obs = self._observe()
        agents = self.possible_agents
        result = (
            {a: obs[i] for i, a in enumerate(agents)},
            dict(zip(agents, rewards.tolist())),
            dict.fromkeys(agents, finished),
            dict.fromkeys(agents, truncated),
            self._infos(),
        )
        if finished or truncated:
            self.agents = []
        return result

    def _observe(self) -> np.ndarray:
        """float32 ``(K, 6, fov, fov)`` observations of the current positions; also updates
        the communication mask."""
        self.last_obs, self._comm = self.view(self.positions)
        return self.last_obs

    def view(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The observations (float32 ``(K, 6, fov, fov)``) and communication mask the
        agents would have at ``positions`` (int ``(K, 2)``, distinct free cells), the env
        left as it is: a planner scores configurations it only considers."""
        r = self.fov // 2
        rows, cols = positions[:, 0], positions[:, 1]
        obs = np.empty((self.max_num_agents, len(OBS_CHANNELS), self.fov, self.fov), np.float32)
        self._occupied[rows + r, cols + r] = 1.0
        obs[:, 0] = self._occupied_windows[rows, cols]
        self._occupied[rows + r, cols + r] = 0.0
        obs[:, 0, r, r] = 0.0  # the agent channel shows the others only
        obs[:, 1] = self._obstacle_windows[rows, cols]
        obs[:, 2:] = self._heuristic_windows[self._rows, :, rows, cols]
        return obs, self._mutual_nearest(positions)

    def _mutual_nearest(self, positions: np.ndarray) -> np.ndarray:
        """The communication mask of ``positions`` (see the module docstring)."""
        delta = positions[:, None, :] - positions[None, :, :]
        in_view = np.abs(delta).max(axis=2) <= self.fov // 2
        sq = (delta**2).sum(axis=2).astype(np.float64)
        sq[~in_view] = np.inf
        # a stable sort keeps equal distances in index order: ties go to the lower index
        nearest = np.argsort(sq, axis=1, kind="stable")[:, : self.k_comm]
        chosen = np.zeros_like(in_view)
        chosen[self._rows[:, None], nearest] = True
        chosen &= in_view  # fewer than k_comm agents in view: the inf columns are not chosen
        return chosen & chosen.T

    def _infos(self) -> dict[str, dict[str, Any]]:
        pos = self.positions.tolist()
        goals = self.goals.tolist()
        comm = self._comm
        return {
            a: {"pos": tuple(pos[i]), "goal": tuple(goals[i]), "comm": comm[i]}
            for i, a in enumerate(self.possible_agents)
        }

    # -- queries -----------------------------------------------------------------------------

    def comm_mask(self) -> np.ndarray:
        """bool ``(K, K)`` in ``possible_agents`` order: who talks to whom now (mutual
        ``k_comm`` nearest in view; symmetric, True diagonal)."""
        return self._comm.copy()

    def distance(self, i: int) -> np.ndarray:
        """int32 ``(H, W)``, read-only: agent ``i``'s BFS distance to its goal from each
        cell (:data:`UNREACHABLE` on obstacles and cells that cannot reach it)."""
        return self._dist[i]

    def on_goal(self) -> np.ndarray:
        """bool ``(K,)``: which agents stand on their goals."""
        return (self.positions == self.goals).all(axis=1)

    # -- rendering ---------------------------------------------------------------------------

    def render(self) -> np.ndarray | None:
        """An RGB uint8 ``(8H, 8W, 3)`` image for ``"rgb_array"`` (None otherwise or before
        the first reset): obstacles dark, floor light, each goal a pale square and each agent
        a smaller square of the same colour."""
        if self.render_mode != "rgb_array" or self.grid is None:
            return None
        px = 8
        colours = _agent_colours(self.max_num_agents)
        pale = (colours.astype(np.uint16) + 2 * 255) // 3
        cells = np.full((*self.grid.shape, 3), 235, np.uint8)
        cells[self.grid] = 50
        cells[self.goals[:, 0], self.goals[:, 1]] = pale.astype(np.uint8)
        image = np.repeat(np.repeat(cells, px, axis=0), px, axis=1)
        for (r, c), colour in zip(self.positions.tolist(), colours):
            image[r * px + 1 : (r + 1) * px - 1, c * px + 1 : (c + 1) * px - 1] = colour
        return image

    def close(self) -> None:
        """Nothing to release."""


def shortest_path_action(env: MapfEnv, i: int) -> int:
    """The action taking agent ``i`` one step down its goal distance map: the first of up,
    down, left, right that lowers the distance, 0 (stay) on the goal. Other agents are
    ignored; it is the building block of a shortest-path baseline."""
    dist = env.distance(i)
    h, w = dist.shape
    r, c = env.positions[i].tolist()
    for action in range(1, len(ACTIONS)):
        dr, dc = MOVES[action].tolist()
        rr, cc = r + dr, c + dc
        if 0 <= rr < h and 0 <= cc < w and dist[rr, cc] < dist[r, c]:
            return action
    return STAY


def _generated_shape(
    size: int | None, shape: tuple[int, int] | None, num_agents: int
) -> tuple[int, int]:
    if size is not None and shape is not None:
        raise ConfigError("mapf size, shape: give one, not both")
    if shape is None:
        side = 10 if size is None else int(size)
        shape = (side, side)
    h, w = (int(n) for n in shape)
    if h < 1 or w < 1 or h * w < 2 or num_agents > h * w:
        raise ConfigError(
            f"mapf shape: {h} x {w} is too small; it needs at least 2 cells and one per agent"
            f" ({num_agents})"
        )
    return h, w


def _checked_placement(
    grid: np.ndarray,
    starts: Sequence[Sequence[int]] | np.ndarray,
    goals: Sequence[Sequence[int]] | np.ndarray,
    num_agents: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Given starts and goals as int ``(K, 2)`` arrays, or an error naming the agent and
    cell that break a rule: in the map, on free cells, distinct starts, distinct goals,
    each goal reachable from its start."""
    h, w = grid.shape
    placed = []
    for what, given in (("start", starts), ("goal", goals)):
        cells = np.asarray(given, dtype=np.intp)
        if cells.shape != (num_agents, 2):
            raise ConfigError(
                f"mapf {what}s: expected {num_agents} (row, col) pairs, one per agent; got an"
                f" array of shape {cells.shape}"
            )
        seen: dict[tuple[int, int], int] = {}
        for i, (r, c) in enumerate(cells.tolist()):
            if not (0 <= r < h and 0 <= c < w):
                raise ConfigError(f"mapf: agent {i}'s {what} {(r, c)} is outside the {h} x {w} map")
            if grid[r, c]:
                raise ConfigError(f"mapf: agent {i}'s {what} {(r, c)} is an obstacle")
            if (r, c) in seen:
                raise ConfigError(
                    f"mapf: agents {seen[(r, c)]} and {i} share the {what} {(r, c)}; {what}s"
                    " must be distinct"
                )
            seen[(r, c)] = i
        placed.append(cells)
    labels = label_components(grid)
    for i, ((sr, sc), (gr, gc)) in enumerate(zip(placed[0].tolist(), placed[1].tolist())):
        if labels[sr, sc] != labels[gr, gc]:
            raise ConfigError(
                f"mapf: agent {i}'s goal {(gr, gc)} cannot be reached from its start {(sr, sc)}"
            )
    return placed[0], placed[1]


def _agent_colours(k: int) -> np.ndarray:
    """``k`` distinct uint8 RGB colours ``(k, 3)``: hues evenly round a cosine palette."""
    hue = np.arange(k)[:, None] / max(k, 1)
    rgb = 0.5 + 0.5 * np.cos(2 * np.pi * (hue + np.array([0.0, 1 / 3, 2 / 3])))
    return (30 + 200 * rgb).astype(np.uint8)
