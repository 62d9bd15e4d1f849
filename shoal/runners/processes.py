"""The processes runner: N rollout worker processes feeding one central learner.

Each worker (spawned) owns ``env.num_envs`` envs and an inference-only copy of the
Q-network (no optimizer, no replay), steps them with one batched forward, and sends the
episodes that end in a step whole, in one message, through its own pipe. The learner (the
caller's process) owns the replay buffer, the networks and the optimizer: it gathers
``episodes_per_batch`` episodes per env from each worker, adds them to replay as n-step
transitions, takes the updates the update schedule owes for the env steps collected
(:class:`~shoal.run.schedule.UpdateSchedule`: the serial rule or ``run.replay_ratio``; or
``learning_steps_per_batch``), and publishes the weights together with the batch's
exploration epsilon into a shared-memory :class:`~shoal.sync.weights.SharedWeightStore`,
from which every worker pulls between steps (all envs of all workers explore with the
published epsilon, optionally spread Ape-X style over every env). Workers that run ahead
of the learner block on their pipes, so the updates per env step stay the schedule's.
Self-play is a plug-in (:class:`~shoal.games.selfplay.SelfPlay`): this runner imports no game.

Only whole episodes travel, so a worker that dies (an exception or SIGKILL) loses at most
its unfinished episode, which never reaches replay. A dead worker, or one silent for
``worker_timeout`` seconds, is killed and restarted, and the restarts are counted. A
failure of a worker's pipe (e.g. killed mid-send) counts as a death. Ctrl-C or an error
stops every worker (no orphans) and writes a final checkpoint.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from shoal.agent.batch_actor import BatchActor, Steps
from shoal.agent.builder import build_actor
from shoal.agent.schedules import actor_epsilon
from shoal.config import Config, param
from shoal.envs import probe_env
from shoal.envs.vector import make_vector_env
from shoal.errors import ShoalError
from shoal.replay.nstep import nstep_episode
from shoal.run.loop import Collected
from shoal.run.seeding import derive_seed
from shoal.runners.dqn import DQNRunner
from shoal.sync.weights import SharedWeightStore
from shoal.sync.workers import RestartBudget, WorkerProcess, child_prologue, stop_processes

__all__ = ["Episode", "ProcessesConfig", "ProcessesRunner", "default_workers"]

WORKER_STREAM = 4
"""Seed stream of worker resets and exploration."""
MAX_FAILURES = 3
"""Restarts in a row without an episode after which a worker's failure stops the run."""


@dataclass
class ProcessesConfig:
    """The processes runner: rollout worker processes feeding one central learner."""

    workers: int = param(0, ge=0)
    """Rollout worker processes (0: cpu_count() - 2, at least 1)."""
    episodes_per_batch: int = param(4, gt=0)
    """Whole episodes each of a worker's envs contributes to one learner batch (a worker
    with env.num_envs envs gives that many times more): the batches, and the weight
    publishes after them, keep their size in env steps whatever the envs per worker."""
    learning_steps_per_batch: int = param(0, ge=0)
    """Gradient steps per collected batch (0: as many as the serial runner would take for
    the env steps collected: the update schedule's)."""
    eps_spread: float = param(0.0, ge=0.0)
    """Ape-X style epsilon per env of every worker, eps ** (1 + spread * i / (N - 1)) over
    the N = workers x env.num_envs envs; 0: all the same."""
    worker_timeout: float = param(60.0, gt=0.0)
    """Seconds a worker may stay silent before it is killed and restarted."""
    max_episodes: int = param(0, ge=0)
    """Stop after this many episodes (0: no limit; run.total_steps still applies)."""


def default_workers() -> int:
    """``cpu_count() - 2``, at least 1: leave a core for the learner and one for the OS."""
    return max(1, (os.cpu_count() or 1) - 2)


@dataclass(frozen=True)
class Episode:
    """One finished episode as a worker sends it."""

    worker: int
    incarnation: int
    index: int
    """Episode number within this worker incarnation: (worker, incarnation, index) is unique."""
    obs: np.ndarray
    """Observations, T + 1 of them (the last is the final next observation)."""
    actions: np.ndarray
    """Discrete actions (the discrete part of hybrid ones), T of them."""
    actions_cont: np.ndarray | None
    """The continuous part of hybrid actions, (T, d); None for discrete actions."""
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    weights_version: int
    meta: dict[str, float] = field(default_factory=dict)
    """What plug-ins attached (self-play: the opponent snapshot played against)."""


