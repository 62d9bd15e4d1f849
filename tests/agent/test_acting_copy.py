"""Serial acting on a copy of the learner's weights (``run.acting_device``): what a learner
on a GPU gets, checked on a CPU with the 'cpu' copy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shoal.config import load_config
from shoal.errors import ConfigError
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(120)


def serial(*extra: str):
    cfg = load_config(
        "cartpole",
        ["run.device='cpu'", "run.learning_starts=64", "dqn.batch_size=16", *extra],
    )
    return runner_for(cfg)(cfg)


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[n], b[n]) for n in a)


def test_a_cpu_learner_acts_on_its_live_weights_by_default():
    runner = serial()
    try:
        assert runner.acting_copy is None
        assert runner.actor.params is runner.learner.params
        assert "acting" not in runner.update_line
    finally:
        runner.close()


def test_a_copy_is_refreshed_every_acting_refresh_updates_and_before_an_evaluation():
    runner = serial("run.acting_device='cpu'", "run.acting_refresh=5", "run.eval_episodes=1")
    try:
        copy = runner.acting_copy
        assert copy is not None and runner.actor.params is copy.params
        assert runner.update_line.endswith("; acting cpu")
        step = 0
        while runner.learner.updates < 12:
            got = runner.collect(step)
            step += got.steps
            runner.learn(step, got.steps)
            stale = runner.learner.updates - copy.refreshed_at
            assert 0 <= stale < 5  # never more than acting_refresh updates old
            assert same(copy.params, runner.learner.params) == (stale == 0)
        runner.evaluate()
        assert copy.refreshed_at == runner.learner.updates
        assert same(copy.params, runner.learner.params)
    finally:
        runner.close()


def test_a_resumed_run_acts_on_the_restored_weights():
    first = serial("run.acting_device='cpu'", "run.acting_refresh=1000")
    try:
        step = 0
        while first.learner.updates < 3:
            got = first.collect(step)
            step += got.steps
            first.learn(step, got.steps)
        state = first.state_dict()
    finally:
        first.close()
    second = serial("run.acting_device='cpu'", "run.acting_refresh=1000")
    try:
        second.load_state_dict(state)
        assert same(second.acting_copy.params, second.learner.params)
        assert not np.isnan(second.learner.updates)
    finally:
        second.close()


def test_acting_on_cuda_without_cuda_is_one_line():
    with pytest.raises(ConfigError, match="config key 'run.acting_device': 'cuda'"):
        load_config("cartpole", ["run.acting_device='cuda'", "run.device='cpu'"])
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="torch sees no CUDA device here"):
            serial_auto = load_config("cartpole", ["run.acting_device='cuda'"])
            runner_for(serial_auto)(serial_auto)


@pytest.mark.parametrize(
    ("key", "value"), [("run.acting_device", "'cuda'"), ("run.compile", "'graph'")]
)
def test_cuda_only_settings_on_a_machine_without_cuda_exit_2_in_one_line(capsys, key, value):
    from shoal.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["train", "cartpole", "--set", f"{key}={value}", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"config key '{key}'" in err[0] and "no CUDA device" in err[0]
