"""DHC's curriculum over agent count and map size.

Training starts in one stage (agents, map side). Each episode is played in a stage drawn
uniformly from those opened so far; once a stage has ``promote_episodes`` episodes and
succeeded in at least ``promote_success`` of the last that many, it opens the stage with
one agent more and the stage with a map ``size_step`` larger (within the maxima). Stages
stay open: earlier skills keep being practised.

DHC draws every episode's stage uniformly among the open ones; with 24 stages open, the
newest (the ones still to be mastered) then get a few percent of the episodes.
``mapf.frontier`` of the episodes are drawn among the stages not yet promoted, the rest
uniformly among all open ones (0, the default: DHC's uniform draws).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from shoal.mapf.config import MapfConfig

__all__ = ["Curriculum", "Stage", "draw_stage"]

Stage = tuple[int, int]
"""(agents, map side)."""


def draw_stage(
    stages: Sequence[Stage], weights: Sequence[float], rng: np.random.Generator
) -> Stage:
    """A stage for the next episode: ``stages`` drawn with ``weights``, as a
    :class:`Curriculum` gives them (:meth:`Curriculum.weights`); the player draws them
    wherever it runs, from the pair it was sent."""
    return stages[int(rng.choice(len(stages), p=weights))]


class Curriculum:
    """The open stages and their recent results.

    Example:
        >>> from shoal.mapf.config import MapfConfig
        >>> cur = Curriculum(MapfConfig(agents=1, size=10, promote_episodes=2))
        >>> for _ in range(2):
        ...     opened = cur.record((1, 10), success=True)
        >>> cur.stages
        [(1, 10), (2, 10), (1, 15)]
    """

    def __init__(self, cfg: MapfConfig) -> None:
        self.cfg = cfg
        self.stages: list[Stage] = [(cfg.agents, cfg.size)]
        """Open stages, in the order they opened."""
        self.promoted: set[Stage] = set()
        self._recent: dict[Stage, deque[bool]] = {}

    def weights(self) -> list[float]:
        """Each open stage's share of the next episodes (aligned with :attr:`stages`):
        ``frontier`` spread over the stages not yet promoted, the rest over all."""
        frontier = [s not in self.promoted for s in self.stages]
        share = self.cfg.frontier if any(frontier) else 0.0
        n, k = len(self.stages), sum(frontier)
        return [(1 - share) / n + (share / k if f else 0.0) for f in frontier]

    def record(self, stage: Stage, *, success: bool) -> list[Stage]:
        """Count an episode of ``stage``; returns the stages it opened."""
        c = self.cfg
        recent = self._recent.setdefault(stage, deque(maxlen=c.promote_episodes))
        recent.append(bool(success))
        full = len(recent) == c.promote_episodes
        if stage in self.promoted or not full or np.mean(recent) < c.promote_success:
            return []
        self.promoted.add(stage)
        agents, size = stage
        opened = []
        for nxt in ((agents + 1, size), (agents, size + c.size_step)):
            if nxt[0] <= c.max_agents and nxt[1] <= c.max_size and nxt not in self.stages:
                if nxt[0] <= nxt[1] * nxt[1] // 4:  # room for the agents' starts and goals
                    self.stages.append(nxt)
                    opened.append(nxt)
        return opened

    def success(self, stage: Stage) -> float:
        """Success rate of the stage's recent episodes (NaN before any)."""
        recent = self._recent.get(stage)
        return float(np.mean(recent)) if recent else float("nan")

    @property
    def hardest(self) -> Stage:
        """The open stage with the most agents (then the largest map)."""
        return max(self.stages)

    def state_dict(self) -> dict[str, Any]:
        """Open stages, promoted stages, recent results (for checkpoints)."""
        return {
            "stages": [list(s) for s in self.stages],
            "promoted": [list(s) for s in self.promoted],
            "recent": [[list(s), list(r)] for s, r in self._recent.items()],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.stages = [(int(a), int(s)) for a, s in state["stages"]]
        self.promoted = {(int(a), int(s)) for a, s in state["promoted"]}
        self._recent = {
            (int(s[0]), int(s[1])): deque(map(bool, r), maxlen=self.cfg.promote_episodes)
            for s, r in state["recent"]
        }
