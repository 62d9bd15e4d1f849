"""Each scheme run for a short measured window: its runner built from the config, started,
warmed up until it updates, then timed over whole collect-and-learn rounds. No run loop,
so nothing is evaluated, checkpointed or written; every process, thread and shared-memory
segment the runner started is stopped with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shoal.bench.parts import bench_runner, replay_ratio
from shoal.bench.ray_modes import time_loop, time_sides
from shoal.bench.timing import run_rounds, warm_up
from shoal.config import Config

__all__ = ["Window", "measure_window"]


@dataclass(frozen=True)
class Window:
    """A scheme's measured pace."""

    scheme: str
    steps_per_s: float
    """Env steps per second over the window."""
    updates_per_s: float
    """Updates per second over the window."""
    seconds: float
    """The window's length (s), whole rounds."""
    startup: float
    """Seconds from building the runner to the window's start: spawning workers or Ray,
    the first updates and a short warm-up after them."""
    ratio: float
    """The config's updates per env step."""
    modes: tuple[tuple[float, float], ...] = ()
    """The runner's own modes timed before the window, each (env steps/s, updates/s):
    the ray scheme's actors alone, learner alone, its own loop
    (:mod:`shoal.bench.ray_modes`; empty: none timed)."""

    @property
    def pace(self) -> float:
        """Env steps per second with their updates done: a scheme whose learning fell
        behind within the window (a learning thread owed rounds) is as fast as its updates
        allow, since the run ends with them."""
        return min(self.steps_per_s, self.updates_per_s / self.ratio)


def measure_window(
    cfg: Config, scheme: str, runner: str, extra: list[str], seconds: float, modes: float = 0.0
) -> Window:
    """Run ``scheme`` (``runner`` with ``extra`` overrides) on ``cfg`` for about
    ``seconds`` after its first updates, and time it; ``modes`` seconds of them (0: none)
    time the ray runner's own modes: its loop before the window, its sides after."""
    from shoal.run.preemption import reclaim_preemption_signals

    t0 = time.perf_counter()
    with bench_runner(cfg, runner, extra) as built:
        built.start()
        reclaim_preemption_signals()  # Ray takes SIGTERM; Ctrl-C must still stop the bench
        step = warm_up(built, min(2.0, seconds / 4))
        startup = time.perf_counter() - t0
        timed: list[tuple[float, float]] = []
        if modes:
            loop, step = time_loop(built, step, modes / 2)
            seconds -= modes
        steps, updates, elapsed, step = run_rounds(built, step, seconds)
        if modes:  # after the window: they leave the runner faster than a run finds it
            timed = [*time_sides(built, step, modes / 2), loop]
        return Window(
            scheme,
            steps / elapsed,
            updates / elapsed,
            elapsed,
            startup,
            replay_ratio(built.cfg),
            tuple(timed),
        )
