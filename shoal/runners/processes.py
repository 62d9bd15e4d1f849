"""The processes runner: N rollout worker processes feeding one central learner.

Each worker (spawned) owns an env and an inference-only copy of the Q-network (no
optimizer, no replay) and plays whole episodes, which it sends through its own pipe. The
learner (the caller's process) owns the replay buffer, the networks and the optimizer: it
gathers ``episodes_per_batch`` episodes from each worker, adds them to replay through the
n-step writer, takes ``learning_steps_per_batch`` gradient steps, and publishes the
weights together with the batch's exploration epsilon into a shared-memory
:class:`~shoal.sync.weights.SharedWeightStore`, from which every worker pulls before its next
episode (so all workers explore with the same epsilon, optionally spread Ape-X style).

Only whole episodes travel, so a worker that dies (an exception or SIGKILL) loses at most
its unfinished episode, which never reaches replay. A dead worker, or one silent for
``worker_timeout`` seconds, is killed and restarted, and the restarts are counted. A
failure of a worker's pipe (e.g. killed mid-send) counts as a death. Ctrl-C or an error
stops every worker (no orphans) and writes a final checkpoint.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import build_nstep
from shoal.agent.dqn import epsilon_greedy_action, greedy_actions
from shoal.agent.networks import make_q_network
from shoal.config import Config, config_to_dict, load_config
from shoal.envs import make_env, probe_env
from shoal.envs.connect_four import heuristic_player, play_match, random_player
from shoal.errors import ShoalError
from shoal.games.selfplay import OpponentPool
from shoal.run.checkpoint import save_checkpoint
from shoal.run.curve import plot_run
from shoal.run.directory import RunDir
from shoal.run.evaluation import evaluate
from shoal.run.metrics import MetricsWriter
from shoal.run.progress import TrainProgress
from shoal.run.seeding import derive_seed
from shoal.runners.base import RunnerBase, TrainResult
from shoal.sync.weights import SharedWeightStore

__all__ = ["Episode", "ProcessesRunner", "check_selfplay", "default_workers"]

WORKER_STREAM = 4
"""Seed stream of worker resets and exploration."""


def check_selfplay(cfg: Config) -> None:
    """Reject a self-play config that cannot work, before any work starts."""
    if not cfg.selfplay.enabled:
        return
    if cfg.run.runner != "processes":
        raise ShoalError(f"selfplay.enabled needs run.runner = 'processes', got {cfg.run.runner!r}")
    env = make_env(cfg.env)
    try:
        if not hasattr(env.unwrapped, "set_opponent"):
            raise ShoalError(
                f"selfplay.enabled: env {cfg.env.id!r} has no opponent to replace "
                "(two-player envs such as shoal/ConnectFour-v0 do)"
            )
    finally:
        env.close()


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
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    weights_version: int
    opponent: int = -1
    """Self-play: the pool snapshot played against (-1: the env's own, e.g. random)."""


def _worker_epsilon(base: float, worker: int, workers: int, spread: float) -> float:
    """Ape-X style per-worker epsilon: base ** (1 + spread * i / (N - 1)); spread 0 = same."""
    if spread == 0 or workers == 1:
        return base
    return base ** (1 + spread * worker / (workers - 1))


def rollout_worker(
    worker: int,
    incarnation: int,
    workers: int,
    cfg_values: dict[str, dict[str, Any]],
    store: Any,
    conn: Connection,
    opponents: Any = None,
) -> None:
    """A rollout worker process: pull weights (and the opponent, in self-play), play an
    episode, send it, repeat."""
    torch.set_num_threads(1)
    cfg = load_config(None, values=cfg_values)
    spec = probe_env(cfg.env)
    env = make_env(cfg.env)
    net = make_q_network(cfg.dqn, spec.obs_dim, spec.n_actions)
    net.requires_grad_(False)
    rng = np.random.default_rng(derive_seed(cfg.run.seed, WORKER_STREAM, worker, incarnation))
    version, eps = -1, 1.0
    index = 0
    device = torch.device("cpu")
    masked = cfg.dqn.action_mask
    opponent, opp_version = -1, -1
    opp_net = copy.deepcopy(net) if opponents is not None else None
    while True:
        got = store.pull(version)
        if got is not None:
            version, state, extras = got
            net.load_state_dict(state)
            eps = _worker_epsilon(float(extras[0]), worker, workers, float(extras[1]))
        if opponents is not None:
            got = opponents.pull(opp_version)
            if got is not None:
                opp_version, opp_state, opp_extras = got
                opponent = int(opp_extras[0])
                env.unwrapped.set_opponent(_opponent_policy(opp_net, opp_state, opponent))
        seed = derive_seed(cfg.run.seed, WORKER_STREAM, worker, incarnation, index, 1)
        obs, _ = env.reset(seed=seed)
        observations, actions, rewards = [obs], [], []
        while True:
            action = epsilon_greedy_action(
                lambda x: greedy_actions(net, x, device, masked),
                obs,
                eps,
                rng,
                spec.n_actions,
                masked,
            )
            obs, reward, term, trunc, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(float(reward))
            if term or trunc:
                break
        conn.send(
            Episode(
                worker=worker,
                incarnation=incarnation,
                index=index,
                obs=np.asarray(observations, dtype=np.float32),
                actions=np.asarray(actions, dtype=np.int64),
                rewards=np.asarray(rewards, dtype=np.float32),
                terminated=bool(term),
                truncated=bool(trunc),
                weights_version=version,
                opponent=opponent,
            )
        )
        index += 1


def _opponent_policy(net: Any, state: dict[str, torch.Tensor], snapshot: int) -> Any:
    """The opponent a worker plays: a pool snapshot, greedy over legal moves, or (snapshot
    -1) the random player."""
    if snapshot < 0:
        return random_player
    net.load_state_dict(state)
    cpu = torch.device("cpu")

    def play(obs: np.ndarray, rng: np.random.Generator) -> int:
        return int(greedy_actions(net, obs[None], cpu, masked=True)[0])

    return play


@dataclass
class _Slot:
    proc: Any
    conn: Connection
    incarnation: int
    last_heard: float


class ProcessesRunner(RunnerBase):
    """Scheme 4: rollout worker processes + one central learner (see the module docstring).

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.runner=processes", "processes.workers=2"])
        >>> # ProcessesRunner(cfg, RunDir.create("runs", "demo")).run()
    """

    def __init__(self, cfg: Config, run: RunDir, resume: dict[str, Any] | None = None) -> None:
        super().__init__(cfg, run)
        p = cfg.processes
        self.workers = p.workers or default_workers()
        self.learning_steps = p.learning_steps_per_batch
        self.batches = self.restarts = 0
        self.received: set[tuple[int, int, int]] = set()
        """(worker, incarnation, index) of every episode that reached the learner."""
        if resume is not None:
            self.dqn.load_state_dict(resume["dqn"])
            self.replay.load_state_dict(resume["replay"])
            c = resume["counters"]
            self._restore_counters(c)
            self.batches, self.restarts = c["batches"], c["restarts"]
        template = self.dqn.online.state_dict()
        self.store = SharedWeightStore(template, extras=2)
        sp = cfg.selfplay
        self.pool: OpponentPool | None = None
        self.opponents: SharedWeightStore | None = None
        if sp.enabled:
            check_selfplay(cfg)
            self.pool = OpponentPool(sp.pool_size, sp.sampling, seed=cfg.run.seed)
            if resume is not None and "pool" in resume:
                self.pool.load_state_dict(resume["pool"])
            self.opponents = SharedWeightStore(template, extras=1)
            self._opp_rng = np.random.default_rng(derive_seed(cfg.run.seed, WORKER_STREAM))
        self._ctx = get_context("spawn")
        self._slots: list[_Slot] = []

    # --- workers -------------------------------------------------------------------------------
    def _start(self, worker: int, incarnation: int) -> _Slot:
        recv, send = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=rollout_worker,
            args=(
                worker,
                incarnation,
                self.workers,
                config_to_dict(self.cfg),
                self.store,
                send,
                self.opponents,
            ),
            name=f"shoal-rollout-{worker}",
            daemon=True,
        )
        proc.start()
        send.close()  # the child holds the write end; EOF then means the child is gone
        return _Slot(proc, recv, incarnation, time.monotonic())

    def _restart(self, worker: int, why: str) -> None:
        slot = self._slots[worker]
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join(5)
        slot.conn.close()
        self.restarts += 1
        self._slots[worker] = self._start(worker, slot.incarnation + 1)
        print(f"shoal: restarted rollout worker {worker}: {why}", file=sys.stderr)

    def _stop_all(self) -> None:
        for slot in self._slots:
            if slot.proc.is_alive():
                slot.proc.kill()
        for slot in self._slots:
            slot.proc.join(5)
            slot.conn.close()
        self._slots = []

    def _collect(self, per_worker: int) -> list[Episode]:
        """``per_worker`` whole episodes from every worker, restarting dead or silent ones."""
        need = dict.fromkeys(range(self.workers), per_worker)
        got: list[Episode] = []
        timeout = self.cfg.processes.worker_timeout
        while any(need.values()):
            conns = {self._slots[w].conn: w for w in need if need[w] > 0}
            for conn in wait(list(conns), timeout=0.5):
                w = conns[conn]
                try:
                    ep = conn.recv()
                except Exception as e:  # EOF, a broken pipe or a truncated message: it died
                    self._restart(w, f"pipe failed ({type(e).__name__})")
                    continue
                self._slots[w].last_heard = time.monotonic()
                got.append(ep)
                need[w] -= 1
            now = time.monotonic()
            for w in list(need):
                slot = self._slots[w]
                if need[w] > 0 and not slot.proc.is_alive():
                    self._restart(w, f"exited with code {slot.proc.exitcode}")
                elif need[w] > 0 and now - slot.last_heard > timeout:
                    self._restart(w, f"silent for {timeout} s")
        return got

    # --- learning ------------------------------------------------------------------------------
    def _store_episode(self, ep: Episode) -> None:
        key = (ep.worker, ep.incarnation, ep.index)
        if key in self.received:
            raise ShoalError(f"episode {key} arrived twice")
        self.received.add(key)
        if self.pool is not None and ep.opponent >= 0:
            self.pool.record(ep.opponent, float(ep.rewards[-1]))
        writer = build_nstep(self.cfg)
        last = len(ep.actions) - 1
        for t in range(len(ep.actions)):
            end = t == last
            for tr in writer.append(
                ep.obs[t],
                int(ep.actions[t]),
                float(ep.rewards[t]),
                ep.obs[t + 1],
                ep.terminated and end,
                ep.truncated and end,
            ):
                self.replay.add(tr)

    def _publish(self) -> None:
        eps = self.epsilon(self.step)
        self.store.publish(
            self.dqn.online.state_dict(), extras=[eps, self.cfg.processes.eps_spread]
        )
        if self.pool is None or self.opponents is None:
            return
        sp = self.cfg.selfplay
        if self.batches > 0 and self.batches % sp.snapshot_every == 0:
            self.pool.add(self.dqn.online.state_dict())
        choice = None if self._opp_rng.random() < sp.random_fraction else self.pool.sample()
        if choice is None:
            self.opponents.publish(self.dqn.online.state_dict(), extras=[-1])
        else:
            self.opponents.publish(choice[1], extras=[choice[0]])

    def _state(self, wall: float) -> dict[str, Any]:
        return {
            "config": config_to_dict(self.cfg),
            "dqn": self.dqn.state_dict(),
            "replay": self.replay.state_dict(),
            "rng": {"torch": torch.get_rng_state()},
            **({"pool": self.pool.state_dict()} if self.pool is not None else {}),
            "counters": {
                **self._counters(wall),
                "batches": self.batches,
                "restarts": self.restarts,
            },
        }

    def _evaluate(self, metrics: MetricsWriter, wall: float) -> None:
        returns = evaluate(
            self.dqn.greedy, self.eval_envs, self.cfg.run.eval_episodes, self.cfg.run.seed
        )
        self._log_eval(metrics, returns, wall, restarts=self.restarts, **self._two_player_record())

    def _close_stores(self) -> None:
        self.store.close()
        if self.opponents is not None:
            self.opponents.close()

    def _two_player_record(self) -> dict[str, float]:
        """Win rates against the random and the one-step-lookahead player, as first and as
        second player (self-play runs only)."""
        if self.pool is None:
            return {}
        games = self.cfg.run.eval_episodes
        out: dict[str, float] = {"pool_size": float(len(self.pool))}
        for name, opponent in (("random", random_player), ("heuristic", heuristic_player)):
            for first in (True, False):
                rec = play_match(
                    self.dqn.greedy_one,
                    opponent,
                    games,
                    learner_first=first,
                    seed=self.cfg.run.seed,
                )
                out[f"win_{name}_{'first' if first else 'second'}"] = rec["win"]
        self.last_record = out
        return out

    def run(self) -> TrainResult:
        """Train until ``total_steps`` env steps (whole batches) or until solved."""
        r, p = self.cfg.run, self.cfg.processes
        metrics = MetricsWriter(self.run_dir.metrics, self.run_dir.tensorboard)
        t0 = time.perf_counter()

        def wall() -> float:
            return self.wall_before + time.perf_counter() - t0

        self._publish()
        next_eval = (self.step // r.eval_every + 1) * r.eval_every
        next_ckpt = (self.step // r.checkpoint_every + 1) * r.checkpoint_every
        loss = float("nan")
        try:
            self._slots = [self._start(w, 0) for w in range(self.workers)]
            with TrainProgress(
                r.total_steps, enabled=r.progress, description=self.cfg.env.id
            ) as bar:
                while (
                    self.step < r.total_steps
                    and self.solved_step is None
                    and (p.max_episodes == 0 or self.episode < p.max_episodes)
                ):
                    t_batch = time.perf_counter()
                    episodes = self._collect(p.episodes_per_batch)
                    new_steps = 0
                    for ep in episodes:
                        self._store_episode(ep)
                        self.step += len(ep.actions)
                        new_steps += len(ep.actions)
                        metrics.log(
                            "episode",
                            self.step,
                            wall_s=wall(),
                            episode=self.episode,
                            length=len(ep.actions),
                            epsilon=self.epsilon(self.step),
                            updates=self.dqn.updates,
                            **{"return": float(ep.rewards.sum())},
                        )
                        self.episode += 1
                    if self.step >= r.learning_starts:
                        steps = self.learning_steps or max(
                            1, round(new_steps * r.gradient_steps / r.train_freq)
                        )
                        loss = self._learn(steps)
                    self.batches += 1
                    self._publish()
                    sps = new_steps / max(time.perf_counter() - t_batch, 1e-9)
                    metrics.log(
                        "tick",
                        self.step,
                        wall_s=wall(),
                        restarts=self.restarts,
                        steps_per_s=sps,
                        loss=loss,
                        epsilon=self.epsilon(self.step),
                        updates=self.dqn.updates,
                    )
                    if self.step >= next_eval:
                        self._evaluate(metrics, wall())
                        next_eval = (self.step // r.eval_every + 1) * r.eval_every
                    if self.step >= next_ckpt:
                        save_checkpoint(self.run_dir.checkpoint, self._state(wall()))
                        next_ckpt = (self.step // r.checkpoint_every + 1) * r.checkpoint_every
                    last = "-" if self.last_eval is None else self.last_eval
                    bar.update(
                        min(self.step, r.total_steps),
                        sps=round(sps),
                        loss=loss,
                        eps=self.epsilon(self.step),
                        eval=last,
                        restarts=self.restarts,
                    )
        except BaseException:
            self._stop_all()
            metrics.flush()
            save_checkpoint(self.run_dir.checkpoint, self._state(wall()))
            metrics.close()
            self._close_stores()
            raise
        self._stop_all()
        if self.solved_step is None or self.last_eval is None:
            self._evaluate(metrics, wall())
        metrics.flush()
        save_checkpoint(self.run_dir.checkpoint, self._state(wall()))
        metrics.close()
        self._close_stores()
        plot_run(self.run_dir.metrics, self.run_dir.curve, title=f"{self.cfg.env.id} (processes)")
        return self._result(wall())
