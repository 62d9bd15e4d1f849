"""A tuning study: Optuna's TPE sampler proposes configs, each trial is a shoal run, the
study's median pruner stops trials that evaluate below the others, the best config is
written as a TOML file ``shoal train`` takes.

A study lives in one directory, so it can be stopped and resumed (Ctrl-C, SIGTERM, a lost
machine):

``study.toml``
    the base config, the search space and the study's settings (what a resume reads);
``journal.log``
    Optuna's storage (every trial, its parameters, its evaluations, its end);
``trials/NNNN/``
    each trial's run directory (config, metrics, checkpoints, curve);
``trials.csv``
    a row per trial: state, score, untrained score (its network's at step 0, before any
    update), env steps, updates, evaluations (and the step of the last), seconds,
    parameters;
``best.toml``
    the best trial's config, for ``shoal train best.toml``, with the tuned config's own
    budget (not the trials') and a warning where the best trial may not have learned (it
    did not beat its untrained network by more than noise).

The driver asks Optuna for a trial, fixes its config, and hands it to an executor (a
process here, or a Ray task); trials report each evaluation to the storage themselves, so
pruning needs nothing of the driver. A trial scores its ``best.pt`` on fresh episodes,
since that is the policy a user keeps.
"""

from __future__ import annotations

import csv
import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shoal.config import (
    CONFIG_VERSION,
    Config,
    config_to_dict,
    load_config,
    read_toml,
    saved_config,
)
from shoal.errors import ConfigError, UntrustedCodeError, first_line
from shoal.tune.journal import check_record, check_trials
from shoal.tune.space import SearchSpace, apply_values
from shoal.tune.trial import TrialJob, TrialOutcome, make_pruner, open_storage, optuna_chose_it
from shoal.tune.untrained import Learning, judge_trial

__all__ = ["TuneResult", "TuneSettings", "resume_study", "tune"]

STUDY_NAME = "shoal"

STARTUP = "startup_point"
"""The user attr of a trial of the start-up design: its point's index."""

CUT = "stopped with the study"
"""The error of a trial a stop cut short: not the config's fault, so a resumed study runs
its parameters again and does not count it against the budget."""


@dataclass
class TuneSettings:
    """How a study searches and how much it may spend."""

    trials: int = 50
    """Trials in the study in all (a resumed study counts the ones before)."""
    hours: float | None = None
    """Wall-clock hours of the study across resumes; no trial starts after them (None:
    no limit). On N cores with ``parallel = N`` that is N CPU-hours."""
    parallel: int = 1
    """Trials side by side."""
    eval_episodes: int = 20
    """Greedy episodes that score a trial's best.pt."""
    seed: int = 0
    """The sampler's seed; trial k trains with run seed ``seed + k``."""
    startup_trials: int = 5
    """Trials of the start-up design before TPE models the results (Optuna's default is
    10 random ones, for studies of hundreds of trials; a study of a few CPU-hours runs
    10-30). The design draws every choice of a list of at most this many choices
    (:meth:`SearchSpace.startup_point`)."""
    prune_startup_trials: int = 3
    """Finished trials before any is pruned."""
    prune_warmup: float = 1 / 3
    """Share of a trial's env steps before it may be pruned."""
    ray: bool = False
    """Trials as tasks of a Ray cluster (``ray_address``, else RAY_ADDRESS, else a local
    Ray)."""
    ray_address: str = ""
    train_steps: int | None = None
    """``run.total_steps`` of the config the study tunes, without the trials' budget
    (``--steps``): what ``best.toml`` trains to (None: a study from before, the trials')."""
    train_minutes: float | None = None
    """Its ``run.max_minutes`` likewise (None: no time limit)."""

    def check(self) -> None:
        """A one-line ConfigError for a setting of the wrong type or out of range."""
        self._check_types()
        checks = [
            ("trials", self.trials, self.trials >= 1, ">= 1"),
            ("hours", self.hours, self.hours is None or self.hours > 0, "> 0"),
            ("parallel", self.parallel, 1 <= self.parallel <= 1024, "1 to 1024"),
            ("eval_episodes", self.eval_episodes, self.eval_episodes >= 1, ">= 1"),
            ("seed", self.seed, 0 <= self.seed < 2**63, "0 to 2**63 - 1"),
            ("startup_trials", self.startup_trials, self.startup_trials >= 0, ">= 0"),
            (
                "prune_startup_trials",
                self.prune_startup_trials,
                self.prune_startup_trials >= 0,
                ">= 0",
            ),
            ("prune_warmup", self.prune_warmup, 0 <= self.prune_warmup <= 1, "0 to 1"),
        ]
        for name, value, ok, allowed in checks:
            if not ok:
                raise ConfigError(f"tune {name}: {value!r} is out of range; allowed: {allowed}")

    def _check_types(self) -> None:
        """Each setting of its annotated type (a study file's, or a caller's, may hold
        any value; a float setting takes a whole number, no number takes true or false)."""
        import dataclasses
        import typing

        hints = typing.get_type_hints(TuneSettings)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            types = typing.get_args(hints[f.name]) or (hints[f.name],)
            if not any(_of_type(value, tp) for tp in types):
                kinds = " or ".join(_TYPE_NAMES[tp] for tp in types)
                raise ConfigError(f"tune {f.name}: {value!r} is not {kinds}")


