"""PIBT's swap (Okumura, "Engineering LaCAM*", AAMAS 2024): where two agents must pass each
other in a corridor, the one choosing backs out and pulls the other after it.

Plain PIBT loses such instances for good: an agent that pushes another into a dead end
only drives it deeper, and two agents head-on in a corridor with no way round stand still
while their priorities grow. The swap detects the case before the agent chooses:

- **required**: walking the corridor from the two agents along the pusher's way to its
  goal, the puller cannot step aside (no cell off the line, bar cells where an agent
  sits on its goal in a dead end), and the two want to go past each other;
- **possible**: walking back behind the pusher, there is a branch where they can pass.

Then the pusher ranks its moves furthest from its goal first (it backs out towards the
branch), and if it gets that move the other agent is pulled into the cell it leaves. The
other case the same paper handles ("clear"): an agent about to enter a corridor that a
neighbour behind it has to go through first lets the neighbour in front.

The rules judge distances to goals, never a policy's scores: a learned ranking says what an
agent would like, the swap says when that cannot work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from shoal.envs.mapf import MOVES

__all__ = ["NOBODY", "Swaps"]

NOBODY = -1


class Swaps:
    """The map, goals and distance maps of one episode, for PIBT's swap decisions.

    Args:
        grid: bool ``(H, W)``, True on obstacles.
        distances: one BFS distance map (``(H, W)``) per agent, to its goal.
        goals: int ``(K, 2)``.
    """

    def __init__(
        self, grid: np.ndarray, distances: Sequence[np.ndarray], goals: np.ndarray
    ) -> None:
        h, w = grid.shape
        self.width = w
        # plain lists: these rules read single cells, where numpy's indexing is slow
        self.dist = [np.asarray(d).ravel().tolist() for d in distances]
        self.goal = [int(r) * w + int(c) for r, c in np.asarray(goals).tolist()]
        free = ~grid
        self.neighbours: dict[int, tuple[int, ...]] = {}
        for r, c in np.argwhere(free).tolist():
            around = [(r + dr, c + dc) for dr, dc in MOVES.tolist() if (dr, dc) != (0, 0)]
            self.neighbours[r * w + c] = tuple(
                y * w + x for y, x in around if 0 <= y < h and 0 <= x < w and free[y, x]
            )
        self.limit = h * w  # no walk along a corridor is longer than the map
        self._actions = {(int(dr), int(dc)): a for a, (dr, dc) in enumerate(MOVES.tolist())}

    def partner(
        self, i: int, first: int, cells: Sequence[int], here: Mapping[int, int], decided: Sequence
    ) -> int:
        """The agent ``i`` should pull (NOBODY: no swap) when its first choice is the cell
        ``first``; ``cells`` are all agents' cells, ``here`` who stands on a cell, and
        ``decided[j]`` not None once j has its move."""
        mine = cells[i]
        j = here.get(first, NOBODY)
        if (
            j not in (NOBODY, i)
            and decided[j] is None
            and self._required(i, j, mine, first, here)
            and self._possible(first, mine, here)
        ):
            return j
        if first != mine:  # "clear": a neighbour behind has to go into the corridor first
            for cell in self.neighbours[mine]:
                k = here.get(cell, NOBODY)
                if k == NOBODY or cell == first:
                    continue
                if self._required(k, i, mine, first, here) and self._possible(first, mine, here):
                    return k
        return NOBODY

    def backwards(self, i: int, choices: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``i``'s ``(action, cell)`` choices furthest from its goal first (equal
        distances in reverse of their order): the pusher backs out."""
        d = self.dist[i]
        order = sorted(range(len(choices)), key=lambda k: (-d[choices[k][1]], -k))
        return [choices[k] for k in order]

    def action(self, source: int, target: int) -> int:
        """The action that moves from the cell ``source`` to the adjacent cell ``target``."""
        (r, c), (y, x) = divmod(source, self.width), divmod(target, self.width)
        return self._actions[(y - r, x - c)]

    def _ways(self, cell: int, came: int, here: Mapping[int, int]) -> list[int]:
        """The cells one can step to from ``cell``, bar ``came`` and dead ends where an
        agent sits on its goal (it need not move, so nobody passes there)."""
        out = []
        for u in self.neighbours[cell]:
            if u == came:
                continue
            a = here.get(u, NOBODY)
            if len(self.neighbours[u]) == 1 and a != NOBODY and self.goal[a] == u:
                continue
            out.append(u)
        return out

    def _required(
        self, pusher: int, puller: int, at: int, ahead: int, here: Mapping[int, int]
    ) -> bool:
        """Whether ``pusher`` (on ``at``) and ``puller`` (on ``ahead``) must pass each
        other: along the pusher's way to its goal the puller finds no cell to step aside
        before a dead end, and the puller wants past the pusher (which, at its goal or not,
        still wants where the puller is)."""
        dp, dq = self.dist[pusher], self.dist[puller]
        for _ in range(self.limit):
            if not dp[ahead] < dp[at]:
                break
            ways = self._ways(ahead, at, here)
            if len(ways) >= 2:
                return False  # the puller can step aside
            if not ways:
                break
            at, ahead = ahead, ways[0]
        return dq[at] < dq[ahead] and (dp[at] == 0 or dp[ahead] < dp[at])

    def _possible(self, at: int, behind: int, here: Mapping[int, int]) -> bool:
        """Whether backing out from ``at`` through ``behind`` (and on along the corridor)
        reaches a branch where two agents can pass, before a dead end."""
        origin = at
        for _ in range(self.limit):
            if behind == origin:
                return False  # round a loop: no branch on it
            ways = self._ways(behind, at, here)
            if len(ways) >= 2:
                return True
            if not ways:
                return False
            at, behind = behind, ways[0]
        return False
