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
from collections.abc import Callable
from typing import Any

from shoal.bench.parts import BLOCKS, Parts, bench_runner, make_parts, time_learning
from shoal.bench.timing import (
    Acting,
    collector,
    gpu_name,
    median_seconds,
    median_timings,
    patched,
    time_acting,
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


def measure_world_parts(
    cfg: Config, seconds: float = 10.0, blocks: int = BLOCKS
) -> tuple[Parts, float]:
    """Time a world's parts for about ``seconds``, each the median of ``blocks`` timings
    spread over them (each block at least a whole epoch where epochs are played); also
    the turns of an epoch (the collector's weights travel once an epoch)."""
    with bench_runner(cfg, "agents", WORLD_SCHEMES["agents"]) as runner:
        collect = collector(runner, warm_up(runner, seconds * 0.1))
        samples, turns, epochs = [], 0, 0
        for _ in range(blocks):
            acted, played = _acting(runner, collect, seconds * 0.3 / blocks)
            turns, epochs = turns + acted.steps, epochs + played
            learning = time_learning(
                lambda: runner.train_round(runner.group),
                lambda: runner.updates,
                collect,
                _no_adds(runner),  # the sync runner's buffers have no lock
                seconds * 0.6 / blocks,
            )
            samples.append(acted.timings() | learning)
        weights, message, add = _transport(runner)
        device = runner.learners[0].device
        nbytes = sum(t.numel() * t.element_size() for t in runner.layout.weights().values())
    transport = (weights / 2, weights / 2, add, message, nbytes)
    timed = median_timings(samples)
    parts = make_parts(cfg, timed, gpu=gpu_name(device), num_envs=1, transport=transport)
    return parts, turns / epochs


def _acting(runner: Any, collect: Callable[[int], int], seconds: float) -> tuple[Acting, int]:
    """Epochs without training for ``seconds`` (one at least), the world's step and the
    stacked forward timed inside; and the epochs played."""
    epochs = [0]

    def counted(n: int) -> int:
        epochs[0] += 1
        return collect(n)

    player = runner.player
    acted = time_acting(counted, (player.env, "step"), (player.actor, "select_actions"), seconds)
    return acted, epochs[0]


def _no_adds(runner: Any) -> Any:
    """Epochs add nothing to the buffers meanwhile (a context manager)."""
    from contextlib import ExitStack

    stack = ExitStack()
    for buffer in runner.replays:
        stack.enter_context(patched(buffer, "add_batch", lambda *args, **kwargs: None))
    return stack


def _transport(runner: Any) -> tuple[float, float, float]:
    """What the collector process moves: seconds to pickle and unpickle the K agents'
    weights (once an epoch), and per turn an epoch's transitions (its message) and adding
    them to the buffers."""
    weights = {k: v.cpu() for k, v in runner.layout.weights().items()}
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
