"""The ray scheme timed on its own runner, as the threads scheme is: Ray's transport (the
replay actor's add, sample and priority calls, the object store, the actors' initial
priorities, a weight server, every process on the same cores) is not made of the parts a
processes run is, and bounding Ray by those overrated it 1.7x on 2 cores (RESULTS); the
best mix of its actors alone, learner alone and both flat out still read 1.1-1.35x its
full runs. So on a started ray runner, just before its window, three modes are timed: the
actors alone (the learner idle) and the learner alone (the actors idle), which say which
side bounds it, and its own loop (collect, then the updates owed), its prediction.
"""

from __future__ import annotations

from typing import Any

from shoal.bench.timing import collector, per_update, run_rounds, time_acting

__all__ = ["Mode", "time_modes"]

LOOP_WARM_S = 1.0
"""Seconds of its own loop, untimed, before it is timed: the actors' calls left done by
the modes before are taken (2 actors' 250 steps each, ~15% of a 4-second loop on CartPole)."""

Mode = tuple[float, float]
"""(env steps per second, updates per second) while a mode runs."""


def time_modes(runner: Any, step: int, seconds: float) -> tuple[list[Mode], int]:
    """The ray ``runner``'s (started, updating) three modes, about ``seconds`` in all:
    [actors alone, learner alone, its own loop]; and the env steps taken by then. The
    updates the actors' collecting left owed are forgiven before its loop, which starts
    level."""
    quarter = seconds / 4
    alone = time_acting(collector(runner, step), None, None, quarter)  # all of it as "env"
    step += alone.steps
    acting = 1.0 / alone.env
    _settle(runner)
    learning = 1.0 / per_update(lambda: runner.learn_steps(1), lambda: runner.updates, quarter)
    runner.schedule.owe(step)
    # The calls the actors finished while idle would count as steps taken at once; taken
    # untimed, the loop is timed with its actors mid-call, as a run finds them.
    warm = min(LOOP_WARM_S, seconds / 8)
    step = run_rounds(runner, step, warm)[3]
    steps, updates, elapsed, step = run_rounds(runner, step, seconds / 2 - warm)
    return [(acting, 0.0), (0.0, learning), (steps / elapsed, updates / elapsed)], step


def _settle(runner: Any) -> None:
    """Until every actor's call in flight has answered (left for the next collect to
    take): the actors idle meanwhile."""
    calls = list(runner.calls)
    runner.ray.wait(calls, num_returns=len(calls), timeout=runner.cfg.ray.timeout)
