"""Hybrid (discrete + continuous) actions end to end: `shoal train hybrid` learns both parts
of HybridTarget's action on every built-in runner (perfect is 10 per episode, ignoring the
continuous part about 5, random about 1)."""

import pytest

import shoal
from shoal.config import load_config
from shoal.envs import probe_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_spec_reads_a_hybrid_action_space():
    spec = probe_env(load_config("hybrid").env)
    assert spec.hybrid and (spec.n_actions, spec.action_dim) == (3, 1)
    assert spec.action_low == (-1.0,) and spec.action_high == (1.0,)


@pytest.mark.parametrize("name", ["serial", "threads", "processes"])
def test_hybrid_preset_learns_both_parts(name, tmp_path, no_shm_leak):
    overrides = [
        f"run.runner={name}",
        "processes.workers=2",
        "threads.learner_threads=1",
        "run.progress=false",
    ]
    result = shoal.train("hybrid", overrides=overrides, run_dir=tmp_path / "r")
    assert result.eval_return >= 8.0, result
    assert shoal.evaluate_run(tmp_path / "r", episodes=20).mean() >= 8.0
