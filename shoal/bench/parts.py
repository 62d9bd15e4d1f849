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

import pickle
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

from shoal.bench.timing import (
    Acting,
    beside,
    built,
    busy_cores,
    collector,
    cores,
    gpu_name,
    median_seconds,
    median_timings,
    patched,
    per_update,
    run_rounds,
    time_acting,
    time_rounds,
    warm_up,
)
from shoal.config import Config, config_to_dict, load_config

__all__ = [
    "BLOCKS",
    "Parts",
    "bench_config",
    "bench_starts",
    "bench_runner",
    "make_parts",
    "measure_parts",
    "replay_ratio",
    "time_learning",
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
    update_beside_acting: float = 0.0
    """One update while an acting thread of the same process runs (s): what the GIL and
    the shared cores leave of it (0: not timed, where the threads runner's own loop was)."""
    acting_beside_update: float = 0.0
    """Per env step (s), acting and writing while an update thread runs (0: not timed)."""
    threads_step: float = 0.0
    """Per env step (s), the threads runner's own loop with its updates done: its acting
    thread collecting and scheduling rounds, its learner threads (the config's count)
    taking them, gradients under the read lock and the step under the write lock (0: not
    timed)."""
    update_cpu: float | None = None
    """One update on this machine's CPU (s), timed where the learner runs on a GPU: what
    the GPU changes (None: the learner is on the CPU)."""
    update_mode: str = "eager"
    """How the timed update ran (``run.compile``: 'eager', 'CUDA graph', 'compiled loss');
    a capture that fell back says so."""
    update_eager: float | None = None
    """The same update run eagerly (s), timed beside where :attr:`update_mode` is not eager:
    what capturing the update gives (None: the update was eager)."""
    acting_between_updates: float = 0.0
    """Per env step (s), acting and writing as a serial run does them, between its
    updates: the serial runner's own loop timed, less its updates at their back-to-back
    cost. An update leaves acting colder caches, and on a GPU the first forward after it
    waits for the queued update (0: not timed; ``acting + write`` stands for it)."""

    @property
    def acting(self) -> float:
        """Per env step (s): the env and its share of the batched forward."""
        return self.env_step + self.forward / self.num_envs

    @property
    def serial_acting(self) -> float:
        """Per env step (s), the serial runner's acting and writing, between its updates."""
        return self.acting_between_updates or self.acting + self.write

    @property
    def serial_step(self) -> float:
        """Per env step (s) of the serial runner: acting, writing and the updates it owes."""
        return self.serial_acting + self.ratio * self.update


def replay_ratio(cfg: Config) -> float:
    """Updates per env step the config asks for, once learning has started."""
    from shoal.run.schedule import UpdateSchedule

    return UpdateSchedule.from_config(cfg.run).ratio


def bench_starts(cfg: Config) -> int:
    """The env steps before a measurement's first update: a batch's worth (at least 256),
    never the config's own warm-up (the atari preset's 80k)."""
    return min(cfg.run.learning_starts, max(cfg.dqn.batch_size, 256))


def bench_config(cfg: Config, runner: str, extra: list[str] | None = None) -> Config:
    """The config for a measurement: ``runner``, no progress bar, learning from the
    first batch's worth of steps (the measurement wants updates, not the warm-up)."""
    overrides = [
        f"run.runner='{runner}'",
        "run.progress=false",
        f"run.learning_starts={bench_starts(cfg)}",
        *(extra or []),
    ]
    return load_config(None, overrides, values=config_to_dict(cfg))


def bench_runner(cfg: Config, runner: str, extra: list[str] | None = None) -> Any:
    """``runner`` built on :func:`bench_config` (a context manager: stopped and closed
    afterwards)."""
    from shoal.api import build_runner
    from shoal.runners import runner_class

    bench = bench_config(cfg, runner, extra)
    return built(lambda: build_runner(runner_class(runner), bench))


BLOCKS = 3
"""Each part is timed in this many short blocks spread over the budget, and the median
block stands for it: on a shared machine one block of a few seconds can run a third slow
or fast (RESULTS: the slow env's serial prediction -34% from one slow acting block)."""


def measure_parts(
    cfg: Config,
    seconds: float = 10.0,
    compare_cpu: bool | None = None,
    threads: float = 0.0,
    blocks: int = BLOCKS,
) -> Parts:
    """Time every part on ``cfg``'s env and network for about ``seconds`` in all, each
    the median of ``blocks`` timings spread over them. ``compare_cpu`` (default: when the
    learner is on a GPU) also times the update on the CPU, out of the same seconds;
    ``threads`` seconds more time the threads runner's own loop (0: not)."""
    with ExitStack() as stack:
        runner = stack.enter_context(bench_runner(cfg, "serial"))
        device = runner.learner.device
        cpu_too = compare_cpu or (compare_cpu is None and device.type != "cpu")
        share = seconds * (0.85 if cpu_too else 1.0)
        # the threads runner's own path, where timed, stands for the serial update beside
        # a thread (which only the model's fallback bound uses)
        serial_block = _serial_timing(runner, cfg, share * 0.1, side=not threads)
        threads_block = None
        if threads:
            threaded = stack.enter_context(bench_runner(cfg, "threads"))
            threads_block = _threads_timing(threaded, threads * 0.1)
        samples = []
        for _ in range(blocks):
            timed = serial_block(share * 0.9 / blocks)
            if threads_block is not None:
                timed |= threads_block(threads * 0.9 / blocks)
            samples.append(timed)
        mode, eager = _update_modes(runner, cfg, share * 0.1)
        publish, pull, nbytes = _weights(runner)
        add, message = _message(runner)
    update_cpu = _update_on_cpu(cfg, seconds - share) if cpu_too else None
    return make_parts(
        cfg,
        median_timings(samples) | {"update_mode": mode, "update_eager": eager},
        gpu=gpu_name(device),
        num_envs=cfg.env.num_envs,
        transport=(publish, pull, add, message, nbytes),
        update_cpu=update_cpu,
    )


def _serial_timing(
    runner: Any, cfg: Config, warm: float, side: bool
) -> Callable[[float], dict[str, float]]:
    """After ``warm`` seconds of warm-up, a timer of one block of the serial runner's
    parts for the seconds it is given: acting alone, acting between the updates a serial
    run owes, and the update alone, beside an acting thread (``side``) and beside busy
    processes; the env steps carry on from block to block."""
    collect = collector(runner, warm_up(runner, warm))
    ratio = replay_ratio(cfg)

    def block(seconds: float) -> dict[str, float]:
        acted = _acting(runner, collect, seconds / 6)
        spent, steps = time_rounds(collect, runner.learn_steps, ratio, seconds / 6)
        learning = time_learning(
            lambda: runner.learn_steps(1),
            lambda: runner.updates,
            collect,
            # the serial runner's replay has no lock, and adding was timed alone
            patched(runner, "add_batch", lambda *args, **kwargs: None),
            seconds * 2 / 3,
            side=side,
        )
        between = max(spent / steps - ratio * learning["update"], 1e-9)
        return acted.timings() | learning | {"acting_between_updates": between}

    return block


def time_learning(
    update: Callable[[], Any],
    updates: Callable[[], int],
    collect: Callable[[int], int],
    no_adds: AbstractContextManager[Any],
    seconds: float,
    side: bool = True,
) -> dict[str, float]:
    """Time ``update()`` (counted by ``updates()``) alone, in a thread beside
    ``collect(steps so far) -> steps`` (which adds nothing to replay meanwhile:
    ``no_adds``; ``side`` False: not, the caller times it its own way), and beside busy
    processes, for about ``seconds`` in all: the :class:`Parts` fields they time."""
    shares = (0.3, 0.4, 0.3) if side else (0.5, 0.0, 0.5)
    timed = {"update": per_update(update, updates, seconds * shares[0])}
    if side:
        with no_adds:
            pair = beside(update, updates, collect, seconds * shares[1])
        timed |= {"update_beside_acting": pair[0], "acting_beside_update": pair[1]}
    with busy_cores(seconds * shares[2]):
        timed["update_beside_processes"] = per_update(update, updates, seconds * shares[2])
    return timed


def make_parts(
    cfg: Config,
    timed: dict[str, Any],
    *,
    gpu: str | None,
    num_envs: int,
    transport: tuple[float, float, float, float, int],
    update_cpu: float | None = None,
) -> Parts:
    """The parts from the fields ``timed`` holds (by name) and ``transport``: (publish,
    pull, add, message, weight bytes)."""
    publish, pull, add, message, nbytes = transport
    return Parts(
        cores=cores(),
        gpu=gpu,
        num_envs=num_envs,
        batch_size=cfg.dqn.batch_size,
        ratio=replay_ratio(cfg),
        publish=publish,
        pull=pull,
        add=add,
        message=message,
        weight_bytes=nbytes,
        update_cpu=update_cpu,
        **timed,
    )


def _acting(runner: Any, collect: Callable[[int], int], seconds: float) -> Acting:
    """Collect without learning, the env's step and the batched forward timed inside (a
    recipe whose acting is not a batch of envs, MAPF's worlds, as a whole)."""
    batch = getattr(getattr(runner, "acting", None), "batch", None)
    env = (batch.envs, "step") if batch is not None else None
    forward = (batch.actor, "act") if batch is not None else None
    return time_acting(collect, env, forward, seconds)


def _update(runner: Any, seconds: float) -> float:
    """Seconds per update of the serial runner's learner."""
    return per_update(lambda: runner.learn_steps(1), lambda: runner.updates, seconds)


def _update_modes(runner: Any, cfg: Config, seconds: float) -> tuple[str, float | None]:
    """How the timed updates ran, and, where not eagerly, the eager update timed for
    ``seconds`` on the same runner (then its mode is set back)."""
    from shoal.agent.capture import SHOWN

    learner = runner.learner
    notes = getattr(learner, "notes", [])
    if notes:  # fell back to eager: say why
        return notes[-1].removeprefix("update: "), None
    mode = getattr(learner, "compile_mode", "off")
    if mode == "off":
        return SHOWN[mode], None
    learner.set_compile("off")
    try:
        return SHOWN[mode], _update(runner, seconds)
    finally:
        learner.set_compile(cfg.run.compile)


def _update_on_cpu(cfg: Config, seconds: float) -> float:
    """Seconds per update with the learner on the CPU (what a GPU is weighed against)."""
    with bench_runner(cfg, "serial", ["run.device='cpu'"]) as runner:
        warm_up(runner, seconds * 0.3)
        return _update(runner, seconds * 0.7)


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


def _message(runner: Any) -> tuple[float, float]:
    """Per env step (s), over at least 64 env steps of acting: adding what they wrote to
    replay in one write, and pickling and unpickling it (a worker's message, less the
    pipe's copy)."""
    acting = runner.acting
    steps = 0
    while steps < 64:
        steps += acting.step().count
    items = acting.take().items
    rows = len(next(iter(items.values()))) if items else 0
    if rows == 0:
        return 0.0, 0.0
    add = median_seconds(lambda: runner.add_batch(items), 5)
    message = median_seconds(lambda: pickle.loads(pickle.dumps(items, pickle.HIGHEST_PROTOCOL)), 5)
    return add / rows, message / rows


def _threads_timing(runner: Any, warm: float) -> Callable[[float], dict[str, float]]:
    """After ``warm`` seconds of warm-up, a timer of one block of the threads runner's own
    loop for the seconds it is given: per env step with its updates done. Its update path
    is not the serial one (gradients with ``torch.autograd.grad`` under the read lock, the
    step under the write lock, weight copies for acting, K threads and acting on one GIL),
    and neither the serial parts nor its modes timed apart predicted it: the best mix of
    its learners alone and beside acting read 1.3-1.5x its full runs (RESULTS). Each block
    ends when its learners have taken every round owed (they idle after it, so the next
    timing is alone)."""
    runner.start()
    step = warm_up(runner, warm)

    def block(seconds: float) -> dict[str, float]:
        nonlocal step
        t0 = time.perf_counter()
        steps, _, _, step = run_rounds(runner, step, seconds)
        # the rounds still owed are part of the block: a short block ends up to max_lag
        # rounds behind, which counted as missing read MinAtar's threads 23% slow
        runner.rounds.wait(behind=0)
        return {"threads_step": (time.perf_counter() - t0) / steps}

    return block
