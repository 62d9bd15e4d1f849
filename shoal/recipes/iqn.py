"""The IQN recipe: implicit quantile networks (Dabney et al. 2018) on shoal's torso (an MLP,
a board or an image encoder, as ``[dqn]`` describes it), double-Q selection on the mean,
n-step returns, uniform or prioritized replay; the fractions' settings are ``[iqn]``'s.

Everything outside the learner is DQN's: the network's output as a Q-network is the mean
quantile at fixed fractions (:mod:`shoal.agent.quantile`), so acting, evaluation, Ape-X's
initial priorities and every transport take it as they take DQN's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from shoal.agent.builder import shoal_network_args
from shoal.agent.network_factory import build_user_torso
from shoal.agent.quantile import IQNLearner, QuantileNetwork
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.recipes.base import ActionValueRecipe, value_search_space

__all__ = ["TORSO_KEY", "IQNRecipe", "make_quantile_network"]

TORSO_KEY = "iqn.torso"
"""The config key naming a user's torso factory."""


def make_quantile_network(cfg: Config, spec: EnvSpec) -> QuantileNetwork:
    """The quantile network ``[dqn]`` and ``[iqn]`` describe (on the user's torso when
    ``iqn.torso`` names one), its weights drawn from torch's generator."""
    q = cfg.iqn
    parts: dict[str, Any] = {}
    if q.torso:
        features, width = build_user_torso(q.torso, spec, TORSO_KEY)
        parts = {"features": features, "features_width": width}
    return QuantileNetwork(
        spec.obs_dim,
        spec.n_actions,
        n_cos=q.n_cos,
        n_policy=q.n_policy_quantiles,
        **parts,
        **shoal_network_args(cfg, spec),
    )


class IQNRecipe(ActionValueRecipe):
    """Builds an IQN agent's parts: its quantile network and learner; the rest is DQN's.
    It trains on every runner; K stacked IQN agents (the agents runner) each draw their
    own fractions."""

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """DQN's search space and the number of fractions the loss draws."""
        return {
            **value_search_space(cfg),
            "iqn.n_quantiles": {"choices": [8, 16, 32, 64]},
            "iqn.n_target_quantiles": {"choices": [8, 16, 32, 64]},
        }

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """The shared checks (discrete actions), and what IQN cannot take: a whole
        Q-network of the user's (``iqn.torso`` takes their torso); a torso factory that
        fails is one line naming ``iqn.torso``."""
        if cfg.dqn.network:
            raise ConfigError(
                f"config key 'dqn.network': the 'iqn' recipe reads quantiles, not the"
                f" Q-values {cfg.dqn.network!r} gives; name your torso as iqn.torso instead"
                " (leave dqn.network empty)"
            )
        super().check(cfg, spec)
        if cfg.iqn.torso:
            with torch.random.fork_rng():
                make_quantile_network(cfg, spec)

    def user_factories(self, cfg: Config) -> dict[str, str]:
        """The user's torso factory, if any."""
        return {TORSO_KEY: cfg.iqn.torso}

    def make_learner(self, cfg: Config, spec: EnvSpec) -> IQNLearner:
        """The IQN learner, its weights and then its fractions' seed drawn from torch's
        generator (the caller seeds it: the run seed, or each stacked agent's own)."""
        network = make_quantile_network(cfg, spec)
        return IQNLearner(
            network,
            cfg.dqn,
            n_quantiles=cfg.iqn.n_quantiles,
            n_target_quantiles=cfg.iqn.n_target_quantiles,
            kappa=cfg.iqn.kappa,
            seed=int(torch.randint(2**62, ())),
            device=cfg.run.device,
        )

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only quantile network of the learner's shape."""
        return make_quantile_network(cfg, spec).requires_grad_(False)
