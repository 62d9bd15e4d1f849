"""Worker processes, started, watched and stopped one way for every scheme that has them
(rollout workers, the agents runner's collector, Sudoku's workers).

- **One start method**, ``spawn`` (:data:`SPAWN`): CUDA and ``fork`` do not mix, and a
  forked child inherits locks other threads of the parent held at the fork. A spawned child
  (and multiprocessing's resource tracker) is ``python -c ...``, which puts the working
  directory first on its module path until the parent's path replaces it: long enough to
  import ``multiprocessing`` and a dozen stdlib modules from it. Opened from inside a
  received run's folder (``cd RUN && shoal train --resume .``), a ``multiprocessing.py``
  there ran in every worker (measured). Children start with ``PYTHONSAFEPATH`` set
  (Python 3.11's ``-P``), unset again in the child before its target runs.
- **One child prologue** (:func:`child_prologue`): Ctrl-C in a terminal reaches the whole
  process group, so a worker ignores it and the parent stops it; one torch thread, since
  the cores belong to the workers together; and a watch on the parent, because a parent
  killed with SIGKILL cannot stop its workers, which must notice and leave by themselves.
- **One stop with grace** (:func:`stop_processes`): asked first, joined against one
  deadline for all, killed only when they do not finish in time.
- **One restart budget** (:class:`RestartBudget`): a worker that fails again and again
  before doing any work (a broken env, a config it cannot load) would otherwise be
  restarted forever.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SPAWN",
    "RestartBudget",
    "WorkerFailure",
    "WorkerProcess",
    "check_not_bootstrapping",
    "child_prologue",
    "start_resource_tracker",
    "stop_processes",
]

_SAFE_PATH = "PYTHONSAFEPATH"
_SET_HERE = "SHOAL_SET_PYTHONSAFEPATH"
"""Marks a ``PYTHONSAFEPATH`` that shoal set for a child's start (the child unsets both)."""


_STARTING = threading.RLock()
"""Held while a child starts with the variable set: two threads starting children at once
must not unset it under each other."""


@contextlib.contextmanager
def _no_working_directory_on_path() -> Iterator[None]:
    """Python processes started within the block put no working directory on their module
    path (``PYTHONSAFEPATH``; the user's own setting is left as it is)."""
    with _STARTING:
        if os.environ.get(_SAFE_PATH):
            yield
            return
        os.environ[_SAFE_PATH] = os.environ[_SET_HERE] = "1"
        try:
            yield
        finally:
            os.environ.pop(_SAFE_PATH, None)
            os.environ.pop(_SET_HERE, None)


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (if not running) with no working directory
    on its path: it is started by the first shared segment or lock and lives on."""
    from multiprocessing import resource_tracker

    with _no_working_directory_on_path():
        resource_tracker.ensure_running()


class _SpawnProcess(multiprocessing.context.SpawnProcess):
    """A spawned process whose interpreter starts with no working directory on its path."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _no_working_directory_on_path():
            start_resource_tracker()
            return multiprocessing.context.SpawnProcess._Popen(process_obj)

    def run(self) -> None:
        if os.environ.pop(_SET_HERE, None):  # the target's own children start as usual
            os.environ.pop(_SAFE_PATH, None)
        super().run()


class _SpawnContext(multiprocessing.context.SpawnContext):
    """The spawn start method with :class:`_SpawnProcess`; its locks and queues start the
    resource tracker as :func:`start_resource_tracker` does."""

    Process = _SpawnProcess

    def Lock(self) -> Any:  # noqa: N802 - multiprocessing's names
        start_resource_tracker()
        return super().Lock()

    def Event(self) -> Any:  # noqa: N802
        start_resource_tracker()
        return super().Event()

    def Queue(self, maxsize: int = 0) -> Any:  # noqa: N802
        start_resource_tracker()
        return super().Queue(maxsize)


SPAWN = _SpawnContext()
"""The start method of every worker process shoal starts."""


@dataclass(frozen=True)
class WorkerFailure:
    """What a worker sends its parent when it fails: the exception's own one-line message
    and the traceback (a bare EOF on the pipe would say only that it died)."""

    message: str
    traceback: str

    @classmethod
    def of(cls, error: BaseException) -> WorkerFailure:
        """The failure of ``error``, being handled now."""
        from shoal.errors import first_line

        return cls(first_line(error), traceback.format_exc())


