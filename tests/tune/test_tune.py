"""shoal tune: a study end to end, pruning, a stopped study resumed, Ray trials, bad input."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.config import load_config
from shoal.errors import ConfigError
from shoal.tune import SearchSpace, TuneSettings, resume_study, tune

pytestmark = pytest.mark.timeout(240)

optuna = pytest.importorskip("optuna")

TINY = [
    "dqn.hidden=[32]",
    "run.total_steps=400",
    "run.learning_starts=100",
    "run.train_freq=4",
    "run.eval_every=200",
    "run.eval_episodes=2",
    "run.checkpoint_every=200",
    "run.stop_return=none",
    "env.max_episode_steps=100",
]
"""A CartPole base whose runs take a second or two."""

SMALL_SPACE = {
    "space": {
        "dqn": {
            "lr": {"low": 1e-4, "high": 1e-2, "log": True},
            "hidden": {"choices": [[16], [32, 32]]},
        }
    },
    "keep": [
        "dqn.gamma",
        "dqn.batch_size",
        "dqn.n_step",
        "dqn.target_period",
        "run.replay_ratio",
        "explore.eps_end",
        "explore.eps_decay_steps",
    ],
}


def sets(overrides):
    return [x for o in overrides for x in ("--set", o)]


def rows(study: Path) -> list[dict[str, str]]:
    with open(study / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_tiny_study_end_to_end(tmp_path, capfd):
    """Two trials, each a shoal run in the study; best.toml is the best trial's config and
    shoal train takes it. Nothing but shoal's lines reach the terminal (Optuna warned of
    values reported twice at a step, a trial's last evaluation past the grid)."""
    study = tmp_path / "study"
    code = _tune_cli(study, TINY)
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "trial 0:" in out and "trial 1:" in out and "best" in out
    assert "Warning" not in err and "warn(" not in err, err
    table = rows(study)
    assert [r["state"] for r in table] == ["complete", "complete"]
    assert sorted(p.name for p in (study / "trials").iterdir()) == ["0000", "0001"]
    for r in table:  # each trial ran the sampled config, on its own seed
        cfg = load_config(study / "trials" / f"{int(r['trial']):04d}" / "config.toml")
        assert cfg.dqn.lr == pytest.approx(float(r["dqn.lr"]))
        assert cfg.run.seed == int(r["trial"])
        assert cfg.run.total_steps == 400  # --set keys are the base, not searched
    best = max(table, key=lambda r: float(r["score"]))
    cfg = load_config(study / "best.toml")
    assert cfg.dqn.lr == pytest.approx(float(best["dqn.lr"]))
    assert f"best {float(best['score']):.2f} (trial {best['trial']}" in out
    assert cfg.run.seed == 0 and cfg.run.progress is True
    assert (
        main(
            [
                "train",
                str(study / "best.toml"),
                "--run-dir",
                str(tmp_path / "again"),
                "--no-progress",
                "--steps",
                "200",
            ]
        )
        == 0
    )


def test_a_budget_too_small_to_learn_is_said_and_best_toml_keeps_the_configs_own(tmp_path, capfd):
    """--steps 1000 on CartPole ends every trial at its learning start: the best trial's
    best.pt is untrained, which the study says; trials.csv reports each trial's updates and
    evaluations; best.toml trains to the preset's budget, not the trials'."""
    study = tmp_path / "study"
    argv = ["tune", "cartpole", "--steps", "1000", "--trials", "1", "--eval-episodes", "2"]
    over = sets(["run.eval_every=500", "run.eval_episodes=2", "run.stop_return=none"])
    code = main([*argv, *over, "--study-dir", str(study), "--no-progress"])
    _, err = capfd.readouterr()
    assert code == 0, err
    assert "warning: trial 0 may not have learned" in err and "best.pt is untrained" in err
    (row,) = rows(study)
    assert (row["updates"], row["evals"], row["last_eval_step"]) == ("0", "2", "1000")
    assert int(row["env_steps"]) >= 1000
    best = (study / "best.toml").read_text()
    assert "# Warning: it may not have learned" in best
    assert "The trials trained 1000 env steps each" in best
    cfg = load_config(study / "best.toml")
    assert cfg.run.total_steps == load_config("cartpole").run.total_steps == 50_000
    assert cfg.run.max_minutes is None


