"""A runner with a learner of its own registers by one line and trains, checkpoints and
resumes through the same loop as the DQN runners."""

import sys
from pathlib import Path

import numpy as np
import pytest

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.schedule import UpdateSchedule
from shoal.runners import RUNNERS, register_runner

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def registered():
    sys.path.insert(0, str(Path(__file__).parent))  # where tabular_domain.py lies
    register_runner("tabular-test", "tabular_domain:TabularRunner")  # the one registry line
    yield
    sys.path.remove(str(Path(__file__).parent))
    RUNNERS.pop("tabular-test")


def test_a_runner_with_its_own_learner_trains_and_resumes(registered, tmp_path, tiny) -> None:
    over = tiny(
        run__runner="tabular-test",
        env__id="'Taxi-v4'",
        run__total_steps=1000,
        run__learning_starts=50,
        run__train_freq=2,
    )
    result = shoal.train(overrides=over, run_dir=tmp_path / "r")
    cfg_run = shoal.load_config(RunDir(tmp_path / "r").config).run
    assert result.updates == UpdateSchedule.from_config(cfg_run).due(result.env_steps) > 0
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert np.abs(state["q"]).sum() > 0 and state["taken"] == result.updates
    resumed = shoal.train(resume=tmp_path / "r", overrides=["run.total_steps=1500"])
    assert resumed.env_steps >= 1500
    assert resumed.updates == UpdateSchedule.from_config(cfg_run).due(resumed.env_steps)