_TYPE_NAMES = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: "a string",
    type(None): "none",
}


def _of_type(value: Any, tp: Any) -> bool:
    if isinstance(value, bool) or tp is bool:
        return isinstance(value, bool) and tp is bool
    if tp is float:
        return isinstance(value, (int, float))
    return isinstance(value, tp)


@dataclass
class TuneResult:
    """What a study found."""

    study_dir: str
    best_value: float | None
    """The best trial's score (None: no trial finished)."""
    best_trial: int | None
    best_config: str | None
    """``best.toml``'s path."""
    trials: dict[str, int] = field(default_factory=dict)
    """Trials by state (complete, pruned, fail)."""
    warning: str = ""
    """Why the best trial may not have learned ('': no reason to think so)."""
    none_learned: str = ""
    """Where no finished trial beat its untrained network: that, and what to raise ('':
    one did)."""
    failed: str = ""
    """Where every trial failed: that, and the first one's error ('': not so)."""


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError(
            "shoal tune needs Optuna: pip install 'shoal[tune]' (or pip install optuna)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def tune(
    base: Config,
    space: SearchSpace,
    settings: TuneSettings,
    study_dir: str | Path,
    *,
    progress: bool = True,
) -> TuneResult:
    """Start a study in ``study_dir`` (new or empty) and run it to its budget."""
    optuna = _optuna()
    settings.check()
    directory = Path(study_dir)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ConfigError(
            f"study directory '{directory}' exists; continue it with shoal tune --resume "
            f"{directory}, or name a new one"
        )
    _check_runner(base, settings)
    directory.mkdir(parents=True, exist_ok=True)
    from shoal.run.lock import DirectoryLock

    with DirectoryLock(directory, "study directory"):  # one process per study
        _write_study_file(directory, base, space, settings)
        return _Study(optuna, directory, base, space, settings, progress).run()


def resume_study(
    study_dir: str | Path,
    *,
    trials: int | None = None,
    hours: float | None = None,
    parallel: int | None = None,
    progress: bool = True,
    trust_code: bool = False,
    ray_address: str | None = None,
) -> TuneResult:
    """Continue a study from its directory, with its config, space and settings (the
    budget and parallel trials may be changed); trials the stop cut short run again.

    The study is loaded before anything is written: a study directory that is not whole
    (no study file, a journal missing, empty or cut short, another process on it) is one
    line and every file stays as it was. Its config is data: code it names runs only with
    ``trust_code`` (:mod:`shoal.run.consent`); a cluster it names is joined only when given
    again (``ray_address``), else trials run on a local Ray.
    """
    from shoal.run.imports import refusing_user_code
    from shoal.run.lock import DirectoryLock

    optuna = _optuna()
    directory = Path(study_dir)
    lock = DirectoryLock(directory, "study directory")
    lock.check_free()
    base, space, settings = _read_study(directory)
    _check_study_consent(base, space, directory, trust_code)
    _check_journal(directory / JOURNAL)
    _check_study_in(optuna, directory / JOURNAL, space)
    _local_ray_unless_given(base, settings, ray_address)
    for name, value in (("trials", trials), ("hours", hours), ("parallel", parallel)):
        if value is not None:
            setattr(settings, name, value)
    settings.check()
    _check_runner(base, settings)
    _check_ray(settings)  # before anything is written: a resume that cannot run changes nothing
    with lock, refusing_user_code(f"study '{directory}'", refuse=not trust_code):
        study = _Study(optuna, directory, base, space, settings, progress, resume=True)
        _write_study_file(directory, base, space, settings)
        return study.run()


