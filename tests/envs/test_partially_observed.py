"""Partially observed benchmark envs: CartPole without velocities (shoal's own) and
POPGym's envs through the gym adapter (``env.imports = ["popgym"]``)."""

import gymnasium as gym
import numpy as np
import pytest

import shoal
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.envs.masked_cartpole import ENV_ID, POSITIONS

pytestmark = pytest.mark.timeout(120)


def test_cartpole_without_velocities_is_cartpole_seen_through_its_positions():
    masked, full = gym.make(ENV_ID), gym.make("CartPole-v1")
    assert masked.spec.max_episode_steps == 500 and masked.observation_space.shape == (2,)
    rng = np.random.default_rng(0)
    for seed in range(3):
        o, _ = masked.reset(seed=seed)
        p, _ = full.reset(seed=seed)
        while True:
            assert np.allclose(o, p[POSITIONS])
            a = int(rng.integers(2))
            o, r, term, trunc, _ = masked.step(a)
            p, r2, term2, trunc2, _ = full.step(a)
            assert (r, term, trunc) == (r2, term2, trunc2)
            if term or trunc:
                break


def test_popgym_envs_train_through_the_gym_adapter(tmp_path, tiny):
    """A POPGym env with discrete observations (one-hot through the adapter) and one with
    a box, registered by importing popgym (in every worker too)."""
    for env_id in ("popgym-RepeatPreviousEasy-v0", "popgym-PositionOnlyCartPoleEasy-v0"):
        over = [
            *tiny(),
            "env.imports=['popgym']",
            f"env.id='{env_id}'",
            "env.max_episode_steps=100",
        ]
        cfg = load_config(None, overrides=over)
        spec = probe_env(cfg.env)
        assert spec.obs_dim > 0 and spec.n_actions > 1
        result = shoal.train(None, overrides=over, run_dir=tmp_path / env_id)
        assert result.updates > 0 and np.isfinite(result.eval_return)
