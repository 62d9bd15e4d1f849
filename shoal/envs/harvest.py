"""Commons harvest: the common-pool-resource social dilemma of Perolat et al. (2017), as a
PettingZoo ``ParallelEnv`` on the :mod:`shoal.envs.gridworld` core.

K agents walk a map with patches of apples. Eating an apple is worth +1; an eaten apple
regrows only near other apples, so a patch harvested bare never comes back: restraint pays
the group, greed pays the individual. Agents can also tag each other out of the game for a
while with a short beam.

**Turn** (see :mod:`shoal.envs.gridworld`): ``step(actions)`` applies the actions one
agent at a time in an order drawn from the env's seeded generator (the first agent in the
order to reach an apple eats it; a cell taken earlier in the order blocks later movers),
then runs the transition that opens the next turn: tagged-out agents whose timeout is over
come back at a random free spawn point, then empty apple cells regrow; then every agent
observes.

**Actions** (``Discrete(6)``): 0 stay, 1 up, 2 down, 3 left, 4 right, 5 tag. Moves are
absolute (row 0 is the top); a move into a wall or an agent fails, but the agent still turns
that way. Tag fires a beam ``beam`` cells long, one cell wide, in the direction the agent
faces (its last attempted move); walls stop it; the first agent on its path is tagged out.

**Rewards**: +1 for moving onto an apple (it is eaten); ``-tag_cost`` for every tag fired
(default 0, as in Perolat et al.); nothing else. A tagged-out agent gets 0 while out; what it
earned earlier in the step it was tagged in is kept.

**Tagged out**: the agent is taken off the board for ``timeout`` steps (its actions are
no-ops, its observation is all zeros except the "tagged out" flag), then comes back at a
random free spawn point (a map has at least K spawn points, so there always is one). With
``leave_when_tagged=True`` an agent tagged for the ``lives``-th time leaves the game for
good instead: it is ``terminated`` in that step's dicts and leaves ``env.agents`` (PettingZoo
agents never re-enter, so the timed comeback cannot be an agent leaving and rejoining).

**Regrowth**: each turn every empty apple cell of the orchard (the map's ``A`` cells) with no
agent on it regrows with probability ``regrowth[min(n, len(regrowth) - 1)]``, ``n`` = apples
within Euclidean distance 2 (the 12 cells with ``dr**2 + dc**2 <= 4``, itself excluded).
The default, ``REGROWTH = (0, 0.01, 0.01, 0.05, 0.05, 0.1)``, reads: 0 apples nearby never,
1-2 apples 1 %, 3-4 apples 5 %, 5 or more 10 %.

**Observations** (``Box(0, 1, (view * view * 4 + 5,), float32)``): the egocentric
``view x view`` window, not rotated, stored height x width x channels and flattened
(channels ``wall, apple, other agent, self``; out-of-map cells read as walls), followed by
the facing direction one-hot (up, down, left, right) and a flag that is 1 while the agent is
tagged out. This is the layout :class:`shoal.agent.networks.BoardEncoder` reads with
``board=env.window_shape`` and ``extra=5``.

Episodes are truncated after ``max_turns`` steps and otherwise never end (except for agents
that leave). Infos carry ``tagged_out`` (bool: off the board as of this observation).
Observation dicts hold rows of one fresh ``(K, obs_dim)`` array per step
(:attr:`HarvestEnv.last_obs`), never written again, so they can be stored without a copy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

from shoal.envs.gridworld import GridWorld
from shoal.envs.parallel import StepResult, joint_actions
from shoal.errors import ConfigError, ShoalError

__all__ = [
    "make_harvest",
    "ACTIONS",
    "DEFAULT_MAP",
    "OBS_CHANNELS",
    "REGROWTH",
    "HarvestEnv",
    "HarvestWorld",
    "generate_map",
    "parse_map",
]

ACTIONS = ("stay", "up", "down", "left", "right", "tag")
"""Action names by index."""
STAY, TAG = 0, 5
OBS_CHANNELS = ("wall", "apple", "agent", "self")
"""Window channels, innermost axis of the (view, view, channels) window."""
REGROWTH = (0.0, 0.01, 0.01, 0.05, 0.05, 0.1)
"""Regrowth probability by the number of apples within radius 2 (the last for all more)."""
REGROWTH_RADIUS = 2
_DISK = tuple(
    (dr, dc)
    for dr in range(-REGROWTH_RADIUS, REGROWTH_RADIUS + 1)
    for dc in range(-REGROWTH_RADIUS, REGROWTH_RADIUS + 1)
    if 0 < dr * dr + dc * dc <= REGROWTH_RADIUS**2
)

DEFAULT_MAP = """\
#########################
#P    P     P     P    P#
#                       #
#   A       A       A   #
#  AAA     AAA     AAA  #
# AAAAA   AAAAA   AAAAA #
#  AAA     AAA     AAA  #
#   A       A       A   #
#P                     P#
#       A       A       #
#      AAA     AAA      #
#     AAAAA   AAAAA     #
#      AAA     AAA      #
#       A       A       #
#                       #
#P    P     P     P    P#
#########################
"""
"""17 x 25 cells, five 13-apple patches (65 apples), 12 spawn points. Legend: ``#`` wall,
``A`` apple (orchard cell), ``P`` spawn point, space or ``.`` floor."""


def parse_map(text: str) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Walls (bool ``(H, W)``), orchard (bool ``(H, W)``) and spawn points (``(row, col)``
    in reading order) of an ASCII map in the :data:`DEFAULT_MAP` legend. Blank lines at
    either end are ignored; every other line must be equally long."""
    lines = text.strip("\n").split("\n")
    if not lines or not lines[0]:
        raise ConfigError("harvest layout: the map is empty")
    width = len(lines[0])
    for r, line in enumerate(lines):
        if len(line) != width:
            raise ConfigError(
                f"harvest layout: line {r} is {len(line)} characters long, line 0 is {width};"
                " every line must be equally long"
            )
        bad = set(line) - set("#AP .")
        if bad:
            raise ConfigError(
                f"harvest layout: line {r} has {sorted(bad)}; allowed: '#', 'A', 'P', ' ', '.'"
            )
    grid = np.array([list(line) for line in lines])
    spawn = [(int(r), int(c)) for r, c in zip(*np.nonzero(grid == "P"))]
    return grid == "#", grid == "A", spawn


