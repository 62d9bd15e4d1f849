"""The acting component: an actor's batch of envs, its exploration and the writer that turns
their steps into replay items, as every runner plays them.

The serial runner, the threads runner's acting thread, each rollout worker process and
each Ray actor wrap one :class:`Acting` (the contract, declared here; ``tests/test_layout.py``
keeps runners to it) and differ only in where its items go and when its actor pulls
weights. :class:`TransitionActing`, the one most recipes make, holds:

- a :class:`~shoal.agent.batch_actor.BatchActor` (one batched forward and one vector step
  for all envs, per-env episodes and seeds, exactly re-playable checkpoints);
- the exploration of its envs: each env's epsilon from one base value, Ape-X's spread over
  every env of the run (:func:`spread_epsilons`; env ``i`` of this acting is env
  ``first + i`` of ``total``), set from the schedule or from the metadata published with
  newer weights (:meth:`Acting.pull`);
- one :class:`~shoal.agent.writers.Writer`, named by the request and built with the
  acting (:data:`WRITERS`): ``"stream"`` (an n-step window per env, transitions as their
  windows close: the serial runner's replay takes them at once) or ``"episodes"`` (each
  env's episode kept whole, its n-step transitions made when it ends: an actor that dies
  mid-episode sends none of it). Either way a runner has one :meth:`Acting.take`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from shoal.agent.batch_actor import BatchActor, Steps
from shoal.agent.episodes import EpisodeRecorder
from shoal.agent.schedules import actor_epsilon
from shoal.agent.writers import NStepStream, Taken, Writer

__all__ = [
    "ACTING_MEMBERS",
    "WRITERS",
    "Acting",
    "ActingRequest",
    "BatchActing",
    "Pulling",
    "Taken",
    "TransitionActing",
    "make_writer",
    "spread_epsilons",
]

WRITERS: dict[str, Callable[[int, int, float, bool], Writer]] = {
    "stream": lambda num_envs, n, gamma, hybrid: NStepStream(num_envs, n, gamma),
    "episodes": EpisodeRecorder,
}
"""The writers an :class:`ActingRequest` names, each built from (envs, n-step horizon,
discount, hybrid actions): how an acting's steps become replay items (see the module
docstring)."""


def make_writer(name: str, num_envs: int, n: int, gamma: float, hybrid: bool) -> Writer:
    """The writer ``name`` (of :data:`WRITERS`) for ``num_envs`` envs: chosen here, once,
    as the acting is built, so the acting holds one writer and branches on none."""
    if name not in WRITERS:
        raise ValueError(f"writer {name!r} is not one of {tuple(WRITERS)}")
    return WRITERS[name](num_envs, n, gamma, hybrid)


def spread_epsilons(base: float, first: int, total: int, alpha: float, n: int) -> np.ndarray:
    """Ape-X's exploration of envs ``first .. first + n - 1`` of ``total``: env ``j``
    explores at ``base ** (1 + alpha * j / (total - 1))`` (alpha 0: every env at ``base``)."""
    return np.array([actor_epsilon(base, first + i, total, alpha) for i in range(n)])


@dataclass(frozen=True)
class ActingRequest:
    """Everything a runner hands a recipe's ``make_acting``, in one record; the acting
    takes it whole, and a recipe refuses in its ``check`` what its acting cannot honour."""

    seeds: tuple[int, ...]
    """The seed path of the acting's episodes."""
    env_seed: int
    """The env engine's own seed."""
    rng: np.random.Generator
    """The acting's exploration draws (shared with its actor)."""
    writer: Literal["stream", "episodes"] = "stream"
    """``"stream"``: items as they complete (serial); ``"episodes"``: whole episodes, sent
    once they end (workers, actors)."""
    place: tuple[int, int] = (0, 1)
    """(index, count) of this acting among the run's, for Ape-X's spread."""
    spread: float = 0.0
    """The exponent of Ape-X's epsilon spread over every env of the run (``explore.spread``
    as the run resolved it; 0: every env at the base epsilon)."""
    on_reset: Callable[[int, Any], dict[str, float]] | None = None
    """Called before each episode begins (self-play loads its opponent there)."""


@runtime_checkable
class Acting(Protocol):
    """What every runner asks of an acting (a recipe's :meth:`make_acting`): one
    collection point's envs or worlds, their exploration and the writer of their items.

    ``step`` returns the collection it made: ``count`` env steps and the episodes
    ``finished`` (each as the recipe's tasks read them)."""

    since_pull: int
    """Env steps since the actor last looked for newer weights."""

    @property
    def num_envs(self) -> int:
        """Envs (or worlds) stepped side by side."""
        ...

    @property
    def ended(self) -> int:
        """Episodes ended and not yet taken (:meth:`take`)."""
        ...

    @property
    def in_progress(self) -> int:
        """Env steps of the episodes still running."""
        ...

    def explore(self, base: float) -> None:
        """Set each env's epsilon from ``base`` (Ape-X's spread as the acting was placed)."""
        ...

    def pull(self) -> bool:
        """Pull newer weights, if any (and explore at the epsilon published with them)."""
        ...

    def configure(self, *tasks: Any) -> None:
        """What the recipe's tasks say of the next episodes (MAPF: the stages open)."""
        ...

    def step(self) -> Any:
        """One step of every env: its ``count`` of env steps and the episodes ``finished``."""
        ...

    def play(self, steps: int, pull_every: int) -> int:
        """At least ``steps`` env steps, newer weights every ``pull_every``; steps taken."""
        ...

    def take(self) -> Taken:
        """Items ready since the last take, their priorities, and the episodes ended since
        then with their env steps (see :class:`~shoal.agent.writers.Taken`)."""
        ...

    def flush(self) -> Taken:
        """End every running episode as a truncation; the items that closes."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the running episodes."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> Taken:
        """Restore; items of episodes that cannot be re-created end here."""
        ...

    def close(self) -> None:
        """Release the envs; safe to call twice."""
        ...


ACTING_MEMBERS: tuple[str, ...] = (
    *(name for name in Acting.__dict__ if not name.startswith("_")),
    "since_pull",
)
"""Every member :class:`Acting` declares."""


class Pulling:
    """What every acting does with its actor's weight source: pull newer weights, and
    explore at the epsilon published with them (:meth:`explore` spreads it)."""

    actor: Any
    since_pull: int

    def explore(self, base: float) -> None:  # pragma: no cover - each acting has its own
        """Set each env's epsilon from ``base``."""
        raise NotImplementedError

    def pull(self) -> bool:
        """Pull newer weights, if any, and explore at the epsilon published with them."""
        self.since_pull = 0
        if not self.actor.update():
            return False
        if "epsilon" in self.actor.meta:
            self.explore(self.actor.meta["epsilon"])
        return True


