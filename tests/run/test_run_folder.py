"""Nothing from the folder a run is opened in runs in any process: a received run (or study)
resumed from inside its own folder (``cd RUN && shoal train --resume .``) that holds files
named after modules a process imports lazily (``pynvml``, ``timeit``, ``tomllib``,
``multiprocessing``) trains as usual and none of those files runs, in the driver, a
rollout worker, the resource tracker, a Ray actor or a Ray trial. With ``--trust-code`` the
modules the run names are listed before any is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomli_w
import tomllib

import shoal
from shoal.config import load_config
from shoal.run.metrics import read_metrics

pytestmark = pytest.mark.timeout(400)

CLI = str(Path(sys.executable).parent / "shoal")

TINY = [
    "dqn.hidden=[16]",
    "dqn.batch_size=16",
    "run.total_steps=300",
    "run.learning_starts=100",
    "run.train_freq=4",
    "run.eval_every=300",
    "run.eval_episodes=2",
    "run.checkpoint_every=300",
    "run.progress=false",
    "run.stop_return=none",
    "env.max_episode_steps=100",
]

LAZY = ("pynvml", "timeit", "tomllib", "multiprocessing", "torchcomms", "opt_einsum")
"""Modules some process of a run imports after it started (measured before the fix: Ray
2.60's workers import ``timeit`` and, in a trial, ``pynvml`` and ``tomllib``; a spawned
worker and the resource tracker import ``multiprocessing`` before their path is set)."""

_PLANTED = textwrap.dedent(
    """\
    # Planted by the test: leaves a marker, then puts the real module in its place, so
    # that a process that imports it goes on as usual (training ends normally either way).
    import importlib, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "ran-" + __name__), "a") as f:
        f.write(" ".join(sys.argv)[:200] + "\\n")
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    del sys.modules[__name__]
    sys.modules[__name__] = importlib.import_module(__name__)
    """
)


def _plant(folder: Path) -> None:
    for name in LAZY:
        (folder / f"{name}.py").write_text(_PLANTED)


def _ran(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.glob("ran-*")}


def _fresh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` in a fresh process in ``cwd`` (the user's own shell: no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=360)


def test_a_local_ray_puts_nothing_of_the_driver_s_folder_on_its_workers_path(tmp_path):
    """The mechanism itself: a local Ray started from a folder gives its workers neither
    that folder on their module path nor as their working directory (Ray's default puts
    it in front of site-packages)."""
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / "sender_module.py").write_text("VALUE = 1\n")
    script = textwrap.dedent(
        """\
        import importlib.util, os, sys
        import ray
        from shoal.runners.ray.local import init_local_ray
        init_local_ray(ray, num_cpus=1)
        def look():
            return os.getcwd(), sys.path, importlib.util.find_spec("sender_module") is None
        cwd, path, absent = ray.get(ray.remote(look).remote())
        here = os.getcwd()
        print("OK" if absent and cwd != here and here not in path else f"BAD {cwd} {path}")
        ray.shutdown()
        """
    )
    out = _fresh([sys.executable, "-c", script], folder)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "OK", out.stdout


@pytest.mark.parametrize("runner", ["ray", "processes"])
def test_a_run_resumed_from_inside_its_folder_runs_nothing_there(runner, tmp_path):
    """A received run whose config names no code, with modules of those names in its
    folder, resumed from inside it: it trains on and none of them runs."""
    run = tmp_path / "run"
    extra = ["processes.workers=2"] if runner == "processes" else ["ray.actors=1"]
    shoal.train("cartpole", overrides=[*TINY, f"run.runner='{runner}'", *extra], run_dir=run)
    _plant(run)
    out = _fresh([CLI, "train", "--resume", ".", "--set", "run.total_steps=700"], run)
    assert out.returncode == 0, out.stderr
    assert _ran(run) == {}, _ran(run)
    assert int(read_metrics(run / "metrics.csv")[-1]["step"]) >= 700


def test_a_ray_study_resumed_from_inside_its_folder_runs_nothing_there(tmp_path, ray_session):
    """The same for a study whose trials run on Ray: the driver, its local Ray and each
    trial leave the study folder's files alone; the resumed trial completes."""
    from shoal.tune import SearchSpace, TuneSettings, tune

    base = load_config("cartpole", TINY)
    space = SearchSpace.build(base, {"space": {"dqn": {"lr": {"low": 1e-4, "high": 1e-2}}}})
    settings = TuneSettings(trials=1, eval_episodes=2, ray=True)
    study = tmp_path / "study"
    tune(base, space, settings, study, progress=False)
    _plant(study)
    out = _fresh([CLI, "tune", "--resume", ".", "--trials", "2", "--no-progress"], study)
    assert out.returncode == 0, out.stderr
    assert _ran(study) == {}, _ran(study)
    assert "2 complete" in out.stdout, out.stdout


def test_with_trust_code_the_modules_are_named_before_they_are_imported(tmp_path, ray_session):
    """--trust-code runs what the run names, and says which modules first: the line
    comes before anything the module prints as it is imported, in the driver and in the
    Ray actor that imports it too."""
    run = tmp_path / "run"
    shoal.train("cartpole", overrides=[*TINY, "run.runner='ray'", "ray.actors=1"], run_dir=run)
    (run / "sender_envs.py").write_text(
        "import os, sys\nprint('SENDER MODULE IMPORTED', file=sys.stderr)\n"
        "open(os.path.join(os.path.dirname(__file__), f'imported-{os.getpid()}'), 'w')\n"
    )
    data = tomllib.loads((run / "config.toml").read_text())
    data["env"]["imports"] = ["sender_envs"]
    (run / "config.toml").write_text(tomli_w.dumps(data))
    argv = [CLI, "train", "--resume", ".", "--set", "run.total_steps=700"]
    refused = _fresh(argv, run)
    assert refused.returncode == 2 and "sender_envs" in refused.stderr, refused.stderr
    assert not list(run.glob("imported-*"))
    out = _fresh([*argv, "--trust-code"], run)
    assert out.returncode == 0, out.stderr
    named = "shoal: trusting run '.': importing its code, module 'sender_envs' (env.imports)"
    assert named in out.stderr, out.stderr
    assert out.stderr.index(named) < out.stderr.index("SENDER MODULE IMPORTED"), out.stderr
    assert len(list(run.glob("imported-*"))) >= 2  # the driver and the actor
