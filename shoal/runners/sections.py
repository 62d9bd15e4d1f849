"""The runners' own config sections (``[threads]``, ``[processes]``, ``[ray]``, ``[agents]``).

They live apart from the runners, in a module that imports neither torch nor a runner,
so that building a :class:`~shoal.config.Config` (which holds every registered section)
loads no runner: the registry names them as ``"module:Class"`` strings
(:data:`shoal.registry.SECTIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.config import MAX_COUNT, MAX_STEPS, param

__all__ = ["AgentsConfig", "ProcessesConfig", "RayConfig", "ThreadsConfig"]


@dataclass
class ThreadsConfig:
    """The threads runner: one acting thread and K learner threads on one network."""

    learner_threads: int = param(2, gt=0, le=4096)
    """Learner threads computing gradients in parallel under the read lock."""
    grad_accum_steps: int = param(1, gt=0, le=MAX_COUNT)
    """Micro-batches whose gradients a learner averages into one optimizer step."""
    sync_every: int = param(10, gt=0, le=MAX_STEPS)
    """Optimizer steps between copies of the weights into the acting thread's network."""
    max_lag: int = param(32, ge=0, le=MAX_STEPS)
    """Updates the learners may fall behind the schedule (gradient_steps every train_freq
    env steps) before acting waits; 0 is lockstep, which reproduces the serial runner."""
    lock_timeout: float = param(60.0, gt=0.0, le=86400.0)
    """Seconds a thread waits for the read/write lock before failing the run."""


@dataclass
class ProcessesConfig:
    """The processes runner: rollout worker processes feeding one central learner."""

    workers: int = param(0, ge=0, le=MAX_COUNT)
    """Rollout worker processes (0: cpu_count() - 2, at least 1)."""
    episodes_per_batch: int = param(4, gt=0, le=MAX_COUNT)
    """Whole episodes each of a worker's envs contributes to one learner batch (a worker
    with env.num_envs envs gives that many times more): the batches, and the weight
    publishes after them, keep their size in env steps whatever the envs per worker."""
    learning_steps_per_batch: int = param(0, ge=0, le=MAX_STEPS)
    """Gradient steps per collected batch (0: as many as the serial runner would take for
    the env steps collected: the update schedule's)."""
    learner_threads: int = param(0, ge=0, le=4096)
    """torch threads of the learner's process (0: run.torch_threads). Workers take one
    thread each and leave most of a core idle when the learner is the bottleneck: a
    learner-bound run on few cores gains from giving it those cores."""
    publish_every: int = param(32, ge=0, le=MAX_STEPS)
    """Updates between weight publishes within a batch's learning, each also taking in what
    workers sent meanwhile (0: publish and take in only after the batch): the workers'
    weights stay this many updates behind at most, and they never wait out a long batch."""
    max_ahead: int = param(4, gt=0, le=MAX_COUNT)
    """Messages (each ``env.num_envs`` episodes or more) a worker may have sent that the
    learner has not taken in; beyond them it waits. This bounds how old the weights behind
    the learner's new episodes are, and how late a change of the tasks (MAPF's stages)
    reaches them, whatever an observation's size (a pipe's buffer alone let a 2-core
    CartPole run take in episodes played ~1,500 updates earlier)."""
    worker_timeout: float = param(60.0, gt=0.0, le=86400.0)
    """Seconds a worker may stay silent before it is killed and restarted."""
    max_episodes: int = param(0, ge=0, le=MAX_STEPS)
    """Stop after this many episodes (0: no limit; run.total_steps still applies)."""


