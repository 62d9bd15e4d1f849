"""Where trials run: processes of this machine, or tasks of a Ray cluster.

Both take :class:`~shoal.tune.trial.TrialJob`s and give back
:class:`~shoal.tune.trial.TrialOutcome`s; a trial that dies (a crash, a kill) comes back
as a failed outcome, never as an error of the study.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from shoal.run.imports import DriverPath
from shoal.sync.workers import SPAWN, stop_processes
from shoal.tune.trial import TrialJob, TrialOutcome, run_trial

__all__ = ["LocalTrials", "RayTrials"]

STOP_GRACE_S = 60.0
"""Seconds a trial gets to checkpoint after Ctrl-C before it is killed."""


def _trial_process(job: TrialJob, conn: Connection) -> None:
    import os

    # Its own process group: a Ctrl-C at the terminal reaches the study alone, which
    # passes one on to each trial (two would cut a trial's checkpoint short).
    os.setpgrp()
    _stop_with_parent()
    try:
        conn.send(run_trial(job))
    except KeyboardInterrupt:
        pass  # the study was interrupted: the run checkpointed, the study marks it
    finally:
        conn.close()


def _stop_with_parent(period_s: float = 2.0) -> None:
    """A trial whose study died (killed, so it could not stop its trials) stops as if
    preempted: its run checkpoints and ends, and a resumed study runs it again."""
    import os
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="shoal-trial-parent", daemon=True).start()


class LocalTrials:
    """Each trial in a fresh process of this machine (spawned: a run's torch settings, its
    memory and any crash stay with it)."""

    def __init__(self) -> None:
        self._running: dict[int, tuple[Any, Connection]] = {}

    def start(self, job: TrialJob) -> None:
        """Start one trial."""
        ours, theirs = SPAWN.Pipe(duplex=False)
        process = SPAWN.Process(
            target=_trial_process, args=(job, theirs), name=f"shoal-trial-{job.number}"
        )
        # Known before it starts: a stop signal in between still finds it to stop.
        self._running[job.number] = (process, ours)
        process.start()
        theirs.close()

    def running(self) -> int:
        """Trials started and not yet collected."""
        return len(self._running)

    def wait(self, timeout: float | None = None) -> list[TrialOutcome]:
        """The trials that ended (waiting up to ``timeout`` seconds for one)."""
        by_sentinel = {p.sentinel: n for n, (p, _) in self._running.items()}
        done = wait(list(by_sentinel), timeout)
        return [self._collect(by_sentinel[s]) for s in done]

    def _collect(self, number: int) -> TrialOutcome:
        process, conn = self._running.pop(number)
        outcome = None
        if conn.poll():
            try:
                outcome = conn.recv()
            except (EOFError, OSError):
                pass
        process.join()
        conn.close()
        if outcome is None:
            outcome = TrialOutcome(
                number, None, error=f"its process ended with exit code {process.exitcode}"
            )
        return outcome

    def stop(self) -> list[int]:
        """Stop every running trial (Ctrl-C to each, so each checkpoints; killed after
        :data:`STOP_GRACE_S`); the numbers of those stopped."""
        import os

        stopped = list(self._running)
        processes = [process for process, _ in self._running.values()]
        for process in processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGINT)
        stop_processes(processes, STOP_GRACE_S)  # those not started yet are skipped
        for _, conn in self._running.values():
            conn.close()
        self._running.clear()
        return stopped

    def close(self) -> None:
        """Nothing to release (every trial's process is joined when collected)."""


class RayTrials:
    """Each trial a Ray task (one CPU) on the cluster the study joined."""

    def __init__(
        self,
        ray: Any,
        paths: DriverPath,
        *,
        started_ray: bool = False,
        stop: Callable[[], None] | None = None,
    ) -> None:
        self.ray = ray
        self.started_ray = started_ray
        """Whether the study started this Ray (a local one): it shuts it down at the end."""
        self.stop_proxy = stop
        """Stops the study's storage proxy (a gRPC server for trials on a cluster), or
        None: called as the study ends."""
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_ray_trial)
        self._paths = paths
        self._running: dict[Any, int] = {}

    def start(self, job: TrialJob) -> None:
        """Start one trial."""
        self._running[self._remote.remote(job, self._paths)] = job.number

    def running(self) -> int:
        """Trials started and not yet collected."""
        return len(self._running)

    def wait(self, timeout: float | None = None) -> list[TrialOutcome]:
        """The trials that ended (waiting up to ``timeout`` seconds for one)."""
        if not self._running:
            return []
        done, _ = self.ray.wait(list(self._running), num_returns=1, timeout=timeout)
        out = []
        for ref in done:
            number = self._running.pop(ref)
            try:
                out.append(self.ray.get(ref))
            except Exception as e:  # the task's worker died, or Ray lost it
                line = (str(e).strip().splitlines() or [type(e).__name__])[0]
                out.append(TrialOutcome(number, None, error=f"its Ray task failed: {line}"))
        return out

    def stop(self) -> list[int]:
        """Cancel every running trial; the numbers of those stopped."""
        stopped = list(self._running.values())
        for ref in self._running:
            self.ray.cancel(ref, force=True)
        self._running.clear()
        return stopped

    def close(self) -> None:
        """Stop the storage proxy; shut down a Ray the study started, leave a cluster it
        joined running."""
        if self.stop_proxy is not None:
            self.stop_proxy()
            self.stop_proxy = None
        if self.started_ray and self.ray.is_initialized():
            self.ray.shutdown()


def _ray_trial(job: TrialJob, paths: DriverPath) -> TrialOutcome:
    """A trial in a Ray worker: the driver's import paths and directory first (the user's
    own env or network modules, found as the driver finds them)."""
    paths.adopt()
    return run_trial(job)
