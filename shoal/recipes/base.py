"""What most recipes share: an agent whose network scores discrete actions (Q-values, or
their means under a distribution) on a gymnasium env, acting on a batch of envs, replaying
n-step transitions, evaluated greedily.

:class:`ActionValueRecipe` implements the :class:`~shoal.recipes.contract.Recipe`
contract but for what makes an algorithm itself: its :meth:`~ActionValueRecipe.search_space`,
its learner (with its pure loss) and its network, which every subclass states. DQN, IQN,
R2D2, C51, the hybrid-action recipe and MAPF's are such subclasses; a recipe may also
implement the contract from scratch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.acting import ActingRequest, TransitionActing
from shoal.agent.actor import Actor
from shoal.agent.builder import Fields, build_actor, transition_fields
from shoal.agent.learner import Learner
from shoal.agent.networks import image_encoder, load_weights
from shoal.agent.priorities import initial_priorities
from shoal.config import Config
from shoal.envs import EnvSpec, make_env, probe_env
from shoal.envs.vector import check_engine, make_vector_env
from shoal.errors import ConfigError
from shoal.recipes.contract import ActorWeights, RecipeTraits
from shoal.run.evaluation import evaluate
from shoal.run.runner import Collected

__all__ = [
    "ActionValueRecipe",
    "EpisodeRows",
    "GreedyEvaluator",
    "value_search_space",
]

EVAL_ENVS = 32
"""Most evaluation envs played side by side."""


def value_search_space(cfg: Config) -> dict[str, dict[str, Any]]:
    """The ``[dqn]``, ``[explore]`` and replay-ratio keys every action-value learner
    reads, as ``shoal tune`` searches them: rl-baselines3-zoo's DQN ranges in shoal's
    units (the target period in updates; exploration in env steps of this run's budget;
    one replay ratio for its train_freq and gradient_steps, at most an update per env
    step)."""
    steps = cfg.run.total_steps
    return {
        "dqn.lr": {"low": 1e-5, "high": 3e-3, "log": True},
        "dqn.gamma": {"choices": [0.95, 0.98, 0.99, 0.995, 0.999]},
        "dqn.batch_size": {"choices": [32, 64, 128, 256, 512]},
        "dqn.hidden": {"choices": [[64, 64], [128, 128], [256, 256], [400, 300]]},
        "dqn.n_step": {"choices": [1, 3, 5]},
        "dqn.target_period": {"low": 10, "high": max(20, min(10_000, steps)), "log": True},
        "run.replay_ratio": {"choices": [0.0625, 0.125, 0.25, 0.5, 1.0]},
        "explore.eps_end": {"low": 0.0, "high": 0.2},
        "explore.eps_decay_steps": {
            "low": max(1, steps // 100),
            "high": max(2, steps // 2),
            "log": True,
        },
    }


class ActionValueRecipe(ABC):
    """A recipe's shared parts (see the module docstring); a subclass states its search
    space, learner and network, and refuses in :meth:`check` what it cannot train."""

    traits = RecipeTraits(action_masks=True)
    """Every runner; env.num_envs envs; replay serves from its first item; legal-action
    masks honoured."""
    actor_type: type[Actor] = Actor
    """The class of its actors (R2D2's keeps a memory per env)."""

    @abstractmethod
    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """What ``shoal tune`` searches for this algorithm by default: config key ->
        ``{low, high, log}`` or ``{choices}``, as a space file writes them."""

    @abstractmethod
    def make_learner(self, cfg: Config, spec: EnvSpec) -> Learner:
        """The learner (its network, target, optimizer and pure loss), weights drawn from
        torch's generator (the caller seeds it)."""

    @abstractmethod
    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only network of the learner's shape (actors that pull weights)."""

    def user_factories(self, cfg: Config) -> dict[str, str]:
        """The user's factories its networks are built from, by config key (each process
        of a run imports them by name): ``dqn.network``, which DQN, R2D2 and hybrid
        actions build their network from (C51 refuses it in :meth:`check`; IQN names its
        torso instead, MAPF none)."""
        return {"dqn.network": cfg.dqn.network}

    def probe(self, cfg: Config) -> EnvSpec:
        """What the parts need to know of the env (made once to read it)."""
        return probe_env(cfg.env)

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """What every such recipe checks before any work: :meth:`check_actions`, then
        :meth:`check_env`."""
        self.check_actions(cfg, spec)
        self.check_env(cfg, spec)

    def check_actions(self, cfg: Config, spec: EnvSpec) -> None:
        """Discrete actions: a continuous part is the 'hybrid' recipe's."""
        if spec.hybrid:
            raise ConfigError(
                f"config key 'run.recipe': {cfg.run.recipe!r} learns values of discrete"
                f" actions; env.id {cfg.env.id!r} has actions with a continuous part (use"
                " 'hybrid')"
            )

    def check_env(self, cfg: Config, spec: EnvSpec) -> None:
        """An engine that cannot step the env, or an encoder that cannot read its
        observations."""
        check_engine(cfg.env)
        image_encoder(cfg.dqn.encoder, spec.image)

    def make_actor(
        self, cfg: Config, spec: EnvSpec, rng: np.random.Generator, weights: ActorWeights
    ) -> Actor:
        """The batch actor (:attr:`actor_type`) acting with the weights ``weights`` names."""
        network = weights.network
        if network is None:
            network = self.make_network(cfg, spec)
        return build_actor(
            cfg,
            spec,
            rng,
            params=weights.params,
            source=weights.source,
            network=network,
            device=weights.device,
            kind=self.actor_type,
            extra=self.actor_extras(spec),
        )

    def actor_extras(self, spec: EnvSpec) -> dict[str, Any]:
        """Further arguments of :attr:`actor_type` (none; the hybrid actor's box)."""
        return {}

    def learner_actor(self, cfg: Config, spec: EnvSpec, learner: Learner) -> Actor:
        """An actor on ``learner``'s own live weights (serial acting, evaluation)."""
        weights = ActorWeights(learner.params, network=learner.online, device=learner.device)
        return self.make_actor(cfg, spec, np.random.default_rng(0), weights)

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

    def make_acting(
        self, cfg: Config, spec: EnvSpec, actor: Actor, request: ActingRequest
    ) -> TransitionActing:
        """``env.num_envs`` envs (the engine seeded with ``request.env_seed``) played by
        ``actor``, their n-step transitions through ``request.writer``."""
        envs = make_vector_env(cfg.env, cfg.env.num_envs, request.env_seed)
        d = cfg.dqn
        return TransitionActing(
            actor, envs, request, n_step=d.n_step, gamma=d.gamma, hybrid=spec.hybrid
        )

    def make_tasks(self, cfg: Config) -> EpisodeRows:
        """Every episode is the env's own: nothing to choose, a row per episode."""
        return EpisodeRows()

    def make_evaluator(self, cfg: Config) -> GreedyEvaluator:
        """Greedy returns on fresh envs."""
        return GreedyEvaluator(cfg, self.eval_policy)

    def eval_policy(self, actor: Actor, n: int) -> Any:
        """What plays evaluation episodes on ``n`` envs side by side: the actor's greedy
        actions (a recipe with memory gives a policy that keeps one per env)."""
        return actor.greedy

    def evaluate_checkpoint(
        self, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Greedy returns of the checkpoint's online weights on fresh envs."""
        spec = self.probe(cfg)
        torch.manual_seed(cfg.run.seed)
        learner = self.make_learner(cfg, spec)
        load_weights(learner.online, state["learner"]["online"])
        actor = self.learner_actor(cfg, spec, learner)
        envs = [make_env(cfg.env, evaluation=True) for _ in range(min(episodes, EVAL_ENVS))]
        try:
            policy = self.eval_policy(actor, len(envs))
            return evaluate(policy, envs, episodes, seed, cfg.run.eval_epsilon)
        finally:
            for env in envs:
                env.close()


class EpisodeRows:
    """The learner's side of plain episodes: nothing to choose for the actings, a metrics
    row per finished episode."""

    key: str | None = None
    """Where a checkpoint keeps its state (None: it has none)."""

    def acting_args(self) -> tuple[Any, ...]:
        """Nothing: every episode is the env's own."""
        return ()

    def collected(self, ended: list[Any], steps: int, side_by_side: bool = False) -> Collected:
        """The loop's rows for finished episodes (each with ``ret`` and ``length``)."""
        if not ended:
            return Collected(steps)
        return Collected(steps, [(e.ret, e.length) for e in ended], side_by_side=side_by_side)

    def metrics(self) -> dict[str, float]:
        """Nothing beyond the loop's own."""
        return {}

    def tick_metrics(self, replay_size: int) -> dict[str, float]:
        """Nothing beyond the runner's own."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Nothing to keep."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


class GreedyEvaluator:
    """Greedy returns of ``run.eval_episodes`` episodes on evaluation envs made on first
    use, played side by side (one batched forward per step)."""

    def __init__(self, cfg: Config, policy: Any = None) -> None:
        self.cfg = cfg
        self.policy = policy if policy is not None else (lambda actor, n: actor.greedy)
        """(actor, envs) -> what plays the episodes (the recipe's ``eval_policy``)."""
        self._envs: list[Any] | None = None

    def evaluate(self, actor: Actor, seed: int) -> np.ndarray:
        """The returns; episode k starts from a seed derived from ``seed`` and k."""
        episodes = self.cfg.run.episodes_per_eval()
        if self._envs is None:
            n = min(episodes, EVAL_ENVS)
            self._envs = [make_env(self.cfg.env, evaluation=True) for _ in range(n)]
        policy = self.policy(actor, len(self._envs))
        return evaluate(policy, self._envs, episodes, seed, self.cfg.run.eval_epsilon)

    def metrics(self) -> dict[str, float]:
        """Nothing beyond the returns."""
        return {}

    def close(self) -> None:
        """Close the evaluation envs; safe to call twice."""
        for env in self._envs or ():
            env.close()
        self._envs = None
