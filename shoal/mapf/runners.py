"""The serial and ray runners of a MAPF run (``env.id = "shoal/Mapf-v0"``).

They are the generic runners with MAPF's parts: the sequence learner and the sequence
replay items come from the DQN runners' hooks, which both override the same way, the
experience from :class:`~shoal.mapf.player.MapfPlayer` (in the caller's process for the
serial runner, in each Ray actor for the ray runner), and the curriculum lives with the
learner: every finished episode counts towards its stage, and players draw new episodes
from the stages open when their call began.

One "env step" of a MAPF run is one step of one world (all its agents move). Evaluations
play ``run.eval_episodes`` held-out generated instances per ``mapf.eval_agents`` /
``mapf.eval_sizes`` target greedily; their mean is the success rate over all targets
(``eval_mean``), with a ``success_AxS`` column per target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from shoal.agent.actor import Actor
from shoal.agent.builder import Fields
from shoal.agent.learner import Learner
from shoal.config import Config
from shoal.envs.gym_env import EnvSpec
from shoal.envs.mapf import ACTIONS, MapfEnv
from shoal.errors import ConfigError
from shoal.mapf.config import MAPF_ID
from shoal.mapf.curriculum import Curriculum
from shoal.mapf.network import JointLayout
from shoal.mapf.player import (
    Episode,
    MapfPlayer,
    build_learner,
    build_network,
    play_greedy,
    sequence_specs,
    world_epsilons,
)
from shoal.run.evaluation import EVAL_STREAM
from shoal.run.loop import Collected
from shoal.run.seeding import derive_seed
from shoal.runners.dqn import DQNRunner
from shoal.runners.ray.actor import RolloutActor
from shoal.runners.ray.runner import RayRunner, _ray

__all__ = ["MapfRayRunner", "MapfRolloutActor", "MapfSerialRunner"]

TRAIN_STREAM = 0
"""Seed stream of the serial runner's training worlds."""
ACTION_STREAM = 3
"""Seed stream of its exploration and stage draws."""


