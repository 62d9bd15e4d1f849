"""The C51 recipe: categorical DQN (Bellemare et al. 2017) on shoal's torso (an MLP, a
board or an image encoder, as ``[dqn]`` describes it), n-step returns, double-Q selection
on the expected return, uniform or prioritized replay (a sample's priority is its
cross-entropy); the support's settings are ``[c51]``'s.

The example of a new algorithm: this module, its network and loss
(:mod:`shoal.agent.categorical`), its config section and one registry line. Everything a
runner needs beyond the learner comes from :class:`~shoal.recipes.base.ActionValueRecipe`:
the network as a Q-network is each action's expected return, so acting, evaluation and
every transport take it as they take DQN's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.actor import Actor
from shoal.agent.builder import shoal_network_args
from shoal.agent.categorical import CategoricalLoss, CategoricalNetwork
from shoal.agent.learner import Learner
from shoal.agent.losses import Batch
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.recipes.base import ActionValueRecipe, value_search_space

__all__ = ["C51Recipe", "make_categorical_network"]


def make_categorical_network(cfg: Config, spec: EnvSpec) -> CategoricalNetwork:
    """The categorical network ``[dqn]`` and ``[c51]`` describe, its weights drawn from
    torch's generator."""
    c = cfg.c51
    return CategoricalNetwork(
        spec.obs_dim,
        spec.n_actions,
        n_atoms=c.n_atoms,
        v_min=c.v_min,
        v_max=c.v_max,
        **shoal_network_args(cfg, spec),
    )


class C51Recipe(ActionValueRecipe):
    """Builds a C51 agent's parts: its categorical network and learner; the rest is the
    shared action-value recipe's."""

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """DQN's search space and the support's ends."""
        return {
            **value_search_space(cfg),
            "c51.v_max": {"choices": [10.0, 100.0, 500.0]},
        }

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """The shared checks (discrete actions: hybrid ones are refused), and a Q-network
        of the user's, which gives no distribution."""
        if cfg.dqn.network:
            raise ConfigError(
                f"config key 'dqn.network': the 'c51' recipe reads return distributions, not"
                f" the Q-values {cfg.dqn.network!r} gives; leave dqn.network empty"
            )
        super().check(cfg, spec)

    def make_learner(self, cfg: Config, spec: EnvSpec) -> Learner:
        """The learner of the categorical network and its cross-entropy loss."""
        network = make_categorical_network(cfg, spec)
        d = cfg.dqn
        loss = CategoricalLoss(network, double=d.double, action_mask=d.action_mask)
        return Learner(network, loss, d, device=cfg.run.device)

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only categorical network of the learner's shape."""
        return make_categorical_network(cfg, spec).requires_grad_(False)

    def initial_priorities(
        self, cfg: Config, actor: Actor, items: dict[str, np.ndarray]
    ) -> np.ndarray:
        """Ape-X's initial priorities: each transition's cross-entropy, the learner's own
        priority, under the actor's weights in both roles."""
        loss = CategoricalLoss(actor.network, action_mask=cfg.dqn.action_mask)
        with torch.inference_mode():
            _, priorities = loss(actor.params, actor.params, Batch.from_numpy(items, actor.device))
        return priorities.double().cpu().numpy()
