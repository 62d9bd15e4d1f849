"""Plays MAPF worlds with the shared network and turns the play into replay sequences.

A player steps ``mapf.envs`` worlds together: one batched forward gives every agent of
every world its Q-values and next memory. Each world's steps go, as joint observations
(:class:`~shoal.mapf.network.JointLayout`), through its own
:class:`~shoal.replay.SequenceWriter` with the memories the agents held before acting, so
the learner can burn in from them. Exploration is epsilon-greedy per agent; memories step
on random actions too. Episodes start in a curriculum stage the caller names; each world's
reset is seeded from (seeds, world, episode), so a player's play is reproducible.

The serial runner, each rollout worker and each Ray actor play through this class; the items'
initial priorities (their TD errors under the player's weights, R2D2's max/mean mix) are
computed here too, in one forward per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from shoal.agent.networks import Params, recurrent_q
from shoal.agent.sequence_loss import SequenceBatch, SequenceDQN, SequenceDQNLoss
from shoal.config import Config
from shoal.envs.mapf import MapfEnv
from shoal.mapf.config import MapfConfig, mapf_of
from shoal.mapf.curriculum import Stage, draw_stage
from shoal.mapf.guide import guided_scores
from shoal.mapf.network import CommQNetwork, JointLayout
from shoal.mapf.pibt import PibtMover
from shoal.recipes.config import R2D2Config
from shoal.replay import SequenceWriter
from shoal.replay.items import stack_items
from shoal.run.seeding import derive_seed

__all__ = [
    "Episode",
    "MapfPlayer",
    "Played",
    "build_learner",
    "build_network",
    "joint_move",
    "make_world",
    "play_greedy",
    "sequence_specs",
]


def build_network(cfg: MapfConfig, *, comm: bool = True) -> CommQNetwork:
    """The network a ``[mapf]`` section describes."""
    return CommQNetwork(
        JointLayout(cfg.max_agents, cfg.fov),
        channels=cfg.channels,
        blocks=cfg.blocks,
        hidden=cfg.hidden,
        heads=cfg.heads,
        rounds=cfg.rounds,
        comm=comm,
    )


def build_learner(cfg: Config) -> SequenceDQN:
    """The learner of a MAPF run: the sequence learner on the ``[mapf]`` network."""
    r = cfg.r2d2
    return SequenceDQN(
        build_network(mapf_of(cfg)),
        cfg.dqn,
        burn_in=r.burn_in,
        eta=r.eta,
        device=cfg.run.device,
    )


def make_world(cfg: MapfConfig, stage: Stage) -> MapfEnv:
    """A generated world of ``stage`` (agents, map side) with the section's rules: its
    view and communication, episode length, idle cost and training density. Training and
    the held-out evaluation make their worlds here."""
    agents, size = stage
    rules = ("density", "fov", "k_comm", "max_steps", "stay_off_goal")
    return MapfEnv(agents, size=size, **{rule: getattr(cfg, rule) for rule in rules})


def sequence_writer(r: R2D2Config) -> SequenceWriter:
    """The sequence writer of one world's stream (``[r2d2]``'s sequences)."""
    return SequenceWriter(r.length, burn_in=r.burn_in, period=r.period)


def sequence_specs(cfg: Config) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Replay field specs of MAPF sequence items (packed joint observations as bytes)."""
    m = mapf_of(cfg)
    layout = JointLayout(m.max_agents, m.fov)
    n = m.max_agents
    return sequence_writer(cfg.r2d2).specs(
        (layout.size,),
        state_shape=(n, m.hidden),
        obs_dtype=np.uint8,
        action_shape=(n,),
        reward_shape=(n,),
    )


@dataclass(frozen=True)
class Episode:
    """One finished episode: its stage, whether every agent reached its goal, its steps and
    the mean over agents of their returns."""

    stage: Stage
    success: bool
    steps: int
    mean_return: float


@dataclass
class Played:
    """What one :meth:`MapfPlayer.play` call produced."""

    items: list[dict[str, np.ndarray]] = field(default_factory=list)
    priorities: np.ndarray = field(default_factory=lambda: np.zeros(0))
    episodes: list[Episode] = field(default_factory=list)
    steps: int = 0


class _World:
    """One world of a player: its env, writer, episode counters and packed observation."""

    def __init__(self, cfg: MapfConfig, sequences: R2D2Config, seed: int) -> None:
        self.env: MapfEnv | None = None
        self.mover = PibtMover(seed)  # the shield's state (mapf.shield)
        self.stage: Stage | None = None
        self.writer = sequence_writer(sequences)
        self.obs: np.ndarray | None = None  # packed joint observation now (None: reset due)
        self.ret = 0.0
        self.episodes = 0


