"""One run loop for every runner: the clock, metrics rows, progress bar, evaluation and
checkpoint cadence, Ctrl-C and error checkpoints, the best policy, the curve and the result.

A runner supplies only how experience is collected (:meth:`collect`, some env steps and the
episodes they finished), how learning is scheduled (:meth:`learn`) and how it evaluates;
see :class:`~shoal.run.runner.Runner` for the whole contract. The loop calls, in order, for as
long as the run lasts::

    collect -> learn -> evaluate (every run.eval_every env steps, once evaluations take
    at most run.eval_max_share of the wall time) -> tick row
    (every run.log_every) -> episode rows -> stop? -> checkpoint (every
    run.checkpoint_every, at the next point the runner calls a boundary)

and at the end ``finish`` (complete scheduled learning, flush a partial episode), a final
evaluation and checkpoint, the curve. On Ctrl-C or any error it stops the runner's threads
or processes first, then writes a checkpoint and lets the error through.

Checkpoints: ``checkpoints/latest.pt`` holds everything to continue (``--resume``);
``checkpoints/best.pt`` holds the weights of the best greedy evaluation so far (or of the one
that solved the run), because DQN often degrades after it has solved a task.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.errors import CheckpointError, DivergedError, RunDirError
from shoal.run.checkpoint import load_checkpoint, save_checkpoint
from shoal.run.directory import RunDir
from shoal.run.divergence import first_non_finite
from shoal.run.metrics import MetricsWriter
from shoal.run.preemption import reclaim_preemption_signals
from shoal.run.progress import TrainProgress
from shoal.run.seeding import SeedStream, derive_seed

if TYPE_CHECKING:
    from shoal.run.runner import Collected, Runner

__all__ = ["RunLoop", "TrainResult"]


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
    best_eval_return: float | None = None
    """Best mean greedy return of any evaluation (its weights are ``best.pt``)."""
    ended_early: bool = False
    """The caller's ``on_eval`` ended the run before its budget (e.g. a pruned trial)."""


