"""Recurrent acting on a batch of envs (R2D2): an actor that carries one memory per env,
and an acting that cuts each env's steps into sequences for replay.

:class:`RecurrentActor` steps a recurrent network (``apply_params(params, obs, state) ->
(q, state)``) on the whole batch at once, keeps each env's state between steps, forgets it
when that env begins an episode (the batch actor tells it), and remembers the states it
held before the last step: a sequence item stores the state before its first step.
:class:`SequenceActing` feeds every env's steps to its own
:class:`~shoal.replay.sequence.SequenceWriter`. Its checkpoint holds the envs' episodes
(re-played on resume, as every acting's), the actor's memories and the writers' open
steps, so a resumed serial run continues exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from shoal.agent.acting import ActingRequest, BatchActing, Taken
from shoal.agent.actor import Actor
from shoal.agent.batch_actor import Finished, Steps
from shoal.agent.networks import recurrent_q
from shoal.agent.writers import ended_taken
from shoal.replay.items import stack_items
from shoal.replay.sequence import SequenceWriter

__all__ = ["RecurrentActor", "SequenceActing", "RecurrentPolicy"]


def fresh_memories(network: Any, states: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """``states`` with ``rows`` at the network's initial state (episodes beginning there),
    out of place: the states come out of inference mode, where acting runs."""
    if not rows:
        return states
    index = torch.as_tensor(rows, dtype=torch.long, device=states.device)
    fresh = network.initial_state(len(rows)).to(device=states.device, dtype=states.dtype)
    return states.index_copy(0, index, fresh)


class RecurrentActor(Actor):
    """Epsilon-greedy over a recurrent network, one memory per env of a batch (see the
    module docstring); :meth:`greedy` is the memoryless single step (evaluation plays
    :class:`RecurrentPolicy`)."""

    states: torch.Tensor | None = None
    """Each env's memory ``(E, state_size)`` (None: no step yet)."""
    held: np.ndarray | None = None
    """The memories held before the last :meth:`act`."""

    def begin(self, envs: Sequence[int], n: int) -> None:
        """Fresh memory for ``envs`` (of ``n``), which begin episodes."""
        if self.states is None or len(self.states) != n:  # every env's memory is fresh
            self.states = self.network.initial_state(n).to(self.device)
        else:
            self.states = fresh_memories(self.network, self.states, list(envs))

    @torch.inference_mode()
    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
        """Epsilon-greedy actions for every env; each env's memory steps on its observation
        (random actions included)."""
        if self.states is None:
            self.begin(range(len(obs)), len(obs))
        assert self.states is not None
        self.held = self.states.cpu().numpy()
        q, self.states = recurrent_q(self.network, self.params, obs, self.states, self.device)
        actions = q.argmax(dim=-1).cpu().numpy()
        explore = self.rng.random(len(obs)) < epsilons
        if explore.any():
            actions[explore] = self.rng.integers(self.n_actions, size=int(explore.sum()))
        return actions

    def memories(self) -> np.ndarray | None:
        """Each env's memory now, for a checkpoint."""
        return None if self.states is None else self.states.cpu().numpy()

    def load_memories(self, states: np.ndarray | None) -> None:
        """Restore what :meth:`memories` gave."""
        self.states = None if states is None else torch.as_tensor(states, device=self.device)


class RecurrentPolicy:
    """Greedy actions of a recurrent actor's network for evaluation episodes played side
    by side: one memory per evaluation env, fresh when its episode begins
    (:func:`~shoal.run.evaluation.evaluate` calls :meth:`begin`)."""

    def __init__(self, actor: Actor, n: int) -> None:
        self.actor = actor
        self.states = actor.network.initial_state(n).to(actor.device)

    @property
    def n(self) -> int:
        """Envs (rows) it keeps memories for."""
        return len(self.states)

    def begin(self, env: int) -> None:
        """Env ``env`` begins an episode."""
        self.states = fresh_memories(self.actor.network, self.states, [env])

    @torch.inference_mode()
    def __call__(self, obs: np.ndarray, envs: Sequence[int]) -> np.ndarray:
        """Greedy actions for the observations of ``envs``."""
        rows = list(envs)
        index = torch.as_tensor(rows, dtype=torch.long, device=self.states.device)
        actor = self.actor
        q, nxt = recurrent_q(actor.network, actor.params, obs, self.states[index], actor.device)
        self.states = self.states.index_copy(0, index, nxt)
        return q.argmax(dim=-1).cpu().numpy()


class SequenceActing(BatchActing):
    """A recurrent actor's batch of envs, each env's steps cut into sequence items by its
    own writer (``length`` training steps after ``burn_in``, a new item every ``period``
    steps); :class:`~shoal.agent.acting.BatchActing`'s arguments besides. Items carry no
    priorities: replay (or the recipe's initial priorities, on Ray) gives them."""

    def __init__(
        self,
        actor: RecurrentActor,
        envs: Any,
        request: ActingRequest,
        *,
        length: int,
        burn_in: int,
        period: int,
    ) -> None:
        super().__init__(actor, envs, request)
        n = self.batch.num_envs
        self.writers = [SequenceWriter(length, burn_in=burn_in, period=period) for _ in range(n)]
        self._items: list[dict[str, np.ndarray]] = []
        self._ended: list[Finished] = []

    def step(self) -> Steps:
        """One batched forward and one step of every env; completed sequences wait for
        :meth:`take`."""
        got = self.batch.step()
        held = self.actor.held
        for i in got.rows():
            self._items += self.writers[i].append(
                got.obs[i],
                got.actions[i],
                got.rewards[i],
                bool(got.terminated[i]),
                bool(got.truncated[i]),
                held[i],
                next_obs=got.next_obs[i],
            )
        self._ended += got.finished
        self.since_pull += got.count
        return got

    def take(self) -> Taken:
        """The sequences completed since the last take, one array per field, the episodes
        finished since then and their env steps (the steps of running episodes are
        counted as they end, as :class:`~shoal.agent.acting.TransitionActing`'s)."""
        items, self._items = self._items, []
        ended, self._ended = self._ended, []
        return ended_taken(stack_items(items) if items else {}, ended)

    @property
    def ended(self) -> int:
        """Episodes finished and not yet taken (:meth:`take`)."""
        return len(self._ended)

    def flush(self) -> Taken:
        """End every running episode here as a truncation: each writer's open sequences
        bootstrap from the last observation; the next step begins new episodes."""
        for writer in self.writers:
            self._items += writer.flush()
        self.batch.cut()
        return self.take()

    def state_dict(self) -> dict[str, Any]:
        """The envs' episodes, the actor's memories and the writers' open steps."""
        return {
            "acting": self.batch.state_dict(),
            "memories": self.actor.memories(),
            "writers": [w.state_dict() for w in self.writers],
        }

    def load_state_dict(self, state: dict[str, Any]) -> Taken:
        """Restore; episodes that cannot be re-created end here (their sequences
        returned)."""
        for writer, saved in zip(self.writers, state["writers"]):
            writer.load_state_dict(saved)
        if self.batch.load_state_dict(state["acting"]):
            self.actor.load_memories(state["memories"])
            return Taken({})
        self.actor.load_memories(None)
        for writer in self.writers:
            self._items += writer.flush()
        return self.take()
