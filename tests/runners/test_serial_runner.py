"""The serial runner: exact resume (mid-episode, one env or several), partial episodes kept
on Ctrl-C. What every runner must do is in test_conformance.py."""

import pytest
import torch

import shoal
from shoal.config import load_config
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.loop import RunLoop
from shoal.run.metrics import read_metrics
from shoal.runners.serial import SerialRunner

pytestmark = pytest.mark.timeout(120)


def params_of(run_dir):
    state = load_checkpoint(RunDir(run_dir).checkpoint)
    return state["learner"]["online"], state


NOISY_IQN = ("run.recipe='iqn'", "explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0")
R2D2 = ("run.recipe='r2d2'", "r2d2.length=4", "r2d2.burn_in=2", "r2d2.period=2", "r2d2.state_dim=8")


@pytest.mark.parametrize(
    ("extra", "num_envs"),
    [((), 1), ((), 4), (NOISY_IQN, 4), (R2D2, 4)],
    ids=["1env", "4envs", "iqn-noisy", "r2d2"],
)
def test_resume_is_exact(tmp_path, tiny, extra, num_envs):
    """2k steps in one go == 1k, then resume to 2k: identical parameters and optimizer. The
    first run ends mid-episode: the resumed one re-creates the running episodes. IQN with
    noisy layers draws quantile fractions and noise: the resumed run draws the same. R2D2
    carries a memory per env and open sequences: the resumed run restores both."""
    full = shoal.train(
        "cartpole",
        overrides=[*tiny(run__total_steps=2000, env__num_envs=num_envs), *extra],
        run_dir=tmp_path / "full",
    )
    half = shoal.train(
        "cartpole",
        overrides=[*tiny(run__total_steps=1000, env__num_envs=num_envs), *extra],
        run_dir=tmp_path / "half",
    )
    assert 1000 <= half.env_steps < 1000 + num_envs
    assert any(load_checkpoint(RunDir(tmp_path / "half").checkpoint)["acting"]["lengths"])
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

    # the resumed run appended to the same metrics file the episodes the full run logged
    def episodes(run):
        rows = read_metrics(RunDir(tmp_path / run).metrics)
        return [(r["step"], r["return"], r["length"]) for r in rows if r["kind"] == "episode"]

    assert episodes("half") == episodes("full")


def test_periodic_checkpoints_fall_where_they_are_due(tmp_path, tiny, monkeypatch):
    """Checkpoints no longer wait for an episode's end: the envs' running episodes are
    re-created on resume, so a checkpoint is written at the first step past its point."""
    saved = []
    original = RunLoop.checkpoint

    def spy(self, metrics):
        saved.append((self.c["step"], any(self.runner.acting.batch.lengths)))
        original(self, metrics)

    monkeypatch.setattr(RunLoop, "checkpoint", spy)
    shoal.train("cartpole", overrides=tiny(run__total_steps=1500), run_dir=tmp_path / "r")
    assert [step for step, _ in saved] == [200, 400, 600, 800, 1000, 1200, 1400, 1500]
    assert sum(mid for _, mid in saved) >= 4  # most of them mid-episode


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


def test_a_checkpoint_from_before_batching_resumes_at_its_next_episode(tmp_path, tiny):
    """Checkpoints written before batching were taken between episodes and hold only the
    reset count: the resumed run begins the episode that count names."""
    shoal.train("cartpole", overrides=tiny(run__total_steps=300), run_dir=tmp_path / "r")
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    for key in ("acting", "nstep"):
        del state[key]
    state["resets"] = 7
    runner = SerialRunner(load_config("cartpole", tiny()))
    try:
        runner.load_state_dict(state)
        assert runner.acting.batch.episodes.tolist() == [7]
        got = runner.acting.batch.step()
        first = runner.acting.batch.seed(0, 7)
        assert got.obs[0].tolist() == runner.acting.batch.envs.envs[0].reset(seed=first)[0].tolist()
    finally:
        runner.close()
