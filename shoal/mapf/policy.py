"""Policies that play a :class:`~shoal.envs.mapf.MapfEnv` for evaluation: the protocol, and
the trained network's policy loaded from a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from shoal.agent.actor import Actor
from shoal.agent.networks import Params
from shoal.envs.mapf import ACTIONS, MapfEnv
from shoal.errors import ConfigError
from shoal.mapf.config import mapf_of
from shoal.mapf.network import CommQNetwork

__all__ = ["MapfPolicy", "NetworkPolicy", "RandomMoves", "Unstick", "load_policy", "perturbed"]


class MapfPolicy(Protocol):
    """Picks every agent's action from an env's current state."""

    name: str
    """How tables and files call it."""

    def reset(self, env: MapfEnv) -> None:
        """A new episode of ``env`` starts (its reset was just called)."""

    def act(self, env: MapfEnv) -> np.ndarray:
        """int ``(K,)``: one action per agent, in ``possible_agents`` order, for the env's
        current state (``env.last_obs``, ``env.comm_mask()``, ``env.positions``)."""


class NetworkPolicy:
    """The shared network's greedy policy through an :class:`~shoal.agent.actor.Actor`
    (epsilon 0): every agent's argmax Q, memories carried from step to step. A network
    built with ``comm=False`` plays with communication masked off (each agent reads only
    itself): the same weights, for what talking is worth."""

    def __init__(
        self,
        network: CommQNetwork,
        params: Params,
        *,
        name: str,
        env_rules: dict[str, Any] | None = None,
        shield_guide: float = 0.0,
    ) -> None:
        self.network, self.params, self.name = network, params, name
        self.env_rules = dict(env_rules or {})
        """MapfEnv settings the policy must play under (the view and the communication
        rule it was trained with)."""
        self.shield_guide = shield_guide
        """The distance guide its run's shield used (``mapf.shield_guide``): a shield's
        default for it."""
        self._actor: Actor | None = None
        self._state: torch.Tensor | None = None

    def reset(self, env: MapfEnv) -> None:
        """Fresh memories for the env's agents (a layout of their number)."""
        net = self.network.for_agents(env.max_num_agents)
        self._actor = Actor(
            net, params=self.params, n_actions=net.n_actions, rng=np.random.default_rng(0)
        )
        self._actor.epsilon = 0.0
        self._state = None

    def scores(self, env: MapfEnv) -> np.ndarray:
        """float ``(K, 5)``: every agent's Q-values now (the memories step, as in
        :meth:`act`: call one of the two per step)."""
        if self._actor is None:
            self.reset(env)
        assert self._actor is not None
        obs = self._actor.network.layout.pack(env.last_obs, env.comm_mask())
        q, self._state = self._actor.q_values(obs, self._state)
        return q[0, : env.max_num_agents].cpu().numpy()

    def scores_at(self, env: MapfEnv, positions: np.ndarray) -> np.ndarray:
        """float ``(K, 5)``: every agent's Q-values were it at ``positions`` (a planner's
        configuration), from fresh memories; the policy's own memories are left alone."""
        if self._actor is None:
            self.reset(env)
        assert self._actor is not None
        obs, comm = env.view(positions)
        q, _ = self._actor.q_values(self._actor.network.layout.pack(obs, comm), None)
        return q[0, : env.max_num_agents].cpu().numpy()

    def act(self, env: MapfEnv) -> np.ndarray:
        """Every agent's greedy action now (the first best on ties)."""
        return self.scores(env).argmax(axis=1)


class _EpisodeNoise:
    """A wrapper of ``policy`` that draws its noise per episode from ``(seed, episode
    index)`` (and its ``stream``, where it is not 0), so policies wrapped alike meet the
    same draws on the same instances. Name and env rules are the wrapped policy's."""

    stream = 0
    """Keeps the draws of different kinds of noise apart."""

    def __init__(self, policy: MapfPolicy, *, seed: int = 0) -> None:
        self.policy, self.seed = policy, seed
        self.name: str = policy.name
        self.env_rules = dict(getattr(policy, "env_rules", {}))
        self._episodes = 0
        self._rng = np.random.default_rng(seed)

    def reset(self, env: MapfEnv) -> None:
        """Reset the wrapped policy; the episode's own draws."""
        self.policy.reset(env)
        key = [self.seed, self._episodes] + ([self.stream] if self.stream else [])
        self._rng = np.random.default_rng(key)
        self._episodes += 1


class RandomMoves(_EpisodeNoise):
    """``policy`` with each agent's action replaced, with probability ``epsilon``, by a
    uniformly random move. A greedy policy can lock into a deterministic deadlock (two
    agents yielding to each other for ever, the same memories each step); a few random
    moves break it, which is why DQN's Atari evaluations play with epsilon 0.05. Each
    episode's draws come from ``(seed, episode index)``, so policies wrapped alike meet
    the same noise on the same instances. Name and env rules are the wrapped policy's.

    Example:
        >>> from shoal.mapf.baselines import ShortestPathPolicy
        >>> RandomMoves(ShortestPathPolicy(), 0.05).name
        'shortest-path'
    """

    def __init__(self, policy: MapfPolicy, epsilon: float, *, seed: int = 0) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ConfigError(f"random moves: epsilon {epsilon} is not within [0, 1]")
        super().__init__(policy, seed=seed)
        self.epsilon = float(epsilon)

    def act(self, env: MapfEnv) -> np.ndarray:
        """The wrapped policy's actions, some replaced by random moves."""
        actions = np.array(self.policy.act(env), copy=True)
        flip = self._rng.random(len(actions)) < self.epsilon
        actions[flip] = self._rng.integers(len(ACTIONS), size=int(flip.sum()))
        return actions


