"""Threads that take rounds of work as the caller schedules them: the learner threads of
the threads runner and the agents runner's learning thread.

The caller (the acting thread) hands over rounds (:meth:`RoundThreads.schedule`) and
waits only when the threads fall too far behind (:meth:`RoundThreads.wait`); a checkpoint
holds them between rounds (:meth:`RoundThreads.paused`). What goes wrong in a thread
reaches the caller: an exception stops every thread and is raised in the caller with its
cause, and with a ``timeout`` a thread that completes no round for that long while rounds
are due is reported as hung instead of hanging the caller. Stopping is safe to call
twice and takes effect between rounds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["RoundThreads", "RoundThreadsError"]


class RoundThreadsError(RuntimeError):
    """A round thread failed, hung or would not stop; a failure's exception is the
    ``__cause__``."""


class RoundThreads:
    """``threads`` threads running ``work(phase_start, phase_end)`` once per round.

    A phase is the rounds scheduled by the time its first round starts: ``phase_start``
    is True on that round, ``phase_end`` on its last (exact with one thread; with several,
    the last round of a phase to start, not to finish). The agents runner publishes its
    weights at a phase's end; the threads runner ignores phases.

    Args:
        work: one round (it runs in one of the threads).
        threads: how many threads take rounds side by side.
        name: the threads' names (``NAME-0``, ...).
        what: how errors name them ("the learning thread").
        error: the exception class raised in the caller (a :class:`RoundThreadsError`).
        timeout: seconds without a completed round, while rounds are due, that count as a
            hang (None: never), and seconds :meth:`stop` waits.
        timeout_key: the config key of ``timeout``, for the hang's message.

    Example:
        >>> done = []
        >>> rounds = RoundThreads(lambda start, end: done.append(end), name="demo")
        >>> rounds.start(); rounds.schedule(3); rounds.wait(behind=0); rounds.stop()
        >>> done
        [False, False, True]
    """

    def __init__(
        self,
        work: Callable[[bool, bool], None],
        *,
        threads: int = 1,
        name: str,
        what: str = "a round thread",
        error: type[RoundThreadsError] = RoundThreadsError,
        timeout: float | None = None,
        timeout_key: str = "",
    ) -> None:
        self.work, self.count, self.name, self.what = work, threads, name, what
        self.error_class, self.timeout, self.timeout_key = error, timeout, timeout_key
        self._cond = threading.Condition()
        self._scheduled = self._started = self._completed = 0
        self._phase_end = 0
        self._running = self._pause = 0
        self._stop = False
        self._error: BaseException | None = None
        self._threads: list[threading.Thread] = []
        self._last_progress = time.monotonic()

    # --- the caller's side -------------------------------------------------------------------
    def start(self) -> None:
        """Start the threads, with the caller's torch thread count (an OpenMP setting per
        OS thread: a new thread starts at the default, and small ops then ran 2.4x
        slower measured on 2 cores)."""
        import torch

        torch_threads = torch.get_num_threads()
        self._stop = False
        self._threads = [
            threading.Thread(
                target=self._run, args=(torch_threads,), name=f"{self.name}-{i}", daemon=True
            )
            for i in range(self.count)
        ]
        for th in self._threads:
            th.start()

    def reset(self, completed: int, scheduled: int) -> None:
        """Count from a resumed run's state: ``completed`` rounds done, ``scheduled`` due
        (those between are taken first)."""
        with self._cond:
            self._started = self._completed = self._phase_end = completed
            self._scheduled = max(completed, scheduled)

    def schedule(self, rounds: int) -> None:
        """Hand over ``rounds`` more rounds."""
        with self._cond:
            if self._completed >= self._scheduled:  # idle until now: waiting was no hang
                self._last_progress = time.monotonic()
            self._scheduled += rounds
            self._cond.notify_all()

    def wait(self, behind: int = 0) -> None:
        """Until at most ``behind`` scheduled rounds are not completed; raises the
        threads' failure or hang."""
        with self._cond:
            while self._scheduled - self._completed > behind and self._error is None:
                self._cond.wait(0.1)
                self._check_progress()
        self.raise_if_failed()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No round runs inside (a consistent checkpoint): rounds in flight finish first."""
        with self._cond:
            self._pause += 1
            try:
                while self._running and self._error is None and not self._stop:
                    self._cond.wait(0.1)
                    self._check_progress()
            except BaseException:
                self._pause -= 1
                raise
        try:
            yield
        finally:
            with self._cond:
                self._pause -= 1
                self._last_progress = time.monotonic()  # held, not hung
                self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Rounds scheduled and not yet completed."""
        with self._cond:
            return self._scheduled - self._completed

    def raise_if_failed(self) -> None:
        """Raise a thread's failure, if one failed, in the caller's thread."""
        if self._error is not None:
            raise self.error_class(f"{self.what} failed: {self._error!r}") from self._error

    def stop(self, timeout: float | None = None) -> None:
        """Stop and join the threads (each after its round in flight); safe to call twice.
        Threads still running after ``timeout`` seconds (default: the hang timeout, else
        30) are reported once."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        threads, self._threads = self._threads, []
        limit = timeout if timeout is not None else (self.timeout or 30.0)
        deadline = time.monotonic() + limit
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
        alive = [th.name for th in threads if th.is_alive()]
        if alive:
            raise self.error_class(f"{self.what} did not stop within {limit} s: {alive}")

    def _check_progress(self) -> None:  # called holding the condition
        if self.timeout is None or self._completed >= self._scheduled and not self._running:
            return
        if time.monotonic() - self._last_progress > self.timeout:
            hint = f" ({self.timeout_key})" if self.timeout_key else ""
            raise self.error_class(f"{self.what} made no progress for {self.timeout} s{hint}")

    # --- the threads' side -------------------------------------------------------------------
    def _next_round(self) -> tuple[bool, bool] | None:
        """Wait for a round (none while paused); its (phase_start, phase_end), or None
        when told to stop."""
        with self._cond:
            while not self._stop and (self._started >= self._scheduled or self._pause):
                self._cond.wait(0.05)
            if self._stop:
                return None
            index = self._started
            self._started += 1
            self._running += 1
            start = index >= self._phase_end
            if start:
                self._phase_end = self._scheduled
            return start, index + 1 == self._phase_end

    def _run(self, torch_threads: int) -> None:
        import torch

        torch.set_num_threads(torch_threads)
        try:
            while (phase := self._next_round()) is not None:
                try:
                    self.work(*phase)
                finally:
                    with self._cond:
                        self._running -= 1
                        self._cond.notify_all()
                with self._cond:
                    self._completed += 1
                    self._last_progress = time.monotonic()
                    self._cond.notify_all()
        except BaseException as e:  # surfaced in the caller's thread
            with self._cond:
                if self._error is None:
                    self._error = e
                self._stop = True
                self._cond.notify_all()
