"""How the agents runner's learning runs beside collection: one component per mode.

- :class:`InlineLearning` (``agents.async_learning = false``): the caller plays an epoch,
  then takes the rounds it owes itself.
- :class:`ThreadLearning` (``async_mode = "thread"``): a thread of its own takes the
  rounds while the caller plays on; acting reads a versioned snapshot of the weights,
  never weights mid-step.
- :class:`CollectorLearning` (``async_mode = "process"``): a collector process plays the
  next epoch while the caller takes the rounds.

Each is a :class:`Learning`: the runner wires one, chosen once by :func:`make_learning`,
and never asks which it has; what differs between the modes lives in its component.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from shoal.config import Config
from shoal.replay import StackedReplay
from shoal.run.schedule import UpdateSchedule
from shoal.runners.agents.collector import CollectorError, CollectorProcess
from shoal.runners.agents.epochs import EpochPlayer, EpochResult, epoch_seed
from shoal.runners.agents.layout import Layout
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rounds import RoundThreads, RoundThreadsError
from shoal.sync.weights import LocalWeightStore
from shoal.sync.workers import RestartBudget

__all__ = [
    "MAX_COLLECTOR_FAILURES",
    "CollectorLearning",
    "InlineLearning",
    "Learning",
    "LearningParts",
    "LearningThreadError",
    "ThreadLearning",
    "learning_kind",
    "make_learning",
]

MAX_COLLECTOR_FAILURES = 3
"""Collector processes lost in a row (died or silent) before the run fails."""

Store = Callable[[EpochResult], None]
"""What the runner does with a played epoch: count it, keep its transitions."""


class LearningThreadError(RoundThreadsError):
    """The background learning thread failed or hung; the cause is the ``__cause__``."""


@dataclass(frozen=True)
class LearningParts:
    """The runner's parts a learning component works with; it owns none of them."""

    cfg: Config
    layout: Layout
    """The K learners: their weights and update count."""
    player: EpochPlayer
    """Plays epochs in the caller's process; its actor is the one that acts."""
    group: StackedReplay
    """The K buffers, unlocked (rounds draw from them)."""
    schedule: UpdateSchedule
    epsilon: Callable[[int], float]
    """Exploration at a turn (an epoch's: at its first turn)."""
    train: Callable[[StackedReplay], float]
    """One round: every agent one update on a batch from its own buffer; the mean loss
    (the runner keeps the latest for its log rows)."""


class Learning(Protocol):
    """One way of learning beside collection, as the agents runner drives it."""

    spawns: ClassVar[bool]
    """Whether it starts processes that build networks (they import the user's code)."""
    lock: AbstractContextManager[Any]
    """Held around every draw from the buffers and every add to them."""
    replays: list[Any]
    """The K buffers as collection adds to them and a checkpoint keeps them."""

    def start(self) -> None:
        """Start its thread or process (nothing when it has none)."""
        ...

    def stop(self) -> None:
        """Stop its thread or process; safe to call twice."""
        ...

    def play(self, step: int, epoch: int, store: Store) -> EpochResult:
        """Epoch ``epoch`` (its first turn is ``step``), handed to ``store``."""
        ...

    def schedule(self, rounds: int) -> None:
        """Take ``rounds`` rounds owed by the update schedule, or hand them over."""
        ...

    def wait(self) -> None:
        """Until every round handed over is taken (the run's end)."""
        ...

    def paused(self) -> AbstractContextManager[Any]:
        """No round runs inside (a consistent checkpoint)."""
        ...

    def sync_actor(self) -> None:
        """Have the player's actor act with the latest weights it may read."""
        ...

    @property
    def pending(self) -> int:
        """Rounds handed over and not yet taken (a checkpoint keeps them)."""
        ...

    def resume(self, pending: int) -> None:
        """Take the rounds a checkpoint had pending first (a resumed run)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Its own columns of each tick row."""
        ...


