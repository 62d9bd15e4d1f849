"""The agents runner learns: independent DQN agents in a small harvest world, trained for
well under a minute, collect clearly more apples greedily than uniformly random agents on
the same episode seeds, and every trained agent gets more than twice a random agent's average.
(``benchmarks/harvest_learning.py`` measures the full 8-agent preset the same way.)"""

import numpy as np
import pytest

import shoal
from shoal.config import load_config
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.runners.agents.epochs import checkpoint_weights, play_epochs

AGENTS = 3
TURNS = 50
EPISODES = 20
SEEDS = [9_100_000 + i for i in range(EPISODES)]
MARGIN = 3.0
"""Trained collective greedy return >= MARGIN x random's. Measured on run seeds 0, 1, 2:
6.9x, 10.4x, 10.4x (random 8.6, 6.4, 6.7; trained 59.3, 66.9, 69.2), 12 s of training each."""


def overrides(tmp_path, seed):
    return [
        f"agents.agents={AGENTS}",
        f"agents.max_turns={TURNS}",
        "run.total_steps=12000",
        "run.learning_starts=500",
        "explore.eps_decay_steps=8000",
        "run.eval_every=100000",
        "run.checkpoint_every=100000",
        "run.progress=false",
        f"run.seed={seed}",
        f"run.out='{tmp_path}'",
    ]


def play(cfg, epsilon, params=None):
    """Per-agent returns ``(EPISODES, K)`` on the fixed seeds."""
    return np.array([r.returns for r in play_epochs(cfg, SEEDS, epsilon=epsilon, params=params)])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [0])
def test_trained_agents_beat_random_agents_on_the_same_seeds(tmp_path, seed):
    over = overrides(tmp_path, seed)
    shoal.train("harvest", overrides=over, run_dir=tmp_path / "run")
    cfg = load_config("harvest", over)
    random = play(cfg, 1.0)
    state = load_checkpoint(RunDir(tmp_path / "run").checkpoint)
    trained = play(cfg, 0.0, checkpoint_weights(state["learner"]))
    collective_random, collective_trained = random.sum(1).mean(), trained.sum(1).mean()
    assert collective_trained >= MARGIN * collective_random, (collective_trained, random)
    per_agent = trained.mean(0)
    assert per_agent.min() > 2.0 * random.mean(), (per_agent, random.mean(0))
