"""One trial of a study: a shoal run in its own directory, whose evaluations go to the
study as they happen (the study's pruner may end it), scored at its end by its ``best.pt``
on fresh episodes: what ``shoal eval`` would say of it, not the evaluation that picked it.

It runs wherever the study sends it (a process of this machine, a Ray task on a cluster),
with nothing but a :class:`TrialJob`: the storage it reports to is named, not shared.
"""

from __future__ import annotations

import contextlib
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shoal.tune.untrained import Learning

__all__ = ["TrialJob", "TrialOutcome", "open_storage", "optuna_chose_it", "run_trial"]


@dataclass(frozen=True)
class TrialJob:
    """Everything a trial needs, picklable."""

    number: int
    """The trial's number in the study (its run directory's name)."""
    trial_id: int
    """Optuna's id of the trial in the storage."""
    config: dict[str, Any]
    """The trial's whole config (``config_to_dict``)."""
    run_dir: str
    storage: tuple[Any, ...]
    """Where the study lives: ``("journal", path)`` or ``("grpc", host, port)``."""
    study_name: str
    pruner: dict[str, int] = field(default_factory=dict)
    """MedianPruner's arguments (the pruner is not kept in the storage)."""
    eval_episodes: int = 20
    """Greedy episodes that score ``best.pt`` at the end."""


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended."""

    number: int
    value: float | None
    """The score: best.pt's mean greedy return on fresh episodes (None: it failed)."""
    pruned: bool = False
    steps: int = 0
    """Env steps trained."""
    updates: int = 0
    """Updates the trial's learner took."""
    evals: list[int] = field(default_factory=list)
    """The env steps its evaluations were at."""
    wall_s: float = 0.0
    """Seconds the trial took, start to score."""
    train_s: float = 0.0
    """Of which its run trained (the rest, its start and its scoring, does not grow with
    its env steps)."""
    error: str = ""
    """What went wrong, one line (a failed trial)."""
    learning: Learning = Learning()
    """Its untrained network's score (the run's evaluation at step 0) and whether the
    trial beat it (:func:`~shoal.tune.untrained.judge_trial`)."""


def open_storage(spec: tuple[Any, ...]) -> Any:
    """The Optuna storage a spec names: a journal file on this machine, or the study
    driver's gRPC proxy (trials on other machines of a Ray cluster)."""
    import optuna

    if spec[0] == "journal":
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(str(spec[1])))
    with optuna_chose_it():  # the proxy is experimental (since Optuna 4.2)
        return optuna.storages.GrpcStorageProxy(host=spec[1], port=spec[2])


@contextlib.contextmanager
def optuna_chose_it() -> Iterator[None]:
    """Optuna's ``ExperimentalWarning`` off inside the block only: shoal uses these
    features on purpose (a warning line in every study would say nothing to the user),
    and a user's own experimental calls elsewhere still warn."""
    import optuna

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        yield


def make_pruner(args: dict[str, int]) -> Any:
    """The study's pruner: a trial whose evaluation falls below the median of the earlier
    trials' at the same step is stopped (after a few trials and a warm-up)."""
    import optuna

    return optuna.pruners.MedianPruner(**args)


def run_trial(job: TrialJob) -> TrialOutcome:
    """Train the trial's run, reporting each evaluation; score its best.pt."""
    import optuna

    from shoal.api import evaluate_run, train
    from shoal.config import load_config
    from shoal.tune.untrained import judge_trial, untrained_score

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    try:
        study = optuna.load_study(
            study_name=job.study_name,
            storage=open_storage(job.storage),
            pruner=make_pruner(job.pruner),
        )
        trial = optuna.trial.Trial(study, job.trial_id)

        cfg = load_config(None, values=job.config)
        every = cfg.run.eval_every
        reported: set[int] = set()
        evals: list[int] = []

        def report(step: int, mean: float) -> bool:
            if step == 0:  # the untrained network's: it says nothing of the settings
                return False
            evals.append(step)
            # The pruner compares trials at equal steps; an evaluation put off (its share
            # of the wall time, run.eval_max_share) lands off the grid, so it is reported
            # at the grid step it was due at. The run's last evaluation (at its end, off
            # the grid) falls on a grid step already reported: Optuna would keep the first
            # and warn, so it is not reported (no other trial has a value there to weigh).
            grid = step // every * every
            if grid not in reported:
                reported.add(grid)
                trial.report(mean, grid)
            return trial.should_prune()

        result = train(cfg, run_dir=job.run_dir, on_eval=report, evaluate_untrained=True)
        steps, updates, train_s = result.env_steps, result.updates, result.wall_seconds
        done = {"steps": steps, "updates": updates, "evals": evals, "train_s": train_s}
        if result.ended_early:
            learning = Learning(untrained_score(job.run_dir))
            wall = time.perf_counter() - t0
            return TrialOutcome(job.number, None, True, **done, wall_s=wall, learning=learning)
        # The study made this run (its user wrote or trusted the config): its code runs.
        returns = evaluate_run(job.run_dir, job.eval_episodes, trust_code=True).tolist()
        # A multi-agent world's evaluations play fewer episodes than this says: its noise
        # is counted a little smaller, and the check warns a little less.
        episodes = cfg.run.episodes_per_eval()
        learning = judge_trial(job.run_dir, returns, cfg.dqn.batch_size, episodes)
        score = sum(returns) / len(returns)
        wall = time.perf_counter() - t0
        return TrialOutcome(job.number, score, False, **done, wall_s=wall, learning=learning)
    except KeyboardInterrupt:
        raise
    except Exception as e:
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return TrialOutcome(job.number, None, error=last, wall_s=time.perf_counter() - t0)
