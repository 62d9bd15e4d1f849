"""One epoch of a multi-agent world played by K stacked agents.

The agents runner's unit of collection, in one place so that it runs the same in the
caller's process (sync learning, the learning thread, evaluation) and in a collector
process (:mod:`shoal.runners.agents.collector`). The turn structure is the world's (harvest:
entities first, then every agent observes, chooses and acts); here every live agent's
action comes from one batched forward, and each agent's n-step transitions are kept apart
for its own buffer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from shoal.agent.builder import build_nstep
from shoal.agent.networks import Params
from shoal.agent.stacked import StackedActor
from shoal.config import Config
from shoal.envs.parallel import (
    MultiAgentSpec,
    check_same_agents,
    make_parallel_env,
    probe_parallel_env,
)
from shoal.envs.social_metrics import EpisodeMetrics
from shoal.registry import recipe_for
from shoal.replay.items import stack_items
from shoal.run.runner import Collected
from shoal.run.seeding import SeedStream, derive_seed

__all__ = [
    "EpochPlayer",
    "EpochResult",
    "actor_rngs",
    "agent_config",
    "build_player",
    "checkpoint_weights",
    "drawn_per_agent",
    "epoch_seed",
    "greedy_agent_returns",
    "greedy_returns",
    "observe",
    "play_checkpoint",
    "play_epochs",
    "stacked_player",
]

T = TypeVar("T")


def actor_rngs(cfg: Config, k: int) -> list[np.random.Generator]:
    """The K agents' exploration generators, the same wherever the epochs are played."""
    return [
        np.random.default_rng(derive_seed(cfg.run.seed, SeedStream.ACTION, i)) for i in range(k)
    ]


def agent_config(cfg: Config, spec: MultiAgentSpec) -> Config:
    """The config each agent's parts are built from: the run's, with ``dqn.action_mask``
    on where the agents differ in action count (their rows end with their legal actions,
    so that neither acting nor a target picks an action an agent does not have)."""
    if not spec.masked or cfg.dqn.action_mask:
        return cfg
    return dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, action_mask=True))


def drawn_per_agent(cfg: Config, k: int, make: Callable[[], T]) -> list[T]:
    """``make()`` once per agent, agent i's with torch's generator seeded for agent i: the
    one rule for the K agents' initial weights, so that the runner's learners and a
    player's initial weights (:func:`build_player`) are the same draws."""
    made = []
    for i in range(k):
        torch.manual_seed(derive_seed(cfg.run.seed, SeedStream.LEARNER, i))
        made.append(make())
    return made


def epoch_seed(cfg: Config, epoch: int) -> int:
    """The reset seed of training epoch ``epoch``."""
    return derive_seed(cfg.run.seed, SeedStream.TRAIN, epoch)


@dataclass
class EpochResult:
    """What one epoch produced."""

    returns: np.ndarray
    """Every agent's return, ``(K,)`` in ``possible_agents`` order."""
    turns: int
    social: dict[str, float]
    """The social outcomes (efficiency, equality, sustainability, peace)."""
    transitions: list[dict[str, np.ndarray] | None]
    """Agent k's n-step transitions as stacked fields (``None``: none stored)."""
    agents: tuple[str, ...] = ()
    """The agents' names, in the order of ``returns``."""

    def collected(self, agents: tuple[str, ...]) -> Collected:
        """The epoch as the run loop counts it: its turns, and one episode row with the
        collective return, every agent's (``return_AGENT``) and the social outcomes."""
        extra = {f"return_{a}": float(r) for a, r in zip(agents, self.returns)}
        row = [{**extra, **self.social}]
        return Collected(self.turns, [(float(self.returns.sum()), self.turns)], row)