class RunLoop:
    """Drives one runner through a run (see the module docstring).

    Args:
        runner: the runner (it was built from the same config).
        run: the run directory.
        resume: a checkpoint to continue from (``latest.pt``'s contents), or None.
        title: the curve's title.
        on_eval: called with (env step, mean greedy return) after every evaluation;
            True ends the run at the runner's next boundary (a tuner's pruning).
        evaluate_untrained: a new run evaluates its untrained network first, at step 0
            (see :meth:`evaluate_untrained`).
    """

    def __init__(
        self,
        runner: Runner,
        run: RunDir,
        *,
        resume: dict[str, Any] | None = None,
        title: str = "",
        on_eval: Callable[[int, float], bool] | None = None,
        evaluate_untrained: bool = False,
    ) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.run_dir = run
        self.title = title
        self.on_eval = on_eval
        self._untrained_first = evaluate_untrained and resume is None
        self._ended_by_caller = False
        self._training = False  # on_eval may end training, not the evaluation after it
        r = self.cfg.run
        self.c: dict[str, Any] = {
            "step": 0,
            "episode": 0,
            "wall": 0.0,
            "last_eval": None,
            "last_eval_step": -1,
            "best_eval": None,
            "best_solved": False,
            "solved_step": None,
            "solved_wall": None,
            "confirms": 0,
            "eval_s": 0.0,
            "next_checkpoint": r.checkpoint_every,
        }
        """The loop's counters; all of them go into every checkpoint."""
        if resume is not None:
            self.c.update(resume["loop"])
            runner.load_state_dict(resume)
        self._best_on_disk()
        self._resumed = resume is not None
        self.started = False
        """Whether training began: the runner's first collection came back (a new run's
        directory that never saw one holds nothing worth keeping, and is removed)."""
        self._t0 = time.perf_counter()
        self._wall_before = self.c["wall"]

    # --- clock, rows, evaluation, checkpoints ---------------------------------------------
    def wall(self) -> float:
        """Seconds of training so far, across resumes."""
        return self._wall_before + time.perf_counter() - self._t0

    def _state(self) -> dict[str, Any]:
        return {**self._state_head(), **self.runner.state_dict()}

    def checkpoint(self, metrics: MetricsWriter, path: Path | None = None) -> None:
        """Write ``latest.pt`` (or ``path``), atomically, with the loop's and the runner's
        state; never a learner whose weights diverged (:meth:`_check_finite`)."""
        metrics.flush()
        with self.runner.checkpoint_guard():
            state = self._state()
            self._check_finite(state.get("learner"))
            save_checkpoint(path or self.run_dir.checkpoint, state)

    def _check_finite(self, weights: Any) -> None:
        """A :class:`~shoal.errors.DivergedError` naming the tensor if ``weights`` hold NaN
        or inf: the run stops there, its last checkpoint the last finite state."""
        where = first_non_finite(weights)
        if where is None:
            return
        kept = (
            "checkpoints/latest.pt keeps its last finite state"
            if self.run_dir.checkpoint.is_file()
            else "no checkpoint of it was written"
        )
        raise DivergedError(
            f"training diverged: the learner's {where} holds NaN or inf at env step "
            f"{self.c['step']} (update {self.runner.updates}); the run stopped and {kept}: "
            "lower dqn.lr or scale the rewards down, then train again"
        )

    def _best_on_disk(self) -> None:
        """Take the score of a ``best.pt`` already on disk as the one to beat: a run stopped
        after an evaluation wrote it and before ``latest.pt`` caught up must not replace it
        with worse weights after ``--resume``."""
        if not self.run_dir.best.is_file():
            return
        try:
            saved = load_checkpoint(self.run_dir.best, best=True)
        except CheckpointError:
            return  # unreadable: the next evaluation replaces it
        c, mean = self.c, float(saved["eval_mean"])
        solved = bool(saved.get("solved", False))
        if c["best_eval"] is None or (solved, mean) > (c["best_solved"], c["best_eval"]):
            c["best_eval"], c["best_solved"] = mean, solved

    def evaluate(self, metrics: MetricsWriter) -> float:
        """Play greedy episodes, log the eval row, keep ``best.pt``; returns the mean."""
        c = self.c
        t0 = time.perf_counter()
        returns, weights = self.runner.evaluate()
        self._check_finite(weights)
        # Read the clock after the evaluation: time-to-solve includes the evaluation that
        # showed it.
        wall = self.wall()
        c["eval_s"] += time.perf_counter() - t0
        mean = float(returns.mean())
        c["last_eval"], c["last_eval_step"] = mean, c["step"]
        metrics.log(
            "eval",
            c["step"],
            wall_s=wall,
            eval_mean=mean,
            eval_std=float(returns.std()),
            updates=self.runner.updates,
            **self.runner.eval_metrics(),
        )
        solved = self._solves(mean, metrics)
        # A solve's weights are best.pt even over a higher unconfirmed mean, once.
        if c["best_eval"] is None or (solved, mean) > (c["best_solved"], c["best_eval"]):
            c["best_eval"], c["best_solved"] = mean, solved or c["best_solved"]
            weights = {k: v.detach().cpu().clone() for k, v in weights.items()}
            save_checkpoint(
                self.run_dir.best,
                {
                    **self._state_head(),
                    "learner": {"online": weights},
                    "eval_mean": mean,
                    "solved": solved,
                },
            )
        if solved:
            # Read the clock after any confirmation: time-to-solve includes it.
            c["solved_step"], c["solved_wall"] = c["step"], self.wall()
        if self.on_eval is not None and self.on_eval(c["step"], mean) and self._training:
            self._ended_by_caller = True
        return mean

    def evaluate_untrained(self, metrics: MetricsWriter) -> None:
        """Evaluate the untrained network at step 0, before any update: an eval row with
        updates 0 (best.pt until an evaluation beats it; given to ``on_eval``), the baseline
        a tuner compares its trial's score with. Its time is left out of the evaluations'
        share (``run.eval_max_share``), so the run's own evaluations come when they would
        without it."""
        spent = self.c["eval_s"]
        self.evaluate(metrics)
        self.c["eval_s"] = spent

    def _solves(self, mean: float, metrics: MetricsWriter) -> bool:
        """Whether an evaluation with this mean solves the run: the first to reach
        ``run.stop_return`` is picked on the noise of the evaluations' fixed starts, so with
        ``run.confirm_solve`` as many fresh episodes, on starts no evaluation has used, must
        reach it too (logged as a ``confirm`` row)."""
        c, r = self.c, self.cfg.run
        if r.stop_return is None or c["solved_step"] is not None or mean < r.stop_return:
            return False
        if not r.confirm_solve:
            return True
        attempt = c["confirms"]
        c["confirms"] = attempt + 1
        t0 = time.perf_counter()
        returns, _ = self.runner.evaluate(derive_seed(r.seed, SeedStream.CONFIRM, attempt))
        c["eval_s"] += time.perf_counter() - t0
        confirm = float(returns.mean())
        metrics.log("confirm", c["step"], wall_s=self.wall(), eval_mean=confirm)
        return confirm >= r.stop_return

    def eval_share(self) -> float:
        """The share of the run's wall time its evaluations took."""
        return self.c["eval_s"] / max(self.wall(), 1e-9)

    def _may_evaluate(self) -> bool:
        """Evaluations so far are within ``run.eval_max_share`` of the wall time."""
        return self.eval_share() <= self.cfg.run.eval_max_share

    def _state_head(self) -> dict[str, Any]:
        self.c["wall"] = self.wall()
        return {"config": self.cfg.to_dict(), "loop": dict(self.c)}

    def _tick(self, metrics: MetricsWriter, bar: TrainProgress, rates: _Rates) -> None:
        step, runner = self.c["step"], self.runner
        for note in runner.update_notes():  # a capture that fell back to eager, and why
            bar.line(note)
        sps, ups = rates.rates(step, runner.updates)
        extra = runner.tick_metrics(ups)
        eps = runner.epsilon(step)
        ratio = ups / sps if sps > 0 else 0.0  # updates per env step since the last tick
        metrics.log(
            "tick",
            step,
            wall_s=self.wall(),
            steps_per_s=sps,
            updates_per_s=ups,
            replay_ratio=ratio,
            eval_share=self.eval_share(),
            epsilon=eps,
            loss=runner.loss,
            updates=runner.updates,
            **extra,
        )
        last = "-" if self.c["last_eval"] is None else self.c["last_eval"]
        bar.update(
            min(step, self.cfg.run.total_steps),
            sps=round(sps),
            ups=round(ups),
            rr=ratio,
            eps=eps,
            loss=runner.loss,
            eval=last,
            **runner.bar_stats(extra),
        )

    def _episode_rows(self, metrics: MetricsWriter, got: Collected) -> None:
        c, runner, episodes = self.c, self.runner, got.episodes
        # The episodes of one collect ran back to back and the last ended at c["step"]
        # (side by side: all at c["step"]): each row gets the step its episode ended at.
        lengths = [length for _, length in episodes]
        epsilon: Any
        if got.side_by_side:
            ends = [c["step"]] * len(episodes)
            epsilon = runner.epsilon(c["step"])  # one value for every row
        else:
            ends = list(itertools.accumulate(lengths, initial=c["step"] - sum(lengths)))[1:]
            epsilon = [runner.epsilon(end) for end in ends]
        columns: dict[str, Any] = {
            "wall_s": self.wall(),
            "episode": range(c["episode"], c["episode"] + len(episodes)),
            "length": lengths,
            "epsilon": epsilon,
            "updates": runner.updates,
            "return": [float(ret) for ret, _ in episodes],
        }
        if got.extras:
            for key in dict.fromkeys(key for extra in got.extras for key in extra):
                columns[key] = [extra.get(key, "") for extra in got.extras]
        metrics.log_many("episode", ends, **columns)
        c["episode"] += len(episodes)

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> TrainResult:
        """Train until ``run.total_steps`` (at the runner's next boundary), until
        ``run.max_minutes``, until solved, or until the runner is done; then finish,
        evaluate, checkpoint and draw the curve."""
        c, r, runner = self.c, self.cfg.run, self.runner
        metrics = MetricsWriter(self.run_dir.metrics, self.run_dir.tensorboard)
        try:
            runner.start()
            reclaim_preemption_signals()  # a runner's library may have taken them (Ray)
            if self._untrained_first:
                self.evaluate_untrained(metrics)
            line = runner.update_line
            described = f"{self.title} · {line}" if line else self.title
            with TrainProgress(r.total_steps, enabled=r.progress, description=described) as bar:
                self._training = True
                self._train(metrics, bar)
                self._training = False
                bar.update(min(c["step"], r.total_steps))
            runner.finish()
            runner.stop()
            if c["last_eval_step"] != c["step"]:
                self.evaluate(metrics)
            self.checkpoint(metrics)
        except BaseException as e:
            # Ctrl-C, a preemption signal or a failure (e.g. a learner thread's, surfaced
            # here): stop the runner's threads or processes, keep the partial episode,
            # write a final checkpoint, then let the original error through.
            e.run_dir = str(self.run_dir.path)  # type: ignore[attr-defined]  # for the CLI's line
            path = self._final_checkpoint_path(e)
            steps = [runner.stop, runner.interrupt, lambda: self.checkpoint(metrics, path)]
            if isinstance(e, (RunDirError, DivergedError)) or not (self.started or self._resumed):
                steps.pop()  # writing failed (it would again), weights diverged, or a new
                # run never began
            for step in steps:
                try:  # each on its own: a thread that would not stop must not cost the
                    step()  # checkpoint
                except Exception as cleanup:  # the original error matters more
                    print(f"shoal: cleanup after the error failed: {cleanup}", file=sys.stderr)
            raise
        finally:
            metrics.close()
        result = self._result()  # the curve is drawn after the clock stops
        from shoal.run.curve import plot_run

        plot_run(self.run_dir.metrics, self.run_dir.curve, title=self.title)
        return result

    def _final_checkpoint_path(self, error: BaseException) -> Path:
        """Where the checkpoint of a cut run goes: ``latest.pt`` after Ctrl-C or a
        preemption signal with the runner's state whole; beside it (``error.pt``) after a
        failure, or when part of the state was lost (a Ray replay actor), so that the last
        good checkpoint is never replaced with less."""
        whole = isinstance(error, KeyboardInterrupt) and self.runner.state_is_whole()
        return self.run_dir.checkpoint if whole else self.run_dir.error_checkpoint

    def _train(self, metrics: MetricsWriter, bar: TrainProgress) -> None:
        """collect -> episode rows -> learn -> evaluate -> tick -> stop? -> checkpoint."""
        c, r, runner = self.c, self.cfg.run, self.runner
        next_eval = (c["step"] // r.eval_every + 1) * r.eval_every
        next_tick = (c["step"] // r.log_every + 1) * r.log_every
        rates = _Rates(c["step"], runner.updates)
        stop = c["solved_step"] is not None and r.stop_return is not None
        while not stop:
            got = runner.collect(c["step"])
            self.started = self.started or got.steps > 0  # calls that failed bring none
            c["step"] += got.steps
            if got.episodes:  # now: a checkpoint after a Ctrl-C below counts these steps
                self._episode_rows(metrics, got)
            runner.learn(c["step"], got.steps)
            if c["step"] >= next_eval and self._may_evaluate():  # else: when it is
                self.evaluate(metrics)
                next_eval = (c["step"] // r.eval_every + 1) * r.eval_every
                stop = c["solved_step"] is not None and r.stop_return is not None
            if c["step"] >= next_tick:
                self._tick(metrics, bar, rates)
                next_tick = (c["step"] // r.log_every + 1) * r.log_every
            if not runner.at_boundary():
                continue
            out_of_time = r.max_minutes is not None and self.wall() >= 60 * r.max_minutes
            if c["step"] >= r.total_steps or runner.done(c["episode"]) or out_of_time:
                self._ended_by_caller = False  # its budget ended it, whatever on_eval said
                return
            if self._ended_by_caller:
                return
            if c["step"] >= c["next_checkpoint"]:
                while c["next_checkpoint"] <= c["step"]:
                    c["next_checkpoint"] += r.checkpoint_every
                self.checkpoint(metrics)

    def _result(self) -> TrainResult:
        c = self.c
        return TrainResult(
            run_dir=str(self.run_dir.path),
            eval_return=float("nan") if c["last_eval"] is None else c["last_eval"],
            env_steps=c["step"],
            wall_seconds=self.wall(),
            updates=self.runner.updates,
            solved_step=c["solved_step"],
            solved_wall_seconds=c["solved_wall"],
            best_eval_return=c["best_eval"],
            ended_early=self._ended_by_caller,
        )


class _Rates:
    """Env steps/s and updates/s since the previous tick."""

    def __init__(self, step: int, updates: int) -> None:
        self.step, self.updates, self.time = step, updates, time.perf_counter()

    def rates(self, step: int, updates: int) -> tuple[float, float]:
        now = time.perf_counter()
        dt = max(now - self.time, 1e-9)
        out = ((step - self.step) / dt, (updates - self.updates) / dt)
        self.step, self.updates, self.time = step, updates, now
        return out