def check_not_bootstrapping(what: str) -> None:
    """Refuse ``what`` in a spawned worker that is importing the user's script (a script
    with no ``if __name__ == "__main__":`` guard runs its training again in every worker):
    the worker exits with this one line instead of making run directories of its own."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        print(
            f"shoal: {what} was called while a worker process imported your script; put it "
            'under `if __name__ == "__main__":` (worker processes import the main script)',
            file=sys.stderr,
        )
        raise SystemExit(2)


def child_prologue(torch_threads: int | None = 1) -> Callable[[], bool]:
    """What a worker process does first: ignore Ctrl-C, SIGTERM and SIGUSR1 (the parent
    stops it), set its torch
    threads (None: leave torch unimported), and return a function telling whether the
    process that started it is still its parent."""
    # SIGTERM and SIGUSR1 too: a scheduler signals the whole job, and the parent, which
    # checkpoints on them, stops its workers in order (SIGKILL still ends a worker).
    for name in ("SIGINT", "SIGTERM", "SIGUSR1"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    if torch_threads is not None:
        import torch

        torch.set_num_threads(torch_threads)
    parent = os.getppid()
    return lambda: os.getppid() == parent


def stop_processes(procs: Sequence[Any], grace: float = 0.0) -> list[Any]:
    """Join every started process within ``grace`` seconds in all (0: none), then kill and
    join those still running; returns the killed ones. Safe on processes already gone."""
    procs = [p for p in procs if p.pid is not None]  # a failed start never ran
    deadline = time.monotonic() + grace
    if grace > 0:
        for p in procs:
            p.join(timeout=max(deadline - time.monotonic(), 0.05))
    killed = [p for p in procs if p.is_alive()]
    for p in killed:
        p.kill()
    for p in procs:
        p.join(5.0)
    return killed


class WorkerProcess:
    """A spawned worker process and the parent's end of a pipe to it.

    ``target`` runs as ``target(*args, conn)`` in the child with the other end; the parent
    closes its copy of that end, so EOF on :attr:`conn` means the child is gone.

    Args:
        target: the child's main function (picklable: a module-level function).
        args: its arguments before the connection.
        name: the process's name.
        duplex: a two-way pipe (else the child only sends).
    """

    def __init__(
        self, target: Callable[..., Any], args: tuple[Any, ...], *, name: str, duplex: bool = False
    ) -> None:
        self.conn, child = SPAWN.Pipe(duplex=duplex)
        self.proc = SPAWN.Process(target=target, args=(*args, child), name=name, daemon=True)
        try:
            self.proc.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()

    def alive(self) -> bool:
        """Whether the process is running."""
        return self.proc.is_alive()

    def why(self) -> str:
        """How the process stands, for an error message."""
        code = self.proc.exitcode
        return "still running" if code is None else f"exit code {code}"

    def stop(self, grace: float = 0.0, ask: Any = None) -> bool:
        """Send ``ask`` (if given) and allow ``grace`` seconds to exit, then kill; close
        the pipe. Returns whether it had to be killed; safe to call twice."""
        if ask is not None:
            try:
                self.conn.send(ask)
            except (OSError, ValueError):  # gone already, or the pipe is closed
                pass
        killed = stop_processes([self.proc], grace)
        self.conn.close()
        return bool(killed)


class RestartBudget:
    """Failures in a row a worker is allowed before its next one stops the run.

    Example:
        >>> budget = RestartBudget(3)
        >>> budget.fail(), budget.fail(), budget.fail()
        (True, True, False)
        >>> budget.succeeded(); budget.fail(), budget.restarts
        (True, 3)
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """Failures in a row that stop the run."""
        self.in_a_row = 0
        """Failures since the worker last did its work."""
        self.restarts = 0
        """Restarts granted in all."""

    def fail(self) -> bool:
        """Count a failure; True: restart the worker, False: the limit is reached."""
        self.in_a_row += 1
        if self.in_a_row >= self.limit:
            return False
        self.restarts += 1
        return True

    def succeeded(self) -> None:
        """The worker did its work (an episode, an epoch): the count in a row restarts."""
        self.in_a_row = 0
