"""Hybrid (discrete + continuous) actions end to end: `shoal train hybrid` learns both parts
of HybridTarget's action on every built-in runner, with shoal's network and with a user's
own (perfect is 10 per episode, ignoring the continuous part about 5, random about 1)."""

import sys
from pathlib import Path

import pytest

import shoal
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

sys.path.insert(0, str(Path(__file__).parents[1]))  # user_code/: a network from outside shoal/

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_spec_reads_a_hybrid_action_space():
    spec = probe_env(load_config("hybrid").env)
    assert spec.hybrid and (spec.n_actions, spec.action_dim) == (3, 1)
    assert spec.action_low == (-1.0,) and spec.action_high == (1.0,)


@pytest.mark.parametrize(
    "name, network",
    [
        ("serial", ""),
        ("threads", ""),
        ("processes", ""),
        # the user's own two-headed network (tests/user_code/qnets.py), in spawned workers too
        ("serial", "user_code.qnets:hybrid_two_heads"),
        ("processes", "user_code.qnets:hybrid_two_heads"),
    ],
)
def test_hybrid_preset_learns_both_parts(name, network, tmp_path, no_shm_leak):
    overrides = [
        f"run.runner={name}",
        "processes.workers=2",
        "threads.learner_threads=1",
        "run.progress=false",
        f"dqn.network='{network}'",
    ]
    result = shoal.train("hybrid", overrides=overrides, run_dir=tmp_path / "r")
    assert result.eval_return >= 8.0, result
    assert shoal.evaluate_run(tmp_path / "r", episodes=20, trust_code=True).mean() >= 8.0
    if network:  # the user's parameters, not shoal's network's
        online = load_checkpoint(RunDir(tmp_path / "r").best, best=True)["learner"]["online"]
        assert {"torso.1.weight", "q.weight", "x.weight"} <= set(online)
