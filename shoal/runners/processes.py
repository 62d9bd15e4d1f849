"""The processes runner: N rollout worker processes feeding one central learner.

Each worker (spawned) owns the recipe's acting: ``env.num_envs`` envs (MAPF: ``mapf.envs``
worlds) and an inference-only copy of the Q-network (no optimizer, no replay), stepped
with one batched forward. It sends whole episodes as n-step transitions (MAPF: the
sequences completed, with their initial priorities; the worker computes them: the
learner's process is the one every worker shares) through its own pipe, as many episodes
as it has envs or more a message. The same pipe brings it what the recipe's tasks say of
the next episodes (MAPF: the curriculum's stages), first and whenever that changes.
The learner (the caller's process) owns the replay buffer, the networks and the
optimizer: it gathers ``episodes_per_batch`` episodes per env from each worker, adds them
to replay in one write, takes the updates the update schedule owes for the env steps collected
(:class:`~shoal.run.schedule.UpdateSchedule`: the serial rule or ``run.replay_ratio``; or
``learning_steps_per_batch``), and publishes the weights together with the batch's
exploration epsilon into a shared-memory :class:`~shoal.sync.weights.SharedWeightStore`,
from which every worker pulls between steps (all envs of all workers explore with the
published epsilon, optionally spread Ape-X style over every env).

Collection and learning overlap: every ``publish_every`` updates the learner publishes its
weights and takes in, without waiting, what the workers have sent meanwhile (up to the next
batch's share each), so workers keep playing with fresh weights instead of blocking on a
full pipe while the learner trains. Workers that run further ahead wait: each may have
``max_ahead`` messages the learner has not taken in (a credit comes back for each it takes),
so the updates per env step stay the schedule's, and the episodes the learner takes in were
played with recent weights and the tasks' latest word.
Self-play is a plug-in (:class:`~shoal.games.selfplay.SelfPlay`): this runner imports no game.

Only whole episodes travel, so a worker that dies (an exception or SIGKILL) loses at most
its unfinished episodes and the fewer than ``env.num_envs`` finished ones it had not sent;
none of them reaches replay. A dead worker, or one silent for
``worker_timeout`` seconds, is killed and restarted, and the restarts are counted. A
failure of a worker's pipe (e.g. killed mid-send) counts as a death. Ctrl-C or an error
stops every worker (no orphans) and writes a final checkpoint; episodes taken in since the
last batch, neither in replay nor counted as env steps yet, go with the workers.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch

from shoal.agent.acting import ActingRequest, Taken
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError, ShoalError
from shoal.recipes.contract import ActorWeights
from shoal.registry import recipe_for
from shoal.replay.items import concat_items
from shoal.run.runner import Collected
from shoal.run.seeding import SeedStream, derive_seed
from shoal.runners.dqn import DQNRunner
from shoal.runners.sections import ProcessesConfig
from shoal.sync.weights import SharedWeightStore
from shoal.sync.workers import (
    RestartBudget,
    WorkerFailure,
    WorkerProcess,
    child_prologue,
    stop_processes,
)

__all__ = ["Block", "Place", "ProcessesConfig", "ProcessesRunner", "default_workers"]

MAX_FAILURES = 3
"""Restarts in a row without an episode after which a worker's failure stops the run."""
KEPT_VERSIONS = 100_000
"""Weights versions whose updates the learner keeps for the policy lag (a message played
with older weights is left out of it)."""


def default_workers() -> int:
    """``cpu_count() - 2``, at least 1: leave a core for the learner and one for the OS."""
    return max(1, (os.cpu_count() or 1) - 2)


@dataclass(frozen=True)
class Block:
    """What a worker sends once its envs ended ``num_envs`` episodes or more: the items
    they completed, ready for replay (the worker computes them: the learner's process is
    the one every worker shares), with their initial priorities where the acting gives
    them, and the episodes as the acting reports them (DQN: return, length, the reset
    hook's meta; MAPF: success and stage)."""

    worker: int
    incarnation: int
    first: int
    """Episode j of the block is episode ``first + j`` of this worker incarnation:
    (worker, incarnation, number) names an episode once in a run."""
    items: dict[str, np.ndarray]
    """One array per replay field (DQN: the episodes' n-step transitions; MAPF: the
    sequences completed)."""
    priorities: np.ndarray | None
    ended: list[Any]
    steps: int
    """Env steps the block accounts for (MAPF: world steps played since the last block)."""
    weights_version: int

    @property
    def episodes(self) -> int:
        """Episodes in the block."""
        return len(self.ended)

    @classmethod
    def of(cls, sent: Taken, ids: tuple[int, int, int], weights_version: int) -> Block:
        """What an acting's :meth:`take` gave, its episodes numbered from ``ids`` (worker,
        incarnation, first)."""
        return cls(*ids, sent.items, sent.priorities, list(sent.ended), sent.steps, weights_version)


