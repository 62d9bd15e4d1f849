"""The ray scheme timed on its own runner, as the threads scheme is: Ray's transport (the
replay actor's add, sample and priority calls, the object store, the actors' initial
priorities, a weight server, every process on the same cores) is not made of the parts a
processes run is, and bounding Ray by those overrated it 1.7x on 2 cores (RESULTS); the
best mix of its actors alone, learner alone and both flat out still read 1.1-1.35x its
full runs. So on a started ray runner three modes are timed: its own loop (collect, then
the updates owed), its prediction, just before its window; then, after the window, the
actors alone (the learner idle) and the learner alone (the actors idle), which say which
side bounds it. They come last because they leave the runner faster than a run finds it
for a while after (the slow env: its loop 1,008 steps/s and its window 915 after them,
650-750 without them, full runs 662-758).
"""

from __future__ import annotations

from typing import Any

from shoal.bench.timing import collector, per_update, run_rounds, time_acting

__all__ = ["Mode", "time_loop", "time_sides"]

Mode = tuple[float, float]
"""(env steps per second, updates per second) while a mode runs."""


def time_loop(runner: Any, step: int, seconds: float) -> tuple[Mode, int]:
    """The ray ``runner``'s (started, updating) own loop for about ``seconds``; and the
    env steps taken by then."""
    steps, updates, elapsed, step = run_rounds(runner, step, seconds)
    return (steps / elapsed, updates / elapsed), step


def time_sides(runner: Any, step: int, seconds: float) -> list[Mode]:
    """The ray ``runner``'s actors alone, then its learner alone, about ``seconds`` in
    all (the last timing on the runner: neither leaves it as a run finds it)."""
    alone = time_acting(collector(runner, step), None, None, seconds / 2)  # all as "env"
    _settle(runner)
    learning = per_update(lambda: runner.learn_steps(1), lambda: runner.updates, seconds / 2)
    return [(1.0 / alone.env, 0.0), (0.0, 1.0 / learning)]


def _settle(runner: Any) -> None:
    """Until every actor's call in flight has answered (left for the next collect to
    take): the actors idle meanwhile."""
    calls = list(runner.calls)
    runner.ray.wait(calls, num_returns=len(calls), timeout=runner.cfg.ray.timeout)
