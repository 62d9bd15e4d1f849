"""The DQN recipe: double DQN with n-step returns, a dueling head, optional prioritized
replay, on shoal's Q-network or the user's own (``dqn.network``); hybrid (discrete,
continuous) action spaces get the hybrid head and learner.

A recipe for another algorithm subclasses it and replaces the parts that differ (most
often :meth:`DQNRecipe.make_learner`, with its own pure loss); the runners take whatever
the recipe builds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.actor import Actor
from shoal.agent.builder import (
    Fields,
    build_actor,
    build_learner,
    build_network,
    transition_fields,
)
from shoal.agent.learner import Learner
from shoal.agent.priorities import initial_priorities
from shoal.config import Config
from shoal.envs import EnvSpec, probe_env

__all__ = ["DQNRecipe"]


class DQNRecipe:
    """Builds a DQN agent's parts from the config and the env's spaces."""

    def probe(self, cfg: Config) -> EnvSpec:
        """What the parts need to know of the env (made once to read it)."""
        return probe_env(cfg.env)

    def make_learner(self, cfg: Config, spec: EnvSpec) -> Learner:
        """The learner (its network, target, optimizer and pure loss), weights drawn from
        torch's generator (the caller seeds it)."""
        return build_learner(cfg, spec, seed=False)

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only network of the learner's shape (actors that pull weights)."""
        return build_network(cfg, spec)

    def make_actor(
        self,
        cfg: Config,
        spec: EnvSpec,
        rng: np.random.Generator,
        *,
        params: Any = None,
        source: Any = None,
        network: nn.Module | None = None,
        device: str | torch.device | None = None,
    ) -> Actor:
        """The batch actor acting with ``params`` or weights pulled from ``source``."""
        if network is None:
            network = self.make_network(cfg, spec)
        return build_actor(
            cfg, spec, rng, params=params, source=source, network=network, device=device
        )

    def replay_fields(self, cfg: Config, spec: EnvSpec) -> Fields:
        """One replay item: an n-step transition."""
        return transition_fields(spec)

    def initial_priorities(
        self, cfg: Config, actor: Actor, items: dict[str, np.ndarray]
    ) -> np.ndarray:
        """Ape-X's initial priorities of items an actor made: their ``|TD error|`` under
        the actor's weights."""
        return initial_priorities(
            actor.network, actor.params, items, action_mask=cfg.dqn.action_mask
        )
