"""PIBT, priority inheritance with backtracking (Okumura et al., IJCAI 2019 / AIJ 2022), as a
shield: each agent ranks its five moves, and one PIBT step turns the rankings into a joint
move with no vertex or swap conflict.

In a step, agents are visited highest priority first. An agent takes the first cell of its
ranking that is free (on the map, no obstacle, reserved by nobody for the next step, and
no swap with an agent moving into its cell). If another agent stands on that cell and has
no move yet, it inherits the priority and must move out of the way first; if it cannot,
the agent tries its next cell (backtracking), and an agent left with no cell stays.

With rankings by distance to goal (:func:`shoal.mapf.baselines.pibt_policy`) this is PIBT
itself, the planner a learned MAPF policy is measured against; with a learned policy's
Q-values it is the shield of CS-PIBT (Veerapaneni et al., ICAPS 2024): the policy's
preferences, kept as far as conflicts allow, with PIBT's way out of deadlocks. PIBT
guarantees that every agent reaches its goal at some step, not that all stand on theirs
at once: on maps with dead ends it can lose a one-shot instance, two agents that must pass
each other in a corridor standing still. The swap of LaCAM*'s PIBT (:mod:`shoal.mapf.swap`,
on unless ``swap=False``) settles most of those; LaCAM's search on top makes it complete.

Priorities follow PIBT: an agent's priority grows by one every step it is off its goal and
drops back to its fractional part on it; the fraction, its distance to its goal at the
episode's start over the map's size, breaks ties in favour of agents with further to go.
The agent with the lead ranks its moves by distance whatever the policy says
(:meth:`PibtMover.move`), which keeps PIBT's guarantee for any ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shoal.envs.mapf import ACTIONS, MOVES, MapfEnv
from shoal.mapf.swap import NOBODY, Swaps

__all__ = [
    "PibtMover",
    "PibtShield",
    "Priorities",
    "constrained_step",
    "distance_scores",
    "distance_scores_at",
    "pibt_step",
    "rank_moves",
    "start_ties",
]


def pibt_step(
    grid: np.ndarray,
    positions: np.ndarray,
    rankings: np.ndarray,
    priorities: np.ndarray,
    swaps: Swaps | None = None,
) -> np.ndarray:
    """One PIBT step: int ``(K,)`` actions, each agent's highest-ranked move that the
    others' allow, with no two agents on one cell and no two swapping cells.

    Args:
        grid: bool ``(H, W)``, True on obstacles.
        positions: int ``(K, 2)`` distinct free cells.
        rankings: int ``(K, 5)``: each agent's actions (indices of
            :data:`~shoal.envs.mapf.ACTIONS`), most wanted first.
        priorities: ``(K,)``: who chooses first (higher first; ties by index).
        swaps: the episode's :class:`~shoal.mapf.swap.Swaps` for PIBT's swap (None:
            plain PIBT).

    Example:
        >>> grid = np.zeros((1, 3), bool)  # agent 0 wants right, into agent 1's cell
        >>> ranks = np.array([[4, 0, 1, 2, 3], [0, 1, 2, 3, 4]])
        >>> pibt_step(grid, np.array([[0, 0], [0, 1]]), ranks, np.array([1.0, 0.0])).tolist()
        [4, 4]
    """
    got = constrained_step(grid, positions, rankings, priorities, {}, swaps)
    assert got is not None  # without fixed moves a step always exists (everyone stays)
    return got


def constrained_step(
    grid: np.ndarray,
    positions: np.ndarray,
    rankings: np.ndarray,
    priorities: np.ndarray,
    fixed: Mapping[int, int],
    swaps: Swaps | None = None,
) -> np.ndarray | None:
    """:func:`pibt_step` with some agents' actions given (``fixed``: agent -> action, as
    LaCAM's constraints give them); None when those moves are illegal, collide, or leave an
    agent no way out of a cell one of them enters."""
    h, w = grid.shape
    k = len(positions)
    cells = positions[:, 0] * w + positions[:, 1]
    target = positions[:, None, :] + MOVES[rankings]  # (K, 5, 2): each ranked move's cell
    inside = (target >= 0).all(axis=2) & (target[..., 0] < h) & (target[..., 1] < w)
    flat = np.where(inside, target[..., 0] * w + target[..., 1], -1)
    free = inside & ~grid.ravel()[np.maximum(flat, 0)]
    choices = [
        [(int(a), int(c)) for a, c, ok in zip(rankings[i], flat[i], free[i]) if ok]
        for i in range(k)
    ]
    state = _Step(cells.tolist(), choices, swaps)
    for i, action in fixed.items():
        if not state.fix(i, action, {a: c for a, c in choices[i]}):
            return None
    for i in sorted(range(k), key=lambda j: -float(priorities[j])):
        if state.action[i] is None:
            state.push(i)
    if len(set(state.next)) < k:  # a fixed agent's cell was needed by one that had to stay
        return None
    return np.array(state.action, dtype=np.intp)


class _Step:
    """The reservations of one PIBT step."""

    def __init__(
        self, cells: list[int], choices: list[list[tuple[int, int]]], swaps: Swaps | None
    ) -> None:
        self.cells, self.choices, self.swaps = cells, choices, swaps
        self.here = {c: i for i, c in enumerate(cells)}  # who stands on a cell now
        self.taken: dict[int, int] = {}  # who has reserved a cell for the next step
        self.action: list[int | None] = [None] * len(cells)
        self.next: list[int | None] = [None] * len(cells)

    def push(self, i: int) -> bool:
        """Find agent ``i`` a cell, pushing whoever stands there first; False when ``i``
        had to stay. With swaps, an agent that must pass another in a corridor backs out
        and pulls it along (:mod:`shoal.mapf.swap`)."""
        choices, pull = self.choices[i], NOBODY
        if self.swaps is not None and choices:
            pull = self.swaps.partner(i, choices[0][1], self.cells, self.here, self.next)
            if pull != NOBODY:
                choices = self.swaps.backwards(i, choices)
        for rank, (action, cell) in enumerate(choices):
            if not self._free(i, cell):
                continue
            self._take(i, cell, action)
            j = self.here.get(cell, NOBODY)
            if j in (NOBODY, i) or self.next[j] is not None or self.push(j):
                if rank == 0 and pull != NOBODY:
                    self._pull(pull, self.cells[i])
                return True
            # j could not move: it stays on the cell, which is its reservation now
        self._take(i, self.cells[i], STAY)
        return False

    def fix(self, i: int, action: int, cells: dict[int, int]) -> bool:
        """Give agent ``i`` the move ``action`` (``cells``: its legal actions' cells);
        False when it is illegal or conflicts with a move given before."""
        cell = cells.get(action)
        if cell is None or not self._free(i, cell):
            return False
        self._take(i, cell, action)
        return True

    def _pull(self, j: int, cell: int) -> None:
        """Move ``j`` into ``cell`` (the puller's, adjacent to j's) if j has no move yet
        and the cell is free for it."""
        if self.next[j] is None and self._free(j, cell):
            assert self.swaps is not None
            self._take(j, cell, self.swaps.action(self.cells[j], cell))

    def _free(self, i: int, cell: int) -> bool:
        """Whether ``i`` may reserve ``cell``: nobody has, and whoever stands there does
        not move into ``i``'s cell (j pushed i, or chose before: a swap)."""
        if cell in self.taken:
            return False
        j = self.here.get(cell, NOBODY)
        return j in (NOBODY, i) or self.next[j] != self.cells[i]

    def _take(self, i: int, cell: int, action: int) -> None:
        self.taken[cell] = i
        self.next[i], self.action[i] = cell, action


STAY = ACTIONS.index("stay")


@dataclass(frozen=True)
class Priorities:
    """PIBT's priorities of one step: an agent's grows by one every step it is off its
    goal and drops back to its tie-breaker (below 1) on it, so whoever has waited longest
    for its goal chooses first. The PIBT shield steps them along an episode, LaCAM along
    each branch of its search."""

    ties: np.ndarray
    """Each agent's tie-breaker (:func:`start_ties`)."""
    elapsed: np.ndarray
    """Steps each agent has been off its goal."""

    @classmethod
    def start(cls, ties: np.ndarray, off: np.ndarray) -> Priorities:
        """The first step's: one for each agent ``off`` its goal, plus its tie-breaker."""
        return cls(np.asarray(ties, np.float64), np.zeros(len(ties))).step(off)

    def step(self, off: np.ndarray) -> Priorities:
        """The next step's, ``off`` saying who is off its goal now."""
        return Priorities(self.ties, np.where(off, self.elapsed + 1.0, 0.0))

    @property
    def values(self) -> np.ndarray:
        """``(K,)`` floats, higher first."""
        return self.elapsed + self.ties


class PibtMover:
    """PIBT's state over one episode of one world (priorities, the draws that order tied
    moves): a joint move from every agent's scores of its moves. The shield and the
    training player's worlds each hold one."""

    def __init__(self, seed: int = 0, *, swap: bool = True) -> None:
        self.seed, self.swap = seed, swap
        self._swaps: Swaps | None = None
        self._priorities: Priorities | None = None
        self._seen: set[bytes] = set()  # configurations of this episode so far
        self._episodes = 0
        self._rng = np.random.default_rng(seed)

    def reset(self, env: MapfEnv) -> None:
        """A new episode: its own draws (from the seed and the episode's number), and every
        agent's priority from its distance to its goal at the start (a fixed tie-breaker:
        one that followed the distance as agents move would hand the lead back and forth
        between agents in a corridor, and they would shuffle there for ever)."""
        self._rng = np.random.default_rng([self.seed, self._episodes])
        self._episodes += 1
        self._priorities = None
        self._ties = start_ties(env)
        self._seen = set()
        if self.swap:
            distances = [env.distance(i) for i in range(env.max_num_agents)]
            self._swaps = Swaps(env.grid, distances, env.goals)

    def move(self, env: MapfEnv, scores: np.ndarray) -> np.ndarray:
        """int ``(K,)``: the joint move of one PIBT step, ``scores`` (``(K, 5)``, higher
        better) ranking each agent's moves, except the leader's (the agent off its goal
        with the highest priority): it ranks its moves by the distance they leave to its
        goal, ``scores`` ordering moves of equal distance.

        That exception keeps PIBT's guarantee that every agent reaches its goal: the
        leader keeps its lead until it arrives and inheritance clears its way, so it
        arrives, provided it wants a shortest path. A learned ranking can prefer to
        wait: two agents off their goals that both do stand still for ever (seen on 8
        agents in 20 x 20 with a trained policy, PIBT's own ranking solving the
        instance).

        Where the agents stand as they stood before in the episode, every agent ranks by
        distance, equally short moves in random order (PIBT's own ranking) for that step.
        A learned ranking orders equally short moves the same way each time, and with the
        swap that can loop for ever: two agents at a corridor's junction swapped, the one
        then pushed aside chose the corridor over the side cell every time (2 of 16
        MovingAI instances lost, PIBT solving both); PIBT's random order leaves such a
        loop within a few steps."""
        scores = np.asarray(scores, dtype=np.float64)
        key = env.positions.tobytes()
        if key in self._seen:
            scores = distance_scores(env)
        self._seen.add(key)
        noise = self._rng.random(scores.shape)
        rankings = _ranked(scores, noise)
        off = ~env.on_goal()
        if self._priorities is None:
            self._priorities = Priorities.start(self._ties, off)
        else:
            self._priorities = self._priorities.step(off)
        priorities = self._priorities.values
        if off.any():
            lead = int(np.argmax(np.where(off, priorities, -np.inf)))
            dist = distance_scores_at(
                env.grid, [env.distance(lead)], env.positions[lead : lead + 1]
            )
            rankings[lead] = np.lexsort((noise[lead], -scores[lead], -dist[0]))
        return pibt_step(env.grid, env.positions, rankings, priorities, self._swaps)


class PibtShield:
    """``policy``'s preferences (its ``scores``: higher is better), made a collision-free
    joint move by :func:`pibt_step` with PIBT's priorities (module docstring). Satisfies
    :class:`~shoal.mapf.policy.MapfPolicy`; named ``NAME+pibt`` unless ``name`` is given.

    Example:
        >>> env = MapfEnv(grid=np.zeros((1, 3), bool), starts=[(0, 0), (0, 2)],
        ...               goals=[(0, 2), (0, 0)])
        >>> _ = env.reset(seed=0)
        >>> from shoal.mapf.baselines import ShortestPathPolicy
        >>> shield = PibtShield(ShortestPathPolicy(), name="pibt")
        >>> shield.reset(env)
        >>> shield.act(env).tolist()  # head-on in a corridor: one gives way, none collide
        [4, 0]
    """

    def __init__(
        self, policy: Any, *, name: str | None = None, seed: int = 0, swap: bool = True
    ) -> None:
        if not hasattr(policy, "scores"):
            raise TypeError(f"mapf shield: policy {policy.name!r} does not score its moves")
        self.policy = policy
        self.name: str = name or f"{policy.name}+pibt"
        self.env_rules = dict(getattr(policy, "env_rules", {}))
        self.mover = PibtMover(seed, swap=swap)

    def reset(self, env: MapfEnv) -> None:
        """A new episode: the wrapped policy's and PIBT's (:meth:`PibtMover.reset`)."""
        self.policy.reset(env)
        self.mover.reset(env)

    def act(self, env: MapfEnv) -> np.ndarray:
        """The joint move: the policy's rankings through one PIBT step."""
        return self.mover.move(env, np.asarray(self.policy.scores(env), np.float64))


def rank_moves(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int ``(K, 5)``: each agent's actions by descending score, equal scores in random
    order. PIBT draws its ties: with a fixed order, agents whose moves tie (two moves
    equally short, common on open grids) fall into the same pattern step after step, and a
    crowd can cycle for ever (64 agents on random-32-32-10 did, within 1,000 steps; with
    random ties they finished in 55)."""
    scores = np.asarray(scores, dtype=np.float64)
    return _ranked(scores, rng.random(scores.shape))


def _ranked(scores: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Each row's actions by descending score, equal scores by ascending ``noise``."""
    return np.lexsort((noise, -scores), axis=1)


def start_ties(env: MapfEnv) -> np.ndarray:
    """PIBT's tie-breakers between agents' priorities: each agent's distance to its goal
    at the episode's start over the map's size (below 1; further to go, earlier)."""
    h, w = env.grid.shape
    rows, cols = env.positions[:, 0], env.positions[:, 1]
    to_go = [env.distance(i)[rows[i], cols[i]] for i in range(env.max_num_agents)]
    return np.array(to_go, np.float64) / (h * w + 1.0)


def distance_scores(env: MapfEnv) -> np.ndarray:
    """float ``(K, 5)``: :func:`distance_scores_at` the env's current positions."""
    distances = [env.distance(i) for i in range(env.max_num_agents)]
    return distance_scores_at(env.grid, distances, env.positions)


def distance_scores_at(
    grid: np.ndarray, distances: Sequence[np.ndarray], positions: np.ndarray
) -> np.ndarray:
    """float ``(K, 5)``: each agent's score of each action at ``positions``, minus the
    distance to its goal (``distances[i]``, a BFS map) from the cell it leads to (-inf off
    the map or into an obstacle)."""
    h, w = grid.shape
    target = positions[:, None, :] + MOVES[None, :, :]
    inside = (target >= 0).all(axis=2) & (target[..., 0] < h) & (target[..., 1] < w)
    rows, cols = np.clip(target[..., 0], 0, h - 1), np.clip(target[..., 1], 0, w - 1)
    dist = np.stack([distances[i][rows[i], cols[i]] for i in range(len(positions))])
    scores = -dist.astype(np.float64)
    scores[~inside | grid[rows, cols]] = -np.inf
    return scores
