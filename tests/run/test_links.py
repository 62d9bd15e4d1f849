"""A shared run directory may hold symbolic links planted to make shoal write elsewhere
(resume cut a torn last row of ``metrics.csv`` through one): every file shoal reads or
writes in a run is refused in one line if it is a link, and the link's target is left
byte-identical by resume, eval, export and plot."""

from __future__ import annotations

import shutil

import pytest

import shoal
from shoal.cli import main
from shoal.run.metrics import MetricsWriter

pytestmark = pytest.mark.timeout(120)

PRECIOUS = b"precious line 1\nprecious line 2, with no newline"
"""A file outside the run: a torn last row to a metrics writer (no final newline)."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained")
    overrides = [
        "dqn.hidden=[16]",
        "run.total_steps=400",
        "run.learning_starts=100",
        "run.eval_every=200",
        "run.eval_episodes=2",
        "run.progress=false",
        "run.stop_return=none",
        "env.max_episode_steps=100",
    ]
    shoal.train("cartpole", overrides=overrides, run_dir=out / "r")
    return out / "r"


def _plant(run, names, outside):
    """Move each named file out of the run and leave a link to it in its place; returns
    {target: its bytes}."""
    targets = {}
    for name in names:
        inside = run / name
        target = outside / name.replace("/", "_")
        if inside.is_dir():
            shutil.move(inside, target)
        else:
            target.write_bytes(PRECIOUS if name == "metrics.csv" else inside.read_bytes())
            inside.unlink()
        inside.symlink_to(target)
        targets[target] = None if target.is_dir() else target.read_bytes()
    return targets


COMMANDS = {
    "resume": ["train", "--resume", "{run}", "--set", "run.total_steps=600", "--no-progress"],
    "eval": ["eval", "{run}", "--episodes", "2"],
    "eval latest": ["eval", "{run}", "--episodes", "2", "--checkpoint", "latest"],
    "export": ["export", "{run}", "--out", "{out}/p.pt"],
    "plot": ["plot", "{run}"],
}


@pytest.mark.parametrize(
    "names",
    [
        ["metrics.csv", "config.toml", "checkpoints/latest.pt"],
        ["metrics.csv"],
        ["config.toml"],
        ["checkpoints/latest.pt"],
        ["checkpoints/best.pt"],
        ["checkpoints"],
        ["tb"],
    ],
    ids=lambda names: "+".join(names),
)
def test_links_in_a_run_are_refused_and_their_targets_left_as_they_were(
    names, trained, tmp_path, capsys
):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    outside = tmp_path / "outside"
    outside.mkdir()
    targets = _plant(run, names, outside)
    for command, argv in COMMANDS.items():
        code = main([a.format(run=run, out=tmp_path) for a in argv])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, (command, err)
        assert "symbolic link" in lines[0], (command, err)
    for target, data in targets.items():
        if data is not None:
            assert target.read_bytes() == data, target
    assert not (tmp_path / "p.pt").exists()


def test_the_metrics_writer_never_writes_through_a_link(tmp_path):
    target = tmp_path / "elsewhere.csv"
    target.write_bytes(PRECIOUS)
    (tmp_path / "metrics.csv").symlink_to(target)
    with pytest.raises(shoal.errors.RunDirError, match="symbolic link"):
        MetricsWriter(tmp_path / "metrics.csv")
    assert target.read_bytes() == PRECIOUS
