"""A run someone sends you runs no code until you say so: on every path that opens a run
(eval, export, load_policy, mapf eval, --resume, tune --resume), a config that names a
module (in the working directory, in the run directory, installed) or a builtin as its
recipe or network stops in one line naming the modules, exit 2, with nothing imported or
called; with --trust-code the same run evaluates as before, and a builtin is still never
called."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest
import tomli_w
import tomllib
import torch

import shoal
from shoal.cli import main
from shoal.config import load_config, save_config
from shoal.errors import UntrustedCodeError
from shoal.run.checkpoint import save_checkpoint
from shoal.run.consent import check_consent
from shoal.run.directory import RunDir
from shoal.tune import SearchSpace, TuneSettings
from shoal.tune.study import _write_study_file

pytestmark = pytest.mark.timeout(120)

TINY = [
    "dqn.hidden=[16]",
    "dqn.batch_size=16",
    "run.total_steps=600",
    "run.learning_starts=100",
    "run.train_freq=4",
    "run.eval_every=300",
    "run.eval_episodes=2",
    "run.checkpoint_every=300",
    "run.progress=false",
    "run.stop_return=none",
    "run.torch_threads=1",
    "env.max_episode_steps=100",
]
"""A CartPole run of a second or two."""

ZEN = "Beautiful is better than ugly"
"""What importing the installed module ``this`` prints."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny CartPole run, trained once; each test opens a copy."""
    out = tmp_path_factory.mktemp("trained")
    shoal.train("cartpole", overrides=TINY, run_dir=out / "r")
    return out / "r"


@pytest.fixture(scope="module")
def mapf_trained(tmp_path_factory):
    """A MAPF run directory: its config and a best.pt of its network's initial weights."""
    from shoal.mapf.player import build_network

    run = RunDir(tmp_path_factory.mktemp("mapf") / "r")
    run.path.mkdir()
    cfg = load_config("mapf", ["mapf.channels=4", "mapf.hidden=8", "mapf.heads=2"])
    save_config(cfg, run.config)
    online = {k: v.clone() for k, v in build_network(cfg.extra["mapf"]).state_dict().items()}
    state = {"config": {}, "loop": {"step": 0}, "learner": {"online": online}, "eval_mean": 0.0}
    save_checkpoint(run.best, state)
    return run.path


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _set_config(run: Path, **keys: object) -> None:
    """Write ``section__key=value`` into the run's config.toml, as a sender would."""
    data = tomllib.loads((run / "config.toml").read_text())
    for name, value in keys.items():
        section, key = name.split("__")
        data[section][key] = value
    (run / "config.toml").write_text(tomli_w.dumps(data))


