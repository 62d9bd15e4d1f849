"""The parts of a multi-agent world's run, timed on the agents runner: a turn of the
world, the stacked forward that picks every agent's action, writing each agent's
transitions, one training round (every agent one update), and what the collector process
moves (the K agents' weights out, an epoch's transitions back).

The agents runner is the one scheme for a world; what there is to choose is how its
learning runs beside collection: in the same thread (``agents``), in a thread of its own
(``agents-thread``) or beside a collector process (``agents-process``). Their parts map
onto :class:`~shoal.bench.parts.Parts` as a single-agent run's do (an env step is a turn,
an update a round), so :mod:`shoal.bench.model` bounds them alike.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from shoal.bench.parts import (
    Clock,
    Parts,
    bench_config,
    busy_cores,
    cores,
    median_seconds,
    replay_ratio,
    warm_up,
)
from shoal.config import Config

__all__ = ["WORLD_SCHEMES", "measure_world_parts"]

WORLD_SCHEMES = {
    "agents": ["agents.async_learning=false"],
    "agents-thread": ["agents.async_learning=true", "agents.async_mode='thread'"],
    "agents-process": ["agents.async_learning=true", "agents.async_mode='process'"],
}
"""A multi-agent world's schemes: the agents runner's ways of learning beside collection."""


@contextmanager
def agents_runner(cfg: Config) -> Iterator[Any]:
    """The agents runner on ``cfg``, learning in the caller's thread; closed afterwards."""
    from shoal.runners.agents.runner import AgentsRunner

    runner = AgentsRunner(bench_config(cfg, "agents", WORLD_SCHEMES["agents"]))
    try:
        yield runner
    finally:
        runner.stop()
        runner.close()


def measure_world_parts(cfg: Config, seconds: float = 10.0) -> tuple[Parts, float]:
    """Time a world's parts for about ``seconds`` (at least a whole epoch each where
    epochs are played); also the turns of an epoch (the collector's weights travel once
    an epoch)."""
    with agents_runner(cfg) as runner:
        step = warm_up(runner, seconds * 0.15)
        acting, step, epoch_turns = _acting(runner, step, seconds * 0.3)
        update = _per_round(runner, seconds * 0.15)
        beside = _beside_acting(runner, step, seconds * 0.25)
        with busy_cores():
            processes = _per_round(runner, seconds * 0.15)
        weights, message, add = _transport(runner, step)
        device = runner.learners[0].device
    parts = Parts(
        cores=cores(),
        gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        num_envs=1,
        batch_size=cfg.dqn.batch_size,
        ratio=replay_ratio(cfg),
        env_step=acting["env"],
        forward=acting["forward"],
        write=acting["write"],
        update=update,
        update_beside_acting=beside[0],
        acting_beside_update=beside[1],
        update_beside_processes=processes,
        publish=weights / 2,
        pull=weights / 2,
        add=add,
        message=message,
        weight_bytes=sum(t.numel() * t.element_size() for t in runner.weights().values()),
    )
    return parts, epoch_turns


def _acting(runner: Any, step: int, seconds: float) -> tuple[dict[str, float], int, float]:
    """Epochs without training for ``seconds`` (one at least): per turn the world's own
    step and the writing, per call the stacked forward; and the turns of an epoch."""
    player = runner.player
    env, forward = Clock(), Clock()
    player.env.step, player.actor.select_actions = (
        env.wrap(player.env.step),
        forward.wrap(player.actor.select_actions),
    )
    turns, epochs, t0 = 0, 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds or epochs == 0:
            turns += runner.collect(step + turns).steps
            epochs += 1
    finally:
        del player.env.step, player.actor.select_actions
    total = time.perf_counter() - t0
    write = max(0.0, total - env.seconds - forward.seconds) / turns
    per_call = forward.seconds / max(forward.calls, 1)
    return (
        {"env": env.seconds / turns, "forward": per_call, "write": write},
        step + turns,
        (turns / epochs),
    )


def _per_round(runner: Any, seconds: float) -> float:
    """Seconds per training round, rounds back to back for ``seconds`` (three at least)."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < 3:
        runner.train_round(runner.group)
        n += 1
    return (time.perf_counter() - t0) / n


def _beside_acting(runner: Any, step: int, seconds: float) -> tuple[float, float]:
    """Rounds in a thread beside epochs in this one, as ``agents-thread`` runs them:
    (seconds per round, seconds per turn). The epochs add nothing to the buffers here (they
    have no lock in this runner; writing was timed alone)."""
    stop, rounds = threading.Event(), [0]

    def learn() -> None:
        while not stop.is_set():
            runner.train_round(runner.group)
            rounds[0] += 1

    for buffer in runner.replays:
        buffer.add_batch = lambda *args, **kwargs: None
    thread = threading.Thread(target=learn, name="shoal-bench-rounds", daemon=True)
    turns, t0 = 0, time.perf_counter()
    thread.start()
    try:
        while time.perf_counter() - t0 < seconds or turns == 0 or rounds[0] == 0:
            turns += runner.collect(step + turns).steps
    finally:
        stop.set()
        thread.join()
        for buffer in runner.replays:
            del buffer.add_batch
    elapsed = time.perf_counter() - t0
    return elapsed / max(rounds[0], 1), elapsed / turns


def _transport(runner: Any, step: int) -> tuple[float, float, float]:
    """What the collector process moves: seconds to pickle and unpickle the K agents'
    weights (once an epoch), and per turn an epoch's transitions (its message) and adding
    them to the buffers."""
    weights = {k: v.cpu() for k, v in runner.weights().items()}
    move = median_seconds(lambda: pickle.loads(pickle.dumps(weights, pickle.HIGHEST_PROTOCOL)), 5)
    result = runner.player.play(0.1, 0, store=True)
    kept = [t for t in result.transitions if t is not None]
    if not kept or result.turns == 0:
        return move, 0.0, 0.0
    message = median_seconds(lambda: pickle.loads(pickle.dumps(kept, pickle.HIGHEST_PROTOCOL)), 3)

    def add() -> None:
        for buffer, items in zip(runner.replays, result.transitions, strict=True):
            if items is not None:
                buffer.add_batch(items)

    return move, message / result.turns, median_seconds(add, 3) / result.turns
