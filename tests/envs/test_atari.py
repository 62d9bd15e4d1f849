"""Atari through shoal: the standard preprocessing (checked against gymnasium's own
wrappers), training-only episodic life and reward clipping, envpool with the same
settings, and one-line errors for bad input."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from shoal.config import EnvConfig
from shoal.envs.gym_env import make_env, probe_env
from shoal.envs.vector import make_vector_env
from shoal.errors import EnvError

pytest.importorskip("ale_py")

BREAKOUT = "ALE/Breakout-v5"


def _reference(env_id: str) -> gym.Env:
    """The standard pipeline written out with gymnasium's wrappers."""
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.25)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return gym.wrappers.FrameStackObservation(env, 4)


def test_evaluation_env_matches_gymnasium_preprocessing() -> None:
    cfg = EnvConfig(id=BREAKOUT, frame_stack=4)
    ours, ref = make_env(cfg, evaluation=True), _reference(BREAKOUT)
    o1, _ = ours.reset(seed=3)
    o2, _ = ref.reset(seed=3)
    assert o1.shape == (4 * 84 * 84,) and o1.dtype == np.uint8
    np.testing.assert_array_equal(o1, o2.reshape(-1))
    actions = np.random.default_rng(0).integers(0, 4, 300)
    total = 0.0
    for a in actions:
        o1, r1, t1, u1, _ = ours.step(a)
        o2, r2, t2, u2, _ = ref.step(a)
        np.testing.assert_array_equal(o1, o2.reshape(-1))
        assert (r1, t1, u1) == (r2, t2, u2)
        total += r1
        if t1 or u1:
            break
    assert total > 0  # the sequence scored, so rewards were compared, not only zeros


def test_spec_reads_the_stack_as_an_image() -> None:
    spec = probe_env(EnvConfig(id=BREAKOUT, frame_stack=4))
    assert spec.image == (4, 84, 84) and spec.image_high == 255 and spec.n_actions == 4


def test_training_env_ends_episodes_at_lost_lives_and_clips_rewards() -> None:
    env = make_env(EnvConfig(id=BREAKOUT, frame_stack=4))
    env.reset(seed=1)
    ale = env.unwrapped.ale
    rng = np.random.default_rng(1)
    rewards = []
    for _ in range(3000):
        _, r, term, trunc, _ = env.step(int(rng.integers(4)))
        rewards.append(r)
        if term:
            break
    assert term and ale.lives() == 4  # one life lost ends the learner's episode
    env.reset()
    assert ale.lives() == 4  # the game goes on rather than restarting
    assert set(rewards) <= {0.0, 1.0}
    raw = make_env(EnvConfig(id="ALE/Pong-v5", frame_stack=1), evaluation=True)
    assert raw.observation_space.shape == (84 * 84,)


def test_envpool_pool_has_the_same_layout() -> None:
    pytest.importorskip("envpool")
    cfg = EnvConfig(id=BREAKOUT, frame_stack=4, vector="envpool")
    envs = make_vector_env(cfg, 2, seed=0)
    try:
        obs = envs.reset()
        assert obs.shape == (2, 4 * 84 * 84) and obs.dtype == np.uint8
        obs, rew, term, trunc = envs.step(np.array([1, 1]))
        assert obs.shape == (2, 4 * 84 * 84) and rew.shape == (2,)
        assert envs.vec.config["use_fire_reset"] is False
        assert envs.vec.config["repeat_action_probability"] == 0.25
        assert envs.vec.config["episodic_life"] and envs.vec.config["reward_clip"]
    finally:
        envs.close()


def test_frame_stack_on_vectors_stacks_the_last_k_and_on_3d_frames_is_one_line_error() -> None:
    """Flat vectors: the last K observations side by side (the reset's repeated at an
    episode's start), the newest last; anything but those and 2-D frames: one line."""
    env = make_env(EnvConfig(id="CartPole-v1", frame_stack=3))
    assert probe_env(EnvConfig(id="CartPole-v1", frame_stack=3)).obs_dim == 12
    obs, _ = env.reset(seed=0)
    assert np.array_equal(obs[:4], obs[8:]) and np.array_equal(obs[4:8], obs[8:])
    nxt = env.step(0)[0]
    assert np.array_equal(nxt[:8], obs[4:]) and not np.array_equal(nxt[8:], obs[8:])
    with pytest.raises(EnvError, match=r"env.frame_stack.*2-D frames.*flat vectors.*\(10, 10, 4\)"):
        probe_env(EnvConfig(id="MinAtar/Breakout-v1", frame_stack=4))


def test_atari_without_ale_py_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py raises ImportError
    with pytest.raises(EnvError, match=r"Atari games need the ale-py package"):
        probe_env(EnvConfig(id="ALE/Pong-v5", frame_stack=4))
