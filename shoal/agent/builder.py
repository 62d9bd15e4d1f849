"""Build an agent's parts from a config: one place, so every runner gets the same learner,
actors, replay, n-step writer and exploration schedule."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from shoal.agent.actor import Actor, WeightSource
from shoal.agent.learner import DQN, Learner
from shoal.agent.networks import Params, make_q_network
from shoal.agent.schedules import LinearSchedule
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.replay import NStepWriter, ReplayBuffer
from shoal.run.seeding import derive_seed

__all__ = [
    "REPLAY_STREAM",
    "build_actor",
    "build_epsilon",
    "build_learner",
    "build_nstep",
    "build_replay",
]

REPLAY_STREAM = 2
"""Seed stream of replay sampling."""


def build_learner(cfg: Config, spec: EnvSpec) -> Learner:
    """The learner, its weights initialised from the run seed."""
    torch.manual_seed(cfg.run.seed)
    return DQN(spec.obs_dim, spec.n_actions, cfg.dqn, device=cfg.run.device)


def build_actor(
    cfg: Config,
    spec: EnvSpec,
    rng: np.random.Generator,
    *,
    params: Params | None = None,
    source: WeightSource | None = None,
    device: str | torch.device = "cpu",
    network: Any = None,
) -> Actor:
    """An actor for ``spec``'s env acting with ``params`` (e.g. the learner's own) or with
    weights pulled from ``source``; it builds its own inference-only network unless given
    one."""
    if network is None:
        network = make_q_network(cfg.dqn, spec.obs_dim, spec.n_actions).requires_grad_(False)
    return Actor(
        network,
        params=params,
        source=source,
        n_actions=spec.n_actions,
        action_mask=cfg.dqn.action_mask,
        device=device,
        rng=rng,
    )


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