class MapfPlayer:
    """Plays ``mapf.envs`` worlds with one network (see the module docstring).

    Args:
        cfg: the run's config (``[mapf]`` for worlds and sequences, ``[dqn]`` for the
            priorities' n-step targets).
        network: the network (an inference copy; its weights come as ``params``).
        seeds: the prefix of every reset's seed (run seed, stream, player index, ...).
        rng: the generator of exploration and stage draws.
    """

    def __init__(
        self,
        cfg: Config,
        network: CommQNetwork,
        *,
        seeds: Sequence[int],
        rng: np.random.Generator,
    ) -> None:
        self.cfg, self.m = cfg, mapf_of(cfg)
        self.network = network
        self.layout = network.layout
        self.seeds = tuple(seeds)
        self.rng = rng
        self.worlds = [
            _World(self.m, cfg.r2d2, derive_seed(*seeds, w, 1)) for w in range(self.m.envs)
        ]
        self._draws: tuple[list[Stage], np.ndarray | None] = ([], None)
        """The stages new episodes are drawn from, and their probabilities."""
        # Memories stay on the CPU between steps (rows are reset and stored per world);
        # the forward moves them to the network's device.
        self.state = network.initial_state(len(self.worlds)).cpu()
        # The learner's loss: initial priorities are the TD errors it will compute.
        self.loss = SequenceDQNLoss.from_config(
            network, cfg.dqn, burn_in=cfg.r2d2.burn_in, eta=cfg.r2d2.eta
        )

    def _reset(self, w: int, world: _World) -> None:
        stages, weights = self._draws
        stage = draw_stage(stages, weights, self.rng)
        if world.stage != stage:
            world.env, world.stage = make_world(self.m, stage), stage
        assert world.env is not None
        world.env.reset(seed=derive_seed(*self.seeds, w, world.episodes))
        world.mover.reset(world.env)
        world.obs = self.layout.pack(world.env.last_obs, world.env.comm_mask())
        world.ret = 0.0
        self.state[w] = 0.0

    @torch.inference_mode()
    def play(
        self,
        steps: int,
        params: Params,
        *,
        epsilon: float | Sequence[float],
        stages: Sequence[Stage],
        weights: Sequence[float] | None = None,
    ) -> Played:
        """Step every world ``steps`` times with ``params`` (episodes go on across calls);
        returns the completed sequences with their priorities and the finished episodes.
        ``epsilon`` is one exploration rate for all worlds or one per world; new episodes
        draw their stage from ``stages`` with probabilities ``weights`` (none: uniformly)."""
        eps = np.broadcast_to(np.asarray(epsilon, np.float64), (len(self.worlds),))
        self._draws = (list(stages), None if weights is None else np.asarray(weights))
        out = Played()
        for w, world in enumerate(self.worlds):
            if world.obs is None:
                self._reset(w, world)
        device = next(iter(params.values())).device
        for _ in range(steps):
            obs = np.stack([world.obs for world in self.worlds])
            before = self.state.clone()
            q, self.state = recurrent_q(self.network, params, obs, self.state, device)
            self.state = self.state.cpu()
            actions = self._actions(q.cpu().numpy(), eps)
            for w, world in enumerate(self.worlds):
                self._step(w, world, obs[w], actions[w], before[w].numpy(), out)
            out.steps += len(self.worlds)
        out.priorities = self.priorities(params, out.items)
        return out

    def _actions(self, q: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """int ``(worlds, agents)``: epsilon-greedy per agent, or through each world's
        PIBT shield with ``mapf.shield`` (an exploring agent ranks its moves at random)."""
        explore = self.rng.random(q.shape[:2]) < eps[:, None]
        if self.m.shield == "none":
            actions = q.argmax(-1)
            actions[explore] = self.rng.integers(q.shape[-1], size=int(explore.sum()))
            return actions
        noise = self.rng.random(q.shape)
        actions = np.zeros(q.shape[:2], np.int64)
        for w, world in enumerate(self.worlds):
            env = world.env
            assert env is not None
            k = env.max_num_agents
            actions[w, :k] = joint_move(
                env,
                q[w, :k],
                world.mover,
                shield=self.m.shield,
                guide=self.m.shield_guide,
                explore=(explore[w, :k], noise[w, :k]),
            )
        return actions

    def _step(
        self,
        w: int,
        world: _World,
        obs: np.ndarray,
        actions: np.ndarray,
        state: np.ndarray,
        out: Played,
    ) -> None:
        env = world.env
        assert env is not None
        k = env.max_num_agents
        names = env.possible_agents
        _, rewards, terms, truncs, _ = env.step(dict(zip(names, actions[:k].tolist())))
        reward = np.zeros(self.layout.max_agents, np.float32)
        reward[:k] = [rewards[a] for a in names]
        term, trunc = terms[names[0]], truncs[names[0]]
        world.obs = self.layout.pack(env.last_obs, env.comm_mask())
        world.ret += float(reward[:k].mean())
        out.items += world.writer.append(
            obs, actions, reward, term, trunc, state, next_obs=world.obs
        )
        if term or trunc:
            assert world.stage is not None
            out.episodes.append(Episode(world.stage, bool(term), env.steps, world.ret))
            world.episodes += 1
            self._reset(w, world)

    def priorities(self, params: Params, items: list[dict[str, np.ndarray]]) -> np.ndarray:
        """Initial priorities of ``items`` under ``params`` (in both roles: a player has no
        target network), float64."""
        if not items:
            return np.zeros(0)
        device = next(iter(params.values())).device
        stacked = stack_items(items)
        batch = SequenceBatch.from_numpy(stacked, device)
        with torch.inference_mode():
            _, priority = self.loss(params, params, batch)
        return priority.double().cpu().numpy()

    def flush(self) -> list[dict[str, np.ndarray]]:
        """End every world's episode as a truncation (the run stops): their open sequences,
        bootstrapping from the current observation."""
        items: list[dict[str, Any]] = []
        for world in self.worlds:
            if world.obs is not None:
                items += world.writer.flush(world.obs)
                world.obs = None
        return items


def joint_move(
    env: MapfEnv,
    q: np.ndarray,
    mover: PibtMover,
    *,
    shield: str,
    guide: float,
    explore: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """A world's joint move from its agents' Q-values ``q`` ``(agents, moves)``: each
    agent's best, or with ``shield`` ``"pibt"`` the Q-values, guided by the distances with
    weight ``guide``, ranking each agent's moves in one PIBT step of ``mover`` (collision
    free, PIBT's progress kept). ``explore`` = (mask, noise): the masked agents rank their
    moves by the noise instead (exploration through the shield). The one place a MAPF
    policy's scores become a move, in training and in evaluation."""
    if shield == "none":
        return q.argmax(-1)
    scores = guided_scores(env, q, guide)
    if explore is not None:
        mask, noise = explore
        scores = np.where(mask[:, None], noise, scores)
    return mover.move(env, scores)


@torch.inference_mode()
def play_greedy(
    network: CommQNetwork,
    params: Params,
    worlds: Sequence[MapfEnv],
    seeds: Sequence[int],
    *,
    shield: str = "none",
    guide: float = 0.0,
) -> list[Episode]:
    """One greedy episode in each world (reset with its seed), all stepped together by one
    batched forward per step, each world's agents through the PIBT shield with ``shield``
    ``"pibt"`` (Q-values guided by the distance with weight ``guide``): the run's
    evaluation."""
    network = network.for_agents(max(env.max_num_agents for env in worlds))
    layout = network.layout
    device = next(iter(params.values())).device
    movers = [PibtMover(seed) for seed in seeds]
    for env, seed, mover in zip(worlds, seeds, movers):
        env.reset(seed=seed)
        mover.reset(env)
    state = network.initial_state(len(worlds)).to(device)
    live = list(range(len(worlds)))
    returns = np.zeros(len(worlds))
    results: dict[int, Episode] = {}
    while live:
        obs = np.stack([layout.pack(worlds[i].last_obs, worlds[i].comm_mask()) for i in live])
        q, nxt = recurrent_q(network, params, obs, state[live], device)
        state[live] = nxt
        q_rows = q.cpu().numpy()
        still = []
        for row, i in enumerate(live):
            env = worlds[i]
            names = env.possible_agents
            scores = q_rows[row, : len(names)]
            acts = joint_move(env, scores, movers[i], shield=shield, guide=guide).tolist()
            _, rewards, terms, truncs, _ = env.step(dict(zip(names, acts)))
            returns[i] += float(np.mean([rewards[a] for a in names]))
            if terms[names[0]] or truncs[names[0]]:
                stage = (len(names), int(env.grid.shape[0]))
                results[i] = Episode(stage, bool(terms[names[0]]), env.steps, returns[i])
            else:
                still.append(i)
        live = still
    return [results[i] for i in range(len(worlds))]