class InlineLearning:
    """Rounds taken in the caller's thread after the epoch it played, on live weights."""

    spawns: ClassVar[bool] = False

    def __init__(self, parts: LearningParts) -> None:
        self.parts = parts
        self.lock: AbstractContextManager[Any] = contextlib.nullcontext()
        self.replays: list[Any] = list(parts.group.buffers)

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""

    def play(self, step: int, epoch: int, store: Store) -> EpochResult:
        """The epoch played here, with the live weights."""
        self.sync_actor()
        result = play_here(self.parts, step, epoch, None)
        store(result)
        return result

    def schedule(self, rounds: int) -> None:
        """The rounds taken now; those a failure or Ctrl-C cuts off go back to the
        schedule."""
        p = self.parts
        p.schedule.take(rounds, lambda: p.train(p.group))

    def wait(self) -> None:
        """Every round was taken when it was owed."""

    def paused(self) -> AbstractContextManager[Any]:
        """No round runs beside a checkpoint: nothing to hold."""
        return contextlib.nullcontext()

    def sync_actor(self) -> None:
        """The actor reads the learners' live weights."""
        self.parts.player.actor.params = self.parts.layout.weights()

    @property
    def pending(self) -> int:
        """None: rounds are taken when owed."""
        return 0

    def resume(self, pending: int) -> None:
        """Rounds a learning thread had pending when the checkpoint was written, taken
        here (the run resumed without the thread)."""
        p = self.parts
        for _ in range(pending):
            p.train(p.group)

    def metrics(self) -> dict[str, float]:
        """None of its own."""
        return {}


def play_here(
    parts: LearningParts, step: int, epoch: int, each_turn: Callable[[], None] | None
) -> EpochResult:
    """Epoch ``epoch`` played in the caller's thread, storing every agent's transitions;
    ``each_turn`` runs after every turn."""
    epsilon, seed = parts.epsilon(step), epoch_seed(parts.cfg, epoch)
    return parts.player.play(epsilon, seed, store=True, each_turn=each_turn)


class ThreadLearning:
    """Rounds taken in a thread of their own, one per scheduled round. Acting reads the
    weights published after each phase (the rounds scheduled at once), a versioned
    snapshot, never weights mid-step. One lock guards all K buffers: their items share
    one block, which a stacked draw reads at once; adds and draws are short, and training
    runs outside it."""

    spawns: ClassVar[bool] = False

    def __init__(self, parts: LearningParts) -> None:
        self.parts = parts
        self.lock: AbstractContextManager[Any] = threading.Lock()
        self.replays: list[Any] = [LockedReplay(b, self.lock) for b in parts.group.buffers]
        self.store = LocalWeightStore()
        self.store.publish(parts.layout.weights())
        self._phase_group: StackedReplay | None = None
        self.rounds = RoundThreads(
            self._round,
            name="shoal-agents-learner",
            what="the learning thread",
            error=LearningThreadError,
            timeout=parts.cfg.agents.step_timeout,
            timeout_key="agents.step_timeout",
        )

    def _round(self, phase_start: bool, phase_end: bool) -> None:
        """One round in the learning thread; with ``copy_on_train`` a phase trains on a copy
        of the buffers taken when it starts (collection never waits for the lock)."""
        p = self.parts
        if phase_start and p.cfg.agents.copy_on_train:
            with self.lock:
                self._phase_group = p.group.copy()
        p.train(self._phase_group or p.group)
        if phase_end:
            self.store.publish(p.layout.weights())
            self._phase_group = None

    def start(self) -> None:
        """Start the learning thread."""
        self.rounds.start()

    def stop(self) -> None:
        """Stop the learning thread (after its round in flight); safe to call twice."""
        self.rounds.stop()

    def play(self, step: int, epoch: int, store: Store) -> EpochResult:
        """The epoch played here with the latest published weights; a failure of the
        learning thread is raised here, before the epoch and after any turn of it."""
        self.rounds.raise_if_failed()
        self.sync_actor()
        result = play_here(self.parts, step, epoch, self.rounds.raise_if_failed)
        store(result)
        return result

    def schedule(self, rounds: int) -> None:
        """The rounds handed to the learning thread."""
        self.rounds.schedule(rounds)

    def wait(self) -> None:
        """Until the learning thread has taken every scheduled round."""
        self.rounds.wait(behind=0)

    def paused(self) -> AbstractContextManager[Any]:
        """The learning thread held between rounds."""
        return self.rounds.paused()

    def sync_actor(self) -> None:
        """The actor takes the latest published weights, if newer than its own."""
        actor = self.parts.player.actor
        got = self.store.pull(actor.version)
        if got is not None:
            actor.params, actor.version = got.state, got.version

    @property
    def pending(self) -> int:
        """Rounds handed to the learning thread and not yet taken."""
        return self.rounds.pending

    def resume(self, pending: int) -> None:
        """The learning thread takes them first."""
        if pending:
            self.rounds.reset(0, pending)

    def metrics(self) -> dict[str, float]:
        """None of its own."""
        return {}


