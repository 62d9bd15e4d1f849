"""A new algorithm as a user adds one: a recipe module (here DQN with a squared TD-error
loss instead of Huber), registered by one line, with no edit under shoal/."""

from __future__ import annotations

from typing import Any

import torch

from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.recipes.dqn import DQNRecipe


class SquaredLoss(DQNLoss):
    """Importance-weighted squared n-step TD errors (the loss of the 2013 DQN paper's
    unclipped form), over explicit parameters like every shoal loss."""

    def __call__(self, params: Any, target_params: Any, batch: Any) -> tuple[torch.Tensor, Any]:
        _, q_a, target = self.td_terms(params, target_params, batch)
        td = target - q_a
        return (batch.weights * 0.5 * td.square()).mean(-1), td.detach()


class SquaredDQN(DQNRecipe):
    """DQN on the squared TD error."""

    def make_learner(self, cfg: Any, spec: Any) -> Learner:
        network = self.make_network(cfg, spec).requires_grad_(True)
        return Learner(
            network, SquaredLoss(network, double=cfg.dqn.double), cfg.dqn, device=cfg.run.device
        )
