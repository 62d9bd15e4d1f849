"""A user's own recurrent network on the R2D2 recipe (``dqn.network``: ``forward(obs,
state) -> (q, state)`` and ``initial_state(batch)``): it learns what only a memory can
(a cue recalled after a delay) on the serial and processes runners, its runs checkpoint,
``shoal eval`` rebuilds it in a fresh process, ``load_policy`` carries its memory until
``reset()``, and a network without a memory as R2D2 needs is one line, exit 2."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(300)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # user_code/ is the user's code, beside shoal, not in it
CLI = str(Path(sys.executable).parent / "shoal")
RECALL = [
    "env.id='UserCode/Recall-v0'",
    "env.imports=['user_code.envs']",
    "run.recipe='r2d2'",
    "dqn.network='user_code.qnets:gru_q'",
    "r2d2.length=8",
    "r2d2.burn_in=0",
    "r2d2.period=4",
    "dqn.batch_size=16",
    "dqn.lr=1e-3",
    "dqn.target_period=50",
    "explore.eps_decay_steps=1500",
    "run.total_steps=3000",
    "run.learning_starts=200",
    "run.eval_every=500",
    "run.eval_episodes=20",
    "run.stop_return=none",
    "run.progress=false",
    "run.torch_threads=1",
    "processes.workers=1",
]
"""The cue is shown once and asked for 4 steps later: a coin toss without memory (a
feed-forward DQN's greedy policy scored 0.75 on these 20 evaluation episodes, the share
of its one answer), 1.0 with it."""


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["serial", "processes"])
def test_a_users_gru_learns_to_recall_and_its_run_evaluates_and_loads(runner, tmp_path):
    run = tmp_path / "r"
    result = shoal.train(None, overrides=[*RECALL, f"run.runner='{runner}'"], run_dir=run)
    assert result.best_eval_return == 1.0, result
    online = load_checkpoint(RunDir(run).best, best=True)["learner"]["online"]
    assert {"encode.0.weight", "gru.weight_hh", "q.bias"} <= set(online)  # the user's GRUQ
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    out = subprocess.run(
        [CLI, "eval", str(run), "--episodes", "20", "--trust-code"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert re.search(r"mean 1\.0", out.stdout), out.stdout
    policy = shoal.load_policy(run, trust_code=True)
    recalls_after_each_reset(policy)


def recalls_after_each_reset(policy):
    """The loaded policy answers the cue it saw first, for each row of a batch, after
    each reset: its memory is carried from act to act and forgotten at reset."""
    assert policy.recurrent and type(policy.network).__name__ == "GRUQ"
    cues = np.array([0, 1, 1, 0])
    for _ in range(2):
        policy.reset()
        first = np.zeros((4, 3), np.float32)
        first[np.arange(4), cues] = 1.0
        policy.act(first)
        for t in range(1, 5):
            blank = np.zeros((4, 3), np.float32)
            blank[:, 2] = float(t == 4)
            answer = policy.act(blank)
        assert (answer == cues).all(), answer
    with torch.no_grad():  # the network is the user's module, weights loaded
        q, state = policy.network(torch.zeros(2, 3), policy.network.initial_state(2))
    assert q.shape == (2, 2) and state.shape == (2, 32)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("gru_without_state", "has no initial_state\\(batch\\)"),
        ("gru_q_only", "returned a Tensor, not \\(q, next_state\\)"),
        ("gru_forward_obs_only", "and a state of shape \\(2, 32\\).*takes 2 positional"),
        ("lstm_tuple_state", "returned a tuple; it must be one float tensor"),
    ],
)
def test_a_network_without_a_memory_as_r2d2_needs_is_one_line_exit_2(factory, message, tmp_path):
    out = subprocess.run(
        [CLI, "train", "r2d2", "--network", f"user_code.qnets:{factory}", "--out", str(tmp_path)],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "config key 'dqn.network'" in out.stderr
    assert re.search(message, out.stderr), out.stderr
    assert list(tmp_path.iterdir()) == []
