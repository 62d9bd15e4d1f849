"""The serial runner: collect, store and learn in one loop. The oracle for every other runner.

Each step: pick an epsilon-greedy action, step the env, push the transition through the
n-step writer into replay, and every ``train_freq`` steps take ``gradient_steps``
gradient steps. Every ``eval_every`` steps the greedy policy plays ``eval_episodes``
episodes on separate envs.

Checkpoints fall on episode boundaries: an env's internals cannot be saved in general,
but a fresh episode can be re-created exactly because every reset is seeded from
(run seed, episode index). Resuming from such a checkpoint therefore continues exactly as
the uninterrupted run would. A run cut mid-episode (Ctrl-C, or stopping once solved) ends
that episode as truncated, so its transitions still bootstrap correctly, and checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import build_nstep
from shoal.config import Config, config_to_dict
from shoal.envs import make_env
from shoal.run.checkpoint import save_checkpoint
from shoal.run.curve import plot_run
from shoal.run.directory import RunDir
from shoal.run.evaluation import evaluate
from shoal.run.metrics import MetricsWriter
from shoal.run.progress import TrainProgress
from shoal.run.seeding import derive_seed
from shoal.runners.base import RunnerBase, TrainResult

__all__ = ["SerialRunner", "TrainResult"]

TRAIN_STREAM = 0
"""Seed stream of training env resets."""
ACTION_STREAM = 3
"""Seed stream of exploration (epsilon-greedy) draws."""


class SerialRunner(RunnerBase):
    """Runs one training job in the calling thread.

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.total_steps=500", "run.progress=false"])
        >>> # SerialRunner(cfg, RunDir.create("runs", "demo")).run()
    """

    def __init__(self, cfg: Config, run: RunDir, resume: dict[str, Any] | None = None) -> None:
        super().__init__(cfg, run)
        self.nstep = build_nstep(cfg)
        self.rng = np.random.default_rng(derive_seed(cfg.run.seed, ACTION_STREAM))
        self.env = make_env(cfg.env)
        self.next_checkpoint = cfg.run.checkpoint_every
        self.last_eval_step = -1
        if resume is not None:
            self._restore(resume)

    # --- checkpoints --------------------------------------------------------------------
    def _state(self, wall: float) -> dict[str, Any]:
        return {
            "config": config_to_dict(self.cfg),
            "dqn": self.dqn.state_dict(),
            "replay": self.replay.state_dict(),
            "rng": {
                "actions": self.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            },
            "counters": {
                **self._counters(wall),
                "next_checkpoint": self.next_checkpoint,
                "last_eval_step": self.last_eval_step,
            },
        }

    def _restore(self, state: dict[str, Any]) -> None:
        self.dqn.load_state_dict(state["dqn"])
        self.replay.load_state_dict(state["replay"])
        self.rng.bit_generator.state = state["rng"]["actions"]
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        c = state["counters"]
        self._restore_counters(c)
        self.next_checkpoint, self.last_eval_step = c["next_checkpoint"], c["last_eval_step"]

    def _checkpoint(self, wall: float, metrics: MetricsWriter) -> None:
        metrics.flush()
        save_checkpoint(self.run_dir.checkpoint, self._state(wall))

    # --- the loop -----------------------------------------------------------------------
    def _reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=derive_seed(self.cfg.run.seed, TRAIN_STREAM, self.episode))
        return obs

    # --- hooks a parallel runner overrides -------------------------------------------------
    def _act(self, obs: np.ndarray, eps: float) -> int:
        """The behaviour policy's action (serial: the online network itself)."""
        return self.dqn.act(obs, eps, self.rng)

    def _on_train_point(self, loss: float) -> float:
        """Called every train_freq steps once learning has started; returns the last loss."""
        return self._learn(self.cfg.run.gradient_steps)

    def _finish_learning(self) -> None:
        """Called when acting ends normally: a parallel runner completes the scheduled
        updates here, so every runner takes the same number of updates."""

    def _greedy_policy(self) -> Callable[[np.ndarray], np.ndarray]:
        """The policy evaluations play."""
        return self.dqn.greedy

    def _tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Extra figures for each tick row of metrics.csv."""
        return {"samples_per_s": updates_per_s * self.cfg.dqn.batch_size}

    def _bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Extra figures for the progress bar."""
        return {}

    def _evaluate(self, metrics: MetricsWriter, clock: Callable[[], float]) -> float:
        returns = evaluate(
            self._greedy_policy(), self.eval_envs, self.cfg.run.eval_episodes, self.cfg.run.seed
        )
        # Read the clock after the evaluation: time-to-solve includes the evaluation
        # that showed it.
        self.last_eval_step = self.step
        return self._log_eval(metrics, returns, clock())

    def run(self) -> TrainResult:
        """Train until ``total_steps`` (finishing the episode) or until solved."""
        r = self.cfg.run
        metrics = MetricsWriter(self.run_dir.metrics, self.run_dir.tensorboard)
        t0 = time.perf_counter()

        def wall() -> float:
            return self.wall_before + time.perf_counter() - t0

        ticker = _Ticker(self.step, self.dqn.updates)
        obs = self._reset()
        ep_return, ep_len, loss = 0.0, 0, float("nan")
        stop = self.solved_step is not None and r.stop_return is not None
        try:
            with TrainProgress(
                r.total_steps, enabled=r.progress, description=self.cfg.env.id
            ) as bar:
                while not stop:
                    eps = self.epsilon(self.step)
                    action = self._act(obs, eps)
                    next_obs, reward, term, trunc, _ = self.env.step(action)
                    self.step += 1
                    ep_return += float(reward)
                    ep_len += 1
                    for tr in self.nstep.append(obs, action, reward, next_obs, term, trunc):
                        self.replay.add(tr)
                    obs = next_obs
                    if self.step >= r.learning_starts and self.step % r.train_freq == 0:
                        loss = self._on_train_point(loss)
                    if self.step % r.eval_every == 0:
                        self._evaluate(metrics, wall)
                        stop = self.solved_step is not None
                    if self.step % r.log_every == 0:
                        sps, ups = ticker.rates(self.step, self.dqn.updates)
                        extra = self._tick_metrics(ups)
                        metrics.log(
                            "tick",
                            self.step,
                            wall_s=wall(),
                            steps_per_s=sps,
                            updates_per_s=ups,
                            epsilon=eps,
                            loss=loss,
                            updates=self.dqn.updates,
                            **extra,
                        )
                        last = "-" if self.last_eval is None else self.last_eval
                        bar.update(
                            self.step,
                            sps=round(sps),
                            ups=round(ups),
                            eps=eps,
                            loss=loss,
                            eval=last,
                            **self._bar_stats(extra),
                        )
                    if term or trunc:
                        metrics.log(
                            "episode",
                            self.step,
                            wall_s=wall(),
                            episode=self.episode,
                            length=ep_len,
                            epsilon=eps,
                            updates=self.dqn.updates,
                            **{"return": ep_return},
                        )
                        self.episode += 1
                        ep_return, ep_len = 0.0, 0
                        if self.step >= r.total_steps:
                            break
                        if self.step >= self.next_checkpoint:
                            while self.next_checkpoint <= self.step:
                                self.next_checkpoint += r.checkpoint_every
                            self._checkpoint(wall(), metrics)
                        obs = self._reset()
                bar.update(self.step)
            self._finish_learning()
            self._end_partial_episode(ep_len)
            if self.last_eval_step != self.step:
                self._evaluate(metrics, wall)
            self._checkpoint(wall(), metrics)
        except BaseException:
            # Ctrl-C or a failure (e.g. a learner thread's, surfaced here): keep the partial
            # episode and write a final checkpoint, then let the original error through.
            self._end_partial_episode(ep_len)
            try:
                self._checkpoint(wall(), metrics)
            except Exception as e:  # pragma: no cover - the original error matters more
                print(f"shoal: final checkpoint failed: {e!r}")
            raise
        finally:
            metrics.close()
        plot_run(self.run_dir.metrics, self.run_dir.curve, title=f"{self.cfg.env.id} (serial)")
        return self._result(wall())

    def _end_partial_episode(self, ep_len: int) -> None:
        """A cut mid-episode is a truncation: pending n-step transitions bootstrap from
        the last observation, and a resumed run starts the next episode (next seed)."""
        for tr in self.nstep.flush():
            self.replay.add(tr)
        if ep_len > 0:
            self.episode += 1


class _Ticker:
    """Env steps/s and updates/s since the previous tick."""

    def __init__(self, step: int, updates: int) -> None:
        self.step, self.updates, self.time = step, updates, time.perf_counter()

    def rates(self, step: int, updates: int) -> tuple[float, float]:
        now = time.perf_counter()
        dt = max(now - self.time, 1e-9)
        out = ((step - self.step) / dt, (updates - self.updates) / dt)
        self.step, self.updates, self.time = step, updates, now
        return out
