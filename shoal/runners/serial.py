"""The serial runner: collect, store and learn in one loop. The oracle for every other runner.

Each step: pick epsilon-greedy actions for the actor's ``env.num_envs`` envs with one
batched forward, step them, push each env's transition through its own n-step writer into
replay, and take the updates the update schedule owes for the env steps taken
(``gradient_steps`` every ``train_freq`` steps).

Every reset is seeded from (run seed, episode index, env index), and a checkpoint holds
each env's actions since its episode began, so a resumed run re-creates the running
episodes and continues exactly as the uninterrupted run would (sync engine); so does a run
that ended and is extended. A run cut by Ctrl-C or an error ends its episodes as truncated,
so their transitions still bootstrap correctly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.agent.acting import ActingRequest, Taken
from shoal.agent.acting_copy import ActingCopy, pick_acting_device
from shoal.agent.actor import Actor
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.recipes.contract import ActorWeights
from shoal.run.runner import Collected
from shoal.run.seeding import SeedStream, derive_seed
from shoal.runners.dqn import DQNRunner

__all__ = ["SerialRunner"]


class SerialRunner(DQNRunner):
    """Collect, store and learn in one loop in the calling thread (the oracle).

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.total_steps=500", "run.progress=false"])
        >>> runner = SerialRunner(cfg)
        >>> runner.collect(0).steps
        1
    """

    acting_copy: ActingCopy | None = None
    """The actor's copy of the weights, where it acts on one (``run.acting_device``)."""

    def __init__(self, cfg: Config, spec: EnvSpec | None = None) -> None:
        super().__init__(cfg, spec)
        self.rng = np.random.default_rng(derive_seed(cfg.run.seed, SeedStream.ACTION))
        self.actor = self.make_actor()
        request = ActingRequest(
            seeds=(cfg.run.seed, SeedStream.TRAIN),
            env_seed=derive_seed(cfg.run.seed, SeedStream.TRAIN),
            rng=self.rng,
            spread=cfg.explore.spread_for(cfg),
        )
        self.acting = self.recipe.make_acting(cfg, self.spec, self.actor, request)
        """The recipe's acting: the actor's envs (MAPF: worlds), their episodes and a
        writer per env (steps of different envs never share a window)."""
        self.acting.configure(*self.tasks.acting_args())

    def eval_actor(self) -> Actor:
        """Evaluations play the behaviour actor's weights (serial: the learner's own, or
        a copy refreshed first)."""
        if self.acting_copy is not None:
            self.acting_copy.refresh(self.learner.updates)
        return self.actor

    def make_actor(self) -> Actor:
        """The behaviour policy: acting on the learner's own live weights, or, beside a
        learner on a GPU, on a copy of them (``run.acting_device``)."""
        where, why = self._acting_device()
        learner = self.learner
        weights = ActorWeights(learner.params, network=learner.online, device=learner.device)
        if where != "learner":
            copy = ActingCopy(learner.params, where, self.cfg.run.acting_refresh)
            self.acting_copy, self.update_line = copy, f"{self.update_line}; acting {where}"
            network = self.recipe.make_network(self.cfg, self.spec).to(where)
            weights = ActorWeights(copy.params, network=network, device=copy.device)
        self.acting_why = why
        """Why acting runs where it does (the run's first line names where)."""
        return self.recipe.make_actor(self.cfg, self.spec, self.rng, weights)

    def _acting_device(self) -> tuple[str, str]:
        cfg, learner = self.cfg, self.learner
        obs = np.zeros((cfg.env.num_envs, self.spec.obs_dim), np.float32)
        return pick_acting_device(
            cfg.run.acting_device, learner.device, learner.online, learner.params, obs
        )

    def collect(self, step: int) -> Collected:
        """One step of every env with the epsilon of ``step``; the items it completes (n-step
        transitions, MAPF's sequences) go to replay."""
        self.acting.explore(self.epsilon(step))
        if self.acting_copy is None:
            got = self.acting.step()
        else:
            with self.acting_copy.acting():
                got = self.acting.step()
        self.add_taken(self.acting.take())
        collected = self.tasks.collected(got.finished, got.count, side_by_side=True)
        if got.finished:  # the tasks change only as episodes end (MAPF: a stage opens)
            self.acting.configure(*self.tasks.acting_args())
        return collected

    def add_taken(self, taken: Taken) -> None:
        """The items an acting gave, with their priorities, to replay (the episodes it
        counts are the tasks', from each step)."""
        self.add_batch(taken.items, taken.priorities)

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the schedule owes (``gradient_steps`` every ``train_freq`` env steps
        once learning starts)."""
        owed = self.schedule.owe(step, ready=self.replay_ready)
        if owed:
            self.on_train_point(owed)

    def on_train_point(self, updates: int) -> None:
        """``updates`` are due (serial: take them here and now); an actor on a copy of the
        weights gets them every ``run.acting_refresh`` updates."""
        self.loss = self.learn_steps(updates)
        if self.acting_copy is not None and self.acting_copy.due(self.learner.updates):
            self.acting_copy.refresh(self.learner.updates)

    def finish(self) -> None:
        """DQN: nothing to flush, the final checkpoint keeps the running episodes and their
        open n-step windows, so a run extended with ``--resume`` continues them exactly;
        a recipe that cannot re-create its episodes (MAPF) flushes them to replay."""
        if self.recipe.traits.flush_on_finish:
            self.add_taken(self.acting.flush())

    def interrupt(self) -> None:
        """A cut mid-episode is a truncation: pending n-step transitions bootstrap from
        the last observation, and a resumed run starts the next episodes (next seeds)."""
        self.add_taken(self.acting.flush())

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples/s, and what the tasks add (MAPF: replay size, the curriculum's stages)."""
        return {
            **super().tick_metrics(updates_per_s),
            **self.tasks.tick_metrics(len(self.replay)),
        }

    def close(self) -> None:
        """Close the actor's envs and the evaluation envs."""
        self.acting.close()
        super().close()

    def state_dict(self) -> dict[str, Any]:
        """The base state plus exploration draws, the envs' episodes and the open n-step
        windows."""
        state = super().state_dict()
        state["rng"]["actions"] = self.rng.bit_generator.state
        state.update(self.acting.state_dict())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (a checkpoint from before batching, taken
        between episodes, holds only the reset count)."""
        super().load_state_dict(state)
        if self.acting_copy is not None:
            self.acting_copy.refresh(self.learner.updates)
        self.acting.configure(*self.tasks.acting_args())  # a resumed curriculum's stages
        self.rng.bit_generator.state = state["rng"]["actions"]
        self.add_taken(self.acting.load_state_dict(state))  # episodes that end here
