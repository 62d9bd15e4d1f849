"""Build the learner's parts from a config: one place, so every runner gets the same ones."""

from __future__ import annotations

import torch

from shoal.agent.dqn import DQN
from shoal.agent.schedules import LinearSchedule
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.replay import NStepWriter, ReplayBuffer
from shoal.run.seeding import derive_seed

__all__ = ["REPLAY_STREAM", "build_dqn", "build_epsilon", "build_nstep", "build_replay"]

REPLAY_STREAM = 2
"""Seed stream of replay sampling."""


def build_dqn(cfg: Config, spec: EnvSpec) -> DQN:
    """The DQN learner, its weights initialised from the run seed."""
    torch.manual_seed(cfg.run.seed)
    return DQN(spec.obs_dim, spec.n_actions, cfg.dqn, device=cfg.run.device)


def build_replay(cfg: Config, spec: EnvSpec) -> ReplayBuffer:
    """The replay buffer (uniform or prioritized) for flat float observations."""
    r = cfg.replay
    return ReplayBuffer(
        r.capacity,
        (spec.obs_dim,),
        prioritized=r.prioritized,
        alpha=r.alpha,
        beta=r.beta,
        beta_final=r.beta_final,
        beta_steps=r.beta_steps,
        seed=derive_seed(cfg.run.seed, REPLAY_STREAM),
    )


def build_nstep(cfg: Config) -> NStepWriter:
    """The n-step writer for one env stream."""
    return NStepWriter(cfg.dqn.n_step, cfg.dqn.gamma)


def build_epsilon(cfg: Config) -> LinearSchedule:
    """Exploration epsilon as a function of env steps."""
    e = cfg.explore
    return LinearSchedule(e.eps_start, e.eps_end, e.eps_decay_steps)
