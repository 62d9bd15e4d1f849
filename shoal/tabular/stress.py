"""Load generators for a shared table: many spawned processes hammering it at once.

Used by the stress tests and the throughput benchmark, so both drive the table the same
way. Workers must live in an importable module for the ``spawn`` start method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shoal.agent.qlearning import constant
from shoal.sync.workers import SPAWN
from shoal.tabular.shared_qtable import SharedQTable, TableHandle

__all__ = ["hammer", "run_workers"]


def hammer(handle: TableHandle, keys: np.ndarray, batch: int, start: Any = None) -> float:
    """Attach and apply one Q-learning step per key (target 1.0), ``batch`` keys per call
    (1: the single-key API). Waits on ``start`` (an Event) so all workers begin together.
    Returns the seconds spent updating."""
    table = SharedQTable.attach(handle)
    alpha = constant(0.5)
    targets = np.ones(len(keys))
    if start is not None:
        start.wait()
    t0 = time.perf_counter()
    if batch == 1:
        for k in keys:
            table.update(k, 1.0, alpha)
    else:
        for i in range(0, len(keys), batch):
            table.update_many(keys[i : i + batch], targets[i : i + batch], alpha)
    dt = time.perf_counter() - t0
    table.close()
    return dt


def _run_and_report(queue: Any, fn: Callable[..., float], args: tuple[Any, ...]) -> None:
    try:
        queue.put(("ok", fn(*args)))
    except BaseException as e:  # report instead of leaving the parent waiting
        queue.put(("error", repr(e)))
        raise


def run_workers(
    fn: Callable[..., float], args: Sequence[tuple[Any, ...]], *, timeout: float = 120.0
) -> list[float]:
    """Run ``fn(*a, start_event)`` in one spawned process per ``a``, all released at once;
    return each worker's result. A worker that fails or overruns ``timeout`` raises
    RuntimeError (after every process is stopped: no orphans)."""
    start = SPAWN.Event()
    queue = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_run_and_report, args=(queue, fn, (*a, start)), daemon=True)
        for a in args
    ]
    try:
        for p in procs:
            p.start()
        start.set()
        replies = [queue.get(timeout=timeout) for _ in procs]
        for p in procs:
            p.join(timeout)
    except Exception as e:
        raise RuntimeError(f"a stress worker failed or timed out: {e!r}") from e
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    errors = [value for status, value in replies if status == "error"]
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if errors or bad:
        raise RuntimeError(f"stress workers failed: {errors}, exit codes {bad}")
    return [value for _, value in replies]
