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

from shoal.envs.mapf import MapfEnv, shortest_path_action

__all__ = ["ShortestPathPolicy"]


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

    def act(self, env: MapfEnv) -> np.ndarray:
        """int ``(K,)``: each agent's first move down its own shortest path."""
        return np.array(
            [shortest_path_action(env, i) for i in range(env.max_num_agents)], dtype=np.intp
        )