class EpochPlayer:
    """Plays epochs of ``env`` with ``actor`` (K agents' stacked weights).

    Args:
        cfg: the run's config (``env.id`` for errors, n-step settings).
        env: the world (a PettingZoo ``ParallelEnv``).
        spec: the world's agents and shapes (:func:`~shoal.envs.parallel.probe_parallel_env`).
        actor: picks all K actions at once.
    """

    def __init__(self, cfg: Config, env: Any, spec: MultiAgentSpec, actor: StackedActor) -> None:
        self.cfg = cfg
        self.env = env
        self.spec = spec
        self.actor = actor

    def _observe(self, obs: dict[str, Any]) -> np.ndarray:
        return observe(self.spec, obs)

    def play(
        self,
        epsilon: float,
        seed: int,
        *,
        store: bool,
        each_turn: Callable[[], None] | None = None,
    ) -> EpochResult:
        """One epoch from ``env.reset(seed=seed)``; ``store`` keeps every agent's
        transitions; ``each_turn`` runs after every turn (e.g. to surface a failure
        elsewhere). Raises ``EnvError`` if the world's agent list changed."""
        agents, env = self.spec.agents, self.env
        obs_d, _ = env.reset(seed=seed)
        check_same_agents(env, self.cfg.env.id, agents)
        obs = self._observe(obs_d)
        writers = [build_nstep(self.cfg) for _ in agents] if store else []
        team = self.cfg.agents.reward == "team"
        kept: list[list[dict[str, Any]]] = [[] for _ in agents]
        metrics, returns = EpisodeMetrics(list(agents)), np.zeros(len(agents))
        turns = 0
        while env.agents:
            live = set(env.agents)
            actions = self.actor.select_actions(obs, epsilon)
            act = {a: int(actions[i]) for i, a in enumerate(agents) if a in live}
            nxt_d, rew, term, trunc, infos = env.step(act)
            nxt = self._observe(nxt_d)
            shared = float(sum(rew.values())) if team else 0.0
            for i, a in enumerate(agents):
                if a not in act:
                    continue
                returns[i] += rew.get(a, 0.0)
                if store:
                    r = shared if team else rew.get(a, 0.0)
                    done = (term.get(a, False), trunc.get(a, False))
                    kept[i] += writers[i].append(obs[i], actions[i], r, nxt[i], *done)
            tagged = {a: bool(info.get("tagged_out", False)) for a, info in infos.items()}
            metrics.add(rew, tagged)
            obs, turns = nxt, turns + 1
            if each_turn is not None:
                each_turn()
        transitions = [stack_items(items) if items else None for items in kept]
        return EpochResult(returns, turns, metrics.result(), transitions, agents)


def observe(spec: MultiAgentSpec, obs: dict[str, Any]) -> np.ndarray:
    """Every agent's observation as rows ``(K, obs_dim)`` laid out as ``spec`` says (its
    id, zeros, its own observation, its legal actions); an agent that has left observes
    zeros (its row is never used again)."""
    if spec.channels_last:  # images height x width x channels: channels first, as stored
        obs = {a: np.moveaxis(np.asarray(o), -1, 0) for a, o in obs.items()}
    if not (spec.padded or spec.share):  # every row is the agent's own observation
        zeros = np.zeros(spec.obs_dim, np.float32)
        return np.stack([np.asarray(obs.get(a, zeros), np.float32).ravel() for a in spec.agents])
    rows, end = spec.base_rows.copy(), spec.obs_end
    for i, a in enumerate(spec.agents):
        if a in obs:
            rows[i, end - spec.obs_sizes[i] : end] = np.asarray(obs[a], np.float32).ravel()
    return rows


def greedy_returns(
    cfg: Config, envs: list[Any], spec: MultiAgentSpec, actor: StackedActor, seeds: list[int]
) -> np.ndarray:
    """Collective greedy returns of one episode per reset seed
    (:func:`greedy_agent_returns` summed over the agents)."""
    return greedy_agent_returns(cfg, envs, spec, actor, seeds).sum(axis=1)


def greedy_agent_returns(
    cfg: Config, envs: list[Any], spec: MultiAgentSpec, actor: StackedActor, seeds: list[int]
) -> np.ndarray:
    """Every agent's greedy return ``(episodes, K)`` of one episode per reset seed, played
    side by side in ``envs`` (a world takes the next seed when its episode ends): one
    forward per turn for every agent of every world still playing. The same returns as
    playing the seeds one after another (greedy acting draws nothing), in a fraction of the
    forwards."""
    returns = np.zeros((len(seeds), len(spec.agents)))
    todo = iter(range(len(seeds)))
    live: dict[int, tuple[int, np.ndarray]] = {}  # world -> (episode, observations)

    def begin(world: int) -> None:
        k = next(todo, None)
        if k is not None:
            obs, _ = envs[world].reset(seed=seeds[k])
            check_same_agents(envs[world], cfg.env.id, spec.agents)
            live[world] = (k, observe(spec, obs))

    for world in range(len(envs)):
        begin(world)
    while live:
        worlds = list(live)
        actions = actor.greedy_worlds(np.stack([live[w][1] for w in worlds], axis=1))
        for col, world in enumerate(worlds):
            env, k = envs[world], live[world][0]
            act = {a: int(actions[i, col]) for i, a in enumerate(spec.agents) if a in env.agents}
            nxt, rew, *_ = env.step(act)
            for i, a in enumerate(spec.agents):
                if a in act:
                    returns[k, i] += rew.get(a, 0.0)
            if env.agents:
                live[world] = (k, observe(spec, nxt))
            else:
                del live[world]
                begin(world)
    return returns


