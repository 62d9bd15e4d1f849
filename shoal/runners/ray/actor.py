"""One Ape-X actor of the ray runner: ``env.num_envs`` envs stepped with one batched forward
of an inference-only network, and their running episodes.

It plays, pulls newer weights every ``ray.pull_every`` steps of each env, and at the end
of each call sends the n-step transitions of the episodes it finished to the replay actor with
their initial priorities (the TD errors under its own weights,
:func:`~shoal.agent.priorities.initial_priorities`), one forward and one send for all of
them: a remote call costs about a millisecond, as much as a few short episodes' steps. An
episode goes to replay whole or not at all: an actor killed mid-episode loses only that
episode (and the others finished in that call). At most ``ray.max_inflight`` sends are
unanswered at a time (backpressure: a slow replay slows its actors instead of growing a
queue). A plain class: the runner makes it a Ray actor.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from shoal.agent.acting import ActingRequest
from shoal.config import Config
from shoal.recipes.contract import ActorWeights
from shoal.registry import recipe_for
from shoal.run.imports import DriverPath
from shoal.run.seeding import SeedStream, derive_seed

__all__ = ["RolloutActor"]


class RolloutActor:
    """Plays ``cfg.env`` for the ray runner.

    Args:
        cfg: the run's config.
        index: this actor's number (0 explores most).
        actors: how many actors the run has.
        tag: the run's tag: the replay actor is ``shoal-replay-TAG``, the weight server
            ``shoal-weights-TAG``.
        start: the run's start count (a resumed run draws seeds its first start did not).
        driver: the driver's module search path and directory (adopted, so the user's
            code the config names imports here and relative paths mean the same).
    """

    def __init__(
        self,
        cfg: Config,
        index: int,
        actors: int,
        tag: str,
        start: int,
        driver: DriverPath | None = None,
    ) -> None:
        import ray

        from shoal.sync.ray_weights import RayWeightStore

        if driver is not None:
            driver.adopt()

        torch.set_num_threads(1)
        os.nice(max(0, cfg.ray.actor_nice - os.nice(0)))  # raising niceness needs no rights
        # The replay and weight server are found by name: handles passed as constructor
        # arguments can be lost to a restart (ray-project/ray#53727).
        store = RayWeightStore(ray.get_actor(f"shoal-weights-{tag}"), poll=True)
        replay = ray.get_actor(f"shoal-replay-{tag}")
        self.cfg, self.index, self.actors = cfg, index, actors
        self.seeds: tuple[int, ...] = (cfg.run.seed, SeedStream.ACTOR, index, start)
        if ray.get_runtime_context().was_current_actor_reconstructed:
            # A restart must not replay its first life's episodes and exploration draws.
            self.seeds += (os.getpid(),)
        self.replay = replay
        self.node = ray.get_runtime_context().get_node_id()
        self.inflight: list[Any] = []
        self.sent = 0
        """Items sent to replay since the last call's answer (:meth:`answer`)."""
        self.setup(store)
        self._pull()

    def setup(self, store: Any) -> None:
        """The recipe's actor, pulling its weights from ``store``, and its acting: Ape-X,
        each env of each actor at its own epsilon (``explore.spread``), each env's episode
        sent whole with those finished in the same call (MAPF: its worlds' sequences)."""
        self.recipe = recipe_for(self.cfg)
        self.spec = self.recipe.probe(self.cfg)
        rng = np.random.default_rng(derive_seed(*self.seeds))
        self.actor = self.recipe.make_actor(self.cfg, self.spec, rng, ActorWeights(source=store))
        request = ActingRequest(
            seeds=(*self.seeds, 1),
            env_seed=derive_seed(*self.seeds, 2),
            rng=rng,
            writer="episodes",
            place=(self.index, self.actors),
            spread=self.cfg.explore.spread_for(self.cfg),
        )
        self.acting = self.recipe.make_acting(self.cfg, self.spec, self.actor, request)

    def _pull(self) -> None:
        self.acting.pull()

    def rollout(self, steps: int, *tasks: Any) -> dict[str, Any]:
        """Play at least ``steps`` env steps in each of the actor's envs (episodes go on
        into the next call), the next episodes as ``tasks`` say (MAPF: the curriculum's
        stages); send what is ready with its initial priorities. Returns the episodes
        finished, the env steps they (MAPF: the call) took, the steps of those in
        progress, the weights version acted with, and where it ran (process, node)."""
        self.acting.configure(*tasks)
        n = self.acting.num_envs if self.recipe.traits.batches_envs else 1
        self.acting.play(steps * n, pull_every=self.cfg.ray.pull_every * n)
        sent = self.acting.take()
        if sent.items:
            priorities = sent.priorities
            if priorities is None:
                priorities = self.recipe.initial_priorities(self.cfg, self.actor, sent.items)
            self.send(sent.items, priorities)
        return self.answer(ended=sent.ended, steps=sent.steps, in_progress=self.acting.in_progress)

    def answer(self, **fields: Any) -> dict[str, Any]:
        """A call's answer: ``fields`` plus the weights version acted with, where it ran
        (process, node) and how many items it sent to replay (the driver knows from them
        what replay holds once the sends land)."""
        sent, self.sent = self.sent, 0
        return {
            **fields,
            "version": self.actor.version,
            "pid": os.getpid(),
            "node": self.node,
            "sent": sent,
        }

    def send(self, batch: dict[str, np.ndarray], priorities: np.ndarray) -> None:
        """Send items (one array per field) with their initial priorities to replay,
        waiting first while ``ray.max_inflight`` sends are unanswered."""
        import ray

        while len(self.inflight) >= self.cfg.ray.max_inflight:
            done, self.inflight = ray.wait(self.inflight, num_returns=1)
            ray.get(done)  # a failed send fails this call, with the replay's error
        self.inflight.append(self.replay.add_batch.remote(batch, priorities))
        self.sent += len(priorities)

    def pid(self) -> int:
        """This actor's process id (tests kill it)."""
        return os.getpid()

    def flush(self) -> int:
        """Wait for every send still unanswered; returns how many there were."""
        import ray

        count = len(self.inflight)
        ray.get(self.inflight)
        self.inflight = []
        return count
