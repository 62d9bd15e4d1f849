"""How ``shoal bench`` times a runner's parts, whatever the runner: acting with the env's
step and the forward timed inside it, updates back to back, updates in a thread beside
acting, updates beside busy processes. The single-agent parts (:mod:`shoal.bench.parts`)
and a world's (:mod:`shoal.bench.worlds`) are these applied to their own runner.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from shoal.errors import ConfigError

__all__ = [
    "Acting",
    "Clock",
    "beside",
    "built",
    "busy_cores",
    "collector",
    "cores",
    "median_seconds",
    "median_timings",
    "patched",
    "per_update",
    "run_rounds",
    "time_acting",
    "time_rounds",
    "warm_up",
]

FIRST_UPDATE_S = 120.0
"""Longest wait for a runner's first update (workers and Ray actors import torch and
start their envs first); past it the config gives no updates to time, a one-line error."""


def cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Clock:
    """Seconds spent inside a wrapped callable, and its calls."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, timed into this clock."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self.calls += 1

        return timed


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.name`` is ``value`` meanwhile; what it was comes back, whatever happens."""
    had = name in vars(obj)
    old = vars(obj).get(name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


@contextmanager
def built(make: Callable[[], Any]) -> Iterator[Any]:
    """A runner from ``make()``, stopped and closed afterwards (closed even when stopping
    fails)."""
    runner = make()
    try:
        yield runner
    finally:
        try:
            runner.stop()
        finally:
            runner.close()


def warm_up(runner: Any, seconds: float, limit: float = FIRST_UPDATE_S) -> int:
    """Collect and learn until updates have started and ``seconds`` have passed; the env
    steps taken. No update within ``limit`` seconds is a config error."""
    step, t0 = 0, time.perf_counter()
    while True:
        got = runner.collect(step)
        step += got.steps
        runner.learn(step, got.steps)
        elapsed = time.perf_counter() - t0
        if runner.updates > 0 and elapsed >= seconds:
            return step
        if runner.updates == 0 and elapsed >= limit:
            raise ConfigError(
                f"no update in {limit:.0f} s of collecting ({step} env steps; config key "
                f"'run.learning_starts' is {runner.cfg.run.learning_starts}): nothing to time"
            )


def collector(runner: Any, step: int) -> Callable[[int], int]:
    """``collect(_) -> env steps``: the runner's collect, its env step count carried on
    from ``step`` across every timing that calls it."""

    def collect(_: int) -> int:
        nonlocal step
        got = runner.collect(step).steps
        step += got
        return got

    return collect


@dataclass(frozen=True)
class Acting:
    """Acting timed: per env step, the env's own code and the rest (writing, resets,
    bookkeeping); per call, the forward; the env steps taken."""

    env: float
    forward: float
    write: float
    steps: int

    def timings(self) -> dict[str, float]:
        """The :class:`~shoal.bench.parts.Parts` fields this times."""
        return {"env_step": self.env, "forward": self.forward, "write": self.write}


def time_acting(
    collect: Callable[[int], int],
    env: tuple[Any, str] | None,
    forward: tuple[Any, str] | None,
    seconds: float,
) -> Acting:
    """Call ``collect(steps so far) -> steps`` for ``seconds`` (once at least), with the
    methods ``env`` and ``forward`` (``(object, name)``) timed inside it. Without them the
    whole of acting counts as the env's."""
    e, f = Clock(), Clock()
    with _timing(env, e), _timing(forward, f):
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or steps == 0:
            steps += collect(steps)
    total = time.perf_counter() - t0
    if env is None:
        return Acting(total / steps, 0.0, 0.0, steps)
    rest = max(0.0, total - e.seconds - f.seconds)
    return Acting(e.seconds / steps, f.seconds / max(f.calls, 1), rest / steps, steps)


@contextmanager
def _timing(target: tuple[Any, str] | None, clock: Clock) -> Iterator[None]:
    if target is None:
        yield
        return
    obj, name = target
    with patched(obj, name, clock.wrap(getattr(obj, name))):
        yield


