"""The R2D2 recipe: recurrent DQN (Kapturowski et al. 2019) for single-agent envs, an MLP
(``[dqn] hidden``) before an LSTM or GRU memory, or the user's own recurrent network
(``dqn.network``: ``forward(obs, state) -> (q, state)`` and ``initial_state(batch)``, see
:mod:`shoal.agent.network_factory`), learning from replayed sequences with
their stored memory and a burn-in (the sequence loss MAPF's agents use: double DQN,
n-step, priorities mixing max and mean), acting with one memory per env, reset as each
env's episode begins, and evaluated greedily with memory. Its settings are ``[r2d2]``'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.acting import ActingRequest
from shoal.agent.actor import Actor
from shoal.agent.network_factory import build_user_recurrent, memory_width
from shoal.agent.networks import RecurrentQNetwork
from shoal.agent.sequence_acting import RecurrentActor, RecurrentPolicy, SequenceActing
from shoal.agent.sequence_loss import SequenceBatch, SequenceDQN, SequenceDQNLoss
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.envs.vector import make_vector_env
from shoal.errors import ConfigError
from shoal.recipes.base import ActionValueRecipe, value_search_space
from shoal.recipes.contract import RecipeTraits
from shoal.replay.sequence import SequenceWriter

__all__ = ["R2D2Recipe", "make_recurrent_network"]


def make_recurrent_network(cfg: Config, spec: EnvSpec) -> nn.Module:
    """The recurrent Q-network: the user's (``dqn.network``), or the one ``[dqn] hidden``
    and ``[r2d2]`` describe; its weights drawn from torch's generator."""
    if cfg.dqn.network:
        return build_user_recurrent(cfg.dqn.network, spec)
    r = cfg.r2d2
    return RecurrentQNetwork(
        spec.obs_dim, spec.n_actions, hidden=cfg.dqn.hidden, state_dim=r.state_dim, cell=r.cell
    )


class R2D2Recipe(ActionValueRecipe):
    """Builds an R2D2 agent's parts: its recurrent network, sequence learner, recurrent
    actor, sequence acting, sequence replay items and their priorities, and evaluation
    with memory."""

    traits = RecipeTraits(
        runners=("serial", "threads", "processes", "ray"), serves_after="batch", recurrent=True
    )
    """Single-agent envs on the DQN runners (stacked recurrent agents are not written); a
    batch of sequences before the first update; a memory per env."""
    actor_type = RecurrentActor
    """One memory per env."""
    memory: int | None = None
    """The width of the learner's memory once :meth:`make_learner` built it: replay's
    items are sized from it, so a user's factory is not called again for them."""

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """DQN's search space and the memory's size and cell (a user's network: its
        shape is the user's, so neither, nor ``dqn.hidden``)."""
        space = value_search_space(cfg)
        if cfg.dqn.network:
            del space["dqn.hidden"]
            return space
        return {
            **space,
            "r2d2.state_dim": {"choices": [32, 64, 128]},
            "r2d2.cell": {"choices": ["lstm", "gru"]},
        }

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """The shared checks (discrete actions), a user's network that does not carry a
        memory as R2D2 needs (one line), and what R2D2 cannot take: noisy layers, an
        engine that resets envs itself."""
        if cfg.dqn.network:  # imports, calls and probes the user's factory once
            with torch.random.fork_rng():
                make_recurrent_network(cfg, spec)
        if cfg.explore.noisy:
            raise ConfigError(
                "config key 'explore.noisy': the 'r2d2' recipe's network has no noisy layers"
                " (explore with epsilon)"
            )
        if cfg.env.vector == "envpool":
            raise ConfigError(
                "config key 'env.vector': the 'r2d2' recipe resets each env's memory as its"
                " episode begins, which envpool's own resets hide; use 'sync' or 'async'"
            )
        super().check(cfg, spec)

    def make_learner(self, cfg: Config, spec: EnvSpec) -> SequenceDQN:
        """The sequence learner, its weights drawn from torch's generator (the caller
        seeds it)."""
        r, network = cfg.r2d2, make_recurrent_network(cfg, spec)
        self.memory = memory_width(network)
        return SequenceDQN(network, cfg.dqn, burn_in=r.burn_in, eta=r.eta, device=cfg.run.device)

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only recurrent network of the learner's shape."""
        return make_recurrent_network(cfg, spec).requires_grad_(False)

    def replay_fields(self, cfg: Config, spec: EnvSpec) -> dict[str, Any]:
        """One sequence item: ``burn_in + length`` steps, the observation after them, the
        stored memory."""
        r = cfg.r2d2
        writer = SequenceWriter(r.length, burn_in=r.burn_in, period=r.period)
        if self.memory is None:  # no learner built here: ask a network of the learner's shape
            with torch.random.fork_rng():
                self.memory = memory_width(make_recurrent_network(cfg, spec))
        return dict(writer.specs((spec.obs_dim,), state_shape=(self.memory,)))

    def initial_priorities(
        self, cfg: Config, actor: Actor, items: dict[str, np.ndarray]
    ) -> np.ndarray:
        """Ape-X's initial priorities of sequences an actor made: their priority under the
        actor's weights (in both roles)."""
        loss = SequenceDQNLoss.from_config(
            actor.network, cfg.dqn, burn_in=cfg.r2d2.burn_in, eta=cfg.r2d2.eta
        )
        with torch.no_grad():
            _, priorities = loss(
                actor.params, actor.params, SequenceBatch.from_numpy(items, actor.device)
            )
        return priorities.cpu().numpy()

    def make_acting(
        self, cfg: Config, spec: EnvSpec, actor: Actor, request: ActingRequest
    ) -> SequenceActing:
        """``env.num_envs`` envs played by the recurrent actor, each env's steps cut into
        sequences, which go as they complete with either writer (a sequence spans
        episodes' ends, so there is no whole episode to wait for)."""
        r = cfg.r2d2
        envs = make_vector_env(cfg.env, cfg.env.num_envs, request.env_seed)
        assert isinstance(actor, RecurrentActor)
        return SequenceActing(
            actor, envs, request, length=r.length, burn_in=r.burn_in, period=r.period
        )

    def eval_policy(self, actor: Actor, n: int) -> RecurrentPolicy:
        """Greedy actions with one memory per evaluation env."""
        return RecurrentPolicy(actor, n)
