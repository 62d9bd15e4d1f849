"""How an acting's steps become replay items: the :class:`Writer` contract, what it gives
(:class:`Taken`) and the n-step stream, one of its two implementations.

An acting steps its envs and hands each step to its one writer; a runner takes the items
from the acting. The two writers differ in when items leave them, and each suits its
runners:

- :class:`NStepStream` (``"stream"``): an n-step window per env, each transition given as
  its window closes; the serial and threads runners put them in replay at once;
- :class:`~shoal.agent.episodes.EpisodeRecorder` (``"episodes"``): each env's episode kept
  whole, its n-step transitions made once it ends; rollout workers and Ray actors send
  them, so an actor that dies mid-episode sends none of it.

The writer is chosen once, where the acting is built (TorchRL's writer, Acme's adder),
so an acting has one ``take`` whichever it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from shoal.agent.batch_actor import Finished, Steps
from shoal.replay.items import concat_items
from shoal.replay.nstep import BatchNStepWriter

__all__ = ["NStepStream", "Taken", "Writer"]


class Taken(NamedTuple):
    """What an acting gives a runner at once (its ``take``, ``flush`` and
    ``load_state_dict``): one record, whether the runner puts the items in replay here
    (serial) or sends them to a learner elsewhere (workers, Ray actors)."""

    items: dict[str, np.ndarray]
    """Items completed, one array per replay field (empty: none)."""
    priorities: np.ndarray | None = None
    """Their initial priorities (None: replay gives them its largest, or the recipe's
    ``initial_priorities`` computes them)."""
    ended: Sequence[Any] = ()
    """The episodes that ended since the last take, as the recipe's tasks read them."""
    steps: int = 0
    """The env steps those episodes took (MAPF: world steps played since the last take)."""


def ended_taken(items: dict[str, np.ndarray], ended: list[Finished]) -> Taken:
    """``items`` (no priorities of their own) and the episodes ``ended`` with their steps."""
    return Taken(items, None, ended, sum(end.length for end in ended))


@runtime_checkable
class Writer(Protocol):
    """Turns a batch actor's steps into replay items (see the module docstring)."""

    @property
    def ended(self) -> int:
        """Episodes ended and not yet taken."""
        ...

    def write(self, steps: Steps) -> None:
        """One step of every env of the batch."""
        ...

    def take(self) -> Taken:
        """The items ready since the last take, and the episodes ended since then."""
        ...

    def flush(self) -> Taken:
        """End every running episode (a run cut mid-episode); what the writer holds that
        can still become items, as :meth:`take` gives it."""
        ...

    def state_dict(self) -> Any:
        """A checkpoint's ``nstep`` entry: the writer's open windows (None: none kept)."""
        ...

    def load_state_dict(self, state: Any) -> None:
        """Restore what :meth:`state_dict` gave."""
        ...


class NStepStream:
    """The ``"stream"`` writer: a :class:`~shoal.replay.nstep.BatchNStepWriter` over the
    batch, whose transitions wait here, as they complete, for :meth:`take`.

    Args:
        num_envs: envs in the batch.
        n, gamma: the n-step return's horizon and discount.
    """

    def __init__(self, num_envs: int, n: int, gamma: float) -> None:
        self.nstep = BatchNStepWriter(num_envs, n, gamma)
        self._items: list[dict[str, np.ndarray]] = []
        self._ended: list[Finished] = []

    @property
    def ended(self) -> int:
        """Episodes ended since the last take (their transitions already given)."""
        return len(self._ended)

    def write(self, steps: Steps) -> None:
        """Feed the step to the n-step windows; keep the transitions it completes."""
        items = steps.write(self.nstep)
        if items:
            self._items.append(items)
        if steps.finished:
            self._ended += steps.finished

    def take(self) -> Taken:
        """The transitions completed since the last take, one array per field, no
        priorities (replay gives new items its largest), and the episodes ended."""
        items, self._items = self._items, []
        out = concat_items(items) if len(items) > 1 else items[0] if items else {}
        if not self._ended:  # nearly every step of the serial runner's, which takes each
            return Taken(out)
        ended, self._ended = self._ended, []
        return ended_taken(out, ended)

    def flush(self) -> Taken:
        """Every open window closed as a truncation (bootstrapping from the last
        observation), after the transitions waiting."""
        closing = self.nstep.flush()
        if closing:
            self._items.append(closing)
        return self.take()

    def state_dict(self) -> dict[str, Any]:
        """The open windows, as plain data."""
        return self.nstep.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore the open windows (None: the checkpoint kept none); the writer copies
        the arrays it keeps."""
        if state is not None:
            self.nstep.load_state_dict(state)
