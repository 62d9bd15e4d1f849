"""What every DQN runner keeps, whatever its transport: the learner, the replay buffer, the
exploration schedule, the evaluation envs, the run's counters, and the result it reports.

The serial runner (and the threads runner built on it) and the processes runner differ in
how experience reaches the learner, not in this bookkeeping; keeping it in one place keeps
their checkpoints, eval rows and results the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import build_dqn, build_epsilon, build_replay
from shoal.agent.dqn import Batch
from shoal.config import Config
from shoal.envs import make_env, probe_env
from shoal.run.directory import RunDir
from shoal.run.metrics import MetricsWriter

__all__ = ["RunnerBase", "TrainResult"]


@dataclass(frozen=True)
class TrainResult:
    """What a finished run reports."""

    run_dir: str
    """Where config, metrics, checkpoints and the curve were written."""
    eval_return: float
    """Mean greedy return of the final evaluation."""
    env_steps: int
    """Env steps taken in training (across resumes)."""
    wall_seconds: float
    """Wall-clock seconds of training (across resumes)."""
    updates: int
    """Gradient steps taken."""
    solved_step: int | None
    """Env step of the first evaluation that reached run.stop_return (None: never)."""
    solved_wall_seconds: float | None
    """Wall-clock seconds at that evaluation."""


class RunnerBase:
    """The learner, replay, schedule, evaluation envs and counters shared by all runners."""

    def __init__(self, cfg: Config, run: RunDir) -> None:
        self.cfg = cfg
        self.run_dir = run
        self.spec = probe_env(cfg.env)
        if cfg.run.torch_threads > 0:
            torch.set_num_threads(cfg.run.torch_threads)
        self.dqn = build_dqn(cfg, self.spec)
        self.replay = build_replay(cfg, self.spec)
        self.epsilon = build_epsilon(cfg)
        self.eval_envs = [make_env(cfg.env) for _ in range(min(cfg.run.eval_episodes, 32))]
        # Counters; all of them go into the checkpoint (with each runner's own).
        self.step = 0
        self.episode = 0
        self.wall_before = 0.0
        self.last_eval: float | None = None
        self.solved_step: int | None = None
        self.solved_wall: float | None = None

    def _counters(self, wall: float) -> dict[str, Any]:
        """The shared counters, as the checkpoint stores them."""
        return {
            "step": self.step,
            "episode": self.episode,
            "wall": wall,
            "last_eval": self.last_eval,
            "solved_step": self.solved_step,
            "solved_wall": self.solved_wall,
        }

    def _restore_counters(self, c: dict[str, Any]) -> None:
        self.step, self.episode, self.wall_before = c["step"], c["episode"], c["wall"]
        self.last_eval, self.solved_step = c["last_eval"], c["solved_step"]
        self.solved_wall = c["solved_wall"]

    def _learn(self, steps: int) -> float:
        """``steps`` gradient steps on replay samples; returns the last loss."""
        loss = float("nan")
        for _ in range(steps):
            sample = self.replay.sample(self.cfg.dqn.batch_size)
            info = self.dqn.update(Batch.from_numpy(sample, self.dqn.device))
            self.replay.update_priorities(sample["indices"], info.td_errors)
            loss = info.loss
        return loss

    def _log_eval(
        self, metrics: MetricsWriter, returns: np.ndarray, wall: float, **extra: float
    ) -> float:
        """Record an evaluation's returns: the eval row, the last eval and, the first time
        the mean reaches run.stop_return, the solved step and time. Returns the mean."""
        mean = float(returns.mean())
        self.last_eval = mean
        metrics.log(
            "eval",
            self.step,
            wall_s=wall,
            eval_mean=mean,
            eval_std=float(returns.std()),
            updates=self.dqn.updates,
            **extra,
        )
        stop = self.cfg.run.stop_return
        if stop is not None and mean >= stop and self.solved_step is None:
            self.solved_step, self.solved_wall = self.step, wall
        return mean

    def _result(self, wall: float) -> TrainResult:
        return TrainResult(
            run_dir=str(self.run_dir.path),
            eval_return=float("nan") if self.last_eval is None else self.last_eval,
            env_steps=self.step,
            wall_seconds=wall,
            updates=self.dqn.updates,
            solved_step=self.solved_step,
            solved_wall_seconds=self.solved_wall,
        )