def generate_map(num_agents: int, *, seed: int = 0, size: int | None = None) -> str:
    """An ASCII map for ``num_agents`` agents: diamond patches of 13 apples (about 5 per 8
    agents, as in :data:`DEFAULT_MAP`), each in a random one of a grid of 7 x 7 slots whose
    border lines are spawn points, inside a wall. The side is ``7 * ceil(sqrt(patches)) +
    3`` unless ``size`` fixes it (then as many patches as fit; the strip left over is
    floor). Deterministic given ``seed``.

    Example:
        >>> print(generate_map(1, seed=0), end="")
        ##########
        #PPPPPPPP#
        #P      P#
        #P   A  P#
        #P  AAA P#
        #P AAAAAP#
        #P  AAA P#
        #P   A  P#
        #PPPPPPPP#
        ##########
    """
    if num_agents < 1:
        raise ConfigError(f"generate_map num_agents: {num_agents!r} is out of range; >= 1")
    rng = np.random.default_rng(seed)
    patches = max(1, math.ceil(num_agents * 5 / 8))
    slot = 7
    if size is None:
        g = math.ceil(math.sqrt(patches))
        inner = g * slot + 1
    else:
        if size < slot + 3:
            raise ConfigError(f"generate_map size: {size!r} is out of range; >= {slot + 3}")
        inner = size - 2
        g = (inner - 1) // slot
        patches = min(patches, g * g)
    grid = np.full((inner, inner), " ")
    lines = (np.arange(inner) % slot) == 0
    grid[lines, :] = "P"
    grid[:, lines] = "P"
    grid[g * slot + 1 :, :] = " "  # leftover strip of a fixed size: plain floor
    grid[:, g * slot + 1 :] = " "
    # a slot's inner cells are 1..6 from its border line; a 5-wide diamond centred on 3 or 4
    # stays inside, so the border lines stay clear corridors of spawn points
    for cell in rng.choice(g * g, size=patches, replace=False).tolist():
        jr, jc = rng.integers(0, 2, size=2).tolist()
        r0, c0 = (cell // g) * slot + 3 + jr, (cell % g) * slot + 3 + jc
        for dr in range(-2, 3):
            for dc in range(-2, 3):
                if abs(dr) + abs(dc) <= 2:
                    grid[r0 + dr, c0 + dc] = "A"
    if (grid == "P").sum() < num_agents:  # too few border cells: every floor cell spawns
        grid[grid == " "] = "P"
    full = np.full((inner + 2, inner + 2), "#")
    full[1:-1, 1:-1] = grid
    return "\n".join("".join(row) for row in full) + "\n"


class HarvestWorld(GridWorld):
    """The harvest rules on the gridworld core: eating, tagging, timeouts, respawn and
    regrowth (see the module docstring). :class:`HarvestEnv` wraps it in PettingZoo's API;
    tests and tools may drive it directly.

    Args:
        walls, orchard, spawn: the map, as :func:`parse_map` returns it.
        num_agents, view, seed: as for :class:`~shoal.envs.gridworld.GridWorld`.
        beam: tag beam length in cells.
        timeout: steps a tagged agent stays out.
        tag_cost: what firing a tag costs the tagger.
        regrowth: probabilities by the number of apples nearby.
        lives: tags after which an agent leaves for good (None: never).
    """

    def __init__(
        self,
        walls: np.ndarray,
        orchard: np.ndarray,
        spawn: Sequence[tuple[int, int]],
        *,
        num_agents: int,
        view: int,
        beam: int,
        timeout: int,
        tag_cost: float,
        regrowth: Sequence[float],
        lives: int | None,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            walls,
            num_agents=num_agents,
            view=view,
            layers=("apple",),
            margin=REGROWTH_RADIUS,
            seed=seed,
        )
        if len(spawn) < num_agents:
            raise ConfigError(
                f"harvest num_agents: {num_agents} agents need as many spawn points ('P'); "
                f"the map has {len(spawn)}"
            )
        self.beam, self.timeout, self.tag_cost, self.lives = beam, timeout, tag_cost, lives
        self.regrowth = np.asarray(regrowth, dtype=np.float64)
        self._apple = self.layer_flat("apple")
        self.orchard = np.array([self.flat(r, c) for r, c in zip(*np.nonzero(orchard))], int)
        """Flat indices of the cells where apples grow."""
        offsets = np.array([dr * self.padded_width + dc for dr, dc in _DISK], int)
        self._neighbours = self.orchard[:, None] + offsets[None, :]
        self.spawn = [self.flat(r, c) for r, c in spawn]
        """Flat indices of the spawn points."""
        self.turn = 0
        """Steps taken since reset."""
        self.times_tagged = [0] * num_agents
        self.gone = [False] * num_agents
        """Agents that have left for good (``lives`` reached)."""
        self._back_at: dict[int, int] = {}  # tagged-out agent -> turn at which it acts again

    def reset(self, seed: int | None = None) -> None:
        """Full orchard, agents on distinct random spawn points facing random ways."""
        super().reset(seed)
        self._apple[:] = 0.0
        self._apple[self.orchard] = 1.0
        self.turn = 0
        self.times_tagged = [0] * self.num_agents
        self.gone = [False] * self.num_agents
        self._back_at = {}
        cells = self.rng.choice(len(self.spawn), size=self.num_agents, replace=False)
        for i, s in enumerate(cells.tolist()):
            self._put(i, self.spawn[s])
        self.facing = self.rng.integers(0, 4, size=self.num_agents).tolist()

    def act(self, i: int, action: int) -> float:
        """Stay, move (eating an apple moved onto: +1) or tag."""
        if action == STAY:
            return 0.0
        if action == TAG:
            j = self.cast(i, self.beam)
            if j >= 0:
                self.tag_out(j)
            return -self.tag_cost
        if self.move(i, action - 1):
            f = self._cell[i]
            if self._apple[f] > 0.0:
                self._apple[f] = 0.0
                return 1.0
        return 0.0

    def tag_out(self, j: int) -> None:
        """Take agent ``j`` off the board: for ``timeout`` steps, or for good on its
        ``lives``-th tag."""
        self.remove(j)
        self.times_tagged[j] += 1
        if self.lives is not None and self.times_tagged[j] >= self.lives:
            self.gone[j] = True
        else:
            # tagged during step `turn`: out for steps turn+1 .. turn+timeout
            self._back_at[j] = self.turn + 1 + self.timeout

    def transition(self) -> None:
        """The turn's end: the clock, then respawns of agents whose timeout is over, then
        regrowth."""
        self.turn += 1
        if self._back_at:
            self._respawn()
        self._regrow()

    def _respawn(self) -> None:
        for j in sorted(self._back_at):
            if self._back_at[j] > self.turn:
                continue
            free = [s for s in self.spawn if self._occupant[s] < 0]
            if not free:
                return  # everyone due waits for a free spawn point
            del self._back_at[j]
            self._put(j, free[int(self.rng.integers(len(free)))])

    def neighbour_counts(self, which: np.ndarray | None = None) -> np.ndarray:
        """Apples within the regrowth radius of each orchard cell (in :attr:`orchard`
        order), or of the orchard cells selected by ``which`` (a mask or indices)."""
        nbrs = self._neighbours if which is None else self._neighbours[which]
        apples = np.ascontiguousarray(self._apple)  # gathering from a contiguous copy is 3x faster
        return np.take(apples, nbrs).sum(axis=1, dtype=np.float32).astype(np.intp)

    def _regrow(self) -> None:
        # one uniform per orchard cell every turn, used or not: a cell's draw does not
        # depend on how many other cells are empty, and it is one call instead of two
        u = self.rng.random(len(self.orchard))
        empty = (self._apple[self.orchard] == 0.0) & (self._agent_ch[self.orchard] == 0.0)
        cand = np.flatnonzero(empty)  # counting only where an apple could grow
        if len(cand) == 0:
            return
        counts = self.neighbour_counts(cand)
        p = self.regrowth[np.minimum(counts, len(self.regrowth) - 1)]
        self._apple[self.orchard[cand[u[cand] < p]]] = 1.0

    @property
    def apples(self) -> int:
        """Apples on the map now."""
        return int(self._apple[self.orchard].sum())


class HarvestEnv(ParallelEnv):
    """Commons harvest for ``num_agents`` agents, as a PettingZoo ``ParallelEnv`` (rules,
    observations and actions in the module docstring).

    Args:
        num_agents: K; agents are named ``agent_0 .. agent_{K-1}``.
        layout: ``"default"`` (:data:`DEFAULT_MAP`, up to 12 agents), ``"generated"``
            (:func:`generate_map` for K agents, seeded by ``layout_seed``) or an ASCII map.
        view: side of the egocentric window (odd).
        beam: tag beam length in cells.
        timeout: steps a tagged agent stays out (Perolat et al.: 25).
        tag_cost: reward the tagger pays per tag fired (>= 0).
        regrowth: regrowth probability by the number of apples within radius 2.
        max_turns: steps before the episode is truncated.
        leave_when_tagged: agents tagged ``lives`` times leave the episode for good.
        lives: tags before an agent leaves (only with ``leave_when_tagged``).
        layout_seed: seed of the generated layout.
        render_mode: None, ``"ansi"`` (text) or ``"rgb_array"`` (uint8 image).

    Example:
        >>> env = HarvestEnv(num_agents=3, max_turns=4)
        >>> obs, infos = env.reset(seed=0)
        >>> obs["agent_0"].shape, env.window_shape, int(env.action_space("agent_0").n)
        ((201,), (7, 7, 4), 6)
        >>> while env.agents:
        ...     actions = {a: env.action_space(a).sample() for a in env.agents}
        ...     obs, rewards, terminations, truncations, infos = env.step(actions)
        >>> env.turn, truncations["agent_2"], sorted(infos["agent_2"])
        (4, True, ['tagged_out'])
    """

    metadata = {
        "name": "shoal_harvest_v0",
        "render_modes": ["ansi", "rgb_array"],
        "is_parallelizable": True,
        "render_fps": 10,
    }

    def __init__(
        self,
        num_agents: int = 8,
        *,
        layout: str = "default",
        view: int = 7,
        beam: int = 5,
        timeout: int = 25,
        tag_cost: float = 0.0,
        regrowth: Sequence[float] = REGROWTH,
        max_turns: int = 1000,
        leave_when_tagged: bool = False,
        lives: int = 1,
        layout_seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        checks = {
            "num_agents": (num_agents, num_agents >= 1, ">= 1"),
            "beam": (beam, beam >= 0, ">= 0"),
            "timeout": (timeout, timeout >= 0, ">= 0"),
            "tag_cost": (tag_cost, tag_cost >= 0, ">= 0"),
            "max_turns": (max_turns, max_turns >= 1, ">= 1"),
            "lives": (lives, lives >= 1, ">= 1"),
            "regrowth": (
                tuple(regrowth),
                len(regrowth) >= 1 and all(0.0 <= p <= 1.0 for p in regrowth),
                "a non-empty sequence of probabilities in [0, 1]",
            ),
        }
        for key, (value, ok, allowed) in checks.items():
            if not ok:
                raise ConfigError(f"harvest {key}: {value!r} is out of range; allowed: {allowed}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(
                f"harvest render_mode: {render_mode!r} is not one of None, 'ansi', 'rgb_array'"
            )
        if layout == "default":
            text = DEFAULT_MAP
        elif layout == "generated":
            text = generate_map(num_agents, seed=layout_seed)
        else:
            text = layout
        self.layout = text
        """The ASCII map in use."""
        walls, orchard, spawn = parse_map(text)
        self.world = HarvestWorld(
            walls,
            orchard,
            spawn,
            num_agents=num_agents,
            view=view,
            beam=beam,
            timeout=timeout,
            tag_cost=float(tag_cost),
            regrowth=regrowth,
            lives=lives if leave_when_tagged else None,
        )
        self.max_turns = int(max_turns)
        self.render_mode = render_mode
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._rows = np.arange(num_agents)
        self.window_shape = (view, view, len(OBS_CHANNELS))
        """Shape of the window at the start of each observation (height, width, channels)."""
        self._board = view * view * len(OBS_CHANNELS)
        dim = self._board + 5
        self._obs_space = {
            a: spaces.Box(0.0, 1.0, (dim,), np.float32) for a in self.possible_agents
        }
        self._act_space = {a: spaces.Discrete(len(ACTIONS)) for a in self.possible_agents}
        self.last_obs = np.zeros((num_agents, dim), np.float32)
        """float32 ``(K, obs_dim)``: the latest observations of all agents in
        ``possible_agents`` order, the very array whose rows the obs dicts hold (a fresh one
        every step, never written again), for batched inference without a ``np.stack``."""

    # PettingZoo's tests require the very same space object on every call.
    def observation_space(self, agent: str) -> spaces.Box:
        """The agent's observation space (the same object on every call)."""
        return self._obs_space[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        """The agent's action space (the same object on every call)."""
        return self._act_space[agent]

    @property
    def turn(self) -> int:
        """Steps taken since reset."""
        return self.world.turn

    @property
    def apples(self) -> int:
        """Apples on the map now."""
        return self.world.apples

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode: full orchard, agents on random spawn points. ``seed`` reseeds
        the env's generator (None: its stream goes on). ``options`` is ignored."""
        self.world.reset(seed)
        self.agents = list(self.possible_agents)
        obs, out = self._observe()
        self.last_obs = obs
        return (
            {a: obs[i] for i, a in enumerate(self.possible_agents)},
            {a: {"tagged_out": False} for a in self.possible_agents},
        )

    def step(self, actions: Mapping[str, int]) -> StepResult:
        """Apply the live agents' actions (a missing one means stay; actions of agents that
        have left are ignored) and return PettingZoo's five dicts for the agents that were
        live at the start of the step."""
        if not self.agents:
            raise ShoalError("harvest step: the episode is over; call reset() first")
        index = self._index
        # STAY is 0, what joint_actions gives a missing agent.
        acts = joint_actions("harvest", actions, index, self.max_num_agents, len(ACTIONS)).tolist()
        world = self.world
        rewards = world._step(acts)
        obs, out = self._observe()
        self.last_obs = obs
        truncated = world.turn >= self.max_turns
        gone = world.gone
        live = self.agents
        result = (
            {a: obs[index[a]] for a in live},
            {a: rewards[index[a]] for a in live},
            {a: gone[index[a]] for a in live},
            dict.fromkeys(live, truncated),
            {a: {"tagged_out": out[index[a]]} for a in live},
        )
        self.agents = [] if truncated else [a for a in live if not gone[index[a]]]
        return result

    def _observe(self) -> tuple[np.ndarray, list[bool]]:
        """float32 ``(K, obs_dim)`` observations and who is tagged out."""
        world = self.world
        k, b = self.max_num_agents, self._board
        here = world.present_mask()
        obs = np.empty((k, b + 5), np.float32)
        obs[:, :b] = world.observe().reshape(k, b)
        obs[:, b:] = 0.0
        obs[self._rows, b + np.asarray(world.facing)] = 1.0
        if not here.all():
            obs[~here, b:] = 0.0
            obs[~here, -1] = 1.0
        return obs, (~here).tolist()

    # -- rendering -----------------------------------------------------------------------

    _COLOURS = {"floor": (0, 0, 0), "wall": (110, 110, 110), "apple": (40, 200, 60)}

    def render(self) -> str | np.ndarray | None:
        """The map: text for ``"ansi"`` (``#`` wall, ``A`` apple, ``.`` floor, agents as
        ``0-9a-z`` by index, ``@`` beyond), an RGB uint8 ``(8H, 8W, 3)`` image for
        ``"rgb_array"``, None without a render mode."""
        world = self.world
        walls = world.walls
        apples = world.layer("apple") > 0
        pos = world.positions()
        here = world.present_mask()
        if self.render_mode == "ansi":
            grid = np.where(walls, "#", np.where(apples, "A", "."))
            names = "0123456789abcdefghijklmnopqrstuvwxyz"
            for i in np.flatnonzero(here):
                grid[pos[i, 0], pos[i, 1]] = names[i] if i < len(names) else "@"
            return "\n".join("".join(row) for row in grid)
        if self.render_mode == "rgb_array":
            image = np.zeros((*walls.shape, 3), np.uint8)
            image[walls] = self._COLOURS["wall"]
            image[apples] = self._COLOURS["apple"]
            colours = _agent_colours(self.max_num_agents)
            image[pos[here, 0], pos[here, 1]] = colours[here]
            return np.repeat(np.repeat(image, 8, axis=0), 8, axis=1)
        return None

    def close(self) -> None:
        """Nothing to release."""


def make_harvest(num_agents: int, max_turns: int, **kwargs: Any) -> HarvestEnv:
    """The harvest world the agents runner trains in: the default map up to 12 agents, a
    generated one of the right size beyond; ``kwargs`` (``env.kwargs``) go to
    :class:`HarvestEnv`."""
    kwargs.setdefault("layout", "default" if num_agents <= 12 else "generated")
    return HarvestEnv(num_agents, max_turns=max_turns, **kwargs)


@functools.lru_cache(maxsize=8)
def _agent_colours(k: int) -> np.ndarray:
    """``k`` distinct bright colours, uint8 ``(k, 3)``, hues spaced by the golden ratio."""
    h = (np.arange(k) * 0.618033988749895) % 1.0
    # HSV -> RGB at full saturation and value
    rgb = np.clip(np.abs(((h[:, None] * 6 + np.array([0, 4, 2])) % 6) - 3) - 1, 0, 1)
    return (55 + 200 * rgb).astype(np.uint8)