@dataclass(frozen=True)
class Place:
    """Which worker a rollout worker process is, for its seeds and its exploration."""

    worker: int
    incarnation: int
    """Restarts of this worker so far."""
    workers: int
    generation: int
    """Starts of the run (resumes included): a resumed run's workers draw seeds the first
    start never used."""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seed path after the run seed and the workers' stream."""
        return (self.worker, self.incarnation, self.generation)


def rollout_worker(
    place: Place,
    cfg: Config,
    store: SharedWeightStore,
    plugins: tuple[Any, ...],
    conn: Connection,
) -> None:
    """A rollout worker process: steps its envs with one batched forward, pulls newer
    weights between steps, and sends episodes whole once its envs have ended as many as
    there are envs (plug-ins set each episode up, e.g. load the self-play opponent); the
    learner's first message, and any later one, says what the next episodes are (MAPF: the
    curriculum's stages). A failure goes to the learner with the worker's own message.

    ``cfg`` arrives as the object (sections of runners registered only in the learner's
    process included)."""
    parent_alive = child_prologue(torch_threads=1)
    try:
        _rollout(place, cfg, store, plugins, conn, parent_alive)
    except (EOFError, BrokenPipeError):
        return  # the learner is gone
    except BaseException as e:  # the learner reports it with the worker's own message
        try:
            conn.send(WorkerFailure.of(e))
        except (OSError, ValueError):
            raise e from None  # no pipe to tell: the traceback goes to stderr
        raise SystemExit(1) from None


def _rollout(
    place: Place,
    cfg: Config,
    store: SharedWeightStore,
    plugins: tuple[Any, ...],
    conn: Connection,
    parent_alive: Callable[[], bool],
) -> None:
    """The rollout worker's loop (:func:`rollout_worker`)."""
    recipe = recipe_for(cfg)
    spec = recipe.probe(cfg)
    seeds = (cfg.run.seed, SeedStream.WORKER, *place.seeds)
    rng = np.random.default_rng(derive_seed(*seeds))
    actor = recipe.make_actor(cfg, spec, rng, ActorWeights(source=store))
    hook = None
    if plugins:

        def hook(env_index: int, env: Any) -> dict[str, float]:
            meta: dict[str, float] = {}
            for plugin in plugins:
                meta.update(plugin.before_episode(env, actor))
            return meta

    # Every env of every worker explores at its own Ape-X epsilon (explore.spread).
    request = ActingRequest(
        seeds=seeds,
        env_seed=derive_seed(*seeds, 2),
        rng=rng,
        writer="episodes",
        place=(place.worker, place.workers),
        spread=cfg.explore.spread_for(cfg),
        on_reset=hook,
    )
    acting = recipe.make_acting(cfg, spec, actor, request)
    acting.pull()
    acting.configure(*conn.recv())  # the learner sends its tasks first (MAPF: the stages)
    index = ahead = 0
    # A learner killed with SIGKILL cannot stop its workers: they notice it is gone (a new
    # parent, or a broken pipe on send) and exit by themselves.
    while parent_alive():
        ahead = _take_messages(conn, acting, ahead, cfg.processes.max_ahead, parent_alive)
        acting.play(1, pull_every=1)  # one step of every env, newer weights before each
        # A message per env's worth of episodes: the learner's receive costs per message.
        if acting.ended >= acting.num_envs:
            ids = (place.worker, place.incarnation, index)
            block = Block.of(acting.take(), ids, actor.version)
            conn.send(block)
            index += block.episodes
            ahead += 1