JOURNAL = "journal.log"
"""Optuna's record of a study's trials, in the study directory."""

_STUDY_FILES = ("study.toml", JOURNAL, "trials.csv", "best.toml")
"""The files a study writes (besides its trials' run directories)."""


def _read_study(directory: Path) -> tuple[Config, SearchSpace, TuneSettings]:
    """The base config, space and settings a study directory's ``study.toml`` holds, its
    files checked first (no link, only regular files, and the journal, which Optuna
    appends to, with no other hard link); one line for a directory that is not a study."""
    from shoal.run.files import file_refusal, link_refused

    for name in (*_STUDY_FILES, "trials"):
        if (directory / name).is_symlink():
            raise ConfigError(link_refused(directory / name))
        if name != "trials" and (why := file_refusal(directory / name, writing=name == JOURNAL)):
            raise ConfigError(why)
    if not (directory / "study.toml").is_file():
        raise ConfigError(f"'{directory}' is not a study directory (it has no study.toml)")
    from shoal.run.imports import reading_imports_nothing

    path = directory / "study.toml"
    data = read_toml(path)
    _check_study_tables(data, path)
    base = saved_config(data["config"], f"study file '{path}' [config]")
    with reading_imports_nothing(f"study '{directory}'"):
        try:
            space = SearchSpace.build(base, {"space": data["space"]}, exact=True)
        except UntrustedCodeError:
            raise
        except ConfigError as e:
            raise ConfigError(f"study file '{path}' [space]: {e}") from None
    return base, space, _read_settings(data["settings"], path)


_STUDY_TABLES = ("settings", "space", "config")
"""The tables of the ``study.toml`` shoal tune writes."""


def _check_study_tables(data: dict[str, Any], path: Path) -> None:
    """One line unless ``data`` has the tables shoal tune writes, and only those."""
    unknown = sorted(set(data) - set(_STUDY_TABLES))
    missing = [name for name in _STUDY_TABLES if name not in data]
    wrong = [name for name in _STUDY_TABLES if name in data and not isinstance(data[name], dict)]
    if unknown:
        why = f"unknown table {unknown[0]!r}"
    elif missing:
        why = f"it has no [{missing[0]}] table"
    elif wrong:
        why = f"[{wrong[0]}] is {data[wrong[0]]!r}, not a table"
    else:
        return
    raise ConfigError(
        f"'{path}' is not a study file shoal tune wrote ({why}; it has [settings], [space] "
        "and [config])"
    )