def rollout_worker(
    worker: int,
    incarnation: int,
    workers: int,
    cfg: Config,
    store: Any,
    plugins: tuple[Any, ...],
    generation: int,
    conn: Connection,
) -> None:
    """A rollout worker process: steps its ``env.num_envs`` envs with one batched forward,
    pulls newer weights between steps, and sends each episode whole as it ends (plug-ins
    set each episode up, e.g. load the self-play opponent).

    ``cfg`` arrives as the object (sections of runners registered only in the learner's
    process included); ``generation`` counts the run's starts, so a resumed run's workers
    draw seeds the first start never used."""
    parent_alive = child_prologue(torch_threads=1)
    spec = probe_env(cfg.env)
    n = cfg.env.num_envs
    seeds = (cfg.run.seed, WORKER_STREAM, worker, incarnation, generation)
    actor = build_actor(cfg, spec, np.random.default_rng(derive_seed(*seeds)), source=store)
    hook = None
    if plugins:

        def hook(env_index: int, env: Any) -> dict[str, float]:
            meta: dict[str, float] = {}
            for plugin in plugins:
                meta.update(plugin.before_episode(env, actor))
            return meta

    envs = make_vector_env(cfg.env, n, derive_seed(*seeds, 2))
    acting = BatchActor(actor, envs, seeds, on_reset=hook)
    paths = [_Path() for _ in range(n)]
    index = 0
    # A learner killed with SIGKILL cannot stop its workers: they notice it is gone (a new
    # parent, or a broken pipe on send) and exit by themselves.
    while parent_alive():
        if actor.update():  # every env of every worker explores at its own Ape-X epsilon
            meta = actor.meta
            acting.epsilons[:] = [
                actor_epsilon(meta["epsilon"], worker * n + i, workers * n, meta["eps_spread"])
                for i in range(n)
            ]
        got = acting.step()
        for i in got.rows():
            paths[i].add(got, i)
        ended = []
        for end in got.finished:
            played = paths[end.env].episode(spec.hybrid)
            paths[end.env] = _Path()
            ids = {"worker": worker, "incarnation": incarnation, "index": index}
            ended.append(Episode(**ids, **played, weights_version=actor.version, meta=end.meta))
            index += 1
        if ended:  # one message for the step's episodes: the learner's receive is per message
            conn.send(ended)


