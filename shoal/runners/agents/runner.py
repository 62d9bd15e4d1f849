"""The agents runner: K independent learners in one multi-agent world (scheme 3).

Each agent has its own network, target, optimizer state and replay buffer; nothing is
shared or pooled. The speed comes from doing the K agents' work together: one batched
forward picks all K actions (``parallel_actions``), and one stacked update trains all K
agents, each on a batch from its own buffer (``parallel_training``,
:class:`~shoal.agent.stacked.StackedLearner`); both have a per-agent fallback that
computes the same thing (:mod:`~shoal.runners.agents.layout`). With ``async_learning`` the
rounds run beside collection, in a thread of their own or while a collector process plays
the next epoch (:mod:`~shoal.runners.agents.learning`). The runner is the wiring: the
layout, the learning component and the evaluation are chosen once, from the config.

An epoch is one episode of at most ``max_turns`` turns (the user's design note's term);
the run loop's env steps are turns. Epsilon decays per epoch: it is the schedule's value at
the epoch's first turn. Episode rows carry every agent's return, the collective return
and the social outcomes (efficiency, equality, sustainability, peace).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

from shoal.agent.builder import build_epsilon, build_replay
from shoal.config import Config
from shoal.envs.parallel import (
    check_padding,
    check_world,
    make_parallel_env,
    probe_parallel_env,
)
from shoal.registry import recipe_for
from shoal.replay import StackedReplay
from shoal.run.runner import Collected, Runner
from shoal.run.schedule import replay_minimum
from shoal.runners.agents.epochs import (
    EpochResult,
    agent_config,
    drawn_per_agent,
    play_checkpoint,
    stacked_player,
)
from shoal.runners.agents.evaluation import WorldsEvaluation
from shoal.runners.agents.layout import make_layout
from shoal.runners.agents.learning import (
    LearningParts,
    LearningThreadError,
    learning_kind,
    make_learning,
)
from shoal.runners.sections import AgentsConfig

__all__ = ["AgentsConfig", "AgentsRunner", "LearningThreadError"]


class AgentsRunner(Runner):
    """K independent learners (own networks, optimizers, buffers) in one world, batched."""

    section = ("agents", AgentsConfig)
    multi_agent = True
    env_batches = False  # one world of many agents, acted on as one stacked batch
    """Its env is a multi-agent world (the conformance suite gives it one)."""

    @classmethod
    def spawns(cls, cfg: Config) -> bool:
        """With a learning component that starts a process (the collector)."""
        return learning_kind(cfg).spawns

    @classmethod
    def check(cls, cfg: Config) -> None:
        """The evaluation's refusals, the world (made once and checked), what padding its
        agents needs, and the recipe's checks of one agent of it (its refusals, its
        network), before any work starts."""
        WorldsEvaluation.check(cfg)
        spec = check_world(cfg.env, cfg.agents.agents, share=cfg.agents.share)
        recipe = recipe_for(cfg)
        check_padding(cfg, spec, recipe.traits.action_masks)
        recipe.check(agent_config(cfg, spec), spec.env_spec())

    @classmethod
    def evaluate_checkpoint(
        cls, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Collective greedy returns of the checkpoint's agents, episode k reset with a
        seed derived from ``seed`` and k."""
        return cls.evaluate_checkpoint_agents(cfg, state, episodes, seed, run_dir)[0]

    @classmethod
    def evaluate_checkpoint_agents(
        cls, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> tuple[np.ndarray, dict[str, float]]:
        """The collective greedy returns and each agent's mean return over them."""
        played = play_checkpoint(cfg, state["learner"], episodes, seed)
        own = np.mean([r.returns for r in played], axis=0)
        collective = np.array([float(r.returns.sum()) for r in played])
        return collective, {a: float(m) for a, m in zip(played[0].agents, own)}

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.recipe = recipe_for(cfg)
        """Each agent's recipe (all K agents are of one kind, stacked)."""
        a = cfg.agents
        self.env = make_parallel_env(cfg.env, num_agents=a.agents, max_turns=a.max_turns)
        self.ma = probe_parallel_env(self.env, cfg.env.id, share=a.share)
        self.spec = self.ma.env_spec()
        self.k = len(self.ma.agents)
        parts_cfg = agent_config(cfg, self.ma)
        """The config the agents' parts are built from (masks where action counts differ)."""
        make = functools.partial(self.recipe.make_learner, parts_cfg, self.spec)
        drawn = drawn_per_agent(cfg, 1 if a.share else self.k, make)
        self.layout = make_layout(cfg, drawn, self.k)
        self.learners = self.layout.learners
        self.update_line = self.layout.set_compile(self.compile_mode())
        fields = self.recipe.replay_fields(cfg, self.spec)
        self.group = StackedReplay([build_replay(cfg, self.spec, fields) for _ in range(self.k)])
        self.exploration = build_epsilon(cfg)
        """Exploration epsilon as a function of turns (the value at an epoch's first)."""
        network, device = self.learners[0].loss.network, self.learners[0].device
        weights = self.layout.weights()
        self.player = stacked_player(parts_cfg, self.env, self.ma, network, weights, device)
        self.actor = self.player.actor
        self.evaluation = WorldsEvaluation(cfg, self.ma)
        self.epochs = 0
        self._last_tick = (time.perf_counter(), 0)
        parts = LearningParts(
            cfg, self.layout, self.player, self.group, self.schedule, self.epsilon, self.train_round
        )
        self.learning = make_learning(parts)
        self.replays = self.learning.replays
        """The K buffers as collection adds to them (locked where a thread draws)."""

    # --- the K learners -----------------------------------------------------------------------
    @property
    def updates(self) -> int:
        """Training rounds taken (every agent steps once per round)."""
        return self.layout.updates

    def update_sources(self) -> list[Any]:
        """The stacked learner, or each agent's."""
        return self.layout.update_sources()

    def train_round(self, group: StackedReplay) -> float:
        """Every agent one update on a batch from its own buffer (``group.buffers[k]``);
        the mean loss, also kept as :attr:`loss`. The learning component calls it."""
        self.loss = self.layout.train_round(group, self.learning.lock)
        return self.loss

    def replay_ready(self) -> bool:
        """Whether every agent's buffer holds the recipe's minimum for an update."""
        need = replay_minimum(self.recipe.traits.serves_after, self.cfg.dqn.batch_size)
        return min(len(b) for b in self.replays) >= need

    # --- collection and learning --------------------------------------------------------------
    def collect(self, step: int) -> Collected:
        """One epoch of every agent (as the learning plays it), into their own buffers."""
        return self.learning.play(step, self.epochs, self._store).collected(self.ma.agents)

    def _store(self, result: EpochResult) -> None:
        """Count a played epoch and give each agent its transitions."""
        self.epochs += 1
        for buffer, transitions in zip(self.replays, result.transitions):
            if transitions is not None:
                buffer.add_batch(transitions)

    def learn(self, step: int, new_steps: int) -> None:
        """Every ``train_interval`` epochs, the rounds the update schedule owes for the turns
        played, to the learning; those owed before every buffer can serve are dropped."""
        if self.epochs % self.cfg.agents.train_interval:
            return
        rounds = self.schedule.owe(step, ready=self.replay_ready)
        if rounds:
            self.learning.schedule(rounds)

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the learning thread or the collector process (async learning)."""
        self.learning.start()

    def finish(self) -> None:
        """Wait until every scheduled round is taken."""
        self.learning.wait()

    def stop(self) -> None:
        """Stop the learning thread or the collector process; safe to call twice."""
        self.learning.stop()

    def epsilon(self, step: int) -> float:
        """The exploration schedule's epsilon at turn ``step``."""
        return self.exploration(step)

    def close(self) -> None:
        """Close the worlds."""
        self.env.close()
        self.evaluation.close()

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """The evaluation's collective greedy returns (``seed``: the episodes' starts,
        default ``run.seed``) and the stacked weights that played them."""
        self.learning.sync_actor()
        seed = self.cfg.run.seed if seed is None else seed
        return self.evaluation.evaluate(self.actor, seed), self.actor.params

    def eval_metrics(self) -> dict[str, float]:
        """Each agent's mean return in the latest evaluation (``eval_return_AGENT``)."""
        return dict(self.evaluation.agent_means)

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples per second over all agents, epochs, epochs per second; the learning's."""
        now = time.perf_counter()
        last_time, last_epochs = self._last_tick
        self._last_tick = (now, self.epochs)
        return {
            "samples_per_s": updates_per_s * self.cfg.dqn.batch_size * self.k,
            "epochs": float(self.epochs),
            "epochs_per_s": (self.epochs - last_epochs) / max(now - last_time, 1e-9),
            **self.learning.metrics(),
        }

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Epochs so far and epochs per second."""
        return {"epochs": self.epochs, "epochs_s": tick["epochs_per_s"]}

    def checkpoint_guard(self) -> Any:
        """No training round runs while a checkpoint is taken."""
        return self.learning.paused()

    # --- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Every agent's weights, target, optimizer and buffer, the exploration streams."""
        return {
            **super().state_dict(),
            "learner": self.layout.state_dict(),
            "replays": [b.state_dict() for b in self.replays],
            "rng": {"actions": self.actor.rng_states()},
            "epochs": self.epochs,
            "pending_rounds": self.learning.pending,  # a resumed run takes them first
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.layout.load_state_dict(state["learner"])
        for b, s in zip(self.replays, state["replays"]):
            b.load_state_dict(s)
        self.actor.set_rng_states(state["rng"]["actions"])
        super().load_state_dict(state)
        self.epochs = state["epochs"]
        self.learning.resume(int(state.get("pending_rounds", 0)))