class Unstick(_EpisodeNoise):
    """``policy``, except that an agent off its goal which has stayed in the same cell for
    the last ``patience`` steps takes a uniformly random action, until it has moved. A
    greedy team that stops stays stopped: with the same views and saturated memories, each
    step repeats the last (``stalled`` failures). Unlike :class:`RandomMoves`, the noise
    falls only on agents that stand still off their goals, so a policy that keeps moving
    plays as it is. The rule reads only the agents' cells, so it applies to every policy
    alike, the shortest-path baseline included. Its draws are per episode, apart from
    :class:`RandomMoves`' (``stream`` 1). Name and env rules are the wrapped policy's.

    Example:
        >>> from shoal.mapf.baselines import ShortestPathPolicy
        >>> Unstick(ShortestPathPolicy(), 3).patience
        3
    """

    stream = 1

    def __init__(self, policy: MapfPolicy, patience: int, *, seed: int = 0) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ConfigError(f"unstick: patience {patience!r} is not a whole number of steps >= 1")
        super().__init__(policy, seed=seed)
        self.patience = patience
        self._cells: np.ndarray | None = None
        self._still = np.zeros(0, np.int64)

    def reset(self, env: MapfEnv) -> None:
        """Reset the wrapped policy and the draws; nobody has stood still yet."""
        super().reset(env)
        self._cells = None
        self._still = np.zeros(env.max_num_agents, np.int64)

    def act(self, env: MapfEnv) -> np.ndarray:
        """The wrapped policy's actions; random ones for agents stuck off their goals."""
        actions = np.array(self.policy.act(env), copy=True)
        if self._cells is not None:  # steps since each agent last changed cell
            same = (env.positions == self._cells).all(axis=1)
            self._still = np.where(same, self._still + 1, 0)
        self._cells = env.positions.copy()
        stuck = (self._still >= self.patience) & ~env.on_goal()
        actions[stuck] = self._rng.integers(len(ACTIONS), size=int(stuck.sum()))
        return actions


def perturbed(policy: MapfPolicy, *, epsilon: float = 0.0, unstick: int = 0) -> MapfPolicy:
    """``policy`` with evaluation's noise: random moves with probability ``epsilon``
    (:class:`RandomMoves`) and random actions for agents stuck off their goals for
    ``unstick`` steps (:class:`Unstick`; 0: never); unchanged when both are off."""
    if epsilon:
        policy = RandomMoves(policy, epsilon)
    if unstick:
        policy = Unstick(policy, unstick)
    return policy


def load_policy(
    run_dir: str | Path, *, comm: bool = True, checkpoint: str = "best", trust_code: bool = False
) -> MapfPolicy:
    """The greedy policy of a MAPF run's best checkpoint (its latest before any
    evaluation), or its latest with ``checkpoint="latest"``; ``comm=False`` masks all
    communication off. A run whose config names code of its own opens only with
    ``trust_code`` (:mod:`shoal.run.consent`)."""
    from shoal.config.opening import open_run

    with open_run(run_dir, trust_code=trust_code) as (run, cfg):
        return _network_policy(run, cfg, comm, checkpoint)


def _network_policy(run: Any, cfg: Any, comm: bool, checkpoint: str) -> MapfPolicy:
    """The policy of a MAPF run's checkpoint, once its config is allowed to load."""
    from shoal.mapf.config import MAPF_ID
    from shoal.mapf.player import build_network
    from shoal.run.checkpoint import checkpoint_fits, load_checkpoint

    if cfg.env.id != MAPF_ID:
        raise ConfigError(f"run '{run.path}': env.id is {cfg.env.id!r}, not a MAPF run")
    if checkpoint not in ("best", "latest"):
        raise ConfigError(f"checkpoint {checkpoint!r}: expected 'best' or 'latest'")
    use_best = checkpoint == "best" and run.best.is_file()
    path = run.best if use_best else run.checkpoint
    if not path.is_file():
        raise ConfigError(f"run '{run.path}': no checkpoint yet")
    state = load_checkpoint(path, best=path == run.best)
    network = build_network(mapf_of(cfg), comm=comm).requires_grad_(False)
    with checkpoint_fits(path, "the run's MAPF network"):
        weights = state["learner"]["online"]
        params = {k: v.float() for k, v in weights.items()}
        network.load_state_dict(params)  # checks the shapes now, not at the first move
    m = mapf_of(cfg)
    rules = {"fov": m.fov, "k_comm": m.k_comm}
    name = "shoal" if comm else "no-comm"
    return NetworkPolicy(network, params, name=name, env_rules=rules, shield_guide=m.shield_guide)