def time_rounds(
    collect: Callable[[int], int],
    learn: Callable[[int], Any],
    ratio: float,
    seconds: float,
) -> tuple[float, int]:
    """Alternate ``collect(steps so far) -> steps`` with ``learn(k)``, the ``k`` updates
    owed at ``ratio`` per env step, as a serial run does, for ``seconds`` (one round at
    least): (seconds spent, env steps taken)."""
    steps, owed, t0 = 0, 0.0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or steps == 0:
        got = collect(steps)
        steps += got
        owed += got * ratio
        if owed >= 1:
            learn(int(owed))
            owed -= int(owed)
    _synchronize()
    return time.perf_counter() - t0, steps


def run_rounds(runner: Any, step: int, seconds: float) -> tuple[int, int, float, int]:
    """The runner's own loop, collect then learn what the schedule owes, from env step
    ``step`` for ``seconds`` (one round at least): (env steps, updates, seconds, the env
    step reached)."""
    first, updates, t0 = step, runner.updates, time.perf_counter()
    while time.perf_counter() - t0 < seconds or step == first:
        got = runner.collect(step)
        step += got.steps
        runner.learn(step, got.steps)
    _synchronize()
    elapsed = time.perf_counter() - t0
    return step - first, runner.updates - updates, elapsed, step


def per_update(update: Callable[[], Any], updates: Callable[[], int], seconds: float) -> float:
    """Seconds per update, ``update()`` back to back for ``seconds`` (three updates at
    least), counted by ``updates()`` (a call that took none is not one)."""
    first, t0 = updates(), time.perf_counter()
    while time.perf_counter() - t0 < seconds or updates() - first < 3:
        update()
        if updates() == first and time.perf_counter() - t0 > FIRST_UPDATE_S:
            raise ConfigError("the learner takes no update (its replay holds too little)")
    _synchronize()
    return (time.perf_counter() - t0) / (updates() - first)


def beside(
    update: Callable[[], Any],
    updates: Callable[[], int],
    collect: Callable[[int], int],
    seconds: float,
) -> tuple[float, float]:
    """Updates in a thread beside ``collect`` in this one, as a learner thread runs
    them: (seconds per update, seconds per env step). A failure in the thread is raised
    here."""
    stop, failed = threading.Event(), []

    def learn() -> None:
        try:
            while not stop.is_set():
                update()
        except BaseException as e:  # raised in the caller below
            failed.append(e)

    first = updates()
    thread = threading.Thread(target=learn, name="shoal-bench-learner", daemon=True)
    steps, t0 = 0, time.perf_counter()
    thread.start()
    try:
        while thread.is_alive() and (
            time.perf_counter() - t0 < seconds or steps == 0 or updates() == first
        ):
            steps += collect(steps)
    finally:
        stop.set()
        thread.join()
    if failed:
        raise failed[0]
    elapsed = time.perf_counter() - t0
    return elapsed / max(updates() - first, 1), elapsed / max(steps, 1)


@contextmanager
def busy_cores(seconds: float) -> Iterator[None]:
    """Every core but this one runs a busy process meanwhile (as a processes run's workers
    keep them). Each stops by itself after ``seconds`` + 10 or once this process is gone,
    so none outlives a killed bench."""
    spin = (
        "import os, time\n"
        f"parent, end = os.getppid(), time.monotonic() + {seconds + 10.0}\n"
        "while os.getppid() == parent and time.monotonic() < end:\n"
        "    for _ in range(10000): pass\n"
    )
    busy: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(max(cores() - 1, 1)):
            busy.append(subprocess.Popen([sys.executable, "-c", spin]))
        time.sleep(0.05)  # let them start before the clock does
        yield
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


def median_timings(samples: list[dict[str, float]]) -> dict[str, float]:
    """Each timing's median over ``samples`` (blocks timing the same parts)."""
    return {name: statistics.median(s[name] for s in samples) for name in samples[0]}


def median_seconds(fn: Callable[[], Any], n: int) -> float:
    """Median seconds of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2]


def gpu_name(device: torch.device) -> str | None:
    """The GPU's name where ``device`` is one (None: the CPU)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else None


def _synchronize() -> None:
    """Wait for the GPU's queued work, so its time is counted."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
