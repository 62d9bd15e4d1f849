"""Self-play opponent pool: snapshots of earlier policies for two-player games.

The learner keeps the pool. Every few batches it adds a snapshot of its online weights
(the oldest is dropped beyond ``size``); before each batch it samples one opponent, which
the workers load and play against. Sampling modes:

* ``latest``: the newest snapshot (classic self-play; can cycle);
* ``uniform``: any snapshot (fictitious-play flavour: keeps old weaknesses covered);
* ``winrate``: snapshots the learner beats least are drawn more, with weight
  ``1 - win_rate + 0.05`` (a floor, so no snapshot is ever starved).

The learner's results against each snapshot (+1, 0, -1 per game) are recorded, which both
feeds ``winrate`` sampling and is reported.

Example:
    >>> import torch
    >>> pool = OpponentPool(size=2, mode="winrate", seed=0)
    >>> a = pool.add({"w": torch.zeros(1)}); b = pool.add({"w": torch.ones(1)})
    >>> pool.record(a, 1.0); pool.record(b, -1.0)
    >>> sorted(pool.win_rates().items())
    [(0, 1.0), (1, 0.0)]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["SAMPLING_MODES", "OpponentPool"]

SAMPLING_MODES = ("latest", "uniform", "winrate")


class OpponentPool:
    """Snapshots of the learner's weights, with per-snapshot game records."""

    def __init__(self, size: int, mode: str = "uniform", seed: int = 0) -> None:
        if size <= 0:
            raise ValueError(f"OpponentPool size: {size!r} is out of range; allowed: > 0")
        if mode not in SAMPLING_MODES:
            raise ValueError(f"OpponentPool mode: {mode!r} is not one of {SAMPLING_MODES}")
        self.size, self.mode = size, mode
        self._rng = np.random.default_rng(seed)
        self._snapshots: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()
        self._games: dict[int, list[float]] = {}
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._snapshots)

    def add(self, state: Mapping[str, torch.Tensor]) -> int:
        """Store a copy of ``state``; returns its snapshot id (ids only go up)."""
        sid = self._next_id
        self._next_id += 1
        self._snapshots[sid] = {k: v.detach().cpu().clone() for k, v in state.items()}
        self._games[sid] = [0.0, 0.0]  # [games, summed results]
        while len(self._snapshots) > self.size:
            old, _ = self._snapshots.popitem(last=False)
            self._games.pop(old, None)
        return sid

    def sample(self) -> tuple[int, dict[str, torch.Tensor]] | None:
        """An opponent (id, weights) by the pool's mode; None while the pool is empty."""
        if not self._snapshots:
            return None
        ids = list(self._snapshots)
        if self.mode == "latest":
            sid = ids[-1]
        elif self.mode == "uniform":
            sid = ids[int(self._rng.integers(len(ids)))]
        else:
            rates = self.win_rates()
            weight = np.array([1.0 - rates.get(i, 0.5) + 0.05 for i in ids])
            sid = ids[int(self._rng.choice(len(ids), p=weight / weight.sum()))]
        return sid, self._snapshots[sid]

    def record(self, snapshot: int, result: float) -> None:
        """One game's result for the learner against ``snapshot`` (+1 win, 0 draw, -1 loss);
        results against snapshots already dropped are ignored."""
        if snapshot in self._games:
            self._games[snapshot][0] += 1
            self._games[snapshot][1] += float(result)

    def win_rates(self) -> dict[int, float]:
        """Per snapshot with games: the learner's score rate in [0, 1] (draw = 0.5)."""
        return {
            sid: 0.5 + 0.5 * total / games
            for sid, (games, total) in self._games.items()
            if games > 0
        }

    def state_dict(self) -> dict[str, Any]:
        """Snapshots, records and the sampling RNG (for checkpoints)."""
        return {
            "snapshots": dict(self._snapshots),
            "games": {k: list(v) for k, v in self._games.items()},
            "next_id": self._next_id,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self._snapshots = OrderedDict(sorted(state["snapshots"].items()))
        self._games = {int(k): list(v) for k, v in state["games"].items()}
        self._next_id = int(state["next_id"])
        self._rng.bit_generator.state = state["rng"]
