"""A new algorithm as a user adds one: a recipe module (here DQN with the pseudo-Huber loss
of the TD error instead of Huber's), registered by one line, with no edit under shoal/."""

from __future__ import annotations

from typing import Any

import torch

from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.recipes.dqn import DQNRecipe


class PseudoHuberLoss(DQNLoss):
    """Importance-weighted pseudo-Huber loss of the n-step TD errors, ``sqrt(1 + td^2) - 1``
    (smooth everywhere, quadratic near 0 and linear far out like Huber's), over explicit
    parameters like every shoal loss."""

    def __call__(self, params: Any, target_params: Any, batch: Any) -> tuple[torch.Tensor, Any]:
        _, q_a, target = self.td_terms(params, target_params, batch)
        td = target - q_a
        return (batch.weights * (torch.sqrt(1 + td.square()) - 1)).mean(-1), td.detach()


class PseudoHuberDQN(DQNRecipe):
    """DQN on the pseudo-Huber loss."""

    def make_learner(self, cfg: Any, spec: Any) -> Learner:
        network = self.make_network(cfg, spec).requires_grad_(True)
        return Learner(
            network, PseudoHuberLoss(network, double=cfg.dqn.double), cfg.dqn, device=cfg.run.device
        )


class NotALearner(DQNRecipe):
    """A recipe whose learner is not a shoal Learner (a plain object with a ``step``)."""

    def make_learner(self, cfg: Any, spec: Any) -> Any:
        class Stepper:
            def step(self, batch: Any) -> None:
                return None

        return Stepper()
