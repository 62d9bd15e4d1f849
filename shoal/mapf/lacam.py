"""LaCAM, lazy constraints addition search (Okumura, AAAI 2023): a complete MAPF search over
joint configurations that uses a PIBT step as its successor generator.

Each search node is a configuration (every agent's cell). Its successors are generated
lazily: the node keeps a queue of constraints (some agents' next moves fixed, in the
node's agent order, breadth first: none, the first agent's five moves, the first two
agents' 25, ...), and each visit takes the next constraint and asks PIBT for a joint move
that honours it (:func:`~shoal.mapf.pibt.constrained_step`). Depth first from the newest
node, the first successors followed are PIBT's own steps, so the search starts as a PIBT
rollout; where PIBT cycles (a configuration seen before) the constraints make it try other
joint moves, and since every node's constraints eventually cover every joint move, the
search finds a solution whenever one exists (given the time). The plan is not optimal.

The rankings PIBT gets come from a scoring function of a configuration: distance to goal
for the planner (:func:`shoal.mapf.baselines.distance_scores_at`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.envs.mapf import ACTIONS, MOVES, MapfEnv
from shoal.mapf.pibt import PibtShield, Priorities, constrained_step, rank_moves, start_ties

__all__ = ["Constraint", "LacamShield", "lacam"]

Scores = Callable[[np.ndarray], np.ndarray]
"""Every agent's score of each action at a configuration (positions ``(K, 2)``)."""


@dataclass(frozen=True)
class Constraint:
    """Moves fixed for the first ``depth`` agents of a node's order (a chain to the root)."""

    parent: Constraint | None = None
    agent: int = -1
    action: int = -1
    depth: int = 0

    def moves(self) -> dict[int, int]:
        """agent -> action for every move the chain fixes."""
        out, node = {}, self
        while node.parent is not None:
            out[node.agent] = node.action
            node = node.parent
        return out


@dataclass
class _Node:
    config: np.ndarray
    parent: _Node | None
    priorities: Priorities
    order: list[int]
    constraints: deque[Constraint] = field(default_factory=lambda: deque([Constraint()]))
    rankings: np.ndarray | None = None
    """Every agent's ranking of its moves here (scored on the node's first visit)."""


def lacam(
    grid: np.ndarray,
    starts: np.ndarray,
    goals: np.ndarray,
    scores: Scores,
    ties: np.ndarray,
    *,
    time_limit: float = 10.0,
    rng: np.random.Generator | None = None,
) -> list[np.ndarray] | None:
    """Configurations from ``starts`` to ``goals`` (both included), one per step, each
    reached from the last by a conflict-free joint move; None when the search ran out of
    ``time_limit`` seconds (or, on an unsolvable instance, of configurations).

    ``scores`` ranks each agent's moves at a configuration (PIBT's preferences); ``ties``
    (``(K,)``, below 1) breaks ties between PIBT's priorities, which grow by one each step an
    agent is off its goal, as in :class:`~shoal.mapf.pibt.PibtShield`; ``rng`` draws the
    order of equally scored moves (:func:`~shoal.mapf.pibt.rank_moves`).
    """
    rng = rng or np.random.default_rng(0)
    deadline = time.monotonic() + time_limit
    goals = np.asarray(goals)
    starts = np.asarray(starts)
    first = _node(starts, None, Priorities.start(ties, _off(starts, goals)))
    explored = {first.config.tobytes(): first}
    stack = [first]
    while stack and time.monotonic() < deadline:
        node = stack[-1]
        if np.array_equal(node.config, goals):
            return _plan(node)
        if not node.constraints:
            stack.pop()
            continue
        constraint = node.constraints.popleft()
        if constraint.depth < len(node.order):
            agent = node.order[constraint.depth]
            for action in range(len(ACTIONS)):
                node.constraints.append(Constraint(constraint, agent, action, constraint.depth + 1))
        if node.rankings is None:  # scored once per node: a learned policy's forward is dear
            node.rankings = rank_moves(scores(node.config), rng)
        moves = constraint.moves()
        actions = constrained_step(grid, node.config, node.rankings, node.priorities.values, moves)
        if actions is None:
            continue
        config = node.config + MOVES[actions]
        key = config.tobytes()
        if key in explored:  # seen: go back there (its constraints may still hold a way)
            stack.append(explored[key])
            continue
        child = _node(config, node, node.priorities.step(_off(config, goals)))
        explored[key] = child
        stack.append(child)
    return None


def _off(config: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Which agents of ``config`` are off their goals."""
    return ~(config == goals).all(axis=1)


def _node(config: np.ndarray, parent: _Node | None, priorities: Priorities) -> _Node:
    """A node of ``config`` with PIBT's ``priorities`` there (the root's started from the
    ties as the PIBT shield starts an episode, each child's one step on from its
    parent's), its agents in descending priority."""
    values = priorities.values
    order = sorted(range(len(config)), key=lambda i: -float(values[i]))
    return _Node(config, parent, priorities, order)


def _plan(node: _Node) -> list[np.ndarray]:
    out = []
    while node is not None:
        out.append(node.config)
        node = node.parent  # type: ignore[assignment]
    return out[::-1]


class LacamShield:
    """LaCAM with ``policy``'s preferences (its ``scores_at`` of a configuration) as the
    PIBT steps' rankings: the whole episode planned at its start within ``time_limit``
    seconds, then played; where the search ran out of time, ``policy`` through the PIBT
    shield instead. Named ``NAME+lacam`` unless ``name`` is given.

    The search visits configurations in no order a policy would see them, so a recurrent
    policy scores each from fresh memories (its ``scores_at`` decides).
    """

    def __init__(
        self, policy: Any, *, time_limit: float = 10.0, name: str | None = None, seed: int = 0
    ) -> None:
        if not hasattr(policy, "scores_at"):
            raise TypeError(f"mapf shield: policy {policy.name!r} does not score configurations")
        self.policy, self.time_limit, self.seed = policy, time_limit, seed
        self.name: str = name or f"{policy.name}+lacam"
        self.env_rules = dict(getattr(policy, "env_rules", {}))
        self._fallback = PibtShield(policy, seed=seed)
        self._plan: list[np.ndarray] | None = None
        self._episodes = 0
        self.planned = 0
        """Episodes whose search found a plan (the others played the PIBT shield)."""

    def reset(self, env: MapfEnv) -> None:
        """Search for the episode's plan from the env's start."""
        self._fallback.reset(env)
        self._plan = lacam(
            env.grid,
            env.positions,
            env.goals,
            lambda config: self.policy.scores_at(env, config),
            start_ties(env),
            time_limit=self.time_limit,
            rng=np.random.default_rng([self.seed, self._episodes]),
        )
        self._episodes += 1
        self.planned += self._plan is not None

    def act(self, env: MapfEnv) -> np.ndarray:
        """The plan's next joint move (the PIBT shield's when there is no plan, or the
        plan is played out)."""
        if self._plan is None or env.steps + 1 >= len(self._plan):
            return self._fallback.act(env)
        delta = self._plan[env.steps + 1] - env.positions
        return (delta[:, None, :] == MOVES[None, :, :]).all(axis=2).argmax(axis=1)
