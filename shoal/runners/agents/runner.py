"""The agents runner: K independent learners in one multi-agent world (scheme 3).

Each agent has its own network, target, optimizer state and replay buffer; nothing is
shared or pooled. The speed comes from doing the K agents' work together: one batched
forward picks all K actions (``parallel_actions``), and one stacked update trains all K
agents, each on a batch from its own buffer (``parallel_training``,
:class:`~shoal.agent.stacked.StackedLearner`); both have a per-agent fallback that
computes the same thing. With ``async_learning`` a background thread trains every
``train_interval`` epochs while the caller's thread keeps collecting; acting then reads a
versioned snapshot of the weights, never weights mid-step.

An epoch is one episode of at most ``max_turns`` turns (the user's design note's term);
the run loop's env steps are turns. Epsilon decays per epoch: it is the schedule's value at
the epoch's first turn. Episode rows carry every agent's return, the collective return
and the social outcomes (efficiency, equality, sustainability, peace).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import build_epsilon, build_replay
from shoal.agent.learner import DQN
from shoal.agent.stacked import StackedActor, StackedLearner
from shoal.config import Config
from shoal.envs.parallel import check_same_agents, make_parallel_env, probe_parallel_env
from shoal.errors import ConfigError
from shoal.registry import recipe_for
from shoal.replay import StackedReplay
from shoal.run.runner import Collected, Runner
from shoal.run.seeding import SeedStream, derive_seed
from shoal.runners.agents.collector import CollectorError, CollectorProcess
from shoal.runners.agents.epochs import (
    EpochPlayer,
    EpochResult,
    actor_rngs,
    epoch_seed,
    greedy_returns,
    play_checkpoint,
)
from shoal.runners.sections import AgentsConfig
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rounds import RoundThreads, RoundThreadsError
from shoal.sync.weights import LocalWeightStore
from shoal.sync.workers import RestartBudget

__all__ = ["AgentsConfig", "AgentsRunner", "LearningThreadError"]

EVAL_WORLDS = 32
"""Most worlds an evaluation plays side by side."""
MAX_COLLECTOR_FAILURES = 3
"""Collector processes lost in a row (died or silent) before the run fails."""


class LearningThreadError(RoundThreadsError):
    """The background learning thread failed or hung; the cause is the ``__cause__``."""


class AgentsRunner(Runner):
    """K independent learners (own networks, optimizers, buffers) in one world, batched."""

    section = ("agents", AgentsConfig)
    multi_agent = True
    env_batches = False  # one world of many agents, acted on as one stacked batch
    """Its env is a multi-agent world (the conformance suite gives it one)."""

    @classmethod
    def spawns(cls, cfg: Config) -> bool:
        """With the collector process (async learning in a process)."""
        a = cfg.agents
        return a.async_learning and a.async_mode == "process"

    @classmethod
    def check(cls, cfg: Config) -> None:
        """Make the world once and check it, and the recipe's checks of one agent of it
        (its refusals, its network), before any work starts."""
        if cfg.run.eval_epsilon > 0:
            raise ConfigError(
                f"config key 'run.eval_epsilon': {cfg.run.eval_epsilon}; the agents runner"
                " evaluates its agents greedily (leave it 0; shoal.play_run takes an epsilon)"
            )
        env = make_parallel_env(cfg.env, num_agents=cfg.agents.agents, max_turns=1)
        try:
            ma = probe_parallel_env(env, cfg.env.id)
            env.reset(seed=0)
            check_same_agents(env, cfg.env.id, ma.agents)
        finally:
            env.close()
        recipe_for(cfg).check(cfg, ma.env_spec())

    @classmethod
    def evaluate_checkpoint(
        cls, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Collective greedy returns of the checkpoint's agents, episode k reset with a
        seed derived from ``seed`` and k."""
        played = play_checkpoint(cfg, state["learner"], episodes, seed)
        return np.array([float(r.returns.sum()) for r in played])

    def update_sources(self) -> list[Any]:
        """The stacked learner, or each agent's."""
        return [self.stacked] if self.stacked is not None else list(self.learners)

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.recipe = recipe_for(cfg)
        """Each agent's recipe (all K agents are of one kind, stacked)."""
        a = cfg.agents
        self.env = make_parallel_env(cfg.env, num_agents=a.agents, max_turns=a.max_turns)
        self.ma = probe_parallel_env(self.env, cfg.env.id)
        self.spec = self.ma.env_spec()
        self.k = len(self.ma.agents)
        self.learners = [self._agent(i) for i in range(self.k)]
        self.stacked = StackedLearner(self.learners) if a.parallel_training else None
        lines = [le.set_compile(cfg.run.compile) for le in self.update_sources()]
        self.update_line = lines[0]
        fields = self.recipe.replay_fields(cfg, self.spec)
        self.replays: list[Any] = [build_replay(cfg, self.spec, fields) for _ in range(self.k)]
        self.group = StackedReplay(self.replays)
        self.replay_lock: Any = contextlib.nullcontext()
        self.exploration = build_epsilon(cfg)
        """Exploration epsilon as a function of turns (the value at an epoch's first)."""
        self._eval_envs: list[Any] | None = None
        self.actor = StackedActor(
            self.learners[0].loss.network,
            self.weights(),
            n_actions=self.ma.n_actions,
            rngs=actor_rngs(cfg, self.k),
            action_mask=cfg.dqn.action_mask,
            batched=a.parallel_actions,
            device=self.learners[0].device,
        )
        self.player = EpochPlayer(cfg, self.env, self.ma, self.actor)
        self.epochs = 0
        self._last_tick = (time.perf_counter(), 0)
        mode = a.async_mode if a.async_learning else None
        self._thread: RoundThreads | None = None
        if mode == "thread":
            self._use_learning_thread()
        self._collector = CollectorProcess(cfg) if mode == "process" else None
        self.collector_restarts = 0

    def _use_learning_thread(self) -> None:
        """Train in a thread of its own, one round per scheduled round. Acting reads the
        weights published after each phase (the rounds scheduled at once), a versioned
        snapshot, never weights mid-step. One lock guards all K buffers: their items share
        one block, which a stacked draw reads at once; adds and draws are short, and
        training runs outside it."""
        self.replay_lock = threading.Lock()
        self.replays = [LockedReplay(b, self.replay_lock) for b in self.group.buffers]
        self.store = LocalWeightStore()
        self.store.publish(self.weights())
        self._phase_group: StackedReplay | None = None
        self._thread = RoundThreads(
            self._async_round,
            name="shoal-agents-learner",
            what="the learning thread",
            error=LearningThreadError,
            timeout=self.cfg.agents.step_timeout,
            timeout_key="agents.step_timeout",
        )

    def _async_round(self, phase_start: bool, phase_end: bool) -> None:
        """One round in the learning thread; with ``copy_on_train`` a phase trains on a copy
        of the buffers taken when it starts (collection never waits for the lock)."""
        if phase_start and self.cfg.agents.copy_on_train:
            with self.replay_lock:
                self._phase_group = self.group.copy()
        self.loss = self.train_round(self._phase_group or self.group)
        if phase_end:
            self.store.publish(self.weights())
            self._phase_group = None

    def _agent(self, i: int) -> DQN:
        torch.manual_seed(derive_seed(self.cfg.run.seed, SeedStream.LEARNER, i))
        return self.recipe.make_learner(self.cfg, self.spec)

    # --- the K learners -----------------------------------------------------------------------
    @property
    def updates(self) -> int:
        """Training rounds taken (every agent steps once per round)."""
        return self.stacked.updates if self.stacked is not None else self.learners[0].updates

    def weights(self) -> dict[str, torch.Tensor]:
        """All agents' online weights, stacked ``(K, ...)`` by name."""
        if self.stacked is not None:
            return self.stacked.weights()
        names = self.learners[0].params
        return {n: torch.stack([le.params[n].detach() for le in self.learners]) for n in names}

    def train_round(self, group: StackedReplay) -> float:
        """Every agent one update on a batch from its own buffer (``group.buffers[k]``);
        returns the mean loss. Stacked: all K batches in one draw from the block, one
        update; else agent by agent, drawing the same batches."""
        b = self.cfg.dqn.batch_size
        if self.stacked is not None:
            with self.replay_lock:
                sample = group.sample(b)
            info = self.stacked.step(self.stacked.make_batch(sample))
            with self.replay_lock:
                group.update_priorities(sample["indices"], info.td_errors)
            return float(info.loss.mean())
        losses = []
        for learner, buffer in zip(self.learners, group.buffers):
            with self.replay_lock:
                sample = buffer.sample(b)
            info = learner.step(learner.make_batch(sample))
            with self.replay_lock:
                buffer.update_priorities(sample["indices"], info.td_errors)
            losses.append(info.loss)
        return float(np.mean(losses))

    # --- collection: one epoch ------------------------------------------------------------------
    def collect(self, step: int) -> Collected:
        """Play one epoch with every agent; each agent's transitions go to its own buffer.
        With a collector process the epoch was asked for at the end of the previous
        ``collect`` (so it played while ``learn`` trained), and the next one is asked
        for before returning."""
        if self._collector is not None:
            result = self._collected_epoch(step)
        else:
            if self._thread is not None:
                self._thread.raise_if_failed()
            self._sync_actor()
            check = self._thread.raise_if_failed if self._thread is not None else None
            seed = epoch_seed(self.cfg, self.epochs)
            result = self.player.play(self.epsilon(step), seed, store=True, each_turn=check)
        self.epochs += 1
        for buffer, transitions in zip(self.replays, result.transitions):
            if transitions is not None:
                buffer.add_batch(transitions)
        if self._collector is not None:
            self._ask_for_epoch(step + result.turns)
        returns, turns = result.returns, result.turns
        extra = {f"return_{a}": float(r) for a, r in zip(self.ma.agents, returns)}
        return Collected(turns, [(float(returns.sum()), turns)], [{**extra, **result.social}])

    def _ask_for_epoch(self, step: int, *, rngs: bool = False) -> None:
        """Have the collector process play epoch ``self.epochs`` (its first turn is
        ``step``) with the current weights."""
        assert self._collector is not None
        states = [g.bit_generator.state for g in self.actor.rngs] if rngs else None
        seed = epoch_seed(self.cfg, self.epochs)
        self._collector.play(self.epsilon(step), seed, self.weights(), self.updates, states)

    def _collected_epoch(self, step: int) -> EpochResult:
        """The collector's epoch; its exploration streams become the checkpointed ones.
        A collector that died or went silent is replaced and the epoch replayed from its
        start (nothing of it reached a buffer), up to ``MAX_COLLECTOR_FAILURES`` times in
        a row."""
        collector, budget = self._collector, RestartBudget(MAX_COLLECTOR_FAILURES)
        assert collector is not None
        while True:
            if not collector.pending:  # the first epoch of a start, a resume or a restart
                self._ask_for_epoch(step, rngs=True)
            try:
                result, rng_states = collector.result(self.cfg.agents.step_timeout)
                break
            except CollectorError as e:
                if not e.lost or not budget.fail():
                    raise
                print(f"shoal: restarting the collector process: {e}", file=sys.stderr)
                collector.stop()
                collector.start()
                self.collector_restarts += 1
        for g, state in zip(self.actor.rngs, rng_states):
            g.bit_generator.state = state
        return result

    def _sync_actor(self) -> None:
        """Act with the latest weights: the published snapshot (async) or the live ones."""
        if self._thread is not None:
            got = self.store.pull(self.actor.version)
            if got is not None:
                self.actor.params, self.actor.version = got.state, got.version
        else:
            self.actor.params = self.weights()

    # --- learning ------------------------------------------------------------------------------
    def learn(self, step: int, new_steps: int) -> None:
        """Every ``train_interval`` epochs, the rounds the update schedule owes for the turns
        played (``gradient_steps`` per ``train_freq`` turns): taken here, or handed to the
        learning thread. Rounds owed while an agent's buffer is still empty are dropped."""
        if self.epochs % self.cfg.agents.train_interval:
            return
        rounds = self.schedule.owe(step, ready=lambda: min(len(b) for b in self.replays) > 0)
        if rounds == 0:
            return
        if self._thread is not None:
            self._thread.schedule(rounds)
            return
        self.loss = self.schedule.take(rounds, lambda: self.train_round(self.group))

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the learning thread or the collector process (async learning)."""
        if self._thread is not None:
            self._thread.start()
        if self._collector is not None:
            self._collector.start()

    def finish(self) -> None:
        """Wait until the learning thread has taken every scheduled round."""
        if self._thread is not None:
            self._thread.wait(behind=0)

    def stop(self) -> None:
        """Stop the learning thread or the collector process; safe to call twice."""
        if self._thread is not None:
            self._thread.stop()
        if self._collector is not None:
            self._collector.stop()

    def epsilon(self, step: int) -> float:
        """The exploration schedule's epsilon at turn ``step``."""
        return self.exploration(step)

    def close(self) -> None:
        """Close the worlds."""
        self.env.close()
        for env in self._eval_envs or ():
            env.close()
        self._eval_envs = None

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """Collective greedy returns of ``run.eval_episodes`` episodes (by default
        ceil(20 / agents), at least 2: each gives every agent a return) played side by side
        in worlds of its own (``seed``: their starts, default ``run.seed``), and the stacked
        weights that played them."""
        r = self.cfg.run
        seed = r.seed if seed is None else seed
        episodes = r.episodes_per_eval(self.k)
        if self._eval_envs is None:
            a = self.cfg.agents
            self._eval_envs = [
                make_parallel_env(self.cfg.env, num_agents=a.agents, max_turns=a.max_turns)
                for _ in range(min(episodes, EVAL_WORLDS))
            ]
        self._sync_actor()
        seeds = [derive_seed(seed, SeedStream.EVAL, i) for i in range(episodes)]
        return greedy_returns(
            self.cfg, self._eval_envs, self.ma, self.actor, seeds
        ), self.actor.params

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples per second over all agents, epochs so far and epochs per second."""
        now = time.perf_counter()
        last_time, last_epochs = self._last_tick
        self._last_tick = (now, self.epochs)
        return {
            "samples_per_s": updates_per_s * self.cfg.dqn.batch_size * self.k,
            "epochs": float(self.epochs),
            "epochs_per_s": (self.epochs - last_epochs) / max(now - last_time, 1e-9),
            **({"collector_restarts": self.collector_restarts} if self._collector else {}),
        }

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Epochs so far and epochs per second."""
        return {"epochs": self.epochs, "epochs_s": tick["epochs_per_s"]}

    def checkpoint_guard(self) -> Any:
        """Async: no training round runs while a checkpoint is taken."""
        return self._thread.paused() if self._thread is not None else super().checkpoint_guard()

    # --- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Every agent's weights, target, optimizer and buffer, the exploration streams."""
        learner = (
            self.stacked.state_dict()
            if self.stacked is not None
            else [le.state_dict() for le in self.learners]
        )
        return {
            **super().state_dict(),
            "learner": learner,
            "replays": [b.state_dict() for b in self.replays],
            "rng": {"actions": [g.bit_generator.state for g in self.actor.rngs]},
            "epochs": self.epochs,
            # Rounds handed to the learning thread and not taken when the checkpoint was
            # written (it pauses between rounds): a resumed run takes them first.
            "pending_rounds": self._thread.pending if self._thread is not None else 0,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        if self.stacked is not None:
            self.stacked.load_state_dict(state["learner"])
        else:
            for le, s in zip(self.learners, state["learner"]):
                le.load_state_dict(s)
        for b, s in zip(self.replays, state["replays"]):
            b.load_state_dict(s)
        for g, s in zip(self.actor.rngs, state["rng"]["actions"]):
            g.bit_generator.state = s
        super().load_state_dict(state)
        self.epochs = state["epochs"]
        pending = int(state.get("pending_rounds", 0))
        if pending and self._thread is not None:
            self._thread.reset(0, pending)
        elif pending:  # resumed without the thread: take them here
            for _ in range(pending):
                self.loss = self.train_round(self.group)
