"""A collector process for the agents runner: it plays epochs while the caller trains.

Why a process: the worlds are Python, and so is most of a small learner update's time
between its many short torch calls. A learning thread beside a collecting thread takes
turns with it on the GIL (docs/ARCHITECTURE.md, benchmarks/RESULTS.md: async learning in a thread
measured 0.72-0.79 of the overlap bound). Here the collector has an interpreter of its own
and the learner keeps the caller's, so both run at once on two cores.

What crosses the pipe is small and whole: the caller sends the weights to act with (numpy,
only when they changed), the epsilon and seed of the epoch, and (after a start or a resume)
the agents' exploration generator states; the collector answers with the epoch's result
(returns, social outcomes, every agent's transitions as arrays) and the generator states
after it. Nothing is shared, so nothing can be read half-written, and a dead collector
costs at most the epoch it was playing.
"""

from __future__ import annotations

import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import torch

from shoal.config import Config
from shoal.envs.parallel import make_parallel_env
from shoal.errors import ShoalError
from shoal.runners.agents.epochs import EpochResult, build_player
from shoal.sync.workers import WorkerProcess, child_prologue

__all__ = ["CollectorError", "CollectorProcess", "collector_main"]


class CollectorError(ShoalError):
    """The collector process failed, died or went silent."""

    def __init__(self, message: str, *, lost: bool = True) -> None:
        super().__init__(message)
        self.lost = lost
        """The process is gone or silent (a new one may replay the epoch); False when the
        epoch itself raised (it would raise again)."""


def collector_main(cfg: Config, conn: Connection) -> None:
    """The collector process: build the world and an inference-only actor, then play the
    epochs the caller asks for until told to stop or the caller is gone."""
    parent_alive = child_prologue(torch_threads=1)
    try:
        a = cfg.agents
        env = make_parallel_env(cfg.env, num_agents=a.agents, max_turns=a.max_turns)
        player = build_player(cfg, env)
        actor = player.actor
        conn.send(("ready",))
        while parent_alive():  # a caller killed with SIGKILL cannot stop us
            if not conn.poll(1.0):
                continue
            message = conn.recv()
            if message[0] == "stop":
                return
            _, epsilon, seed, weights, rng_states = message
            if weights is not None:
                actor.params = {n: torch.from_numpy(w) for n, w in weights.items()}
            if rng_states is not None:
                actor.set_rng_states(rng_states)
            result = player.play(epsilon, seed, store=True)
            conn.send(("epoch", result, actor.rng_states()))
    except (EOFError, BrokenPipeError):
        return  # the caller is gone
    except BaseException as e:  # everything else reaches the caller with its traceback
        try:
            conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
        except (OSError, ValueError):
            pass


class CollectorProcess:
    """The caller's handle on one collector process (spawned on :meth:`start`).

    Args:
        cfg: the run's config (the process builds its own world and actor from it).
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.worker: WorkerProcess | None = None
        self._sent_version: int | None = None
        self.pending = False
        """An epoch was asked for and its result not yet taken."""

    def start(self) -> None:
        """Spawn the process and wait until its world and actor are built (a world it
        cannot build fails here, with the process's traceback)."""
        self.worker = WorkerProcess(
            collector_main, (self.cfg,), name="shoal-collector", duplex=True
        )
        self._sent_version = None
        self._receive(self.cfg.agents.step_timeout, "started")

    def _receive(self, timeout: float, what: str) -> Any:
        """The next message; raises :class:`CollectorError` if the process failed, died
        or sent nothing for ``timeout`` seconds."""
        assert self.worker is not None
        conn, deadline = self.worker.conn, time.monotonic() + timeout
        while not conn.poll(0.1):
            if not self.worker.alive() and not conn.poll(0):
                raise CollectorError(f"the collector process died ({self.worker.why()})")
            if time.monotonic() > deadline:
                raise CollectorError(
                    f"the collector process has not {what} for {timeout} s (agents.step_timeout)"
                )
        try:
            message = conn.recv()
        except (EOFError, OSError) as e:
            raise CollectorError(f"the collector process died ({self.worker.why()})") from e
        if message[0] == "error":
            raise CollectorError(
                f"the collector process failed: {message[1]}\n{message[2]}", lost=False
            )
        return message

    def play(
        self,
        epsilon: float,
        seed: int,
        weights: dict[str, torch.Tensor],
        version: int,
        rng_states: list[dict[str, Any]] | None = None,
    ) -> None:
        """Ask for one epoch acted with ``weights`` (sent only when ``version`` changed);
        ``rng_states`` replace the agents' exploration generators first."""
        if self.worker is None:
            raise CollectorError("the collector process is not running")
        send = None
        if version != self._sent_version:
            send = {n: w.detach().cpu().numpy() for n, w in weights.items()}
        try:
            self.worker.conn.send(("play", epsilon, seed, send, rng_states))
        except (BrokenPipeError, OSError) as e:
            raise CollectorError(f"the collector process is gone ({self.worker.why()})") from e
        self._sent_version, self.pending = version, True

    def result(self, timeout: float) -> tuple[EpochResult, list[dict[str, Any]]]:
        """The epoch asked for, and the exploration generator states after it. Raises
        :class:`CollectorError` if the process failed, died, or sent nothing for
        ``timeout`` seconds (``agents.step_timeout``)."""
        assert self.pending
        message = self._receive(timeout, "sent an epoch")
        self.pending = False
        return message[1], message[2]

    def stop(self) -> None:
        """Stop the process (asked first, killed if it does not go); safe to call twice."""
        if self.worker is not None:
            self.worker.stop(grace=2.0, ask=("stop",))
        self.worker, self.pending = None, False
