"""The ray runner: Ape-X on Ray (scheme 5).

N actor actors play with inference-only networks and per-actor exploration
(``eps ** (1 + alpha * i / (N - 1))``), compute their transitions' initial priorities and
send whole episodes to one replay actor (shoal's prioritized replay behind
:class:`~shoal.replay.ReplayService`, which drops priority updates for slots rewritten
since they were drawn). One learner, in the caller's process, takes double-DQN n-step
steps with importance weights on batches it asks for ``ray.prefetch`` ahead (each request
carries the priorities of the batch just learned from: one call per update), and every
``ray.publish_every`` updates puts a numpy copy of its weights in the object store
(:class:`~shoal.sync.ray_weights.RayWeightStore`); actors pull anything newer every
``ray.pull_every`` steps of each env.

With no address shoal starts a local Ray for the run (``address="local"``, no dashboard)
and shuts it down at the end; ``ray.address`` (``--ray-address`` or ``RAY_ADDRESS``) joins
a running cluster and leaves it running. Actors take fractional CPUs, so there may be more
of them than cores. Ray is an optional extra (``pip install 'shoal[ray]'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from shoal.agent.builder import Fields, build_replay
from shoal.agent.late_priorities import LatePriorities
from shoal.config import APEX_SPREAD, Config
from shoal.envs.gym_env import EnvSpec
from shoal.errors import ConfigError, MachineryError, ShoalError, first_line
from shoal.replay import ReplayService
from shoal.run.imports import search_path
from shoal.run.runner import Collected
from shoal.runners.dqn import DQNRunner
from shoal.runners.ray.actor import RolloutActor
from shoal.runners.ray.address import (
    check_node_address,
    cluster_address,
    preflight,
    require_ray_version,
)
from shoal.runners.ray.local import init_local_ray, join_cluster
from shoal.runners.sections import RayConfig

__all__ = ["RayConfig", "RayRunner", "ReplayActor", "ReplayLostError"]


class ReplayActor(ReplayService):
    """The replay actor: a :class:`~shoal.replay.ReplayService` over the run's prioritized
    buffer of ``fields``, built inside the actor (so no empty buffer travels)."""

    def __init__(self, cfg: Config, spec: EnvSpec, fields: Fields) -> None:
        replay = dataclasses.replace(cfg.replay, prioritized=True)  # Ape-X's replay
        super().__init__(build_replay(dataclasses.replace(cfg, replay=replay), spec, fields))

    def size(self) -> int:
        """Items held."""
        return len(self)

    def cpu_seconds(self) -> float:
        """CPU time this actor's process has used (its load: near one core means the replay
        is the run's bottleneck, a case for shards)."""
        return time.process_time()


class ReplayLostError(ShoalError):
    """The replay actor died: the run stops (its checkpoint keeps the learner)."""


