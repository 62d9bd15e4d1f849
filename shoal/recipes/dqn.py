"""The DQN recipe: double DQN with n-step returns, a dueling head, optional prioritized
replay and noisy layers, on shoal's Q-network or the user's own (``dqn.network``).

A recipe for another algorithm subclasses it, or :class:`~shoal.recipes.base.ActionValueRecipe`,
and replaces the parts that differ (most often :meth:`DQNRecipe.make_learner`, with its own
pure loss); the runners take whatever the recipe builds, through the
:class:`~shoal.recipes.contract.Recipe` contract.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from shoal.agent.builder import build_network, build_q_network
from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.recipes.base import ActionValueRecipe, value_search_space

__all__ = ["DQNRecipe"]


class DQNRecipe(ActionValueRecipe):
    """Builds a DQN agent's parts from the config and the env's spaces."""

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """What ``shoal tune`` searches for DQN by default (:func:`value_search_space`)."""
        return value_search_space(cfg)

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """The shared checks (engine, encoder, discrete actions), and a network factory
        that fails, before any work."""
        super().check(cfg, spec)
        if cfg.dqn.network:  # imports, calls and probes the user's factory once
            with torch.random.fork_rng():
                build_q_network(cfg, spec)

    def make_learner(self, cfg: Config, spec: EnvSpec) -> Learner:
        """The double-DQN learner: the Q-network (shoal's or ``dqn.network``'s) and its
        n-step Huber loss, weights drawn from torch's generator (the runner seeds it)."""
        network = build_q_network(cfg, spec)
        d = cfg.dqn
        loss = DQNLoss(
            network, double=d.double, huber_delta=d.huber_delta, action_mask=d.action_mask
        )
        return Learner(network, loss, d, device=cfg.run.device)

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only network of the learner's shape (actors that pull weights)."""
        return build_network(cfg, spec)