def stacked_player(
    cfg: Config,
    env: Any,
    spec: MultiAgentSpec,
    network: Any,
    params: Params,
    device: str | torch.device = "cpu",
) -> EpochPlayer:
    """A player of ``env`` whose K agents act on stacked ``params`` through ``network`` (a
    template: only explicit weights enter it) on ``device``, each exploring with its own
    generator (:func:`actor_rngs`): the one way the runner, a collector process and
    :func:`play_epochs` build their actor."""
    actor = StackedActor(
        network,
        params,
        n_actions=spec.n_actions,
        rngs=actor_rngs(cfg, len(spec.agents)),
        action_mask=cfg.dqn.action_mask,
        batched=cfg.agents.parallel_actions,
        device=device,
    )
    return EpochPlayer(cfg, env, spec, actor)


def build_player(cfg: Config, env: Any, params: Params | None = None) -> EpochPlayer:
    """A player of ``env`` with an inference-only actor over stacked ``params`` (``None``:
    each agent's initial weights, drawn as the agents runner draws them). Weights that do
    not fit the config's network and agents are a one-line ValueError naming the first
    parameter and both shapes."""
    spec = probe_parallel_env(env, cfg.env.id, share=cfg.agents.share)
    cfg, recipe, k = agent_config(cfg, spec), recipe_for(cfg), len(spec.agents)
    network = recipe.make_network(cfg, spec.env_spec())
    if params is not None:
        from shoal.run.checkpoint import weights_misfit

        own = {n: p.detach().expand(k, *p.shape) for n, p in network.named_parameters()}
        misfit = weights_misfit({n: v for n, v in params.items() if n in own}, own)
        if misfit is not None:
            raise ValueError(misfit)
    else:
        with torch.random.fork_rng():  # the caller's generator goes on as if none were drawn
            drawn = 1 if cfg.agents.share else k
            nets = drawn_per_agent(cfg, drawn, lambda: recipe.make_network(cfg, spec.env_spec()))
        params = {
            n: torch.stack([dict(m.named_parameters())[n].detach() for m in nets]).expand(
                k, *p.shape
            )
            for n, p in network.named_parameters()
        }
    return stacked_player(cfg, env, spec, network, params)


def play_epochs(
    cfg: Config, seeds: list[int], *, epsilon: float = 0.0, params: Params | None = None
) -> list[EpochResult]:
    """One epoch per reset seed in a world of ``cfg`` with K agents acting on stacked
    ``params`` (e.g. :func:`checkpoint_weights` of a run's checkpoint; ``None``: initial
    weights), at ``epsilon`` (0: greedy, 1: uniformly random), storing nothing. The way to
    compare trained agents with random ones on the same seeds."""
    a = cfg.agents
    env = make_parallel_env(cfg.env, num_agents=a.agents, max_turns=a.max_turns)
    try:
        player = build_player(cfg, env, params)
        return [player.play(epsilon, seed, store=False) for seed in seeds]
    finally:
        env.close()


def play_checkpoint(
    cfg: Config, learner_state: Any, episodes: int, seed: int, *, epsilon: float = 0.0
) -> list[EpochResult]:
    """``episodes`` epochs of a checkpoint's agents (its ``learner`` entry), episode k reset
    with a seed derived from ``seed`` and k, so two runs, or trained and random agents,
    meet the same worlds."""
    seeds = [derive_seed(seed, SeedStream.EVAL, k) for k in range(episodes)]
    return play_epochs(cfg, seeds, epsilon=epsilon, params=checkpoint_weights(learner_state))


def checkpoint_weights(learner_state: Any) -> dict[str, torch.Tensor]:
    """The stacked ``(K, ...)`` online weights in an agents-runner checkpoint's
    ``learner`` entry (stacked, a list of per-agent learners, or one shared learner)."""
    if isinstance(learner_state, list):  # parallel_training = false
        online = [s["online"] for s in learner_state]
        return {n: torch.stack([o[n] for o in online]) for n in online[0]}
    if "shared_by" in learner_state:  # agents.share: one network for every agent
        k = int(learner_state["shared_by"])
        return {n: w.expand(k, *w.shape) for n, w in learner_state["online"].items()}
    return dict(learner_state["online"])
