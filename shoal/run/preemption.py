"""Preemption: SIGTERM and SIGUSR1 take the Ctrl-C path, so a stopped job keeps its work.

Cluster schedulers stop jobs with SIGTERM (Slurm, Kubernetes, ``docker stop``, systemd),
and Slurm can warn with SIGUSR1 first (``--signal=USR1@90``). Python's default for both is
to die on the spot, losing everything since the last periodic checkpoint. While
:func:`preemption_signals` is active, the first such signal raises :class:`Preempted` in
the main thread, a :class:`KeyboardInterrupt`, so every place that already stops workers,
keeps the partial episode and writes a checkpoint on Ctrl-C does the same for it. Signals
that follow are noted and ignored: a scheduler repeating itself must not cut the
checkpoint being written (it sends SIGKILL when its grace period is over anyway).

The process exits with ``128 + signal number`` (143 for SIGTERM, 138 for SIGUSR1), as a
shell reports a job killed by that signal, after the checkpoint is on disk.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "PREEMPTION_SIGNALS",
    "Preempted",
    "preemption_signals",
    "reclaim_preemption_signals",
    "uninterrupted",
]

_HANDLER: list[Any] = []
"""The active handler (at most one), so that it can be put back after a library took the
signals (``ray.init`` makes the driver exit on SIGTERM)."""

PREEMPTION_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name)
)
"""The signals that stop a run the way Ctrl-C does (SIGUSR1 does not exist on Windows)."""


class Preempted(KeyboardInterrupt):
    """The run was stopped by a signal (``signum``) from the system or a scheduler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The exit code the command line gives: 128 + the signal number."""
        return 128 + self.signum


@contextlib.contextmanager
def preemption_signals() -> Iterator[None]:
    """Raise :class:`Preempted` in the main thread on the first SIGTERM or SIGUSR1 while
    active; later ones are ignored. Outside the main thread (where Python cannot install
    handlers) it does nothing. The previous handlers come back at exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        if _HELD:  # a checkpoint is being written: stop right after it
            _HELD[-1].append(signum)
            return
        raise Preempted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in PREEMPTION_SIGNALS}
    _HANDLER.append(handler)
    try:
        yield
    finally:
        _HANDLER.remove(handler)
        for sig, old in previous.items():
            signal.signal(sig, old)


_HELD: list[list[int]] = []
"""Signals that arrived inside :func:`uninterrupted` blocks (innermost last)."""


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A preemption signal that arrives inside the block stops the run right after it, not
    inside: raised in the middle of ``torch.save``, it left the zip writer half-closed,
    whose own error then replaced the stop (exit 1, a traceback, seen once in a suite
    run). Main thread only, as the handler; Ctrl-C is not held (Python raises it itself)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    _HELD.append(held)
    try:
        yield
    finally:
        _HELD.remove(held)
    if held:
        raise Preempted(held[0])


def reclaim_preemption_signals() -> None:
    """Put the active handler back on SIGTERM and SIGUSR1, after starting something that
    installs its own (a local Ray's driver exits on SIGTERM, checkpoint or not). Does
    nothing outside :func:`preemption_signals` or the main thread."""
    if _HANDLER and threading.current_thread() is threading.main_thread():
        for sig in PREEMPTION_SIGNALS:
            signal.signal(sig, _HANDLER[-1])