class _Path:
    """One env's episode so far, as :class:`Episode`'s arrays will hold it."""

    def __init__(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.end = (False, False)

    def add(self, steps: Steps, i: int) -> None:
        if not self.obs:
            self.obs.append(steps.obs[i])
        self.obs.append(steps.next_obs[i])
        self.actions.append(steps.actions[i])
        self.rewards.append(float(steps.rewards[i]))
        self.end = (bool(steps.terminated[i]), bool(steps.truncated[i]))

    def episode(self, hybrid: bool) -> dict[str, Any]:
        actions = self.actions
        return {
            "obs": np.asarray(self.obs, dtype=np.float32),
            "actions": np.asarray([a[0] if hybrid else a for a in actions], dtype=np.int64),
            "actions_cont": np.asarray([a[1] for a in actions], np.float32) if hybrid else None,
            "rewards": np.asarray(self.rewards, dtype=np.float32),
            "terminated": self.end[0],
            "truncated": self.end[1],
        }


@dataclass
class _Slot:
    worker: WorkerProcess
    incarnation: int
    last_heard: float
    budget: RestartBudget
    """This worker's failures in a row (since it last delivered an episode)."""


class ProcessesRunner(DQNRunner):
    """Rollout worker processes play whole episodes; one central learner trains.

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.runner=processes", "processes.workers=2"])
        >>> # RunLoop(ProcessesRunner(cfg), ...).run() starts, supervises and stops them
    """

    section = ("processes", ProcessesConfig)
    workers_key = "processes.workers"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        p = cfg.processes
        self.workers = p.workers or default_workers()
        self.batches = self.restarts = 0
        self.generation = 0
        """Starts of this run (resumes included): part of every worker's seeds."""
        self.received: set[tuple[int, int, int]] = set()
        """(worker, incarnation, index) of every episode that reached the learner."""
        self._step = 0
        template = self.learner.weights()
        self.store = SharedWeightStore(template, meta_keys=("epsilon", "eps_spread"))
        self.plugins = [
            section.build(cfg, template)
            for _, section in cfg.sections()
            if getattr(section, "enabled", False) and hasattr(section, "build")
        ]
        self._slots: list[_Slot] = []

    # --- workers -------------------------------------------------------------------------------
    def _start(self, worker: int, incarnation: int, budget: RestartBudget) -> _Slot:
        plugins = tuple(plugin.worker_part() for plugin in self.plugins)
        args = (worker, incarnation, self.workers, self.cfg, self.store)
        process = WorkerProcess(
            rollout_worker, (*args, plugins, self.generation), name=f"shoal-rollout-{worker}"
        )
        return _Slot(process, incarnation, time.monotonic(), budget)

    def _restart(self, worker: int, why: str) -> None:
        slot = self._slots[worker]
        slot.worker.stop()
        if not slot.budget.fail():
            raise ShoalError(
                f"rollout worker {worker} failed {MAX_FAILURES} times in a row without "
                f"finishing an episode; last: {why}"
            )
        self.restarts += 1
        self._slots[worker] = self._start(worker, slot.incarnation + 1, slot.budget)
        print(f"shoal: restarted rollout worker {worker}: {why}", file=sys.stderr)

    def _stop_all(self) -> None:
        stop_processes([slot.worker.proc for slot in self._slots])
        for slot in self._slots:
            slot.worker.conn.close()
        self._slots = []

    def _collect(self, per_worker: int) -> list[Episode]:
        """At least ``per_worker`` whole episodes from every worker (a message holds the
        episodes one step of its envs ended), restarting dead or silent ones."""
        need = dict.fromkeys(range(self.workers), per_worker)
        got: list[Episode] = []
        timeout = self.cfg.processes.worker_timeout
        while any(n > 0 for n in need.values()):
            conns = {self._slots[w].worker.conn: w for w in need if need[w] > 0}
            for conn in wait(list(conns), timeout=0.5):
                w = conns[conn]
                try:
                    episodes = conn.recv()
                except Exception as e:  # EOF, a broken pipe or a truncated message: it died
                    self._restart(w, f"pipe failed ({type(e).__name__})")
                    continue
                self._slots[w].last_heard = time.monotonic()
                self._slots[w].budget.succeeded()
                got += episodes
                need[w] -= len(episodes)
            now = time.monotonic()
            for w in list(need):
                slot = self._slots[w]
                if need[w] > 0 and not slot.worker.alive():
                    self._restart(w, f"exited with code {slot.worker.proc.exitcode}")
                elif need[w] > 0 and now - slot.last_heard > timeout:
                    self._restart(w, f"silent for {timeout} s")
        return got

    # --- collection and learning -----------------------------------------------------------
    def start(self) -> None:
        """Publish the first weights and start the workers."""
        self.generation += 1
        self._publish()
        for w in range(self.workers):  # one by one: a failed start still stops the others
            self._slots.append(self._start(w, 0, RestartBudget(MAX_FAILURES)))

    def collect(self, step: int) -> Collected:
        """``episodes_per_batch`` whole episodes per env from every worker, into replay."""
        self._step = step
        got = []
        per_worker = self.cfg.processes.episodes_per_batch * self.cfg.env.num_envs
        for ep in self._collect(per_worker):
            self._store_episode(ep)
            got.append((float(ep.rewards.sum()), len(ep.actions)))
        return Collected(sum(length for _, length in got), got)

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the schedule owes for the env steps collected (or
        ``learning_steps_per_batch``), then publish the weights with the new epsilon."""
        self._step = step
        owed = self.schedule.owe(step)
        fixed = self.cfg.processes.learning_steps_per_batch
        if fixed and step >= self.cfg.run.learning_starts:
            owed = fixed
        if owed:
            self.loss = self.learn_steps(owed)
        self.batches += 1
        self._publish()

    def done(self, episodes: int) -> bool:
        """``max_episodes`` reached."""
        limit = self.cfg.processes.max_episodes
        return limit > 0 and episodes >= limit

    def stop(self) -> None:
        """Kill and join every worker, release shared memory; safe to call twice."""
        self._stop_all()
        self.store.close()
        for plugin in self.plugins:
            plugin.close()

    def _store_episode(self, ep: Episode) -> None:
        key = (ep.worker, ep.incarnation, ep.index)
        if key in self.received:
            raise ShoalError(f"episode {key} arrived twice")
        self.received.add(key)
        for plugin in self.plugins:
            plugin.on_episode(ep.meta, ep.rewards)
        d = self.cfg.dqn
        items = nstep_episode(
            ep.obs, ep.actions, ep.rewards, terminated=ep.terminated, n=d.n_step, gamma=d.gamma
        )
        if ep.actions_cont is not None:
            items["action_cont"] = ep.actions_cont
        self.replay.add_batch(items)  # one write per episode, not one per step

    def _publish(self) -> None:
        weights = self.learner.weights()
        meta = {"epsilon": self.epsilon(self._step), "eps_spread": self.cfg.processes.eps_spread}
        self.store.publish(weights, meta)
        for plugin in self.plugins:
            plugin.on_publish(weights, self.batches)

    # --- what the loop reads -----------------------------------------------------------------
    def eval_metrics(self) -> dict[str, float]:
        """Worker restarts, and what plug-ins add (self-play: the two-player record)."""
        out = {"restarts": float(self.restarts)}
        actor = self.eval_actor()
        for plugin in self.plugins:
            out.update(plugin.eval_metrics(actor))
        return out

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples/s and worker restarts."""
        return {**super().tick_metrics(updates_per_s), "restarts": float(self.restarts)}

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Worker restarts on the progress bar."""
        return {"restarts": self.restarts}

    def state_dict(self) -> dict[str, Any]:
        """The base state plus batches, restarts and the plug-ins' state."""
        return {
            **super().state_dict(),
            "batches": self.batches,
            "restarts": self.restarts,
            "generation": self.generation,
            "plugins": [plugin.state_dict() for plugin in self.plugins],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        super().load_state_dict(state)
        self.batches, self.restarts = state["batches"], state["restarts"]
        self.generation = state["generation"]
        self._step = state["loop"]["step"]  # the first publish uses the resumed epsilon
        for plugin, saved in zip(self.plugins, state["plugins"]):
            plugin.load_state_dict(saved)
