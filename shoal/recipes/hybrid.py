"""The hybrid-action recipe: DQN for ``Tuple(Discrete(K), Box)`` actions (a discrete mode
and a bounded continuous part), as P-DQN does it (Xiong et al. 2018): Q-values over the
modes and a continuous head per mode, trained together (:mod:`shoal.agent.hybrid`), on
shoal's hybrid network or the user's own two-headed one (``dqn.network``).

Everything but the learner, network, actor and replay item is DQN's. Ape-X's exploration
spread draws random discrete modes, so the ray runner is not one of its runners.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from shoal.agent.builder import Fields, transition_fields
from shoal.agent.hybrid import HybridActor, HybridDQN, make_hybrid_network
from shoal.agent.network_factory import build_user_network
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.recipes.contract import RecipeTraits
from shoal.recipes.dqn import DQNRecipe

__all__ = ["HybridRecipe", "make_hybrid_q_network"]


def make_hybrid_q_network(cfg: Config, spec: EnvSpec) -> nn.Module:
    """The user's two-headed network (``dqn.network``) or shoal's hybrid one, weights
    drawn from torch's generator."""
    if cfg.dqn.network:
        return build_user_network(cfg.dqn.network, spec)
    return make_hybrid_network(
        cfg.dqn, spec.obs_dim, spec.n_actions, spec.action_dim, spec.action_low, spec.action_high
    )


class HybridRecipe(DQNRecipe):
    """Builds a hybrid-action agent's parts: its two-headed network and learner, an actor
    that adds the continuous part, and transitions that store it."""

    traits = RecipeTraits(runners=("serial", "threads", "processes"), action_masks=True)
    """The ray runner's Ape-X spread and the agents runner's stacked worlds are discrete."""
    actor_type = HybridActor
    """Picks a mode and adds its continuous part, in the action box."""

    def check_actions(self, cfg: Config, spec: EnvSpec) -> None:
        """Actions with a continuous part, played without random discrete draws at
        evaluation and without noisy layers."""
        if not spec.hybrid:
            raise ConfigError(
                f"config key 'run.recipe': 'hybrid' learns Tuple(Discrete, Box) actions;"
                f" env.id {cfg.env.id!r} has Discrete ones (use 'dqn')"
            )
        if cfg.run.eval_epsilon > 0:
            raise ConfigError(
                f"config key 'run.eval_epsilon': {cfg.run.eval_epsilon} draws random discrete"
                f" actions, and env.id {cfg.env.id!r} has hybrid actions (leave it 0)"
            )
        if cfg.explore.noisy:
            raise ConfigError(
                f"config key 'explore.noisy': env.id {cfg.env.id!r} has hybrid actions, whose"
                " network has no noisy layers (explore with epsilon)"
            )

    def make_learner(self, cfg: Config, spec: EnvSpec) -> HybridDQN:
        """The hybrid learner on :func:`make_hybrid_q_network`'s network."""
        return HybridDQN(
            spec.obs_dim,
            spec.n_actions,
            spec.action_dim,
            cfg.dqn,
            low=spec.action_low,
            high=spec.action_high,
            device=cfg.run.device,
            network=make_hybrid_q_network(cfg, spec),
        )

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only hybrid network of the learner's shape."""
        return make_hybrid_q_network(cfg, spec).requires_grad_(False)

    def actor_extras(self, spec: EnvSpec) -> dict[str, Any]:
        """The action box the actor's continuous part stays in."""
        return {"low": spec.action_low, "high": spec.action_high}

    def replay_fields(self, cfg: Config, spec: EnvSpec) -> Fields:
        """An n-step transition whose action is stored as ``action`` (the mode) and
        ``action_cont``."""
        fields = list(transition_fields(spec).items())
        fields.insert(2, ("action_cont", ((spec.action_dim,), np.float32)))
        return dict(fields)
