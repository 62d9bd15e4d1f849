"""A run counts as solved only when a confirming evaluation on fresh starts agrees
(``run.confirm_solve``): the first evaluation past ``stop_return`` is the one picked on
the noise of its fixed starts."""

import numpy as np
import pytest

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.serial import SerialRunner

pytestmark = pytest.mark.timeout(120)


def scripted(monkeypatch, evals, confirms):
    """Evaluations return the next of ``evals`` (default starts) or ``confirms`` (any other
    seed); the seeds the confirmations asked for are recorded."""
    evals, confirms, seeds = list(evals), list(confirms), []

    def evaluate(self, seed=None):
        if seed is not None:
            seeds.append(seed)
        mean = (evals if seed is None else confirms).pop(0)
        return np.full(2, mean), {k: v.detach().clone() for k, v in self.learner.weights().items()}

    monkeypatch.setattr(SerialRunner, "evaluate", evaluate)
    return seeds


def test_an_unconfirmed_solve_trains_on_until_one_is_confirmed(tmp_path, tiny, monkeypatch):
    seeds = scripted(monkeypatch, [100.0, 480.0, 490.0, 476.0, 200.0], [300.0, 400.0, 477.0])
    over = tiny(run__stop_return=475, run__eval_every=100, run__total_steps=2000)
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    evals = [(int(r["step"]), float(r["eval_mean"])) for r in rows if r["kind"] == "eval"]
    confirms = [(int(r["step"]), float(r["eval_mean"])) for r in rows if r["kind"] == "confirm"]
    assert [m for _, m in evals][:4] == [100.0, 480.0, 490.0, 476.0]
    assert confirms == [(s, m) for (s, _), m in zip(evals[1:4], [300.0, 400.0, 477.0])]
    assert result.solved_step == evals[3][0]
    assert len(set(seeds)) == 3  # every confirmation on starts of its own
    best = load_checkpoint(RunDir(tmp_path / "r").best)
    assert best["eval_mean"] == 476.0  # the solve's weights, not the higher unconfirmed 490
    assert best["loop"]["step"] == result.solved_step


def test_without_confirmation_the_first_evaluation_past_the_bar_solves(tmp_path, tiny, monkeypatch):
    seeds = scripted(monkeypatch, [100.0, 480.0, 476.0], [])
    over = tiny(run__stop_return=475, run__eval_every=100, run__confirm_solve="false")
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    evals = [int(r["step"]) for r in rows if r["kind"] == "eval"]
    assert result.solved_step == evals[1]
    assert seeds == [] and not [r for r in rows if r["kind"] == "confirm"]


def test_a_run_stops_at_its_time_budget(tmp_path, tiny, monkeypatch):
    """run.max_minutes ends a run early (at an episode boundary) and it still finishes
    normally: final evaluation, checkpoint, curve."""
    from itertools import count

    from shoal.run.loop import RunLoop

    clock = count(0.0, 7.0)  # each reading of the run's clock is 7 s later
    monkeypatch.setattr(RunLoop, "wall", lambda self: next(clock))
    over = tiny(run__total_steps=100_000, run__max_minutes=0.5)
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert result.env_steps < 100_000 and result.wall_seconds >= 30
    assert RunDir(tmp_path / "r").checkpoint.is_file()