def _take_messages(
    conn: Connection, acting: Any, ahead: int, limit: int, parent_alive: Callable[[], bool]
) -> int:
    """The learner's messages to a worker: credits (an int: messages it took in) and what
    the tasks say of the next episodes, when that changes. With ``limit`` messages not yet
    taken in, waits for a credit: a pipe's buffer would let a worker run ~1,500 updates
    ahead of a busy learner (CartPole, 2 cores), and its tasks reach the learner's intake
    that late. Returns the messages still ahead."""
    while True:
        waiting = ahead >= limit
        if not conn.poll(0.5 if waiting else 0):
            if not waiting or not parent_alive():
                return ahead
            continue
        message = conn.recv()
        if isinstance(message, int):
            ahead -= message
        else:
            acting.configure(*message)


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

    @classmethod
    def spawns(cls, cfg: Config) -> bool:
        """Its rollout workers are spawned processes."""
        return True

    @classmethod
    def check(cls, cfg: Config) -> EnvSpec:
        """The DQN runners' checks, and an engine a worker can run: ``async`` starts a
        process per env, which a worker (a daemon process, so it never outlives the run)
        may not have."""
        if cfg.env.vector == "async":
            raise ConfigError(
                "config key 'env.vector': 'async' starts a process per env, which a rollout "
                "worker (itself a process) cannot start; use 'sync' (more workers for more "
                "cores) or 'envpool'"
            )
        return super().check(cfg)

    def __init__(self, cfg: Config, spec: EnvSpec | None = None) -> None:
        super().__init__(cfg, spec)
        p = cfg.processes
        if p.learner_threads:
            torch.set_num_threads(p.learner_threads)
        self.workers = p.workers or default_workers()
        self.batches = self.restarts = 0
        self.generation = 0
        """Starts of this run (resumes included): part of every worker's seeds."""
        self.received: dict[tuple[int, int], int] = {}
        """Episodes that reached the learner per (worker, incarnation)."""
        self._step = 0
        self._pending: dict[int, list[Block]] = {}
        """Blocks taken in while the learner learned, per worker, in arrival order: the
        next collection's first (not yet in replay, nor counted as steps)."""
        self._since_publish = 0
        self._published: dict[int, int] = {}
        """The learner's updates at each weights version published (for the policy lag)."""
        self._lags: list[int] = []
        """Policy lag of each message checked since the last tick."""
        template = self.learner.weights()
        self.store = SharedWeightStore(template, meta_keys=("epsilon",))
        self.plugins = [
            section.build(cfg, template)
            for _, section in cfg.sections()
            if getattr(section, "enabled", False) and hasattr(section, "build")
        ]
        self._slots: list[_Slot] = []
        self._tasks: tuple[Any, ...] = ()
        """What the workers were last told of their next episodes."""

    # --- workers -------------------------------------------------------------------------------
    def _start(self, worker: int, incarnation: int, budget: RestartBudget) -> _Slot:
        plugins = tuple(plugin.worker_part() for plugin in self.plugins)
        place = Place(worker, incarnation, self.workers, self.generation)
        process = WorkerProcess(
            rollout_worker,
            (place, self.cfg, self.store, plugins),
            name=f"shoal-rollout-{worker}",
            duplex=True,
        )
        process.conn.send(self._tasks)  # its first message: what its episodes are
        return _Slot(process, incarnation, time.monotonic(), budget)

    def _send_tasks(self) -> None:
        """What the tasks now say of the next episodes, to every worker, when it changed
        (MAPF: the curriculum's stages and shares; plain episodes: never)."""
        tasks = self.tasks.acting_args()
        if tasks == self._tasks:
            return
        self._tasks = tasks
        for w, slot in enumerate(self._slots):
            try:
                slot.worker.conn.send(tasks)
            except OSError as e:  # it died: the next collection restarts it
                print(f"shoal: rollout worker {w} missed the tasks: {e}", file=sys.stderr)

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
        self._pending = {}  # neither in replay nor counted: lost as unfinished episodes are

    def _receive(self, worker: int) -> None:
        """One message of ``worker`` into the pending blocks (a failed pipe: restart it)."""
        slot = self._slots[worker]
        try:
            block = slot.worker.conn.recv()
        except Exception as e:  # EOF, a broken pipe or a truncated message: it died
            slot.worker.proc.join(0.5)  # its exit code, where it has one
            self._restart(worker, f"pipe failed ({type(e).__name__}; {slot.worker.why()})")
            return
        if isinstance(block, WorkerFailure):
            self._restart(worker, block.message)
            return
        slot.last_heard = time.monotonic()
        slot.budget.succeeded()
        self._pending.setdefault(worker, []).append(block)
        try:
            slot.worker.conn.send(1)  # a credit: it may send one message more
        except OSError:  # it died after sending: the next collection restarts it
            pass

    def _short(self, per_worker: int) -> list[int]:
        """The workers whose pending blocks hold fewer than ``per_worker`` episodes."""
        return [
            w
            for w in range(self.workers)
            if sum(b.episodes for b in self._pending.get(w, ())) < per_worker
        ]

    def _drain(self) -> None:
        """Take in, without waiting, what workers sent while the learner learned, up to
        the next batch's share each: they go on playing instead of blocking on a full
        pipe; a worker further ahead blocks (the schedule's updates per env step hold)."""
        short = self._short(self._per_worker())
        ready = wait([self._slots[w].worker.conn for w in short], timeout=0)
        for w in short:
            if self._slots[w].worker.conn in ready:
                self._receive(w)

    def _collect(self, per_worker: int) -> list[Block]:
        """At least ``per_worker`` whole episodes from every worker, pending ones first (a
        message holds ``env.num_envs`` or more), restarting dead or silent ones."""
        timeout = self.cfg.processes.worker_timeout
        while short := self._short(per_worker):
            conns = {self._slots[w].worker.conn: w for w in short}
            for conn in wait(list(conns), timeout=0.5):
                self._receive(conns[conn])
            now = time.monotonic()
            for w in self._short(per_worker):
                slot = self._slots[w]
                if not slot.worker.alive():
                    self._restart(w, f"exited with code {slot.worker.proc.exitcode}")
                elif now - slot.last_heard > timeout:
                    self._restart(w, f"silent for {timeout} s")
        got = [block for w in sorted(self._pending) for block in self._pending[w]]
        self._pending = {}
        return got

    def _per_worker(self) -> int:
        return self.cfg.processes.episodes_per_batch * self.cfg.env.num_envs

    # --- collection and learning -----------------------------------------------------------
    def start(self) -> None:
        """Publish the first weights and start the workers."""
        self.generation += 1
        self._tasks = self.tasks.acting_args()  # a resumed curriculum's stages included
        self._publish()
        for w in range(self.workers):  # one by one: a failed start still stops the others
            self._slots.append(self._start(w, 0, RestartBudget(MAX_FAILURES)))

    def collect(self, step: int) -> Collected:
        """``episodes_per_batch`` whole episodes per env from every worker, into replay
        in one write."""
        self._step = step
        blocks = self._collect(self._per_worker())
        for block in blocks:
            self._check(block)
        filled = [b for b in blocks if b.items]
        if filled:
            items = concat_items([b.items for b in filled])
            given = [b.priorities for b in filled]
            self.add_batch(items, None if any(p is None for p in given) else np.concatenate(given))
        got = self.tasks.collected(
            [end for b in blocks for end in b.ended], sum(b.steps for b in blocks)
        )
        self._send_tasks()
        return got

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the schedule owes for the env steps collected (or
        ``learning_steps_per_batch``), then publish the weights with the new epsilon."""
        self._step = step
        owed = self.schedule.owe(step, ready=self.replay_ready)
        fixed = self.cfg.processes.learning_steps_per_batch
        if fixed and step >= self.cfg.run.learning_starts:
            owed = fixed
        if owed:
            self.loss = self.learn_steps(owed)
        self.batches += 1
        self._publish()

    def _learn_step(self) -> float:
        """One update; every ``publish_every``, first publish the weights and take in what
        workers sent (before the update: one cut short by a failure there is owed again)."""
        every = self.cfg.processes.publish_every
        if every and self._since_publish >= every:
            self._publish_weights()
            self._drain()
        self._since_publish += 1
        return super()._learn_step()

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

    def _check(self, block: Block) -> None:
        """Refuse episodes out of their worker's order (one sent twice, or one lost); note
        the message's policy lag; tell plug-ins the episodes' results."""
        key = (block.worker, block.incarnation)
        expected = self.received.get(key, 0)
        if block.first != expected:
            raise ShoalError(
                f"rollout worker {key[0]} (start {key[1]}) sent episodes from {block.first} "
                f"on, after {expected}: an episode arrived twice or was lost"
            )
        self.received[key] = expected + block.episodes
        if block.weights_version in self._published:
            self._lags.append(self.updates - self._published[block.weights_version])
        for plugin in self.plugins:
            for end in block.ended:
                plugin.on_episode(end.meta, end.final_reward)

    def _publish(self) -> None:
        """The weights to the workers, and to plug-ins once a batch."""
        weights = self._publish_weights()
        for plugin in self.plugins:
            plugin.on_publish(weights, self.batches)

    def _publish_weights(self) -> dict[str, Any]:
        weights = self.learner.weights()
        meta = {"epsilon": self.epsilon(self._step)}
        version = self.store.publish(weights, meta)
        self._published[version] = self.updates
        self._published.pop(version - KEPT_VERSIONS, None)
        self._since_publish = 0
        return weights

    # --- what the loop reads -----------------------------------------------------------------
    def eval_metrics(self) -> dict[str, float]:
        """What the evaluation and tasks add, worker restarts, and what plug-ins add
        (self-play: the two-player record)."""
        out = {**super().eval_metrics(), "restarts": float(self.restarts)}
        actor = self.eval_actor()
        for plugin in self.plugins:
            out.update(plugin.eval_metrics(actor))
        return out

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples/s, worker restarts, the policy lag since the last tick (the updates
        between the newest weights behind a message and the learner's as the message
        entered replay, averaged), and what the tasks add (MAPF: replay size, the
        curriculum's stages)."""
        lags, self._lags = self._lags, []
        lag = {"policy_lag": float(np.mean(lags))} if lags else {}
        return {
            **super().tick_metrics(updates_per_s),
            "restarts": float(self.restarts),
            **lag,
            **self.tasks.tick_metrics(len(self.replay)),
        }

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
