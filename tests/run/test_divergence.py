"""A run whose weights stop being numbers stops in one line: nothing non-finite is
checkpointed (``latest.pt`` keeps the last finite state, no ``error.pt``), and a checkpoint
holding NaN or inf is refused on load with every file left as it was."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

import shoal
from shoal.cli import main
from shoal.errors import DivergedError
from shoal.run.checkpoint import load_checkpoint, save_checkpoint
from shoal.run.divergence import first_non_finite

pytestmark = pytest.mark.timeout(180)

DATA = Path(__file__).parent / "data"
TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # user_code/ is the user's code, beside shoal, not in it

POISONED = [
    "env.id='UserCode/Poisoned-v0'",
    "env.imports=['user_code.envs']",
    "env.kwargs={poison_after = 400}",
    "dqn.hidden=[16]",
    "dqn.batch_size=16",
    "run.total_steps=3000",
    "run.learning_starts=50",
    "run.eval_every=200",
    "run.eval_episodes=2",
    "run.checkpoint_every=200",
    "run.progress=false",
    "run.stop_return=none",
]
"""A run whose env's observations turn to NaN at its 400th step."""


def test_a_diverging_run_stops_with_its_last_finite_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--run-dir", str(run), *[x for o in POISONED for x in ("--set", o)]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("shoal: error: training diverged: "), err
    assert "holds NaN or inf" in err[0] and "latest.pt keeps its last finite state" in err[0]
    latest = load_checkpoint(run / "checkpoints" / "latest.pt")  # finite, so it loads
    assert 0 < latest["loop"]["step"] < 3000
    assert not (run / "checkpoints" / "error.pt").exists()


def test_the_python_api_raises_diverged_error(tmp_path):
    with pytest.raises(DivergedError, match="training diverged"):
        shoal.train(None, overrides=POISONED, run_dir=tmp_path / "run")


@pytest.mark.parametrize("name", ["best.pt", "latest.pt"])
def test_a_checkpoint_holding_nan_is_refused_on_load(name, tmp_path, capsys):
    run = Path(shutil.copytree(DATA / "cuda_cartpole", tmp_path / "run"))
    path = run / "checkpoints" / name
    state = torch.load(path, map_location="cpu", weights_only=True)
    weight = next(iter(state["learner"]["online"].values()))
    weight.view(-1)[0] = float("nan")
    save_checkpoint(path, state)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    checkpoint = "best" if name == "best.pt" else "latest"
    commands = [
        ["eval", str(run), "--episodes", "2", "--checkpoint", checkpoint],
        ["export", str(run), "--out", str(tmp_path / "p.pt"), "--checkpoint", checkpoint],
    ]
    if name == "latest.pt":
        commands.append(["train", "--resume", str(run), "--set", "run.total_steps=900"])
    for argv in commands:
        assert main(argv) == 2, argv
        err = [x for x in capsys.readouterr().err.splitlines() if "made on a GPU" not in x]
        assert len(err) == 1 and "holds NaN or inf in the learner's online." in err[0], err
    assert before == {p: p.read_bytes() for p in before}
    assert not (tmp_path / "p.pt").exists()


def test_first_non_finite_names_the_tensor():
    tree = {"online": {"w": torch.zeros(2), "b": torch.tensor([1.0, float("inf")])}, "n": 3}
    assert first_non_finite(tree) == "online.b"
    assert first_non_finite({"steps": torch.arange(3), "w": [torch.ones(2)]}) is None
