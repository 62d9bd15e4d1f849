"""The agents runner on image observations: each agent's own conv encoder (stacked
through ``torch.func``), images turned channels first and stored as bytes, and the agents
learn to read them."""

from pathlib import Path

import numpy as np
import pytest

import shoal
from shoal.agent.networks import ImageEncoder
from shoal.config import load_config
from shoal.envs.parallel import make_parallel_env, probe_parallel_env
from shoal.runners import runner_for

HERE = Path(__file__).parent
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def image_world(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    return "pettingzoo:image_world"


def overrides(tmp_path, world, steps=4000):
    return [
        "run.runner='agents'",
        f"env.id='{world}'",
        "dqn.hidden=[32]",
        "dqn.lr=1e-3",
        "dqn.n_step=1",
        "dqn.gamma=0.5",
        f"run.total_steps={steps}",
        "run.learning_starts=200",
        "run.train_freq=2",
        "explore.eps_decay_steps=1500",
        "run.eval_every=100000",
        "run.eval_episodes=20",
        "run.checkpoint_every=100000",
        "run.progress=false",
        "run.stop_return=none",
        f"run.out='{tmp_path}'",
    ]


def test_images_are_read_channels_first_by_conv_encoders(tmp_path, image_world):
    spec = probe_parallel_env(make_parallel_env(image_world, num_agents=2, max_turns=1), "w")
    assert spec.image == (2, 8, 8) and spec.channels_last and spec.image_high == 255
    cfg = load_config(None, overrides(tmp_path, image_world))
    runner = runner_for(cfg)(cfg)
    try:
        assert all(
            any(isinstance(m, ImageEncoder) for m in learner.loss.network.modules())
            for learner in runner.learners
        )
        assert all(r.specs["obs"] == ((2 * 8 * 8,), np.uint8) for r in runner.replays)
    finally:
        runner.close()


def test_agents_learn_from_images(tmp_path, image_world):
    result = shoal.train(None, overrides=overrides(tmp_path, image_world), run_dir=tmp_path / "r")
    # 2 agents x 10 turns: random agents earn 10, agents that read the image 20
    assert result.best_eval_return >= 17, result.best_eval_return
