"""The parts a run is made of, timed on the user's env and config: acting (env step and
batched forward), writing to replay, the learner's update, weight publish and pull, and a
worker's message. Every scheme is these parts wired through a different transport, so
their times bound what each scheme can reach (:mod:`shoal.bench.model`).

The parts are timed on a serial runner built from the config (its own envs, network,
replay and learner), so they are the user's, not a stand-in's. Contention is timed too,
because it decides the schemes: the update beside an acting thread (one process, the GIL
between them) and beside busy processes (the cores shared).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from shoal.config import Config, config_to_dict, load_config

__all__ = [
    "Clock",
    "Parts",
    "bench_config",
    "busy_cores",
    "cores",
    "measure_parts",
    "median_seconds",
    "replay_ratio",
    "warm_up",
]


@dataclass(frozen=True)
class Parts:
    """Seconds each part takes on this machine (per env step, per update, or per call)."""

    cores: int
    """CPU cores this process may use."""
    gpu: str | None
    """The GPU the learner ran on (None: CPU)."""
    num_envs: int
    """Envs per actor (``env.num_envs``): one batched forward steps them all."""
    batch_size: int
    """Samples per update (``dqn.batch_size``)."""
    ratio: float
    """Updates per env step (``run.replay_ratio``, or gradient_steps / train_freq)."""
    env_step: float
    """One env's step (s), the env's own code."""
    forward: float
    """One batched forward with exploration, for ``num_envs`` envs (s)."""
    write: float
    """Per env step (s): n-step writing, replay add and the collect's bookkeeping."""
    update: float
    """One update (s): replay sample, loss, backward, optimizer, priorities."""
    update_beside_acting: float
    """One update while an acting thread of the same process runs (s): what the GIL and
    the shared cores leave of it."""
    acting_beside_update: float
    """Per env step (s), acting and writing while an update thread runs."""
    update_beside_processes: float
    """One update while ``cores`` - 1 other processes run flat out (s)."""
    publish: float
    """Copying the weights into shared memory (s)."""
    pull: float
    """Copying them out in a worker (s)."""
    add: float
    """Per env step (s): adding a worker's block of transitions to replay in one write
    (where the processes runner's learner writes; the n-step writing is the worker's)."""
    message: float
    """Per env step (s): pickling and unpickling what one env step adds to replay, the
    cost of sending it from a worker process."""
    weight_bytes: int
    """Bytes of the network's weights."""
    update_cpu: float | None = None
    """One update on this machine's CPU (s), timed where the learner runs on a GPU: what
    the GPU changes (None: the learner is on the CPU)."""

    @property
    def acting(self) -> float:
        """Per env step (s): the env and its share of the batched forward."""
        return self.env_step + self.forward / self.num_envs

    @property
    def serial_step(self) -> float:
        """Per env step (s) of the serial runner: acting, writing and the updates it owes."""
        return self.acting + self.write + self.ratio * self.update


def cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def replay_ratio(cfg: Config) -> float:
    """Updates per env step the config asks for, once learning has started."""
    from shoal.run.schedule import UpdateSchedule

    return UpdateSchedule.from_config(cfg.run).ratio


class Clock:
    """Seconds spent inside a wrapped callable, and its calls."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self.calls += 1

        return timed


def bench_config(cfg: Config, runner: str, extra: list[str] | None = None) -> Config:
    """The config for a measurement: ``runner``, no progress bar, learning from the
    first batch's worth of steps (the measurement wants updates, not the warm-up)."""
    starts = min(cfg.run.learning_starts, max(cfg.dqn.batch_size, 256))
    overrides = [
        f"run.runner='{runner}'",
        "run.progress=false",
        f"run.learning_starts={starts}",
        *(extra or []),
    ]
    return load_config(None, overrides, values=config_to_dict(cfg))


@contextmanager
def serial_runner(cfg: Config) -> Iterator[Any]:
    """A serial runner on ``cfg``, closed afterwards."""
    from shoal.runners.serial import SerialRunner

    runner = SerialRunner(bench_config(cfg, "serial"))
    try:
        yield runner
    finally:
        runner.stop()
        runner.close()


def warm_up(runner: Any, seconds: float) -> int:
    """Collect and learn until updates have started and ``seconds`` have passed (or
    four times that without an update: an env whose episodes never end a batch); the
    env steps taken."""
    step, t0 = 0, time.perf_counter()
    while True:
        got = runner.collect(step)
        step += got.steps
        runner.learn(step, got.steps)
        elapsed = time.perf_counter() - t0
        if (runner.updates > 0 and elapsed >= seconds) or elapsed >= 4 * seconds:
            return step


