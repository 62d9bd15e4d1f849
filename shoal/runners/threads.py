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
   the target network (:meth:`~shoal.agent.dqn.DQN.apply`),
4. every ``sync_every`` updates copies the weights, under the read lock, into a versioned
   store from which the acting thread's inference copy pulls.

The acting thread (the caller's thread, so Ctrl-C lands there) collects experience with
the inference copy, evaluates, logs and checkpoints, everything the serial runner does.
Learners follow the serial schedule (``gradient_steps`` updates every ``train_freq`` env
steps): they never run ahead of it, and acting waits when they fall more than ``max_lag``
updates behind. ``max_lag=0`` is lockstep and, with one learner and ``sync_every=1``,
reproduces the serial runner exactly; a larger lag lets acting and learning overlap.

An exception in any learner thread stops all of them and is raised in the acting thread,
after a final checkpoint; so is Ctrl-C.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from shoal.agent.dqn import Batch, epsilon_greedy_action, greedy_actions
from shoal.config import Config
from shoal.run.directory import RunDir
from shoal.run.metrics import MetricsWriter
from shoal.runners.serial import SerialRunner, TrainResult
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rwlock import RWLock
from shoal.sync.weights import LocalWeightStore

__all__ = ["LearnerThreadError", "ThreadsRunner"]


class LearnerThreadError(RuntimeError):
    """A learner thread failed; the original exception is the ``__cause__``."""


class ThreadsRunner(SerialRunner):
    """Scheme 2: K learner threads behind a read/write lock, one acting thread.

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.runner=threads", "threads.learner_threads=2"])
        >>> # ThreadsRunner(cfg, RunDir.create("runs", "demo")).run()
    """

    def __init__(self, cfg: Config, run: RunDir, resume: dict[str, Any] | None = None) -> None:
        super().__init__(cfg, run, resume)
        t = cfg.threads
        self.replay = LockedReplay(self.replay)  # type: ignore[assignment]
        self.lock = RWLock(timeout=t.lock_timeout, name="dqn-weights")
        self.store = LocalWeightStore()
        self.inference = copy.deepcopy(self.dqn.online).requires_grad_(False)
        self._inference_version = -1
        self.store.publish(self.dqn.online.state_dict(), version=self.dqn.updates)
        self._pull_weights()
        # Schedule: updates the serial runner would have done by now (scheduled), begun by
        # a learner (started), finished (completed). Guarded by one condition variable.
        self._sched = threading.Condition()
        self._scheduled = self._started = self._completed = self.dqn.updates
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._last_loss = float("nan")
        self._staleness: list[int] = []
        self._threads: list[threading.Thread] = []

    # --- acting side (the caller's thread) -------------------------------------------------
    def _pull_weights(self) -> None:
        got = self.store.pull(self._inference_version)
        if got is not None:
            self._inference_version, state = got
            self.inference.load_state_dict(state)

    def _inference_greedy(self, obs: np.ndarray) -> np.ndarray:
        return greedy_actions(self.inference, obs, self.dqn.device, self.cfg.dqn.action_mask)

    def _act(self, obs: np.ndarray, eps: float) -> int:
        self._pull_weights()
        return epsilon_greedy_action(self._inference_greedy, obs, eps, self.rng, self.dqn.n_actions)

    def _greedy_policy(self) -> Callable[[np.ndarray], np.ndarray]:
        self._pull_weights()
        return self._inference_greedy

    def _on_train_point(self, loss: float) -> float:
        max_lag = self.cfg.threads.max_lag
        with self._sched:
            self._scheduled += self.cfg.run.gradient_steps
            self._sched.notify_all()
            while self._scheduled - self._completed > max_lag and self._error is None:
                self._sched.wait(0.1)
        self._raise_if_failed()
        return self._last_loss

    def _finish_learning(self) -> None:
        with self._sched:
            while self._completed < self._scheduled and self._error is None:
                self._sched.wait(0.1)
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise LearnerThreadError(f"a learner thread failed: {self._error!r}") from self._error

    def _tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        stats = self.lock.stats()
        self.lock.reset_stats()
        with self._sched:
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

    def _bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        return {
            "rwait_ms": tick["read_wait_ms"],
            "wwait_ms": tick["write_wait_ms"],
            "stale": tick.get("staleness_mean", 0.0),
        }

    def _checkpoint(self, wall: float, metrics: MetricsWriter) -> None:
        # The write lock pauses every learner between updates: a consistent snapshot of
        # weights, optimizer and counters.
        with self.lock.write():
            super()._checkpoint(wall, metrics)

    # --- learner threads ---------------------------------------------------------------------
    def _learner_loop(self, torch_threads: int) -> None:
        # torch's thread count is OpenMP's per-thread setting: a new thread starts with the
        # default (all cores), and small ops then pay for thread wake-ups (2.4x slower
        # measured on 2 cores). Apply the acting thread's setting here too.
        torch.set_num_threads(torch_threads)
        try:
            while True:
                with self._sched:
                    while self._started >= self._scheduled and not self._stop.is_set():
                        self._sched.wait(0.05)
                    if self._stop.is_set():
                        return
                    self._started += 1
                self._learner_update()
                with self._sched:
                    self._completed += 1
                    self._sched.notify_all()
        except BaseException as e:  # surfaced in the acting thread
            with self._sched:
                if self._error is None:
                    self._error = e
                self._stop.set()
                self._sched.notify_all()

    def _learner_update(self) -> None:
        t = self.cfg.threads
        samples = [self.replay.sample(self.cfg.dqn.batch_size) for _ in range(t.grad_accum_steps)]
        infos = []
        with self.lock.read():
            version = self.dqn.updates
            total: list[torch.Tensor] | None = None
            for sample in samples:
                grads, info = self.dqn.gradients(Batch.from_numpy(sample, self.dqn.device))
                infos.append(info)
                total = grads if total is None else [a + b for a, b in zip(total, grads)]
        assert total is not None
        if t.grad_accum_steps > 1:
            total = [g / t.grad_accum_steps for g in total]
        with self.lock.write():
            staleness = self.dqn.updates - version
            self.dqn.apply(total)
            updates = self.dqn.updates
        for sample, info in zip(samples, infos):
            self.replay.update_priorities(sample["indices"], info.td_errors)
        if updates % t.sync_every == 0:
            with self.lock.read():
                self.store.publish(self.dqn.online.state_dict(), version=updates)
        with self._sched:
            self._last_loss = float(np.mean([i.loss for i in infos]))
            self._staleness.append(staleness)

    # --- the run -----------------------------------------------------------------------------
    def run(self) -> TrainResult:
        """Start the learner threads, act in this thread, stop everything at the end."""
        self._threads = [
            threading.Thread(
                target=self._learner_loop,
                args=(torch.get_num_threads(),),
                name=f"shoal-learner-{i}",
                daemon=True,
            )
            for i in range(self.cfg.threads.learner_threads)
        ]
        for th in self._threads:
            th.start()
        try:
            result = super().run()
        finally:
            self.shutdown()
        self._raise_if_failed()
        return result

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop and join the learner threads; safe to call twice."""
        with self._sched:
            self._stop.set()
            self._sched.notify_all()
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
        alive = [th.name for th in self._threads if th.is_alive()]
        if alive:
            raise LearnerThreadError(f"learner threads did not stop within {timeout} s: {alive}")