class CollectorLearning(InlineLearning):
    """Rounds taken in the caller's thread while a collector process plays the next epoch.
    Each epoch is asked for as the previous one is stored, with the weights of then; a
    collector that died or went silent is replaced and its epoch replayed from its start
    (nothing of it reached a buffer), up to ``MAX_COLLECTOR_FAILURES`` times in a row."""

    spawns: ClassVar[bool] = True

    def __init__(self, parts: LearningParts) -> None:
        super().__init__(parts)
        self.collector = CollectorProcess(parts.cfg)
        self.restarts = 0
        """Collector processes replaced so far (a tick row's ``collector_restarts``)."""

    def start(self) -> None:
        """Start the collector process."""
        self.collector.start()

    def stop(self) -> None:
        """Stop the collector process; safe to call twice."""
        self.collector.stop()

    def play(self, step: int, epoch: int, store: Store) -> EpochResult:
        """The collector's epoch (asked for when the previous one was stored, so it played
        while the rounds were taken); the next one is asked for once this is stored."""
        result = self._collected(step, epoch)
        store(result)
        self._ask(step + result.turns, epoch + 1)
        return result

    def _ask(self, step: int, epoch: int, *, rngs: bool = False) -> None:
        """Have the collector play epoch ``epoch`` (its first turn is ``step``) with the
        current weights; ``rngs``: the agents' exploration streams with it."""
        p, actor = self.parts, self.parts.player.actor
        states = actor.rng_states() if rngs else None
        seed = epoch_seed(p.cfg, epoch)
        self.collector.play(p.epsilon(step), seed, p.layout.weights(), p.layout.updates, states)

    def _collected(self, step: int, epoch: int) -> EpochResult:
        """The collector's epoch; its exploration streams become the checkpointed ones."""
        budget = RestartBudget(MAX_COLLECTOR_FAILURES)
        while True:
            if not self.collector.pending:  # the first epoch of a start, a resume or a restart
                self._ask(step, epoch, rngs=True)
            try:
                result, rng_states = self.collector.result(self.parts.cfg.agents.step_timeout)
                break
            except CollectorError as e:
                if not e.lost or not budget.fail():
                    raise
                print(f"shoal: restarting the collector process: {e}", file=sys.stderr)
                self.collector.stop()
                self.collector.start()
                self.restarts += 1
        self.parts.player.actor.set_rng_states(rng_states)
        return result

    def metrics(self) -> dict[str, float]:
        """Collector processes replaced so far."""
        return {"collector_restarts": self.restarts}


def learning_kind(cfg: Config) -> type[Learning]:
    """The component ``agents.async_learning`` and ``agents.async_mode`` ask for."""
    a = cfg.agents
    if not a.async_learning:
        return InlineLearning
    return {"thread": ThreadLearning, "process": CollectorLearning}[a.async_mode]


def make_learning(parts: LearningParts) -> Learning:
    """The learning component the config asks for, on the runner's parts."""
    return learning_kind(parts.cfg)(parts)