@dataclass
class RayConfig:
    """The ray runner: Ape-X actors, a replay actor and one learner on Ray."""

    actors: int = param(2, gt=0, le=MAX_COUNT)
    """Actor actors playing the env (``--workers``)."""
    address: str | None = None
    """A running Ray cluster to join (HOST:PORT); none: start a local Ray for the run
    (``RAY_ADDRESS`` is read too)."""
    num_cpus: int | None = param(None, gt=0, le=MAX_COUNT)
    """CPUs of the local Ray (none: the machine's)."""
    actor_cpus: float = param(0.5, gt=0.0, le=4096.0)
    """CPUs each actor asks Ray for (fractions let actors outnumber cores; at most 4096, more
    than any one node has)."""
    node_ip_address: str | None = None
    """The local Ray's node address (tests: a loopback address such as 127.0.0.2)."""
    temp_dir: str | None = None
    """The local Ray's directory for sockets and logs (none: Ray's default)."""
    steps_per_call: int = param(250, gt=0, le=MAX_STEPS)
    """Steps each of an actor's envs plays per call (the driver hears of finished episodes
    then; a call costs a round trip and a send: at 100 steps they added ~5% to an actor's
    time). Per env, so a call keeps its share of an actor's time whatever env.num_envs."""
    publish_every: int = param(10, gt=0, le=MAX_STEPS)
    """Learner updates between weight publishes."""
    pull_every: int = param(100, gt=0, le=MAX_STEPS)
    """Steps of each env between an actor's checks for newer weights (a check is a remote
    call: per env, its cost per env step stays put whatever env.num_envs)."""
    max_inflight: int = param(2, gt=0, le=MAX_COUNT)
    """Sends to replay (each holding the episodes one call finished) an actor may have
    unanswered."""
    prefetch: int = param(8, gt=0, le=MAX_COUNT)
    """Batches the learner has asked the replay actor for ahead of use (on 2 cores shared
    with 2 actors, with Ray's default worker niceness: 2 left the learner waiting about 20%
    of its time in learn, 8 about 7%)."""
    actor_nice: int = param(19, ge=0, le=19)
    """Niceness of the actors' processes (never below Ray's for its workers): on a node
    they share with the learner and the replay actor, actors yield the CPU to those two."""
    max_restarts: int = param(3, ge=0, le=MAX_STEPS)
    """Restarts Ray grants each actor (an actor killed mid-run comes back this often)."""
    timeout: float = param(120.0, gt=0.0, le=86400.0)
    """Seconds the driver waits for any actor or the replay before failing the run."""


@dataclass
class AgentsConfig:
    """The agents runner: K independent learners in one multi-agent world."""

    agents: int = param(8, gt=0, le=MAX_COUNT)
    """Agents in the world (K); shoal/Harvest-v0 is built with this many."""
    max_turns: int = param(1000, gt=0, le=MAX_STEPS)
    """Turns per epoch (episode) at most."""
    parallel_actions: bool = True
    """One batched forward picks all K actions (else one forward per agent)."""
    parallel_training: bool = True
    """One stacked update trains all K agents (else one update per agent in a loop)."""
    async_learning: bool = False
    """A background thread trains while the caller's thread keeps collecting."""
    train_interval: int = param(1, gt=0, le=MAX_STEPS)
    """Epochs between training phases."""
    async_mode: str = param("process", choices=("process", "thread"))
    """Async: 'process' plays epochs in a collector process while the caller's thread
    trains (the two never share the GIL); 'thread' trains in a thread beside the caller's
    collecting thread (they take turns on the GIL)."""
    copy_on_train: bool = False
    """Async thread: each phase trains on a copy of the buffers taken when it starts
    (collection never waits for the buffer locks; the copy's priority updates are dropped)."""
    step_timeout: float = param(60.0, gt=0.0, le=86400.0)
    """Seconds the caller waits for the learning thread or an epoch from the collector
    process before the run fails as hung."""
    reward: str = param("own", choices=("own", "team"))
    """What each agent learns from: 'own', its own reward; 'team', the sum of every
    agent's reward that turn, given to each (the cooperative tasks' common reward, as
    EPyMARL trains). Episode rows carry each agent's own return and their sum either way."""
    share: bool = False
    """One network, target and optimizer for all agents (parameter sharing: each agent's
    observation begins with its one-hot id, and every round trains on a batch from each
    agent's own buffer at once); false: each agent its own (independent learners)."""
