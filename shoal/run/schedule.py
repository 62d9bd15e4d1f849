"""The update schedule: how many gradient updates a run owes for the env steps it took.

One rule for every runner, the serial runner's, which the others are tested against: once
``run.learning_starts`` env steps are taken, ``run.gradient_steps`` updates at every env
step that is a multiple of ``run.train_freq`` (steps are counted from 1); or, with
``run.replay_ratio`` set, that many updates per env step after ``learning_starts``, which
says the same thing for any ratio (0.3, not only 1/train_freq). Runners collect
in steps, episodes, epochs or actor calls; each asks :meth:`UpdateSchedule.owe` after a
collection and gets what the rule owes and has not yet handed out. So the updates per env
step (the replay ratio) do not depend on how collection was split, and since what was
handed out is checkpointed, a resumed run owes exactly what the uninterrupted run owes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["UpdateSchedule", "replay_minimum"]

T = TypeVar("T")


def replay_minimum(serves_after: str, batch_size: int) -> int:
    """Items replay holds before it serves an update, for a recipe whose replay serves
    after one ``"item"`` or a whole ``"batch"`` (its traits' ``serves_after``)."""
    return batch_size if serves_after == "batch" else 1


@dataclass
class UpdateSchedule:
    """The serial rule, counted: what is due by an env step, and what was handed out.

    Example:
        >>> s = UpdateSchedule(learning_starts=10, train_freq=4, gradient_steps=2)
        >>> s.owe(9), s.owe(12), s.owe(12), s.owe(20)
        (0, 2, 0, 4)
        >>> s.due(20) == s.granted
        True
        >>> r = UpdateSchedule(10, 4, 2, replay_ratio=0.25)
        >>> r.owe(9), r.owe(13), r.owe(30)
        (0, 1, 4)
    """

    learning_starts: int
    """Env steps before the first update."""
    train_freq: int
    """Env steps between training points."""
    gradient_steps: int
    """Updates at each training point."""
    granted: int = 0
    """Updates handed out so far (:meth:`owe`'s answers added up)."""
    replay_ratio: float | None = None
    """Updates per env step instead of the serial rule (``run.replay_ratio``): after
    ``learning_starts``, ``floor(steps * replay_ratio)`` updates in all."""

    def __post_init__(self) -> None:
        if self.learning_starts < 0 or self.train_freq < 1 or self.gradient_steps < 1:
            raise ValueError(f"not a schedule: {self!r}")
        if self.replay_ratio is not None and not self.replay_ratio > 0:
            raise ValueError(f"not a schedule: {self!r}")

    @classmethod
    def from_config(cls, run: Any) -> UpdateSchedule:
        """The schedule of a config's ``run`` section."""
        ratio = getattr(run, "replay_ratio", None)
        return cls(run.learning_starts, run.train_freq, run.gradient_steps, replay_ratio=ratio)

    @property
    def ratio(self) -> float:
        """Updates per env step once learning has started."""
        if self.replay_ratio is not None:
            return self.replay_ratio
        return self.gradient_steps / self.train_freq

    def due(self, step: int) -> int:
        """Updates the rule owes in all once ``step`` env steps are taken."""
        first = max(self.learning_starts, 1)  # the first step that may be a training point
        if step < first:
            return 0
        if self.replay_ratio is not None:  # the epsilon keeps 0.29 * 100 from flooring to 28
            return math.floor((step - first + 1) * self.replay_ratio + 1e-9)
        points = step // self.train_freq - (first - 1) // self.train_freq
        return points * self.gradient_steps

    def owe(self, step: int, ready: Callable[[], bool] | None = None) -> int:
        """Updates owed now that ``step`` env steps are taken: the rule's updates up to
        ``step`` not handed out before (0 while learning has not started).

        The step alone says what is owed, so a runner that asks only now and then (every
        few epochs) gets the updates of every step since, and a run cut between a
        collection and its learning loses none. One rule for what is owed before replay
        can serve (``ready()`` False: fewer items than :func:`replay_minimum`, or an agent's
        buffer empty): those updates are dropped, handed out and never taken, so the first
        batch of sequences brings no burst of updates; every runner asks this way.
        ``ready`` is asked only when updates are owed (most env steps owe none)."""
        owed = max(0, self.due(step) - self.granted)
        self.granted += owed
        return owed if owed == 0 or ready is None or ready() else 0

    def give_back(self, updates: int) -> None:
        """Updates handed out and not taken (a run cut mid-learning): owed again at the
        next :meth:`owe`, so the checkpoint written after the cut keeps them owed."""
        self.granted -= updates

    def take(self, updates: int, update: Callable[[], T]) -> T | None:
        """Call ``update`` ``updates`` times (updates :meth:`owe` handed out) and return
        its last result (None for none); those a failure or Ctrl-C cuts off are given
        back."""
        taken, last = 0, None
        try:
            for _ in range(updates):
                last = update()
                taken += 1
        except BaseException:
            self.give_back(updates - taken)
            raise
        return last

    def state_dict(self) -> dict[str, int]:
        """What a checkpoint keeps: the updates handed out."""
        return {"granted": self.granted}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.granted = int(state["granted"])
