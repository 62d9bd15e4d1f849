"""The ray scheme timed on its own runner, as the threads scheme is: Ray's transport (the
replay actor's add, sample and priority calls, the object store, the actors' initial
priorities, a weight server, every process on the same cores) is not made of the parts a
processes run is, and bounding Ray by those overrated it 1.7x on 2 cores (RESULTS). So its
three modes are timed on a started ray runner, just before its window: the actors alone
(the learner idle), the learner alone (the actors idle) and both flat out; the best mix of
them that keeps the config's updates per env step is its prediction
(:func:`~shoal.bench.model.best_mix`).
"""

from __future__ import annotations

import time
from typing import Any

from shoal.bench.timing import per_update

__all__ = ["Mode", "time_modes"]

Mode = tuple[float, float]
"""(env steps per second, updates per second) while a mode runs."""


def time_modes(runner: Any, step: int, seconds: float) -> tuple[list[Mode], int]:
    """The ray ``runner``'s (started, updating) three modes, about ``seconds`` in all:
    [actors alone, learner alone, both flat out]; and the env steps taken by then. The
    updates the modes' collecting left owed are forgiven, so what runs next starts level."""
    third = seconds / 3
    t0, first = time.perf_counter(), step
    while time.perf_counter() - t0 < third or step == first:
        step += runner.collect(step).steps
    acting = (step - first) / (time.perf_counter() - t0)
    _settle(runner)
    learning = 1.0 / per_update(lambda: runner.learn_steps(1), lambda: runner.updates, third)
    both, step = _both(runner, step, third)
    runner.schedule.owe(step)
    return [(acting, 0.0), (0.0, learning), both], step


def _settle(runner: Any) -> None:
    """Until every actor's call in flight has answered (left for the next collect to
    take): the actors idle meanwhile."""
    calls = list(runner.calls)
    runner.ray.wait(calls, num_returns=len(calls), timeout=runner.cfg.ray.timeout)


def _both(runner: Any, step: int, seconds: float) -> tuple[Mode, int]:
    """Updates back to back, every answered actor call taken between them: (env steps/s,
    updates/s), and the env steps taken by then."""
    first, updates = step, runner.updates
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or runner.updates == updates:
        ready, _ = runner.ray.wait(list(runner.calls), num_returns=1, timeout=0)
        for _ in ready:
            step += runner.collect(step).steps
        runner.learn_steps(1)
    elapsed = time.perf_counter() - t0
    return ((step - first) / elapsed, (runner.updates - updates) / elapsed), step