def _marker_module(folder: Path, marker: Path) -> str:
    """A module in ``folder`` that writes ``marker`` when imported; its (fresh) name."""
    name = f"mark_{uuid.uuid4().hex[:10]}"
    (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return name


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("shoal: error: "), err
    return lines[0]


CASES = {
    # case -> (config keys it sets, modules the line names); "{mod}": a marker module
    "working-directory env id": ({"env__id": "{mod}:CartPole-v1"}, ["{mod}"]),
    "working-directory module": ({"env__imports": ["{mod}"]}, ["{mod}"]),
    "run-directory module": ({"env__imports": ["{mod}"]}, ["{mod}"]),
    "installed module": ({"env__imports": ["this"]}, ["this"]),
    "recipe os:abort": ({"run__recipe": "os:abort"}, ["os"]),
    "network builtins:breakpoint": ({"dqn__network": "builtins:breakpoint"}, ["builtins"]),
    "network builtins:print": ({"dqn__network": "builtins:print"}, ["builtins"]),
}


def _received(case, run, tmp_path, monkeypatch):
    """Make ``run`` name the case's code; returns (marker, modules the line must name)."""
    keys, modules = CASES[case]
    marker = tmp_path / "marker"
    folder = run if case == "run-directory module" else tmp_path
    mod = _marker_module(folder, marker)
    monkeypatch.chdir(folder)  # the sender's module sits where the user runs shoal
    fill = {
        k: ([m.format(mod=mod) for m in v] if isinstance(v, list) else v.format(mod=mod))
        for k, v in keys.items()
    }
    _set_config(run, **fill)
    return marker, [m.format(mod=mod) for m in modules]


def _argv(path: str, run: Path, tmp_path: Path) -> list[str]:
    return {
        "eval": ["eval", str(run), "--episodes", "2"],
        "export": ["export", str(run), "--out", str(tmp_path / "p.pt")],
        "resume": ["train", "--resume", str(run), "--set", "run.total_steps=800", "--no-progress"],
        "mapf eval": ["mapf", "eval", str(run), "--agents", "2", "--generate", "--size", "6"]
        + ["--instances", "1", "--no-baselines", "--max-steps", "8"],
    }[path]


def _open(path, run, tmp_path, trust):
    """Open ``run`` on ``path``: the CLI's exit code, or load_policy's (0, or 2 raised)."""
    if path == "load_policy":
        try:
            shoal.load_policy(run, trust_code=trust)
        except UntrustedCodeError as e:
            print(f"shoal: error: {e}", file=sys.stderr)
            return 2
        return 0
    return main(_argv(path, run, tmp_path) + (["--trust-code"] if trust else []))


PATHS = ["eval", "export", "load_policy", "resume", "mapf eval"]


MAPF_CASES = ["working-directory module", "run-directory module", "installed module"]
"""A MAPF run's env is shoal's, its recipe 'mapf' and its network shoal's: its code is
what env.imports names."""


@pytest.mark.parametrize(
    "path, case",
    [(p, c) for p in PATHS for c in CASES if p != "mapf eval" or c in MAPF_CASES],
)
def test_a_received_run_runs_none_of_its_code_without_consent(
    path, case, trained, mapf_trained, tmp_path, capsys, monkeypatch
):
    run = _copy(mapf_trained if path == "mapf eval" else trained, tmp_path / "run")
    marker, modules = _received(case, run, tmp_path, monkeypatch)
    before = set(sys.modules)
    code = _open(path, run, tmp_path, trust=False)
    out, err = capsys.readouterr()
    line = _one_error_line(err)
    assert code == 2, err
    assert all(f"'{m}'" in line for m in modules) and "--trust-code" in line, line
    assert not marker.exists() and ZEN not in out
    assert not set(modules) & (set(sys.modules) - before), "a named module was imported"
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize("path", PATHS)
def test_with_consent_the_same_run_evaluates_as_before(
    path, trained, mapf_trained, tmp_path, capsys, monkeypatch
):
    run = _copy(mapf_trained if path == "mapf eval" else trained, tmp_path / "run")
    marker, _ = _received("run-directory module", run, tmp_path, monkeypatch)
    assert _open(path, run, tmp_path, trust=True) == 0, capsys.readouterr().err
    # MAPF eval imports no env module (its worlds are shoal's): consent lets it, no more
    assert marker.exists() == (path != "mapf eval")


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("run__recipe", "os:abort", "not a recipe class"),
        ("run__recipe", "builtins:breakpoint", "not a recipe class"),
        ("run__recipe", "shoal.api:shutil.rmtree", "reaches module 'shutil'"),
        ("dqn__network", "builtins:breakpoint", "built-in 'breakpoint'"),
        ("dqn__network", "builtins:print", "built-in 'print'"),
        ("dqn__network", "os:abort", "built-in 'abort'"),
    ],
)
def test_with_consent_a_builtin_is_still_never_called(
    key, value, needle, trained, tmp_path, capsys
):
    run = _copy(trained, tmp_path / "run")
    _set_config(run, **{key: value})
    assert main(_argv("eval", run, tmp_path) + ["--trust-code"]) == 2
    out, err = capsys.readouterr()
    if not value.startswith("shoal."):  # the trusted run's modules are named first
        trusted, _, err = err.partition("\n")
        assert trusted.startswith("shoal: trusting run ") and value.split(":")[0] in trusted
    assert needle in _one_error_line(err) and "not called" in err, err
    assert "Box(" not in out  # builtins:print was not called with the spaces


def test_a_network_handed_over_in_python_opens_in_the_same_process(tmp_path):
    """``shoal.train(network=f)`` records f's name; the process that was handed f opens
    the run without consent (it imports nothing of the run's)."""

    def local_net(observation_space, action_space):
        return torch.nn.Linear(observation_space.shape[0], action_space.n)

    result = shoal.train("cartpole", overrides=TINY, run_dir=tmp_path / "r", network=local_net)
    assert len(shoal.evaluate_run(result.run_dir, episodes=2)) == 2


def test_tune_resume_of_a_study_naming_code_is_refused_with_every_file_kept(
    tmp_path, capsys, monkeypatch
):
    pytest.importorskip("optuna")
    study = tmp_path / "study"
    study.mkdir()
    mod = _marker_module(tmp_path, tmp_path / "marker")
    monkeypatch.chdir(tmp_path)
    base = load_config("cartpole", [f"env.imports=['{mod}', 'this']"])
    space = SearchSpace.build(base, None)
    _write_study_file(study, base, space, TuneSettings(trials=2))
    (study / "journal.log").write_text('{"op_code": 0, "worker_id": "w", "study_name": "shoal"}\n')
    files = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    line = _one_error_line(err)
    assert f"'{mod}'" in line and "'this'" in line and "--trust-code" in line, line
    assert not (tmp_path / "marker").exists() and ZEN not in out
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == files