NODE_CHECK_S = 5.0
"""Longest wait for an actor's answer between two looks at whether the local node is
still there (actors placed on a dead node never answer: without a look the run would wait
out ``ray.timeout``)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ConfigError(
            "run.runner 'ray' needs Ray: pip install 'shoal[ray]' (or pip install ray)"
        ) from e
    require_ray_version(ray.__version__)  # before any Ray starts or is joined
    return ray


class RayRunner(DQNRunner):
    """Ape-X on Ray: actor actors, a prioritized replay actor, one learner."""

    section = ("ray", RayConfig)
    workers_key = "ray.actors"
    spread = APEX_SPREAD  # Ape-X's actors explore at spread epsilons
    actor_class: Any = RolloutActor
    """What each actor actor is (a class the runner hands to ``ray.remote``)."""

    @classmethod
    def spawns(cls, cfg: Config) -> bool:
        """Its actors are Ray worker processes."""
        return True

    @classmethod
    def check(cls, cfg: Config) -> EnvSpec:
        """Ray importable, the recipe's checks, and a Ray cluster answering at any address
        given (:func:`~shoal.runners.ray.address.preflight`), a node address of this machine
        for a local one (unless this process has joined a Ray already)."""
        ray = _ray()
        spec = super().check(cfg)
        given = cluster_address(cfg)
        if given and not ray.is_initialized():
            preflight(*given)
        elif not ray.is_initialized():
            check_node_address(cfg.ray.node_ip_address)
        return spec

    def make_replay(self) -> None:
        """None: replay lives in the replay actor (the recipe's ``replay_fields`` say what it
        holds)."""
        return None

    def __init__(self, cfg: Config, spec: EnvSpec | None = None) -> None:  # noqa: D107
        super().__init__(cfg, spec)  # the base builds the learner
        self.ray = _ray()
        self.started_ray = False
        self.replay_actor: Any = None
        self.server: Any = None
        self.actors: list[Any] = []
        self.calls: dict[Any, int] = {}
        self.samples: deque[Any] = deque()
        """Batches asked of the replay actor, oldest first (calls from one caller run in
        order, so the priority updates they carry land before any later call)."""
        self.resume_replay: dict[str, Any] | None = None
        self.replay_size = 0
        self.expected_size = 0
        """What replay holds once every send the actors reported has landed."""
        self.replay_lost = False
        self.priorities = LatePriorities.for_device(self._send_priorities, self.learner.device)
        """New priorities go back with the next request, one update late on a GPU."""
        self.restarts = 0
        """Actors Ray restarted (seen as a new process answering)."""
        self.failed_calls = 0
        self.pids: dict[int, int] = {}
        self.nodes: set[str] = set()
        """Ray nodes the actors ran on."""
        self.starts = 0
        self._replay_cpu: tuple[float, float] | None = None
        """The replay actor's CPU seconds and this process's clock at the last tick."""
        self._wait_s = self._learn_s = 0.0
        self._step = 0
        """The env steps of the last learn (the epsilon a publish carries)."""

    # --- start and stop -----------------------------------------------------------------------
    def _connect(self) -> None:
        ray, c = self.ray, self.cfg.ray
        if ray.is_initialized():  # a session the caller started (tests share one)
            return
        given = cluster_address(self.cfg)
        if given:
            try:
                join_cluster(ray, given[0])
            except Exception as e:  # gone since the pre-flight, or Ray says no
                line = str(e).strip().splitlines()[:1] or [type(e).__name__]
                raise ShoalError(
                    f"{given[1]} {given[0]!r}: could not join the Ray cluster there ({line[0]})"
                ) from e
        else:
            try:
                init_local_ray(
                    ray, num_cpus=c.num_cpus, node_ip_address=c.node_ip_address, temp_dir=c.temp_dir
                )
            except Exception as e:  # a daemon died as Ray started it (its start timed out)
                raise MachineryError(
                    f"the local Ray did not start ({first_line(e)}); nothing was kept: try again"
                ) from e
        self.started_ray = True

    # --- a lost node --------------------------------------------------------------------------
    def _node_lost(self) -> bool:
        """Whether the local Ray this run started has lost its node (its raylet exited, as
        it does when any of Ray's agents dies). To Python a dead node looks like dead actors
        (``ActorDiedError``, as for one killed actor, which Ray restarts); only the node's
        own processes tell them apart. On a cluster nodes come and go: never lost here."""
        if not self.started_ray:
            return False
        try:  # Ray's own record of the daemons it started (no public API says it)
            from ray._private import worker

            node = worker._global_node
            return node is not None and any(k == "raylet" for k, _ in node.dead_processes())
        except Exception:
            return False

    def _lost(self, error: BaseException) -> MachineryError:
        """The one line for a local node that died under the run; its replay went with it."""
        self.replay_lost = True
        return MachineryError(
            "the local Ray's node died under the run (its raylet exited; Ray said "
            f"{first_line(error)}); a run that had begun training keeps its learner in "
            "checkpoints/error.pt, one that had not left nothing: start it again"
        )

    @contextlib.contextmanager
    def _watching_node(self) -> Iterator[None]:
        """Ray's errors inside the block become :meth:`_lost`'s one line when the node is
        gone; any other error passes as it is."""
        try:
            yield
        except self.ray.exceptions.RayError as e:
            if self._node_lost():
                raise self._lost(e) from e
            raise

    def start(self) -> None:
        """Connect to Ray, start the replay, the weight server and the actors."""
        self._connect()
        with self._watching_node():
            self._start_actors()

    def _start_actors(self) -> None:
        from shoal.sync.ray_weights import RayWeightStore
        from shoal.sync.weight_server import WeightServer

        ray, c = self.ray, self.cfg.ray
        self.starts += 1
        tag = uuid.uuid4().hex[:12]
        replay = ray.remote(num_cpus=0)(ReplayActor).options(name=f"shoal-replay-{tag}")
        fields = self.recipe.replay_fields(self.cfg, self.spec)
        self.replay_actor = replay.remote(self.cfg, self.spec, fields)
        # The weight server's process starts beside the replay's (which imports torch, about
        # two seconds); the actors, which find both by name and pull weights as they start,
        # come after.
        server = ray.remote(num_cpus=0)(WeightServer).options(name=f"shoal-weights-{tag}")
        self.server = server.remote()
        self.store = RayWeightStore(self.server)
        if self.resume_replay is not None:
            ray.get(self.replay_actor.load_state_dict.remote(self.resume_replay))
        self._replay_cpu = None  # a new process: its load is measured from here
        self._replay_load()
        self.replay_size = self.expected_size = self._from_replay(self.replay_actor.size.remote())
        self._publish(0)
        self.store.flush()  # the actors' first pull finds these weights
        remote = ray.remote(num_cpus=c.actor_cpus, max_restarts=c.max_restarts)(self.actor_class)
        paths = search_path()
        self.actors = [
            remote.remote(self.cfg, i, c.actors, tag, self.starts, paths) for i in range(c.actors)
        ]
        for i in range(c.actors):
            self._call(i)

    def _call(self, i: int) -> None:
        call = self.actors[i].rollout.remote(self.cfg.ray.steps_per_call, *self.rollout_args())
        self.calls[call] = i

    def rollout_args(self) -> tuple[Any, ...]:
        """Arguments of every rollout call after the step count: what the tasks say of
        the next episodes (MAPF: the stages open now and their shares)."""
        return self.tasks.acting_args()

    def collected(self, got: dict[str, Any]) -> Collected:
        """What the loop hears of an actor call's answer: its finished episodes."""
        return self.tasks.collected(got["ended"], int(got["steps"]))

    def stop(self) -> None:
        """Kill every actor, the replay (its contents kept for the last checkpoint) and the
        weight server; shut a local Ray down."""
        ray = self.ray
        if not ray.is_initialized():
            return
        if self._node_lost():  # nothing to keep or kill: Ray ends a driver that tries
            self.replay_lost = True
            self.actors, self.replay_actor, self.server, self.calls = [], None, None, {}
        if self.replay_actor is not None and not self.replay_lost:
            try:  # the checkpoint after the stop keeps what replay held
                self.resume_replay = self._from_replay(self.replay_actor.state_dict.remote())
            except ReplayLostError:
                pass
        for handle in [*self.actors, self.replay_actor, self.server]:
            if handle is not None:
                ray.kill(handle)
        self.actors, self.replay_actor, self.server, self.calls = [], None, None, {}
        self.samples.clear()
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False

    # --- collection ---------------------------------------------------------------------------
    def collect(self, step: int) -> Collected:
        """The episodes of the next actor call to finish (its actor is sent on at once)."""
        with self._watching_node():
            return self._collect()

    def _answer(self) -> Any:
        """The next actor call to finish, looking every :data:`NODE_CHECK_S` whether the
        node is still there; one line after ``ray.timeout`` without an answer."""
        deadline = time.monotonic() + self.cfg.ray.timeout
        while True:
            left = deadline - time.monotonic()
            wait = max(0.0, min(NODE_CHECK_S, left))
            ready, _ = self.ray.wait(list(self.calls), num_returns=1, timeout=wait)
            if ready:
                return ready[0]
            if self._node_lost():
                raise self._lost(TimeoutError("no actor answered"))
            if left <= NODE_CHECK_S:
                raise ShoalError(f"no actor answered for {self.cfg.ray.timeout} s (ray.timeout)")

    def _collect(self) -> Collected:
        ray = self.ray
        ready = self._answer()
        i = self.calls.pop(ready)
        try:
            got = ray.get(ready)
        except ray.exceptions.RayTaskError:
            self._from_replay(self.replay_actor.size.remote())  # a lost replay says so
            raise
        except ray.exceptions.RayActorError as e:  # killed mid-call: Ray restarts it
            if self._node_lost():  # unless its node is gone, and the rest with it
                raise self._lost(e) from e
            self.failed_calls += 1
            if self.failed_calls > self.cfg.ray.max_restarts * self.cfg.ray.actors:
                raise ShoalError(f"ray actor calls failed {self.failed_calls} times: {e}") from e
            self._call(i)
            return Collected(0, [])
        self.nodes.add(got["node"])
        self.expected_size += int(got["sent"])
        if self.pids.setdefault(i, got["pid"]) != got["pid"]:  # a new incarnation
            self.pids[i] = got["pid"]
            self.restarts += 1
            print(  # Ray's own line about it names a worker id, not the run's actor
                f"shoal: ray actor {i} died and Ray restarted it (restarts in the run: "
                f"{self.restarts}; each actor at most ray.max_restarts = "
                f"{self.cfg.ray.max_restarts})",
                file=sys.stderr,
            )
        self._call(i)
        return self.collected(got)

    # --- learning -----------------------------------------------------------------------------
    def _from_replay(self, ref: Any) -> Any:
        """``ray.get`` of a replay call; a dead replay actor stops the run."""
        try:
            return self.ray.get(ref, timeout=self.cfg.ray.timeout)
        except self.ray.exceptions.RayActorError as e:
            if self._node_lost():
                raise self._lost(e) from e
            self.replay_lost = True
            raise ReplayLostError(
                "the replay actor died; the run stops. Its checkpoint keeps the learner; "
                "--resume continues with an empty replay"
            ) from e

    def _batch(self) -> dict[str, Any]:
        while len(self.samples) < self.cfg.ray.prefetch:
            self.samples.append(self.replay_actor.sample.remote(self.cfg.dqn.batch_size))
        ref = self.samples.popleft()
        t0 = time.perf_counter()
        # Idle is the wait for a batch not yet there; fetching one that is counts as work.
        self.ray.wait([ref], timeout=self.cfg.ray.timeout)
        self._wait_s += time.perf_counter() - t0
        batch = self._from_replay(ref)
        # Arrays from the object store are read-only; torch wants its own.
        return {name: np.array(a) for name, a in batch.items()}

    def _replay_ready(self, wait: bool = False) -> bool:
        """Whether replay holds :meth:`replay_need` items. Sends are asynchronous: replay
        may hold fewer items than the actors reported sending; ``wait`` waits (up to
        ``ray.timeout``) for those sends when they make enough."""
        need = self.replay_need()
        if self.replay_size < need:
            self.replay_size = self._from_replay(self.replay_actor.size.remote())
        deadline = time.monotonic() + self.cfg.ray.timeout
        while wait and self.replay_size < need <= self.expected_size:
            if time.monotonic() > deadline:
                raise ShoalError(
                    f"replay did not receive the actors' sends in {self.cfg.ray.timeout} s "
                    "(ray.timeout)"
                )
            time.sleep(0.01)
            self.replay_size = self._from_replay(self.replay_actor.size.remote())
        return self.replay_size >= need

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the update schedule owes for the env steps taken, each on a
        prefetched batch; new priorities go back, weights out every ``publish_every``."""
        # Replay serves once it holds a batch; the actors' sends are asynchronous, so once
        # they report a batch sent, wait for it to land: replay then holds what the env
        # steps collected, as the serial oracle's does, and owed updates before are
        # dropped by the one rule (UpdateSchedule.owe).
        self._step = step
        owed = self.schedule.owe(step, ready=lambda: self._replay_ready(wait=True))
        if not owed:
            return
        t0 = time.perf_counter()
        with self._watching_node():  # the weight server's calls too
            self.schedule.take(owed, lambda: self._apex_update(step))
        self._learn_s += time.perf_counter() - t0

    def learn_steps(self, steps: int) -> float:
        """``steps`` updates now, whatever the schedule owes (``shoal bench`` times them),
        once replay holds a batch; the last loss."""
        if not self._replay_ready():
            return float("nan")
        self.schedule.take(steps, lambda: self._apex_update(self._step))
        return self.loss

    def _apex_update(self, step: int) -> None:
        """One update on a prefetched batch; its priorities go back with the next request
        (one update later on a GPU, whose update is not waited for)."""
        batch = self._batch()
        pending = self.learner.update(self.learner.make_batch(batch))
        self.priorities.push((batch["indices"], batch["generations"]), pending.td_errors)
        self.loss = pending.loss
        if self.learner.updates % self.cfg.ray.publish_every == 0:
            self._publish(step)

    def _send_priorities(self, key: tuple[Any, Any], td_errors: np.ndarray) -> None:
        indices, generations = key
        self.samples.append(
            self.replay_actor.update_and_sample.remote(
                indices, generations, td_errors, self.cfg.dqn.batch_size
            )
        )

    def _publish(self, step: int) -> None:
        self.store.publish(self.learner.weights(), {"epsilon": self.epsilon(step)})

    # --- what the loop reads --------------------------------------------------------------------
    def eval_metrics(self) -> dict[str, float]:
        """Actor restarts, and what the evaluation and the tasks add."""
        return {"restarts": float(self.restarts), **super().eval_metrics()}

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples per second, restarts, the learner's idle fraction (waiting for a batch,
        of its time in learn) and the replay actor's CPU load (cores)."""
        idle = self._wait_s / self._learn_s if self._learn_s > 0 else 0.0
        self._wait_s = self._learn_s = 0.0
        return {
            **super().tick_metrics(updates_per_s),
            "restarts": float(self.restarts),
            "learner_idle": idle,
            "replay_cpu": self._replay_load(),
            "ray_nodes": float(len(self.nodes)),
        }

    def _replay_load(self) -> float:
        now = (self._from_replay(self.replay_actor.cpu_seconds.remote()), time.perf_counter())
        last, self._replay_cpu = self._replay_cpu, now
        if last is None:
            return 0.0
        return (now[0] - last[0]) / max(now[1] - last[1], 1e-9)

    # --- state ----------------------------------------------------------------------------------
    def replay_state(self) -> Any:
        """The replay actor's contents (None once it is lost; before the actor starts,
        what a resume handed over)."""
        if self.replay_lost:
            return None  # gone with its actor
        if self.replay_actor is not None:
            return self._from_replay(self.replay_actor.state_dict.remote())
        return self.resume_replay

    def load_replay_state(self, state: Any) -> None:
        """Kept until :meth:`start` loads it into the new replay actor."""
        self.resume_replay = state

    def state_is_whole(self) -> bool:
        """Not once the replay actor is lost (its contents went with it)."""
        return not self.replay_lost

    def state_dict(self) -> dict[str, Any]:
        """The learner, the replay actor's contents, the RNG states, the start count."""
        return {**super().state_dict(), "starts": self.starts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the learner now, the replay into the replay actor when it starts."""
        super().load_state_dict(state)
        self.starts = state["starts"]
