"""The threads runner: one acting thread and K learner threads on one network.

The design users reach for (forward under a read lock, ``backward()`` and
``optimizer.step()`` under the write lock) is broken: another thread's optimizer step can
land between a thread's forward and its backward, and autograd then fails with "one of the
variables needed for gradient computation has been modified by an inplace operation".
Here each learner thread

1. samples a batch (the replay buffer has its own lock),
2. under the **read lock** (weights held steady, other learners alongside) computes the
   gradients of ``grad_accum_steps`` micro-batches with ``torch.autograd.grad``, forward
   and backward both inside the lock, without touching ``.grad``,
3. under the **write lock** (alone) averages them, clips, steps the optimizer and moves
   the target network (:meth:`~shoal.agent.learner.Learner.apply`),
4. every ``sync_every`` updates copies the weights, under the read lock, into a versioned
   store from which the acting thread's inference copy pulls.

The acting thread (the caller's thread, so Ctrl-C lands there) collects experience with
the inference copy, evaluates, logs and checkpoints, everything the serial runner does.
Learners follow the update schedule (``gradient_steps`` updates every ``train_freq`` env
steps): they never run ahead of it, and acting waits when they fall more than ``max_lag``
updates behind. ``max_lag=0`` is lockstep and, with one learner and ``sync_every=1``,
reproduces the serial runner exactly; a larger lag lets acting and learning overlap.

An exception in any learner thread stops all of them and is raised in the acting thread,
after a final checkpoint; so is Ctrl-C.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np
import torch

from shoal.agent.actor import Actor
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.recipes.contract import ActorWeights
from shoal.run.runner import Collected
from shoal.runners.sections import ThreadsConfig
from shoal.runners.serial import SerialRunner
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rounds import RoundThreads, RoundThreadsError
from shoal.sync.rwlock import RWLock
from shoal.sync.weights import LocalWeightStore

__all__ = ["LearnerThreadError", "ThreadsConfig", "ThreadsRunner"]


class LearnerThreadError(RoundThreadsError):
    """A learner thread failed; the original exception is the ``__cause__``."""


class ThreadsRunner(SerialRunner):
    """One acting thread and K learner threads on one network behind a read/write lock.

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.runner=threads", "threads.learner_threads=2"])
        >>> # RunLoop(ThreadsRunner(cfg), ...).run() starts, joins and checks the threads
    """

    section = ("threads", ThreadsConfig)

    def compile_mode(self) -> str:
        """Eager: the learner threads compute gradients side by side on one network and
        apply them one at a time, which no single captured update does."""
        cfg = self.cfg
        if cfg.run.compile in ("compile", "graph"):
            raise ConfigError(
                f"config key 'run.compile': {cfg.run.compile!r} captures one whole update, "
                "and the threads runner's learner threads compute gradients side by side "
                "and apply them one at a time; use 'auto' or 'off' (on a GPU, the serial "
                "or processes runner replays one captured update)"
            )
        return "off"

    def __init__(self, cfg: Config, spec: EnvSpec | None = None) -> None:
        t = cfg.threads
        self.lock = RWLock(timeout=t.lock_timeout, name="dqn-weights")
        self.store = LocalWeightStore()
        super().__init__(cfg, spec)
        self.replay = LockedReplay(self.replay)
        self.rounds = RoundThreads(
            self._learner_update,
            threads=cfg.threads.learner_threads,
            name="shoal-learner",
            what="a learner thread",
            error=LearnerThreadError,
        )
        """The learner threads: one round is one update."""
        self._stats = threading.Lock()  # the latest loss and the staleness since a tick
        self._staleness: list[int] = []

    def make_actor(self) -> Actor:
        """Acting reads a versioned copy of the weights, never weights mid-step."""
        return self.recipe.make_actor(
            self.cfg, self.spec, self.rng, ActorWeights(source=self.store)
        )

    def collect(self, step: int) -> Collected:
        """Pull newer weights if the learners published some, then one serial step."""
        self.actor.update()
        return super().collect(step)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore; the updates the schedule handed out but the learners had not taken
        when the checkpoint was written (up to max_lag) are taken now."""
        super().load_state_dict(state)
        self.rounds.reset(self.learner.updates, self.schedule.granted)

    def start(self) -> None:
        """Publish the first weights and start the learner threads."""
        self.store.publish(self.learner.weights(), version=self.learner.updates)
        self.rounds.start()

    # --- acting side (the caller's thread) -------------------------------------------------
    def eval_actor(self) -> Actor:
        """The acting thread's actor, with the latest published weights."""
        self.actor.update()
        return self.actor

    def on_train_point(self, updates: int) -> None:
        """Hand the updates to the learners; wait only if they fall more than max_lag
        behind."""
        self.rounds.schedule(updates)
        self.rounds.wait(behind=self.cfg.threads.max_lag)

    def finish(self) -> None:
        """Complete every scheduled update, then flush a partial episode."""
        self.rounds.wait(behind=0)
        super().finish()

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples/s, read/write lock waits and gradient staleness since the last tick."""
        stats = self.lock.stats()
        self.lock.reset_stats()
        with self._stats:
            stale, self._staleness = self._staleness, []
        extra = {
            "samples_per_s": updates_per_s
            * self.cfg.dqn.batch_size
            * self.cfg.threads.grad_accum_steps,
            "read_wait_ms": 1e3 * stats.read.mean_wait,
            "write_wait_ms": 1e3 * stats.write.mean_wait,
        }
        if stale:
            extra["staleness_mean"] = float(np.mean(stale))
            extra["staleness_max"] = float(np.max(stale))
        return extra

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Lock waits and staleness on the progress bar."""
        return {
            "rwait_ms": tick["read_wait_ms"],
            "wwait_ms": tick["write_wait_ms"],
            "stale": tick.get("staleness_mean", 0.0),
        }

    def checkpoint_guard(self) -> contextlib.AbstractContextManager[Any]:
        """The write lock pauses every learner between updates: a consistent snapshot of
        weights, optimizer and counters."""
        return self.lock.write()

    # --- learner threads ---------------------------------------------------------------------
    def _learner_update(self, phase_start: bool, phase_end: bool) -> None:
        """One update: gradients under the read lock, the step under the write lock."""
        t = self.cfg.threads
        samples = [self.replay.sample(self.cfg.dqn.batch_size) for _ in range(t.grad_accum_steps)]
        infos = []
        with self.lock.read():
            version = self.learner.updates
            total: list[torch.Tensor] | None = None
            for sample in samples:
                grads, info = self.learner.gradients(self.learner.make_batch(sample))
                infos.append(info)
                total = grads if total is None else [a + b for a, b in zip(total, grads)]
        assert total is not None
        if t.grad_accum_steps > 1:
            total = [g / t.grad_accum_steps for g in total]
        with self.lock.write():
            staleness = self.learner.updates - version
            self.learner.apply(total)
            updates = self.learner.updates
        for sample, info in zip(samples, infos):
            self.replay.update_priorities(sample["indices"], info.td_errors)
        if updates % t.sync_every == 0:
            with self.lock.read():
                self.store.publish(self.learner.weights(), version=updates)
        with self._stats:
            self.loss = float(np.mean([i.loss for i in infos]))
            self._staleness.append(staleness)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join the learner threads; safe to call twice."""
        self.rounds.stop(timeout)