def _read_settings(values: dict[str, Any], path: Path) -> TuneSettings:
    """The study's settings from its file's ``[settings]``: known keys, each of its type
    and in its range (one line naming the key otherwise)."""
    import dataclasses

    known = [f.name for f in dataclasses.fields(TuneSettings)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(
            f"study file '{path}' [settings]: unknown key {unknown[0]!r}; keys: {', '.join(known)}"
        )
    settings = TuneSettings(**values)
    try:
        settings.check()
    except ConfigError as e:
        raise ConfigError(f"study file '{path}' [settings]: {e}") from None
    return settings


def _check_journal(path: Path) -> None:
    """One line unless ``path`` is a whole journal: present, not empty, every line a
    complete JSON record (a stop while Optuna wrote one leaves the last cut short; the
    lines after it would be unreadable, so nothing is resumed on top of it)."""
    where = f"study '{path.parent}'"
    untouched = "nothing was resumed and every file is as it was"
    if not path.is_file():
        raise ConfigError(
            f"{where} has no {JOURNAL}, the record of its trials; {untouched} (start a new "
            "study to tune again)"
        )
    data = path.read_bytes()
    if not data.strip():
        raise ConfigError(
            f"{where}: {JOURNAL} is empty, its trials' record is lost; {untouched} (start a "
            "new study to tune again)"
        )
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if last and not line:
            return
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if record is None or last:
            what = "its last line is cut short" if last else f"line {number} is not a record"
            raise ConfigError(
                f"{where}: {JOURNAL} is damaged ({what}, {len(line)} bytes, as a stop while "
                f"it was written leaves it); {untouched}. To resume from the trials before "
                "it, remove that line"
            )
        problem = check_record(record)
        if problem:
            raise ConfigError(
                f"{where}: {JOURNAL} line {number} is JSON but not one of Optuna's records "
                f"({problem}), not what shoal tune wrote; {untouched}"
            )


def _check_study_consent(
    base: Config, space: SearchSpace, directory: Path, trust_code: bool
) -> None:
    """A study's files are data: the code its base config names, and any its space may
    pick for a trial, run only with the user's consent; a cluster address it searches is
    refused (a resume joins no cluster its files name)."""
    from shoal.run.consent import check_consent, code_in

    where = f"study '{directory}'"
    if "ray.address" in space.dimensions:
        raise ConfigError(
            f"{where} searches ray.address, and a resumed study joins no cluster its files "
            "name; nothing was resumed (start a new study to search it)"
        )
    picked = [
        code
        for d in space.dimensions.values()
        for choice in d.choices or ()
        for code in code_in(base, d.key, choice)
    ]
    check_consent(base, where, trust_code=trust_code, also=picked)


def _check_ray(settings: TuneSettings) -> None:
    """Ray importable, and the cluster answering where one is named (one line each)."""
    if not settings.ray:
        return
    from shoal.runners.ray.address import preflight
    from shoal.runners.ray.runner import _ray

    _ray()
    if settings.ray_address and settings.ray_address != "auto":
        preflight(settings.ray_address, "--ray-address")


def _check_study_in(optuna: Any, journal: Path, space: SearchSpace) -> None:
    """One line unless the (whole) journal holds shoal's study: Optuna's ``load_study``
    rule, a missing study is an error and never a new one; its records replayed by
    Optuna, its trials those of ``space`` with shoal's values (read only: nothing
    written)."""
    where = f"study '{journal.parent}': {JOURNAL}"
    untouched = "nothing was resumed and every file is as it was"
    try:  # records of Optuna's shape whose values Optuna cannot read (a date, a state)
        storage = open_storage(("journal", str(journal)))  # it replays them here
        names = optuna.study.get_all_study_names(storage)
        study = (
            optuna.load_study(study_name=STUDY_NAME, storage=storage)
            if STUDY_NAME in names
            else None
        )
    except (KeyError, ValueError, TypeError, AttributeError, AssertionError) as e:
        raise ConfigError(
            f"{where} holds records Optuna cannot replay ({first_line(e)}), not what shoal "
            f"tune wrote; {untouched}"
        ) from None
    if study is None:
        raise ConfigError(
            f"{where} holds no study {STUDY_NAME!r} (it holds "
            f"{', '.join(map(repr, names)) or 'none'}); {untouched}"
        )
    try:
        check_trials(study, space.dimensions, where)
    except ConfigError as e:
        raise ConfigError(f"{e}; {untouched}") from None


def _local_ray_unless_given(base: Config, settings: TuneSettings, given: str | None) -> None:
    """A resumed study joins no cluster its files name unless the user names it again:
    ``given`` (``--ray-address``) for the trials, none for the base config's ray runs."""
    from shoal.runners.ray.address import forget_saved_address, local_unless_given

    if given:
        settings.ray, settings.ray_address = True, given
    elif settings.ray_address:
        forget_saved_address(settings.ray_address, "study")
        settings.ray_address = ""
    local_unless_given(base, "study", "a new study with --set ray.address=")


def _check_runner(base: Config, settings: TuneSettings) -> None:
    if settings.ray and base.run.runner == "ray":
        raise ConfigError(
            "run.runner 'ray' inside Ray trials: tune the ray runner with local trials "
            "(drop --ray), or tune another runner on the cluster"
        )


def _write_study_file(directory: Path, base: Config, space: SearchSpace, s: TuneSettings) -> None:
    import tomli_w

    from shoal.run.files import atomic_write_text

    settings = {k: v for k, v in asdict(s).items() if v is not None}
    config = {"config_version": CONFIG_VERSION, **config_to_dict(base)}
    data = {"settings": settings, "space": space.as_toml(), "config": config}
    atomic_write_text(directory / "study.toml", tomli_w.dumps(data))


class _Study:
    """The driver of one study's session (see the module docstring)."""

    def __init__(
        self,
        optuna: Any,
        directory: Path,
        base: Config,
        space: SearchSpace,
        settings: TuneSettings,
        progress: bool,
        *,
        resume: bool = False,
    ) -> None:
        self.optuna, self.dir, self.base, self.space, self.s = (
            optuna,
            directory,
            base,
            space,
            settings,
        )
        self.pruner_args = {
            "n_startup_trials": settings.prune_startup_trials,
            "n_warmup_steps": int(base.run.total_steps * settings.prune_warmup),
        }
        # Absolute: a trial on Ray runs in a directory of Ray's (shoal.runners.ray.local).
        self.storage_spec: tuple[Any, ...] = ("journal", str((directory / JOURNAL).absolute()))
        storage = open_storage(self.storage_spec)
        try:
            done = len(optuna.load_study(study_name=STUDY_NAME, storage=storage).trials)
        except KeyError:  # no such study in the journal
            if resume:  # Optuna's load_study: a missing study is an error, never a new one
                raise ConfigError(
                    f"study '{directory}': {JOURNAL} holds no study {STUDY_NAME!r}; nothing "
                    "was resumed and every file is as it was"
                ) from None
            done = 0
        # Seeded by what was done before, so that a resumed study does not draw its
        # random start-up trials again.
        with optuna_chose_it():  # multivariate TPE: experimental before Optuna 5
            sampler = optuna.samplers.TPESampler(
                n_startup_trials=settings.startup_trials,
                multivariate=True,
                seed=settings.seed + done,
            )
        found = {"study_name": STUDY_NAME, "storage": storage, "sampler": sampler}
        pruner = make_pruner(self.pruner_args)
        if resume:  # load_study writes nothing (create_study adds a record every time)
            self.study = optuna.load_study(**found, pruner=pruner)
        else:
            self.study = optuna.create_study(
                **found, direction="maximize", pruner=pruner, load_if_exists=True
            )
        self.progress = progress
        self.executor: Any = None
        self.asked: dict[int, Any] = {}
        """Optuna's trial objects of the trials running, by number."""
        self.jobs: dict[int, TrialJob] = {}

    # --- the loop -----------------------------------------------------------------------
    def run(self) -> TuneResult:
        from shoal.run.preemption import preemption_signals
        from shoal.run.progress import TrainProgress

        self._fail_cut_trials()
        self.t0 = time.perf_counter()
        self.wall_before = float(self.study.user_attrs.get("wall_s", 0.0))
        bar = TrainProgress(self.s.trials, enabled=self.progress, description="trials")
        with preemption_signals(), bar as view:
            self.view = view
            view.update(self._finished(), best=self._best_line())
            self.executor = self._executor()
            try:
                self._loop()
            except KeyboardInterrupt as e:
                for number in self.executor.stop():  # cut: it will never report
                    self._tell(TrialOutcome(number, None, error=CUT))
                e.study_dir = str(self.dir)  # type: ignore[attr-defined]  # for the CLI's line
                raise
            finally:
                self._save_wall()
                self._write_trials_csv()
                self.executor.close()
        return self._result()

    def _loop(self) -> None:
        while True:
            while self.executor.running() < self.s.parallel and self._may_start():
                self._start_one()
            if not self.executor.running():
                return
            for outcome in self.executor.wait(timeout=5.0):
                self._tell(outcome)

    def _may_start(self) -> bool:
        if self._counted() >= self.s.trials:
            return False
        return self.s.hours is None or self._wall() < 3600 * self.s.hours

    def _ask(self) -> Any:
        """The next trial: a cut trial's parameters again (queued before), then the next
        point of the start-up design (:meth:`SearchSpace.startup_point`, seeded by the
        study's seed: a resumed study goes on with it), then TPE's. A study from before
        the design, with its start-up done, gets none."""
        trials = self.study.get_trials(deepcopy=False)
        k = sum(STARTUP in t.user_attrs for t in trials)
        waiting = self.optuna.trial.TrialState.WAITING
        startup = self.s.startup_trials
        if k < startup and self._counted() < startup and all(t.state != waiting for t in trials):
            point = self.space.startup_point(k, startup, self.s.seed)
            self.study.enqueue_trial(point, user_attrs={STARTUP: k}, skip_if_exists=False)
        return self.study.ask()

    def _start_one(self) -> None:
        trial = self._ask()
        values = self.space.sample(trial)
        values["run.seed"] = self.base.run.seed + trial.number
        values["run.progress"] = False
        try:
            cfg = apply_values(self.base, values)
        except ConfigError as e:  # keys that do not go together (eps_end > eps_start)
            trial.set_user_attr("error", f"not a valid config ({e})")
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            self.view.line(f"trial {trial.number}: not a valid config ({e})")
            return
        job = TrialJob(
            number=trial.number,
            trial_id=trial._trial_id,  # Optuna names a trial to other processes by it
            config=config_to_dict(cfg),
            run_dir=str((self.dir / "trials" / f"{trial.number:04d}").absolute()),
            storage=self.storage_spec,
            study_name=STUDY_NAME,
            pruner=self.pruner_args,
            eval_episodes=self.s.eval_episodes,
        )
        self.asked[trial.number], self.jobs[trial.number] = trial, job
        self.executor.start(job)

    def _tell(self, outcome: TrialOutcome) -> None:
        state = self.optuna.trial.TrialState
        number = outcome.number
        trial, job = self.asked.pop(number), self.jobs.pop(number)
        params = trial.params
        trial.set_user_attr("env_steps", outcome.steps)
        trial.set_user_attr("updates", outcome.updates)
        trial.set_user_attr("evals", outcome.evals)
        trial.set_user_attr("train_s", outcome.train_s)
        trial.set_user_attr("untrained", outcome.learning.untrained)
        if outcome.pruned:
            self.study.tell(trial, state=state.PRUNED)
            text = f"pruned after {outcome.steps} env steps"
        elif outcome.value is None:
            trial.set_user_attr("error", outcome.error)
            self.study.tell(trial, state=state.FAIL)
            text = f"failed: {outcome.error}"
        else:
            trial.set_user_attr("beat_untrained", outcome.learning.beat_untrained)
            trial.set_user_attr("doubt", outcome.learning.doubt)
            self.study.tell(trial, outcome.value)
            text = f"{outcome.value:.1f}"
            if self.study.best_trial.number == number:
                self._write_best(job, outcome.value, outcome.learning.doubt)
                text += " (best so far)"
        shown = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
        self.view.line(f"trial {number}: {text}, {outcome.wall_s:.0f} s  [{shown}]")
        self.view.update(self._finished(), best=self._best_line())
        self._save_wall()
        self._write_trials_csv()

    # --- files --------------------------------------------------------------------------
    def _write_best(self, job: TrialJob, value: float, doubt: str) -> None:
        """``best.toml``: the trial's config with the base's seed, name and output."""
        import tomli_w

        from shoal.run.files import atomic_write_text

        number = job.number
        cfg = load_config(None, values=job.config)
        # Trials hide their bars; a user trains the best config at a terminal.
        cfg.run.seed, cfg.run.progress = self.base.run.seed, True
        cfg.run.name, cfg.run.out = self.base.run.name, self.base.run.out
        head = (
            f"# shoal tune: trial {number} of the study in {self.dir}, best.pt scored "
            f"{value:.2f} over {self.s.eval_episodes} greedy episodes.\n"
            f"# Train it with: shoal train {self.dir / 'best.toml'}\n"
        )
        if self.s.train_steps is not None:  # the config's own budget, not the trials'
            limit = "" if cfg.run.max_minutes is None else f", {cfg.run.max_minutes} minutes"
            head += (
                f"# The trials trained {cfg.run.total_steps} env steps each{limit}; this"
                " config trains to its own budget.\n"
            )
            cfg.run.total_steps, cfg.run.max_minutes = self.s.train_steps, self.s.train_minutes
        if doubt:
            head += f"# Warning: it may not have learned: {doubt}.\n"
        atomic_write_text(self.dir / "best.toml", head + tomli_w.dumps(config_to_dict(cfg)))

    def _write_trials_csv(self) -> None:
        from shoal.run.files import atomic_write_text

        keys = list(self.space.dimensions)
        out = io.StringIO()
        writer = csv.writer(out)
        head = ["trial", "state", "score", "untrained", "env_steps", "updates", "evals"]
        writer.writerow([*head, "last_eval_step", "seconds", *keys])
        for t in self.study.trials:
            seconds = (
                (t.datetime_complete - t.datetime_start).total_seconds()
                if t.datetime_complete and t.datetime_start
                else ""
            )
            evals = t.user_attrs.get("evals", [])
            untrained = t.user_attrs.get("untrained")
            writer.writerow(
                [
                    t.number,
                    t.state.name.lower(),
                    "" if t.value is None else t.value,
                    "" if untrained is None else untrained,
                    t.user_attrs.get("env_steps", ""),
                    t.user_attrs.get("updates", ""),
                    len(evals),
                    evals[-1] if evals else "",
                    seconds,
                    *(t.params.get(k, "") for k in keys),
                ]
            )
        atomic_write_text(self.dir / "trials.csv", out.getvalue())

    # --- bookkeeping --------------------------------------------------------------------
    def _fail_cut_trials(self) -> None:
        """Trials a stop cut short run again: those it left running (the study was killed)
        are failed as cut, and each cut trial's parameters are queued once more."""
        state = self.optuna.trial.TrialState
        for t in self.study.trials:
            if t.state == state.RUNNING:
                self.optuna.trial.Trial(self.study, t._trial_id).set_user_attr("error", CUT)
                self.study.tell(t.number, state=state.FAIL)
        requeued = set(self.study.user_attrs.get("requeued", []))
        for t in self.study.get_trials(deepcopy=False):
            if t.user_attrs.get("error") == CUT and t.number not in requeued:
                self.study.enqueue_trial(t.params, skip_if_exists=False)
                requeued.add(t.number)
        self.study.set_user_attr("requeued", sorted(requeued))

    def _counted(self) -> int:
        """Trials that count against the budget: all but those a stop cut short."""
        return sum(t.user_attrs.get("error") != CUT for t in self.study.get_trials(deepcopy=False))

    def _finished(self) -> int:
        running = self.optuna.trial.TrialState.RUNNING
        return sum(t.state != running for t in self.study.trials)

    def _wall(self) -> float:
        return self.wall_before + time.perf_counter() - self.t0

    def _save_wall(self) -> None:
        self.study.set_user_attr("wall_s", self._wall())

    def _best_line(self) -> str:
        done = [t for t in self.study.trials if t.value is not None]
        if not done:
            return "-"
        best = self.study.best_trial
        return f"{best.value:.1f} (trial {best.number})"

    def _executor(self) -> Any:
        from shoal.tune.executors import LocalTrials

        if not self.s.ray:
            return LocalTrials()
        return _ray_executor(self)

    def _result(self) -> TuneResult:
        counts: dict[str, int] = {}
        for t in self.study.trials:
            counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
        try:
            best = self.study.best_trial
        except ValueError:
            return TuneResult(str(self.dir), None, None, None, counts, failed=self._all_failed())
        return TuneResult(
            str(self.dir),
            best.value,
            best.number,
            str(self.dir / "best.toml"),
            counts,
            self._learning(best).doubt,
            self._none_learned(),
        )

    def _learning(self, t: Any) -> Learning:
        """Whether finished trial ``t`` beat its untrained network, as the trial judged
        itself (its run directory may be on another machine of a Ray cluster); a trial of
        a study from before judged from its run directory here (its score's spread
        unknown: none)."""
        a = t.user_attrs
        if "doubt" in a:
            return Learning(a.get("untrained"), bool(a.get("beat_untrained")), str(a["doubt"]))
        run_dir = self.dir / "trials" / f"{t.number:04d}"
        r = self.base.run
        return judge_trial(run_dir, [t.value], self.base.dqn.batch_size, r.episodes_per_eval())

    def _none_learned(self) -> str:
        """What to raise where no finished trial beat its untrained network ('' where one
        did): the trials' env steps against the config's own, and the hours that budget
        takes at the trials' pace."""
        done = self.optuna.trial.TrialState.COMPLETE
        complete = self.study.get_trials(deepcopy=False, states=(done,))
        if not complete or any(self._learning(t).beat_untrained for t in complete):
            return ""
        steps = max(int(t.user_attrs.get("env_steps") or 0) for t in complete)
        own = self.s.train_steps
        line = f"no trial beat its untrained network: raise --steps (the trials trained {steps}"
        if own is None or own <= steps:
            return f"{line} env steps each)"
        line += f" env steps each; the config trains {own})"
        seconds = [
            self._seconds_at(t, own / steps)
            for t in complete
            if t.datetime_complete and t.datetime_start
        ]
        if not seconds or not steps:
            return line if self.s.hours is None else f"{line} and --hours"
        total = sum(seconds) / len(seconds) * self.s.trials / self.s.parallel
        took = (
            f"{self.s.trials} trials of {own} env steps take about {_duration(total)} at "
            f"these trials' pace, {self.s.parallel} side by side"
        )
        return f"{line}; {took}" if self.s.hours is None else f"{line} and --hours: {took}"

    @staticmethod
    def _seconds_at(t: Any, scale: float) -> float:
        """Seconds finished trial ``t`` would take at ``scale`` times its env steps: its
        training grows with them, its start and scoring do not (a trial of a study from
        before, which did not record its training time: all of it grows)."""
        seconds = (t.datetime_complete - t.datetime_start).total_seconds()
        train = float(t.user_attrs.get("train_s") or seconds)
        return seconds - train + train * scale

    def _all_failed(self) -> str:
        """Where every trial of the study failed: how many, and the first one's error
        ('' otherwise)."""
        trials = self.study.get_trials(deepcopy=False)
        fail = self.optuna.trial.TrialState.FAIL
        if not trials or any(t.state != fail for t in trials):
            return ""
        errors = [(t.number, t.user_attrs.get("error") or "") for t in trials]
        number, error = next(((n, e) for n, e in errors if e != CUT), errors[0])
        return f"every trial failed ({len(trials)}); trial {number}: {error or 'no error recorded'}"


def _ray_executor(study: _Study) -> Any:
    """Trials as Ray tasks: join the cluster at the study's address (or RAY_ADDRESS), else
    start a local Ray. On a cluster, trials on other machines reach the study's journal
    through a gRPC proxy this process serves (Optuna's); a local Ray's trials open the
    journal file itself."""
    import os
    import socket

    from shoal.run.imports import search_path
    from shoal.runners.ray.address import preflight
    from shoal.runners.ray.local import init_local_ray, join_cluster
    from shoal.runners.ray.runner import _ray
    from shoal.tune.executors import RayTrials

    ray = _ray()
    address = study.s.ray_address or os.environ.get("RAY_ADDRESS", "")
    started = not ray.is_initialized()
    if started:
        if address:
            preflight(address, "--ray-address" if study.s.ray_address else "RAY_ADDRESS")
            join_cluster(ray, address)
        else:
            init_local_ray(ray)
    if address:
        # run_grpc_proxy_server's own server, which the study can stop when it ends (that
        # function blocks for good); Optuna marks the proxy experimental (since 4.2).
        from optuna.storages._grpc.server import make_server

        host = ray.util.get_node_ip_address()
        with socket.socket() as probe:  # a free port on the address the cluster sees
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        pool = ThreadPoolExecutor(max_workers=10, thread_name_prefix="shoal-tune-storage")
        with optuna_chose_it():
            server = make_server(open_storage(study.storage_spec), host, port, pool)
        server.start()

        def stop_proxy() -> None:
            server.stop(grace=None).wait()
            pool.shutdown(wait=True)

        study.storage_spec = ("grpc", host, port)
        proxy = open_storage(study.storage_spec)
        proxy.wait_server_ready(timeout=60)  # before a trial on another machine asks it
        proxy.close()
        return RayTrials(ray, search_path(), started_ray=started, stop=stop_proxy)
    return RayTrials(ray, search_path(), started_ray=started)


def _duration(seconds: float) -> str:
    """Seconds as a person reads them: minutes below two hours, else hours."""
    if seconds < 7200:
        minutes = max(1, round(seconds / 60))
        return f"{minutes} minute{'s' if minutes > 1 else ''}"
    return f"{seconds / 3600:.1f} hours"


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