class _MapfParts(DQNRunner):
    """What both MAPF runners add to their generic runner: MAPF's learner and replay
    items (through the DQN runners' hooks), the curriculum, episode rows, evaluation on
    held-out instances, and their state."""

    env_batches = False  # its player steps mapf.envs worlds side by side

    @classmethod
    def probe(cls, cfg: Config) -> EnvSpec:
        """The packed joint observation's bytes and the five moves."""
        if cfg.env.id != MAPF_ID:
            raise ConfigError(f"config key 'env.id': a mapf runner needs {MAPF_ID!r}")
        m = cfg.extra["mapf"]
        return EnvSpec(obs_dim=JointLayout(m.max_agents, m.fov).size, n_actions=len(ACTIONS))

    @classmethod
    def make_learner(cls, cfg: Config, spec: EnvSpec) -> Learner:
        """The sequence learner on the ``[mapf]`` network, from the run seed."""
        torch.manual_seed(cfg.run.seed)
        return build_learner(cfg)

    @classmethod
    def replay_fields(cls, cfg: Config, spec: EnvSpec) -> Fields:
        """Sequences of packed joint observations, with stored recurrent states."""
        return dict(sequence_specs(cfg.extra["mapf"]))

    @classmethod
    def evaluate_checkpoint(
        cls, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """MAPF runs are evaluated against their baselines, not by returns."""
        raise ConfigError(
            f"run '{run_dir}' is a MAPF run: evaluate it against its baselines with "
            f"`shoal mapf eval {run_dir} --generate --agents N --size S`"
        )

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.curriculum = Curriculum(cfg.extra["mapf"])
        self._eval_worlds: list[tuple[tuple[int, int], list[MapfEnv]]] | None = None
        self._last_eval: dict[str, float] = {}

    def episodes_collected(self, episodes: list[Episode], steps: int) -> Collected:
        """Count episodes towards their stages; the loop's rows for them."""
        rows, extras = [], []
        for ep in episodes:
            self.curriculum.record(ep.stage, success=ep.success)
            rows.append((ep.mean_return, ep.steps))
            extras.append(
                {
                    "success": float(ep.success),
                    "agents": float(ep.stage[0]),
                    "size": float(ep.stage[1]),
                    "stages": float(len(self.curriculum.stages)),
                }
            )
        return Collected(steps, rows, extras, side_by_side=True)

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """Greedy success on ``run.eval_episodes`` held-out instances per target."""
        m, r = self.cfg.extra["mapf"], self.cfg.run
        if self._eval_worlds is None:
            self._eval_worlds = []
            for agents, size in zip(m.eval_agents, m.eval_sizes):
                worlds = [
                    MapfEnv(agents, size=size, fov=m.fov, k_comm=m.k_comm, max_steps=m.max_steps)
                    for _ in range(r.eval_episodes)
                ]
                self._eval_worlds.append(((agents, size), worlds))
        seed = r.seed if seed is None else seed
        rng = np.random.default_rng(derive_seed(seed, EVAL_STREAM, 1))
        lo, hi = m.eval_density
        successes, self._last_eval = [], {}
        params = self.learner.params
        for (agents, size), worlds in self._eval_worlds:
            for env in worlds:
                env.density = float(rng.uniform(lo, hi))
            seeds = [derive_seed(seed, EVAL_STREAM, agents, size, k) for k in range(len(worlds))]
            shield, guide = m.shield, m.shield_guide
            played = play_greedy(
                self.learner.online, params, worlds, seeds, shield=shield, guide=guide
            )
            ok = [float(ep.success) for ep in played]
            self._last_eval[f"success_{agents}x{size}"] = float(np.mean(ok))
            successes += ok
        return np.array(successes), params

    def eval_metrics(self) -> dict[str, float]:
        """Success per evaluation target and the curriculum's reach."""
        agents, size = self.curriculum.hardest
        return {
            **self._last_eval,
            "stages": float(len(self.curriculum.stages)),
            "max_agents": float(agents),
            "max_size": float(size),
        }

    def close(self) -> None:
        """Release the evaluation worlds (plain numpy) and what the runner holds."""
        self._eval_worlds = None
        super().close()


class MapfSerialRunner(_MapfParts):
    """MAPF in one process: play a batch of worlds, store sequences, learn (the oracle)."""

    def __init__(self, cfg: Config) -> None:  # noqa: D107 - the base builds the parts
        super().__init__(cfg)
        self.rng = np.random.default_rng(derive_seed(cfg.run.seed, ACTION_STREAM))
        self.player = MapfPlayer(
            cfg, self.learner.online, seeds=(cfg.run.seed, TRAIN_STREAM), rng=self.rng
        )

    def collect(self, step: int) -> Collected:
        """One step of every world; completed sequences go to replay with their
        priorities."""
        m = self.cfg.extra["mapf"]
        eps = world_epsilons(m, self.epsilon(step), 0, m.envs)
        cur = self.curriculum
        got = self.player.play(
            1, self.learner.params, epsilon=eps, stages=cur.stages, weights=cur.weights()
        )
        self._store(got.items, got.priorities)
        return self.episodes_collected(got.episodes, got.steps)

    def _store(self, items: list[dict[str, np.ndarray]], priorities: np.ndarray) -> None:
        if items:
            prioritized = self.cfg.replay.prioritized
            self.replay.add_many(items, priorities=priorities if prioritized else None)

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the schedule owes for the world steps taken; those owed before
        replay holds a batch are dropped (no burst of updates on the first few sequences)."""
        owed = self.schedule.owe(step)
        if owed and len(self.replay) >= self.cfg.dqn.batch_size:
            self.loss = self.learn_steps(owed)

    def finish(self) -> None:
        """The worlds' open sequences go to replay (the next run starts new episodes)."""
        items = self.player.flush()
        self._store(items, self.player.priorities(self.learner.params, items))

    def interrupt(self) -> None:
        """As :meth:`finish`: keep the open sequences."""
        self.finish()

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples/s, replay size and the curriculum's stage count."""
        return {
            **super().tick_metrics(updates_per_s),
            "replay": float(len(self.replay)),
            "stages": float(len(self.curriculum.stages)),
        }

    def state_dict(self) -> dict[str, Any]:
        """The base state plus the curriculum and the draws' generator."""
        state = super().state_dict()
        state["curriculum"] = self.curriculum.state_dict()
        state["rng"]["actions"] = self.rng.bit_generator.state
        state["world_episodes"] = [w.episodes for w in self.player.worlds]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        super().load_state_dict(state)
        self.curriculum.load_state_dict(state["curriculum"])
        self.rng.bit_generator.state = state["rng"]["actions"]
        for world, episodes in zip(self.player.worlds, state["world_episodes"]):
            world.episodes = int(episodes) + 1  # the cut episode is not replayed


class MapfRolloutActor(RolloutActor):
    """A ray runner actor playing MAPF worlds with a :class:`MapfPlayer`."""

    def setup(self, store: Any) -> None:
        """The player and an actor that only holds the pulled weights."""
        cfg = self.cfg
        network = build_network(cfg.extra["mapf"]).requires_grad_(False)
        rng = np.random.default_rng(derive_seed(*self.seeds))
        self.actor = Actor(network, source=store, n_actions=len(ACTIONS), rng=rng)
        self.player = MapfPlayer(cfg, network, seeds=self.seeds, rng=rng)

    def _pull(self) -> None:
        """Newer weights, if any (each call spreads the published epsilon over its
        worlds)."""
        self.actor.update()

    def rollout(  # type: ignore[override]
        self, steps: int, stages: list[tuple[int, int]], weights: list[float] | None = None
    ) -> dict[str, Any]:
        """Play about ``steps`` world steps in ``stages`` (drawn with ``weights``); send
        the completed sequences with their priorities; returns the finished episodes."""
        self._pull()  # a call's steps outnumber ray.pull_every: pull at every call
        m = self.cfg.extra["mapf"]
        base = self.actor.meta.get("epsilon", 1.0)
        eps = world_epsilons(m, base, self.index * m.envs, self.actors * m.envs)
        got = self.player.play(
            max(1, steps // m.envs), self.actor.params, epsilon=eps, stages=stages, weights=weights
        )
        if got.items:
            batch = {k: np.stack([item[k] for item in got.items]) for k in got.items[0]}
            self.send(batch, got.priorities)
        return self.answer(
            episodes=[(e.stage, e.success, e.steps, e.mean_return) for e in got.episodes],
            steps=got.steps,
        )


class MapfRayRunner(_MapfParts, RayRunner):
    """MAPF on Ray: actors play worlds, one replay actor holds sequences, one learner."""

    actor_class = MapfRolloutActor

    @classmethod
    def check(cls, cfg: Config) -> None:
        """Ray importable, a MAPF config."""
        _ray()
        cls.probe(cfg)

    def rollout_args(self) -> tuple[Any, ...]:
        """The stages open now and their shares (the actors draw their next episodes
        from them)."""
        return (list(self.curriculum.stages), self.curriculum.weights())

    def collected(self, got: dict[str, Any]) -> Collected:
        """Count the call's episodes towards their stages."""
        episodes = [
            Episode((int(s[0]), int(s[1])), bool(ok), int(n), float(ret))
            for s, ok, n, ret in got["episodes"]
        ]
        return self.episodes_collected(episodes, int(got["steps"]))

    def eval_metrics(self) -> dict[str, float]:
        """Actor restarts, success per evaluation target, the curriculum's reach."""
        return {**RayRunner.eval_metrics(self), **_MapfParts.eval_metrics(self)}

    def state_dict(self) -> dict[str, Any]:
        """The base state plus the curriculum."""
        return {**super().state_dict(), "curriculum": self.curriculum.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        super().load_state_dict(state)
        self.curriculum.load_state_dict(state["curriculum"])