def measure_parts(cfg: Config, seconds: float = 10.0, compare_cpu: bool | None = None) -> Parts:
    """Time every part on ``cfg``'s env and network for about ``seconds`` in all.
    ``compare_cpu`` (default: when the learner is on a GPU) also times the update on the
    CPU."""
    with serial_runner(cfg) as runner:
        step = warm_up(runner, seconds * 0.15)
        acting, step = _acting(runner, step, seconds * 0.25)
        update = _per_update(runner, seconds * 0.15)
        beside = _beside_acting(runner, step, seconds * 0.2)
        with busy_cores():
            processes = _per_update(runner, seconds * 0.15)
        publish, pull, nbytes = _weights(runner)
        add, message = _message(runner, step)
    device = runner.learner.device
    if compare_cpu or (compare_cpu is None and device.type != "cpu"):
        with serial_runner(bench_config(cfg, "serial", ["run.device='cpu'"])) as on_cpu:
            warm_up(on_cpu, seconds * 0.05)
            update_cpu: float | None = _per_update(on_cpu, seconds * 0.1)
    else:
        update_cpu = None
    return Parts(
        cores=cores(),
        gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        num_envs=cfg.env.num_envs,
        batch_size=cfg.dqn.batch_size,
        ratio=replay_ratio(cfg),
        env_step=acting["env"],
        forward=acting["forward"],
        write=acting["write"],
        update=update,
        update_beside_acting=beside[0],
        acting_beside_update=beside[1],
        update_beside_processes=processes,
        publish=publish,
        pull=pull,
        add=add,
        message=message,
        weight_bytes=nbytes,
        update_cpu=update_cpu,
    )


def _acting(runner: Any, step: int, seconds: float) -> tuple[dict[str, float], int]:
    """Collect without learning for ``seconds``: per env step, the env's code and the
    writing; per call, the batched forward. A recipe whose acting is not a batch of envs
    (MAPF's worlds) is timed as a whole, as env time."""
    batch = getattr(getattr(runner, "acting", None), "batch", None)
    env, forward = Clock(), Clock()
    if batch is not None:
        batch.envs.step, batch.actor.act = env.wrap(batch.envs.step), forward.wrap(batch.actor.act)
    steps, t0 = 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds or steps == 0:
            steps += runner.collect(step + steps).steps
    finally:
        if batch is not None:  # the instance attributes shadowed the methods: drop them
            del batch.envs.step, batch.actor.act
    total = time.perf_counter() - t0
    if batch is None:
        return {"env": total / steps, "forward": 0.0, "write": 0.0}, step + steps
    per_call = forward.seconds / max(forward.calls, 1)
    write = max(0.0, total - env.seconds - forward.seconds) / steps
    return {"env": env.seconds / steps, "forward": per_call, "write": write}, step + steps


def _per_update(runner: Any, seconds: float) -> float:
    """Seconds per update, updates back to back for ``seconds`` (at least three)."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < 3:
        runner.learn_steps(1)
        n += 1
    return (time.perf_counter() - t0) / n


def _beside_acting(runner: Any, step: int, seconds: float) -> tuple[float, float]:
    """Updates in a thread beside acting in this one, as the threads runner runs them:
    (seconds per update, seconds per env step of acting). Acting adds nothing to replay
    here (the serial runner's replay has no lock; its writing was timed alone)."""
    stop, updates = threading.Event(), [0]

    def learn() -> None:
        while not stop.is_set():
            runner.learn_steps(1)
            updates[0] += 1

    runner.add_batch = lambda *args, **kwargs: None
    thread = threading.Thread(target=learn, name="shoal-bench-learner", daemon=True)
    steps, t0 = 0, time.perf_counter()
    thread.start()
    try:
        while time.perf_counter() - t0 < seconds or steps == 0 or updates[0] == 0:
            steps += runner.collect(step + steps).steps
    finally:
        stop.set()
        thread.join()
        del runner.add_batch
    elapsed = time.perf_counter() - t0
    return elapsed / max(updates[0], 1), elapsed / steps


@contextmanager
def busy_cores() -> Iterator[None]:
    """Every core but this one runs a busy process meanwhile (as a processes run's workers
    keep them)."""
    import subprocess
    import sys

    spin = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(spin) for _ in range(max(cores() - 1, 1))]
    try:
        time.sleep(0.05)  # let them start before the clock does
        yield
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


def _weights(runner: Any) -> tuple[float, float, int]:
    """Seconds to publish the learner's weights into shared memory and to pull them out,
    the median of 20 each, and their bytes."""
    from shoal.sync.weights import SharedWeightStore

    state = {k: v.detach().cpu() for k, v in runner.learner.weights().items()}
    store = SharedWeightStore(state)
    try:
        publish = median_seconds(lambda: store.publish(state), 20)
        pull = median_seconds(lambda: store.pull(), 20)
    finally:
        store.close()
    return publish, pull, sum(t.numel() * t.element_size() for t in state.values())


def _message(runner: Any, step: int) -> tuple[float, float]:
    """Per env step (s), over at least 64 env steps of acting: adding what they wrote to
    replay in one write, and pickling and unpickling it (a worker's message, less the
    pipe's copy)."""
    acting = runner.acting
    steps = 0
    while steps < 64:
        steps += acting.step().count
    items, _ = acting.take()
    rows = len(next(iter(items.values()))) if items else 0
    if rows == 0:
        return 0.0, 0.0
    add = median_seconds(lambda: runner.add_batch(items), 5)
    message = median_seconds(lambda: pickle.loads(pickle.dumps(items, pickle.HIGHEST_PROTOCOL)), 5)
    return add / rows, message / rows


def median_seconds(fn: Callable[[], Any], n: int) -> float:
    """Median seconds of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2]