def test_resume_never_dials_the_cluster_a_run_names(trained, tmp_path, capsys, monkeypatch):
    """A received ray run's ray.address is not joined on resume: the run resumes on a
    local Ray, said in one line; given again, it is joined (the runner's checks stubbed
    to record the address it would use)."""
    from shoal.errors import ShoalError
    from shoal.runners.ray.runner import RayRunner

    run = _copy(trained, tmp_path / "run")
    _set_config(run, run__runner="ray", ray__address="10.255.255.1:6379")
    used = []

    def record(cfg):
        used.append(cfg.ray.address)
        raise ShoalError("stopped by the test")

    monkeypatch.setattr(RayRunner, "preflight", staticmethod(record))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    argv = ["train", "--resume", str(run), "--set", "run.total_steps=800", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "resuming on a local Ray" in err and "--ray-address 10.255.255.1:6379" in err, err
    assert main([*argv, "--ray-address", "10.255.255.1:6379"]) == 2
    assert "resuming on a local Ray" not in capsys.readouterr().err
    assert used == [None, "10.255.255.1:6379"], used


def test_reading_a_config_imports_nothing_even_where_a_check_needs_the_env(
    trained, tmp_path, capsys, monkeypatch
):
    """Self-play's check makes the env (to see it has an opponent): at the runner's
    preflight, never while a config is read, so a received run with self-play on is
    refused before its env's module is imported."""
    run = _copy(trained, tmp_path / "run")
    marker = tmp_path / "marker"
    mod = _marker_module(tmp_path, marker)
    monkeypatch.chdir(tmp_path)
    _set_config(
        run,
        env__id="shoal/ConnectFour-v0",
        env__imports=[mod],
        run__runner="processes",
        selfplay__enabled=True,
    )
    for argv in (_argv("eval", run, tmp_path), ["plot", str(run)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert not marker.exists(), argv
        if argv[0] == "eval":
            assert code == 2 and f"'{mod}'" in _one_error_line(err), err
    load_config(run / "config.toml")  # a config the user names: still read as data
    assert not marker.exists()


def test_tune_resume_refuses_code_its_search_space_may_pick(tmp_path, capsys, monkeypatch):
    pytest.importorskip("optuna")
    study = tmp_path / "study"
    study.mkdir()
    monkeypatch.chdir(tmp_path)
    base = load_config("cartpole")
    space = SearchSpace.build(base, {"space": {"dqn": {"network": {"choices": ["evilnet:f"]}}}})
    _write_study_file(study, base, space, TuneSettings(trials=2))
    (study / "journal.log").write_text('{"op_code": 0, "worker_id": "w", "study_name": "shoal"}\n')
    files = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    assert main(["tune", "--resume", str(study), "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "'evilnet' (dqn.network = 'evilnet:f')" in line and "--trust-code" in line, line
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == files


def test_a_builtin_a_library_replaced_is_still_refused(trained, tmp_path, capsys, monkeypatch):
    """Ray's driver replaces ``print`` with a function of its own: what a path names in
    ``builtins`` is refused by its path, whatever object is there now."""
    import builtins

    called, original = [], builtins.print

    def replaced(*args, **kwargs):  # as the factory it would be called with the spaces
        if args and not isinstance(args[0], str):
            called.append(args)
        else:
            original(*args, **kwargs)

    monkeypatch.setattr(builtins, "print", replaced)
    run = _copy(trained, tmp_path / "run")
    _set_config(run, dqn__network="builtins:print")
    code = main(_argv("eval", run, tmp_path) + ["--trust-code"])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2 and "built-in 'print'" in err and not called, (err, called)


def test_a_look_alike_module_name_is_not_printed_as_shoals():
    """A module named with a Greek omicron (``shοal.nets``) is not shoal's: the line that
    names it escapes the letter, so it cannot be read as shoal's own module."""
    cfg = load_config(None, ['dqn.network="sh\u03bfal.nets:make_q"'])
    with pytest.raises(UntrustedCodeError) as e:
        check_consent(cfg, "run 'r'", trust_code=False)
    assert "module 'sh\\u03bfal.nets' (dqn.network" in str(e.value)
    assert str(e.value).isascii()
