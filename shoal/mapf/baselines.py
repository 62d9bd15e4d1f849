"""Baseline policies for MAPF evaluation: what a learned policy has to beat.

:class:`ShortestPathPolicy` is the issue's "independent shortest-path agents": every agent
takes the first step of a shortest path to its own goal as if it were alone on the map, and
the env's move rules (:func:`shoal.envs.mapf.resolve_moves`) settle conflicts: a mover that
is blocked, or in a vertex or swap conflict, stays where it is, so it waits. Nothing steers
an agent round another, so two agents meeting head-on in a corridor wait for ever: that is
the gap a learned, communicating policy should close.
"""

from __future__ import annotations

import numpy as np

from shoal.envs.mapf import MapfEnv
from shoal.mapf.lacam import LacamShield
from shoal.mapf.pibt import PibtShield, distance_scores, distance_scores_at
from shoal.mapf.policy import MapfPolicy

__all__ = [
    "ShortestPathPolicy",
    "distance_scores",
    "distance_scores_at",
    "lacam_policy",
    "pibt_policy",
]


class ShortestPathPolicy:
    """Independent shortest-path agents: each agent's action is
    :func:`~shoal.envs.mapf.shortest_path_action`, one step down its own BFS distance map
    (stay on the goal), ignoring the other agents. Deterministic and stateless; it
    satisfies :class:`shoal.mapf.policy.MapfPolicy`.

    Example:
        >>> env = MapfEnv(grid=np.zeros((1, 3), bool), starts=[(0, 0)], goals=[(0, 2)])
        >>> _ = env.reset(seed=0)
        >>> ShortestPathPolicy().act(env).tolist()  # right
        [4]
    """

    name = "shortest-path"

    def reset(self, env: MapfEnv) -> None:
        """Nothing to reset: the distance maps come from the env each step."""

    def scores(self, env: MapfEnv) -> np.ndarray:
        """float ``(K, 5)``: :func:`distance_scores` (ranked: a shortest path's first
        steps, then stay, then moves away)."""
        return distance_scores(env)

    def scores_at(self, env: MapfEnv, positions: np.ndarray) -> np.ndarray:
        """float ``(K, 5)``: :func:`distance_scores_at` ``positions`` (a planner's
        configuration)."""
        distances = [env.distance(i) for i in range(env.max_num_agents)]
        return distance_scores_at(env.grid, distances, positions)

    def act(self, env: MapfEnv) -> np.ndarray:
        """int ``(K,)``: each agent's first move down its own shortest path (the first of
        up, down, left, right that gets closer; stay on the goal)."""
        return self.scores(env).argmax(axis=1)


def pibt_policy(*, swap: bool = True) -> MapfPolicy:
    """PIBT, the planner: shortest-path rankings through the PIBT shield (equally good moves
    in random order, as PIBT draws them), with the swap of LaCAM*'s PIBT
    (:mod:`shoal.mapf.swap`), named ``pibt``, or without it, the planner as first
    published, named ``pibt-noswap``."""
    return PibtShield(ShortestPathPolicy(), name="pibt" if swap else "pibt-noswap", swap=swap)


def lacam_policy(time_limit: float = 10.0) -> MapfPolicy:
    """LaCAM, the planner: shortest-path rankings as its PIBT steps' preferences, the
    episode planned at its start within ``time_limit`` seconds, named ``lacam``."""
    return LacamShield(ShortestPathPolicy(), time_limit=time_limit, name="lacam")
