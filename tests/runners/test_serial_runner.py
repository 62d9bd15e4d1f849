"""The serial runner: exact resume, episode-boundary checkpoints, partial episodes kept on
Ctrl-C. What every runner must do is in test_conformance.py."""

import pytest
import torch

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.loop import RunLoop
from shoal.run.metrics import read_metrics
from shoal.runners.serial import SerialRunner

pytestmark = pytest.mark.timeout(120)


def params_of(run_dir):
    state = load_checkpoint(RunDir(run_dir).checkpoint)
    return state["learner"]["online"], state


def test_resume_is_exact(tmp_path, tiny):
    """2k steps in one go == 1k, then resume to 2k: identical parameters and optimizer."""
    full = shoal.train("cartpole", overrides=tiny(run__total_steps=2000), run_dir=tmp_path / "full")
    half = shoal.train("cartpole", overrides=tiny(run__total_steps=1000), run_dir=tmp_path / "half")
    assert 1000 <= half.env_steps < 2000
    resumed = shoal.train(resume=tmp_path / "half", overrides=["run.total_steps=2000"])
    assert resumed.env_steps == full.env_steps
    assert resumed.updates == full.updates
    p_full, s_full = params_of(tmp_path / "full")
    p_res, s_res = params_of(tmp_path / "half")
    for k in p_full:
        assert torch.equal(p_full[k], p_res[k]), k
    for k, v in s_full["learner"]["target"].items():
        assert torch.equal(v, s_res["learner"]["target"][k])
    assert s_full["rng"]["actions"] == s_res["rng"]["actions"]
    # the resumed run appended to the same metrics file, with no step counted twice
    steps = [
        int(r["step"])
        for r in read_metrics(RunDir(tmp_path / "half").metrics)
        if r["kind"] == "episode"
    ]
    assert steps == sorted(set(steps))


def test_periodic_checkpoints_fall_on_episode_boundaries(tmp_path, tiny, monkeypatch):
    saved = []
    original = RunLoop.checkpoint

    def spy(self, metrics):
        saved.append(self.c["step"])
        original(self, metrics)

    monkeypatch.setattr(RunLoop, "checkpoint", spy)
    shoal.train("cartpole", overrides=tiny(run__total_steps=1500), run_dir=tmp_path / "r")
    ends = {
        int(r["step"])
        for r in read_metrics(RunDir(tmp_path / "r").metrics)
        if r["kind"] == "episode"
    }
    assert len(saved) >= 4
    assert set(saved) <= ends


def test_ctrl_c_keeps_the_partial_episode(tmp_path, tiny, monkeypatch):
    calls = {"n": 0}
    original = SerialRunner.learn_steps

    def interrupting(self, steps):
        calls["n"] += 1
        if calls["n"] == 150:
            raise KeyboardInterrupt
        return original(self, steps)

    monkeypatch.setattr(SerialRunner, "learn_steps", interrupting)
    with pytest.raises(KeyboardInterrupt):
        shoal.train("cartpole", overrides=tiny(run__total_steps=5000), run_dir=tmp_path / "r")
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    step = state["loop"]["step"]
    assert step > 100
    # the partial episode was stored (as truncated), not lost: each env step made exactly
    # one n-step transition, pending ones included
    assert state["replay"]["storage"]["size"] == step
    monkeypatch.setattr(SerialRunner, "learn_steps", original)
    result = shoal.train(resume=tmp_path / "r", overrides=["run.total_steps=1200"])
    assert result.env_steps >= max(step, 1200)