def test_a_trial_below_the_others_is_pruned(tmp_path):
    """A trial whose evaluation falls below the median of the finished ones at the same
    step ends there (the run stops early, checkpointed) and is told pruned."""
    from shoal.tune.trial import TrialJob, make_pruner, open_storage, run_trial

    storage_spec = ("journal", str(tmp_path / "journal.log"))
    pruner = {"n_startup_trials": 1, "n_warmup_steps": 0}
    study = optuna.create_study(
        study_name="s",
        storage=open_storage(storage_spec),
        direction="maximize",
        pruner=make_pruner(pruner),
    )
    lr = optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True)
    study.add_trial(
        optuna.trial.create_trial(
            value=500.0,
            params={"dqn.lr": 1e-3},
            distributions={"dqn.lr": lr},
            intermediate_values={step: 500.0 for step in range(0, 10_001, 100)},
        )
    )
    trial = study.ask({"dqn.lr": lr})
    base = load_config(None, TINY + ["run.total_steps=2000"])
    from shoal.config import config_to_dict

    job = TrialJob(
        0,
        trial._trial_id,
        config_to_dict(base),
        str(tmp_path / "run"),
        storage_spec,
        "s",
        pruner,
        2,
    )
    outcome = run_trial(job)
    assert outcome.pruned and outcome.value is None
    assert 200 <= outcome.steps < 2000
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").is_file()


def test_the_run_loop_ends_a_run_when_on_eval_says_so(tmp_path):
    import shoal

    seen = []

    def on_eval(step: int, mean: float) -> bool:
        seen.append(step)
        return step >= 400

    r = shoal.train(
        "cartpole",
        overrides=TINY + ["run.total_steps=2000", "run.progress=false"],
        run_dir=tmp_path / "r",
        on_eval=on_eval,
    )
    assert r.ended_early and 400 <= r.env_steps < 2000
    assert seen[:2] == [200, 400]
    r = shoal.train(
        "cartpole",
        overrides=TINY + ["run.progress=false"],
        run_dir=tmp_path / "s",
        on_eval=lambda step, mean: False,
    )
    assert not r.ended_early and r.env_steps >= 400
    # True at the evaluation that ends the budget, or at the one after training: the run
    # had its budget, it did not end early (a tuner would call it pruned).
    r = shoal.train(
        "cartpole",
        overrides=TINY + ["run.progress=false", "run.eval_every=300"],
        run_dir=tmp_path / "t",
        on_eval=lambda step, mean: step >= 400,
    )
    assert not r.ended_early and r.env_steps >= 400
    r = shoal.train(
        "cartpole",
        overrides=TINY + ["run.progress=false"],
        run_dir=tmp_path / "u",
        on_eval=lambda step, mean: step >= 400,
    )
    assert not r.ended_early and r.env_steps >= 400


def test_a_run_evaluates_its_untrained_network_first_when_asked(tmp_path):
    """evaluate_untrained: an eval row at step 0 with no update, given to on_eval, whatever
    run.eval_every (here past the budget: the run's own evaluation is its last)."""
    import shoal
    from shoal.run.metrics import read_metrics

    seen = []
    shoal.train(
        "cartpole",
        overrides=[*TINY, "run.progress=false", "run.eval_every=1000"],
        run_dir=tmp_path / "r",
        on_eval=lambda step, mean: seen.append(step) or False,
        evaluate_untrained=True,
    )
    evals = [r for r in read_metrics(tmp_path / "r" / "metrics.csv") if r["kind"] == "eval"]
    assert [(r["step"], r["updates"]) for r in evals][0] == ("0", "0")
    assert seen[0] == 0 and len(seen) == len(evals) == 2 and int(evals[1]["updates"]) > 0