class BatchActing(Pulling):
    """An actor's batch of envs and their exploration, without a writer: what every acting
    that steps a :class:`~shoal.agent.batch_actor.BatchActor` shares (:class:`Acting`
    writes transitions, :class:`~shoal.agent.sequence_acting.SequenceActing` sequences).

    Args:
        actor: picks the actions; its weights are its own or pulled from a source.
        envs: the batch of envs.
        request: the runner's :class:`ActingRequest` (the episodes' seeds, this acting's
            place among the run's and the spread's exponent, the reset hook).
    """

    def __init__(self, actor: Any, envs: Any, request: ActingRequest) -> None:
        self.actor = actor
        self.batch = BatchActor(actor, envs, request.seeds, on_reset=request.on_reset)
        """The envs and their running episodes."""
        n = self.batch.num_envs
        self.first, self.total = request.place[0] * n, request.place[1] * n
        self.alpha = request.spread
        self.since_pull = 0
        """Env steps since the actor last looked for newer weights."""

    @property
    def num_envs(self) -> int:
        """Envs in the batch."""
        return self.batch.num_envs

    def explore(self, base: float) -> None:
        """Set every env's epsilon from ``base`` (spread as the acting was placed)."""
        if self.alpha == 0:  # the serial runner's case, every step: no spread to compute
            self.batch.epsilons[:] = base
            return
        self.batch.epsilons[:] = spread_epsilons(
            base, self.first, self.total, self.alpha, self.num_envs
        )

    def configure(self, *args: Any) -> None:
        """What the tasks say of the next episodes (plain envs: nothing)."""

    def step(self) -> Steps:  # pragma: no cover - each acting writes its own way
        """One batched forward and one step of every env, through the writer."""
        raise NotImplementedError

    def play(self, steps: int, pull_every: int) -> int:
        """Step until at least ``steps`` env steps are taken, pulling newer weights every
        ``pull_every`` env steps; the env steps taken."""
        taken = 0
        while taken < steps:
            if self.since_pull >= pull_every:
                self.pull()
            taken += self.step().count
        return taken

    @property
    def in_progress(self) -> int:
        """Env steps of the episodes still running."""
        return int(self.batch.lengths.sum())

    def load_episodes(self, state: dict[str, Any]) -> bool:
        """Restore the envs' episodes from a checkpoint's entries; False if the running
        ones cannot be re-created (they end here). A checkpoint from before batching,
        taken between episodes, holds only the reset count."""
        if "acting" not in state:
            self.batch.episodes[0] = int(state["resets"])
            return True
        return self.batch.load_state_dict(state["acting"])

    def close(self) -> None:
        """Close the envs."""
        self.batch.close()


class TransitionActing(BatchActing):
    """:class:`BatchActing`'s envs, their steps written as n-step transitions (horizon
    ``n_step``, discount ``gamma``; ``hybrid``: ``(discrete, continuous)`` actions) by the
    one writer the request names (:func:`make_writer`)."""

    def __init__(
        self,
        actor: Any,
        envs: Any,
        request: ActingRequest,
        *,
        n_step: int,
        gamma: float,
        hybrid: bool = False,
    ) -> None:
        super().__init__(actor, envs, request)
        self.writer = make_writer(request.writer, self.num_envs, n_step, gamma, hybrid)

    def step(self) -> Steps:
        """One batched forward and one step of every env, through the writer."""
        got = self.batch.step()
        self.writer.write(got)
        self.since_pull += got.count
        return got

    @property
    def ended(self) -> int:
        """Episodes ended and not yet taken."""
        return self.writer.ended

    def take(self) -> Taken:
        """What the writer has ready (see :meth:`Acting.take`)."""
        return self.writer.take()

    def flush(self) -> Taken:
        """End every running episode here (the writer's, then the envs'); what that gives."""
        taken = self.writer.flush()
        self.batch.cut()
        return taken

    def state_dict(self) -> dict[str, Any]:
        """The envs' episodes (``acting``) and the writer's open windows (``nstep``)."""
        return {"acting": self.batch.state_dict(), "nstep": self.writer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> Taken:
        """Restore; episodes that cannot be re-created end here (their items returned)."""
        self.writer.load_state_dict(state.get("nstep"))  # none before batching
        return Taken({}) if self.load_episodes(state) else self.writer.flush()
