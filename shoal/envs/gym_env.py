"""Gymnasium environments for DQN: checked up front, observations flattened to 1-D."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from shoal.config import EnvConfig
from shoal.envs.step_cost import StepCost
from shoal.errors import EnvError

__all__ = ["EnvSpec", "make_env", "probe_env"]


@dataclass(frozen=True)
class EnvSpec:
    """What the learner needs to know about an env: flat observation size and actions."""

    obs_dim: int
    n_actions: int


def make_env(cfg: EnvConfig) -> gym.Env:
    """Create the env, rejecting ids that do not exist and non-discrete action spaces.

    Non-vector observations (Discrete, Tuple, Dict, images) are flattened, so the MLP
    learner sees a 1-D float vector whatever the env.
    """
    kwargs = {}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gym.make(cfg.id, disable_env_checker=True, **kwargs)
    except gym.error.Error as e:
        raise EnvError(f"env.id {cfg.id!r}: cannot be made by gymnasium: {e}") from None
    except (ImportError, ModuleNotFoundError) as e:
        raise EnvError(f"env.id {cfg.id!r}: needs a package that is not installed: {e}") from None
    if not isinstance(env.action_space, gym.spaces.Discrete):
        env.close()
        raise EnvError(
            f"env.id {cfg.id!r}: action space is {env.action_space}; shoal's DQN needs a "
            "Discrete action space"
        )
    if cfg.step_cost_us > 0:
        env = StepCost(env, micros=cfg.step_cost_us, kind=cfg.step_cost_kind)
    obs_space = env.observation_space
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        env = gym.wrappers.FlattenObservation(env)
    return env


def probe_env(cfg: EnvConfig) -> EnvSpec:
    """Make the env once to validate it and read its sizes."""
    env = make_env(cfg)
    try:
        obs_dim = int(np.prod(env.observation_space.shape))
        return EnvSpec(obs_dim=obs_dim, n_actions=int(env.action_space.n))
    finally:
        env.close()