def _wait_for(predicate, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_stopped_study_resumes_and_runs_its_cut_trial_again(tmp_path):
    """SIGTERM stops the study (exit 143) with its trials checkpointed; --resume runs the
    cut trial's parameters again and ends at the budget, the cut one not counted."""
    study = tmp_path / "study"
    args = [
        "tune",
        "cartpole",
        *sets(TINY),
        "--set",
        "run.total_steps=3000",
        "--trials",
        "3",
        "--eval-episodes",
        "2",
        "--study-dir",
        str(study),
        "--no-progress",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli", *args],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: (study / "trials" / "0001" / "metrics.csv").is_file(), 120)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err
    assert f"continue with `shoal tune --resume {study}`" in err
    cut = [r for r in rows(study) if r["state"] == "fail"]
    assert cut and (study / "trials" / f"{int(cut[0]['trial']):04d}" / "checkpoints").is_dir()
    result = resume_study(study, progress=False)
    table = rows(study)
    complete = [r for r in table if r["state"] == "complete"]
    assert len(complete) == 3 and result.trials.get("complete") == 3
    for r in cut:  # the cut trial's parameters ran again
        again = [c for c in complete if c["dqn.lr"] == r["dqn.lr"]]
        assert again, (r, table)
    assert result.best_config and Path(result.best_config).is_file()


def test_trials_on_ray_report_through_the_study_s_storage_proxy(tmp_path, ray_session):
    """Trials as Ray tasks; with a cluster address they reach the study through its gRPC
    proxy (the journal file is on the driver's machine)."""
    base = load_config("cartpole", TINY)
    space = SearchSpace.build(base, SMALL_SPACE)
    settings = TuneSettings(trials=2, parallel=2, eval_episodes=2, ray=True, ray_address="auto")
    result = tune(base, space, settings, tmp_path / "study", progress=False)
    assert result.trials == {"complete": 2}
    assert [r["state"] for r in rows(tmp_path / "study")] == ["complete", "complete"]
    # the storage proxy stopped with the study: no thread of it is left
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-tune-storage")]


def test_search_space_keys_are_checked_against_the_config():
    base = load_config("cartpole", TINY)
    space = SearchSpace.build(base, SMALL_SPACE, fixed=["dqn.lr"])
    assert list(space.dimensions) == ["dqn.hidden"]  # lr set by the user, the rest kept
    default = SearchSpace.build(base)
    assert {"dqn.lr", "dqn.gamma", "run.replay_ratio"} <= set(default.dimensions)
    steps = SearchSpace.build(
        base, {"space": {"explore": {"eps_decay_steps": {"low": 1e2, "high": 1e3}}}}
    )
    d = steps.dimensions["explore.eps_decay_steps"]
    assert (d.low, d.high) == (100, 1000) and isinstance(d.low, int)
    bad = [
        ({"space": {"dqn": {"lrr": {"low": 1, "high": 2}}}}, "'dqn.lrr'"),
        ({"space": {"dqn": {"lr": {"low": -1.0, "high": 1e-3}}}}, "low = -1.0"),
        ({"space": {"dqn": {"lr": {"low": 1e-2, "high": 1e-3}}}}, "must be below high"),
        ({"space": {"dqn": {"hidden": {"choices": []}}}}, "non-empty list"),
        ({"space": {"dqn": {"hidden": {"choices": [[0]]}}}}, "choice [0]"),
        ({"space": {"dqn": {"lr": {"low": 0.0, "high": 1.0, "log": True}}}}, "log scale"),
        ({"space": {"dqn": {"lr": 0.1}}}, "expected {low"),
        ({"keep": ["nope.x"]}, "'nope.x'"),
        ({"spaces": {}}, "unknown table 'spaces'"),
    ]
    for data, needle in bad:
        with pytest.raises(ConfigError, match=None) as e:
            SearchSpace.build(base, data)
        assert needle in str(e.value) and "\n" not in str(e.value), (data, str(e.value))


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--hours", "0"], "tune hours: 0.0 is out of range"),
        (["--trials", "0"], "argument --trials: '0' is out of range"),
        (["--parallel", "0"], "argument --parallel: '0' is out of range"),
        (["--space", "SPACE"], "search space key 'dqn.lrr'"),
        (["--space", "MISSING"], "MISSING"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, extra, needle):
    space = tmp_path / "space.toml"
    space.write_text("[space.dqn]\nlrr = { low = 1e-4, high = 1e-3 }\n")
    extra = [
        str(space) if e == "SPACE" else str(tmp_path / "missing.toml") if e == "MISSING" else e
        for e in extra
    ]
    study = tmp_path / "study"
    try:
        code = main(["tune", "cartpole", "--study-dir", str(study), "--no-progress", *extra])
    except SystemExit as e:  # a bad flag: argparse's, in shoal's one line
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and err.startswith("shoal: error:"), err
    assert needle.replace("MISSING", "missing.toml") in err
    assert not study.exists()


def test_without_optuna_tune_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    code = main(["tune", "cartpole", "--study-dir", str(tmp_path / "s")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "pip install 'shoal[tune]'" in err


def test_an_existing_study_directory_is_refused(tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    (study / "x").write_text("mine")
    code = main(["tune", "cartpole", "--study-dir", str(study), "--no-progress"])
    _, err = capsys.readouterr()
    assert code == 2 and "--resume" in err and (study / "x").read_text() == "mine"


def test_resume_of_what_is_not_a_study_is_one_line_exit_2(tmp_path, capsys):
    assert main(["tune", "--resume", str(tmp_path)]) == 2
    assert "is not a study directory" in capsys.readouterr().err
    (tmp_path / "study.toml").write_text("[settings]\ntrials = 3\n")
    assert main(["tune", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a study file shoal tune wrote" in err and err.count("\n") == 1


def _crafted_study(folder: Path, name: str = "shoal") -> Path:
    """A study directory as shoal tune leaves it after one finished trial, made with
    Optuna directly (no run trains)."""
    from shoal.tune.study import _write_study_file
    from shoal.tune.trial import open_storage

    base = load_config("cartpole", TINY)
    space = SearchSpace.build(base, SMALL_SPACE)
    _write_study_file(folder, base, space, TuneSettings(trials=3))
    storage = open_storage(("journal", str(folder / "journal.log")))
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    trial = study.ask()
    space.sample(trial)
    study.tell(trial, 1.0)
    (folder / "trials.csv").write_text("trial,state\n0,complete\n")
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("damage", ["missing", "empty", "torn", "middle", "other study"])
def test_resume_of_a_damaged_journal_is_one_line_and_every_file_is_kept(tmp_path, capsys, damage):
    study = _crafted_study(tmp_path / "study", "other" if damage == "other study" else "shoal")
    journal = study / "journal.log"
    data = journal.read_bytes()
    if damage == "missing":
        journal.unlink()
    elif damage == "empty":
        journal.write_bytes(b"")
    elif damage == "torn":
        journal.write_bytes(data[: len(data) - 7])  # the last record cut mid-line
    elif damage == "middle":
        first = data.index(b"\n") + 1
        journal.write_bytes(data[:first] + b'{"op_code": \n' + data[first:])
    files = _files(study)
    assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shoal: error:"), err
    assert "journal.log" in err and "every file is as it was" in err, err
    assert _files(study) == files


@pytest.mark.parametrize(
    "name, make, needle",
    [
        ("journal.log", "fifo", "is a FIFO, not a regular file"),
        ("study.toml", "fifo", "is a FIFO, not a regular file"),
        ("journal.log", "hard link", "has 2 hard links"),
    ],
)
def test_a_study_file_that_is_not_a_file_of_its_own_is_one_line(
    tmp_path, capsys, name, make, needle
):
    """A FIFO would block the resume for good; Optuna appends to the journal in place,
    so a hard link would write a file elsewhere."""
    study = _crafted_study(tmp_path / "study")
    target = study / name
    if make == "fifo":
        target.unlink()
        os.mkfifo(target)
    else:
        os.link(target, tmp_path / "elsewhere.log")
    files = {p: p.read_bytes() for p in study.rglob("*") if p.is_file() and not p.is_fifo()}
    assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shoal: error:") and needle in err, err
    assert {p: p.read_bytes() for p in files} == files


def test_a_study_another_process_runs_is_refused_untouched(tmp_path, capsys):
    from shoal.run.lock import DirectoryLock

    study = _crafted_study(tmp_path / "study")
    with DirectoryLock(study, "study directory"):
        files = _files(study)
        assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"in use by process {os.getpid()} " in err and err.count("\n") == 1, err
    assert _files(study) == files


# --- whether trials learned: the untrained network's score -----------------------------------
def _tune_cli(study: Path, overrides: list[str], *extra: str) -> int:
    return main(
        [
            "tune",
            "cartpole",
            *sets(overrides),
            "--trials",
            "2",
            "--eval-episodes",
            "2",
            "--study-dir",
            str(study),
            "--no-progress",
            *extra,
        ]
    )


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("shoal: warning:")]


def test_a_study_where_nothing_learns_says_so_and_what_to_raise(tmp_path, capfd):
    """Trials that update (their first evaluation after learning began) but cannot learn
    (lr 1e-12: their greedy policy never changes) are caught by each trial's evaluation
    of its untrained network at step 0: the end says the best trial may not have learned
    and that no trial beat its untrained network, with the trials' env steps and the
    config's own; best.toml carries the warning; trials.csv the untrained score."""
    study = tmp_path / "study"
    over = [o for o in TINY if not o.startswith("run.total_steps")]
    over += ["run.eval_every=400", "dqn.lr=1e-12"]
    space = _small_space(tmp_path)
    code = _tune_cli(study, over, "--steps", "400", "--hours", "1", "--space", space)
    _, err = capfd.readouterr()
    assert code == 0, err
    table = rows(study)
    assert all(int(r["updates"]) > 0 and r["evals"] == "1" for r in table), table
    assert all(r["untrained"] != "" for r in table), table
    best, none_learned = _warnings(err)
    assert best.startswith("shoal: warning: trial ") and "may not have learned" in best, err
    steps = max(int(r["env_steps"]) for r in table)
    assert none_learned.startswith("shoal: warning: no trial beat its untrained network"), err
    assert f"raise --steps (the trials trained {steps} env steps each; the config trains " in (
        none_learned
    )
    assert "50000) and --hours: 2 trials of 50000 env steps take about " in none_learned
    assert "# Warning: it may not have learned" in (study / "best.toml").read_text()


def test_every_evaluation_equal_to_the_untrained_score_warns(tmp_path, capfd):
    """A task where every policy scores the same (one-step CartPole episodes: 1.0 each):
    a spread of 0 is no evidence of learning, and the study says every evaluation scored
    the untrained network's score."""
    study = tmp_path / "study"
    code = _tune_cli(study, [*TINY, "env.max_episode_steps=1"], "--space", _small_space(tmp_path))
    _, err = capfd.readouterr()
    assert code == 0, err
    said = "every evaluation scored 1.0, the untrained network's score"
    assert said in _warnings(err)[0], err
    assert f"# Warning: it may not have learned: {said}." in (study / "best.toml").read_text()
    assert {r["untrained"] for r in rows(study)} == {"1.0"}


def _small_space(tmp_path: Path) -> str:
    """A space file searching dqn.gamma alone (TINY's --set keys are fixed)."""
    import tomli_w

    keep = [k for k in SMALL_SPACE["keep"] if k != "dqn.gamma"]
    space = {"space": {"dqn": {"gamma": {"choices": [0.9, 0.99]}}}, "keep": keep}
    path = tmp_path / "space.toml"
    path.write_text(tomli_w.dumps(space))
    return str(path)


class _Outcomes:
    """An executor whose trials end at once with a given outcome (no run trains): the
    study's driver, sampler and files alone."""

    def __init__(self, value: float | None = 0.0, error: str = "") -> None:
        self.value, self.error, self.ended = value, error, []

    def start(self, job) -> None:
        from shoal.tune.trial import TrialOutcome

        self.ended.append(TrialOutcome(job.number, self.value, error=self.error))

    def running(self) -> int:
        return len(self.ended)

    def wait(self, timeout=None):
        ended, self.ended = self.ended, []
        return ended

    def stop(self) -> list[int]:
        return []

    def close(self) -> None:
        pass


def _no_training(monkeypatch, **outcome) -> None:
    from shoal.tune.study import _Study

    monkeypatch.setattr(_Study, "_executor", lambda self: _Outcomes(**outcome))


def test_the_start_up_trials_draw_every_choice(tmp_path, monkeypatch):
    """The start-up trials are a design, not independent draws: every choice of a list of
    at most startup_trials choices is drawn in them, and each range once in each of
    startup_trials strata, for any seed, in a study resumed part way too. (Five
    independent draws of five choices draw all of them 4% of the time; seed 0 drew
    run.replay_ratio 0.125, 0.0625, 0.125, 0.125, 0.0625, and TPE, every score tied at
    0.0, went on with trial 0's.)"""
    import math

    _no_training(monkeypatch)
    base = load_config("cartpole", ["run.total_steps=8000"])
    space = SearchSpace.build(base)
    for seed in range(8):
        study = tmp_path / f"study{seed}"
        tune(base, space, TuneSettings(trials=2, seed=seed), study, progress=False)
        resume_study(study, trials=5, progress=False)  # the design goes on after a resume
        table = rows(study)
        assert len(table) == 5
        for key, d in space.dimensions.items():
            drawn = [r[key] for r in table]
            if d.choices is not None:
                assert len(set(drawn)) == min(5, len(d.choices)), (seed, key, drawn)
                assert set(drawn) <= {str(c) for c in d.choices}, (seed, key, drawn)
                continue
            scale = math.log if d.log else float
            top = d.high + 1 if isinstance(d.low, int) else d.high
            share = [(scale(float(x)) - scale(d.low)) / (scale(top) - scale(d.low)) for x in drawn]
            assert sorted(min(int(s * 5), 4) for s in share) == [0, 1, 2, 3, 4], (seed, key)


def test_a_study_whose_every_trial_failed_exits_1(tmp_path, capfd, monkeypatch):
    _no_training(monkeypatch, value=None, error="RuntimeError: boom")
    study = tmp_path / "study"
    code = _tune_cli(study, TINY)
    out, err = capfd.readouterr()
    assert code == 1, (out, err)
    assert err.count("\n") == 1 and err.startswith("shoal: error: study "), err
    assert "every trial failed (2); trial 0: RuntimeError: boom" in err
    assert [r["state"] for r in rows(study)] == ["fail", "fail"]


def _toml_edit(path: Path, edit) -> None:
    import tomli_w
    import tomllib

    data = tomllib.loads(path.read_text())
    edit(data)
    path.write_text(tomli_w.dumps(data))


def _journal_insert(path: Path, line: str) -> None:
    data = path.read_bytes()
    first = data.index(b"\n") + 1
    path.write_bytes(data[:first] + line.encode() + b"\n" + data[first:])


BAD_STUDY_FILES = {
    "a setting of the wrong type": (
        lambda s: _toml_edit(s / "study.toml", lambda d: d["settings"].update(trials="x")),
        "[settings]: tune trials: 'x' is not a whole number",
    ),
    "an unknown setting": (
        lambda s: _toml_edit(s / "study.toml", lambda d: d["settings"].update(trails=3)),
        "[settings]: unknown key 'trails'",
    ),
    "a space that is not a table": (
        lambda s: _toml_edit(s / "study.toml", lambda d: d.update(space=3)),
        "[space] is 3, not a table",
    ),
    "a table shoal does not write": (
        lambda s: _toml_edit(s / "study.toml", lambda d: d.update(extra={"a": 1})),
        "unknown table 'extra'",
    ),
    "a JSON object that is no Optuna record": (
        lambda s: _journal_insert(s / "journal.log", '{"hello": 1}'),
        "journal.log line 2 is JSON but not one of Optuna's records (op_code None",
    ),
    "a record of the wrong type": (
        lambda s: _journal_insert(
            s / "journal.log", '{"op_code": 8, "worker_id": "w", "trial_id": "0", "user_attr": {}}'
        ),
        "operation 8's 'trial_id' is '0'",
    ),
    "a record Optuna cannot replay": (
        lambda s: _journal_insert(
            s / "journal.log",
            '{"op_code": 0, "worker_id": "w", "study_name": "x", "directions": [7]}',
        ),
        "holds records Optuna cannot replay (ValueError: 7 is not a valid StudyDirection)",
    ),
    "a study value shoal did not write": (
        lambda s: (
            (s / "journal.log")
            .open("a")
            .write(
                '{"op_code": 2, "worker_id": "w", "study_id": 0, "user_attr": {"wall_s": "x"}}\n'
            )
        ),
        "the study's 'wall_s' is 'x', not what shoal wrote",
    ),
}


@pytest.mark.parametrize("damage", list(BAD_STUDY_FILES))
def test_resume_of_study_files_shoal_did_not_write_is_one_line_and_every_file_is_kept(
    tmp_path, capfd, damage
):
    """Valid TOML or JSON that is not what shoal tune wrote is one line, exit 2, before
    anything is written (no traceback from a settings check or from Optuna's replay)."""
    study = _crafted_study(tmp_path / "study")
    edit, needle = BAD_STUDY_FILES[damage]
    edit(study)
    files = _files(study)
    assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    _, err = capfd.readouterr()
    assert err.count("\n") == 1 and err.startswith("shoal: error:"), err
    assert needle in err, err
    assert _files(study) == files
