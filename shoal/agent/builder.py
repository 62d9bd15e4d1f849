"""Build an agent's parts from a config: one place, so every runner gets the same learner,
actors, replay, n-step writer and exploration schedule."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.actor import Actor, WeightSource
from shoal.agent.augment import Augment
from shoal.agent.learner import Learner
from shoal.agent.network_factory import build_user_network
from shoal.agent.networks import Params, QNetwork, network_args
from shoal.agent.schedules import LinearSchedule
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.replay import NStepWriter, ReplayBuffer
from shoal.run.seeding import SeedStream, derive_seed

__all__ = [
    "build_actor",
    "build_augment",
    "build_epsilon",
    "build_network",
    "build_nstep",
    "build_q_network",
    "build_replay",
    "shoal_network_args",
    "transition_fields",
]


def build_augment(cfg: Config, spec: EnvSpec, learner: Learner) -> Augment | None:
    """What augments ``learner``'s sampled batches (``dqn.augment``; None: nothing),
    its generator seeded from the run seed."""
    if cfg.dqn.augment == "none":
        return None
    if type(learner).make_batch is not Learner.make_batch:
        raise ConfigError(
            f"config key 'dqn.augment': {cfg.dqn.augment!r} augments single sampled "
            f"transitions, and run.recipe {cfg.run.recipe!r}'s {type(learner).__name__} "
            "makes its own batches; use 'none'"
        )
    return Augment(
        cfg.dqn.augment,
        derive_seed(cfg.run.seed, SeedStream.AUGMENT),
        image=spec.image,
        board=cfg.dqn.board or spec.board or (),
        n_actions=spec.n_actions,
        action_mask=cfg.dqn.action_mask,
    )


def build_q_network(cfg: Config, spec: EnvSpec) -> nn.Module:
    """The Q-network of ``cfg``: the user's own (``dqn.network``) or the one ``dqn.hidden``,
    ``dqn.dueling`` and ``dqn.encoder`` describe; its weights drawn from torch's
    generator."""
    if cfg.dqn.network:
        return build_user_network(cfg.dqn.network, spec)
    return QNetwork(spec.obs_dim, spec.n_actions, **shoal_network_args(cfg, spec))


def shoal_network_args(cfg: Config, spec: EnvSpec) -> dict[str, Any]:
    """The torso and head ``[dqn]`` and ``[explore]`` describe for ``spec``'s observations,
    as the keyword arguments of shoal's networks (Q, quantile, categorical)."""
    return network_args(
        cfg.dqn,
        image=spec.image,
        image_high=spec.image_high,
        noisy=cfg.explore.noisy,
        sigma0=cfg.explore.noisy_sigma,
    )


def build_network(cfg: Config, spec: EnvSpec) -> nn.Module:
    """An inference-only network of the learner's shape (for actors in other threads or
    processes, which pull their weights from a store)."""
    return build_q_network(cfg, spec).requires_grad_(False)


def build_actor(
    cfg: Config,
    spec: EnvSpec,
    rng: np.random.Generator,
    *,
    params: Params | None = None,
    source: WeightSource | None = None,
    device: str | torch.device | None = None,
    network: Any = None,
    kind: type[Actor] = Actor,
    extra: dict[str, Any] | None = None,
) -> Actor:
    """An actor for ``spec``'s env acting with ``params`` (e.g. the learner's own) or with
    weights pulled from ``source``; it builds its own inference-only network unless given
    one. ``kind``: the actor's class (default: DQN's); ``extra``: its further arguments."""
    if network is None:
        network = build_network(cfg, spec)
    return kind(
        network,
        params=params,
        source=source,
        n_actions=spec.n_actions,
        action_mask=cfg.dqn.action_mask,
        device=device,
        rng=rng,
        **(extra or {}),
    )


Fields = dict[str, tuple[tuple[int, ...], Any]]
"""Replay item fields: name -> (shape, dtype) of one item."""


def transition_fields(spec: EnvSpec) -> Fields:
    """One n-step transition of ``spec``'s env: flat observations, float or, for images,
    bytes (a quarter of the memory; the encoder scales them on the device):
    ``spec.obs_dtype``."""
    obs = ((spec.obs_dim,), spec.obs_dtype)
    return {
        "obs": obs,
        "action": ((), np.int64),
        "reward": ((), np.float32),
        "next_obs": obs,
        "discount": ((), np.float32),
    }


def build_replay(cfg: Config, spec: EnvSpec, fields: Fields | None = None) -> ReplayBuffer:
    """The replay buffer (uniform or prioritized, as ``cfg.replay`` says) of ``fields``
    (default: :func:`transition_fields` of ``spec``); with ``env.frame_stack`` above 1,
    image transitions keep each frame once."""
    r = cfg.replay
    fields = transition_fields(spec) if fields is None else fields
    stacked = spec.image is not None and {"obs", "next_obs"} <= set(fields)
    return ReplayBuffer.from_specs(
        r.capacity,
        fields,
        prioritized=r.prioritized,
        alpha=r.alpha,
        beta=r.beta,
        beta_final=r.beta_final,
        beta_steps=r.beta_steps,
        seed=derive_seed(cfg.run.seed, SeedStream.REPLAY),
        frame_stack=cfg.env.frame_stack if stacked else 1,
    )


def build_nstep(cfg: Config) -> NStepWriter:
    """The n-step writer for one env stream."""
    return NStepWriter(cfg.dqn.n_step, cfg.dqn.gamma)


def build_epsilon(cfg: Config) -> LinearSchedule:
    """Exploration epsilon as a function of env steps."""
    e = cfg.explore
    return LinearSchedule(e.eps_start, e.eps_end, e.eps_decay_steps)
