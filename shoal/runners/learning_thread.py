"""The agents runner's learning thread (``agents.async_mode='thread'``).

The caller's thread collects epochs and schedules training rounds; this thread takes them
and publishes the weights after each phase (the rounds scheduled at once), so acting
reads a versioned snapshot, never weights mid-step. Failures and hangs reach the caller's
thread: an exception with its cause, a thread that makes no progress for
``agents.step_timeout`` seconds as a :class:`LearningThreadError`. Stopping and
checkpoints take effect between rounds, not at the end of a phase.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import torch

from shoal.agent.stacked import StackedActor
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.weights import LocalWeightStore

if TYPE_CHECKING:
    from shoal.runners.agents import AgentsRunner

__all__ = ["LearningThread", "LearningThreadError"]


class LearningThreadError(RuntimeError):
    """The background learning thread failed or hung; the cause is the ``__cause__``."""


class LearningThread:
    """Takes the training rounds the caller schedules, in a thread of its own.

    Args:
        runner: the agents runner whose ``train_round`` and buffers it uses; its buffers
            are wrapped to be safe for the caller's adds beside this thread's draws.
    """

    def __init__(self, runner: AgentsRunner) -> None:
        self.runner = runner
        self.timeout = runner.cfg.agents.step_timeout
        # One lock for all K buffers: their items share one block, which a stacked draw
        # reads at once. Adds and draws are short; training runs outside it.
        lock = threading.Lock()
        runner.replay_lock = lock
        runner.replays = [LockedReplay(b, lock) for b in runner.group.buffers]
        self.store = LocalWeightStore()
        self.store.publish(runner.weights())
        self._cond = threading.Condition()
        self._scheduled = self._done = 0
        self._pause = 0
        self._busy = self._stop = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._last_progress = time.monotonic()

    def start(self) -> None:
        """Start the thread (with the caller's torch thread count: it is per OS thread)."""
        self._thread = threading.Thread(
            target=self._run, args=(torch.get_num_threads(),), name="shoal-agents-learner"
        )
        self._thread.daemon = True
        self._thread.start()

    def schedule(self, rounds: int) -> None:
        """Hand over ``rounds`` more training rounds."""
        with self._cond:
            if self._done >= self._scheduled:  # idle until now: waiting was not a hang
                self._last_progress = time.monotonic()
            self._scheduled += rounds
            self._cond.notify_all()

    def refresh(self, actor: StackedActor) -> None:
        """Give ``actor`` the last published weights, if newer than its own."""
        got = self.store.pull(actor.version)
        if got is not None:
            actor.params, actor.version = got.state, got.version

    def raise_if_failed(self) -> None:
        """Raise the thread's failure, if it had one, in the caller's thread."""
        if self._error is not None:
            raise LearningThreadError(f"the learning thread failed: {self._error!r}") from (
                self._error
            )

    def _check_progress(self) -> None:
        if time.monotonic() - self._last_progress > self.timeout:
            raise LearningThreadError(
                f"the learning thread made no progress for {self.timeout} s (agents.step_timeout)"
            )

    def wait_idle(self) -> None:
        """Until every scheduled round is done; a thread making no progress for
        ``step_timeout`` seconds fails the run."""
        with self._cond:
            while self._done < self._scheduled and self._error is None:
                self._cond.wait(0.1)
                self._check_progress()
        self.raise_if_failed()

    def paused(self) -> Any:
        """A context in which no training round runs (for a consistent checkpoint)."""
        return _Pause(self)

    def stop(self) -> None:
        """Stop and join the thread (it stops after its current round); safe to call
        twice, and a thread that does not stop is reported once."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.timeout)
            if thread.is_alive():
                raise LearningThreadError(
                    f"the learning thread did not stop within {self.timeout} s"
                )

    def _next_round(self) -> bool:
        """Wait for a round to take (not while paused); False when told to stop."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()
            while not self._stop and (self._done >= self._scheduled or self._pause):
                self._cond.wait(0.1)
            if self._stop:
                return False
            self._busy = True
            return True

    def _run(self, torch_threads: int) -> None:
        torch.set_num_threads(torch_threads)  # per OS thread (see DESIGN.md)
        runner, group, phase_end = self.runner, None, 0
        try:
            while self._next_round():
                if self._done >= phase_end:  # a phase: the rounds scheduled by now
                    phase_end = self._scheduled
                    if runner.cfg.agents.copy_on_train:  # trained on a copy taken now
                        with runner.replay_lock:
                            group = runner.group.copy()
                runner.loss = runner.train_round(group or runner.group)
                if self._done + 1 == phase_end:
                    self.store.publish(runner.weights())
                    group = None
                with self._cond:
                    self._done += 1
                    self._last_progress = time.monotonic()
        except BaseException as e:  # surfaced in the caller's thread
            self._error = e
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class _Pause:
    """Holds the learning thread between rounds; a thread stuck in a round for
    ``step_timeout`` seconds fails the caller instead of hanging it."""

    def __init__(self, thread: LearningThread) -> None:
        self.thread = thread

    def __enter__(self) -> None:
        t = self.thread
        with t._cond:
            t._pause += 1
            try:
                while t._busy and t._error is None and not t._stop:
                    t._cond.wait(0.1)
                    t._check_progress()
            except BaseException:
                t._pause -= 1
                raise

    def __exit__(self, *exc: Any) -> None:
        t = self.thread
        with t._cond:
            t._pause -= 1
            t._cond.notify_all()
