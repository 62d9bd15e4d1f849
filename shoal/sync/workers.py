"""Worker processes, started, watched and stopped one way for every scheme that has them
(rollout workers, the agents runner's collector, Sudoku's workers).

- **One start method**, ``spawn`` (:data:`SPAWN`): CUDA and ``fork`` do not mix, and a
  forked child inherits locks other threads of the parent held at the fork.
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

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SPAWN",
    "RestartBudget",
    "WorkerFailure",
    "WorkerProcess",
    "check_not_bootstrapping",
    "child_prologue",
    "stop_processes",
]

SPAWN = multiprocessing.get_context("spawn")
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
