"""What every DQN runner keeps whatever its transport: the learner, the replay buffer, the
exploration schedule, the learning step, the tasks and the evaluation.

Every part comes from the config's recipe (:mod:`shoal.recipes`): the runner moves
experience and schedules learning, and never asks what kind of agent it trains. A domain
with its own parts (MAPF: sequences, a curriculum, held-out instances) is a recipe, not a
runner subclass. Runners ask the recipe only what :class:`~shoal.recipes.contract.Recipe`
declares, through :attr:`DQNRunner.recipe`; only :meth:`DQNRunner.check` (before a runner
is built) and :meth:`DQNRunner.evaluate_checkpoint` (none is built) look the recipe up
themselves. :meth:`DQNRunner.make_replay` stays a hook for a runner with no replay in the
driver (ray); :meth:`~shoal.run.runner.Runner.compile_mode` is one for a runner whose
updates cannot be captured (threads).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import build_augment, build_epsilon, build_replay
from shoal.agent.late_priorities import LatePriorities
from shoal.agent.learner import Learner
from shoal.agent.update_steps import UpdateSteps
from shoal.config import Config
from shoal.envs import EnvSpec
from shoal.errors import ConfigError
from shoal.registry import recipe_for
from shoal.run.runner import Runner
from shoal.run.schedule import replay_minimum

__all__ = ["DQNRunner"]


class DQNRunner(Runner):
    """Base of the DQN runners: builds the learner, replay and exploration from the config
    and takes gradient steps on replay samples."""

    # --- hooks that build the parts ---------------------------------------------------------
    @classmethod
    def check(cls, cfg: Config) -> EnvSpec:
        """The recipe's checks of the env and its parts, before any work; the env's spec it
        probed, which the runner is then built with (the env is made once)."""
        recipe = recipe_for(cfg)
        spec = recipe.probe(cfg)
        recipe.check(cfg, spec)
        return spec

    def make_learner(self) -> Learner:
        """The recipe's learner, its weights initialised from the run seed (the one place
        they are seeded), its updates run as ``run.compile`` says."""
        cfg = self.cfg
        torch.manual_seed(cfg.run.seed)
        learner = self.recipe.make_learner(cfg, self.spec)
        if not isinstance(learner, UpdateSteps):  # the runners call update(), not step()
            raise ConfigError(
                f"config key 'run.recipe': {cfg.run.recipe!r} makes a learner of type "
                f"{type(learner).__name__}, not a shoal.agent.learner.Learner; build it as "
                "Learner(network, loss, cfg.dqn) (or a subclass) with your own loss"
            )
        learner.augment = build_augment(cfg, self.spec, learner)
        learner.set_compile(self.compile_mode())
        return learner

    def make_replay(self) -> Any:
        """The driver's replay buffer of the recipe's items (None where replay lives
        elsewhere)."""
        return build_replay(self.cfg, self.spec, self.recipe.replay_fields(self.cfg, self.spec))

    @classmethod
    def evaluate_checkpoint(
        cls, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Greedy returns of the checkpoint's weights, as the recipe plays them."""
        return recipe_for(cfg).evaluate_checkpoint(cfg, state, episodes, seed, run_dir)

    def __init__(self, cfg: Config, spec: EnvSpec | None = None) -> None:
        super().__init__(cfg)
        self.recipe = recipe_for(cfg)
        """The agent's recipe: what its parts are (the runner only moves them)."""
        self.spec = self.recipe.probe(cfg) if spec is None else spec
        """The env's spec: :meth:`check`'s, handed on by the caller that ran it."""
        self.learner = self.make_learner()
        self.replay: Any = self.make_replay()
        _check_memory(cfg, self._replay_bytes())
        self.update_line = self.learner.update_line
        self.priorities = LatePriorities.for_device(self._set_priorities, self.learner.device)
        """New priorities one update late on a GPU (no wait on the host), at once on a CPU."""
        self._prefetch = self.learner.device.type == "cuda"
        self._next: tuple[Any, Any] | None = None
        self.exploration = build_epsilon(cfg)
        """Exploration epsilon as a function of env steps."""
        self.tasks = self.recipe.make_tasks(cfg)
        """The learner's side of the episodes: what actings play next, episode rows."""
        self.evaluator = self.recipe.make_evaluator(cfg)

    @property
    def updates(self) -> int:
        """Optimizer steps taken so far."""
        return self.learner.updates

    def epsilon(self, step: int) -> float:
        """The exploration schedule's epsilon at env step ``step``."""
        return self.exploration(step)

    def add_batch(self, items: dict[str, Any], priorities: np.ndarray | None = None) -> None:
        """Add items given as one array per field (none: nothing to add), with their
        initial priorities where the acting computed them and replay is prioritized."""
        if items:
            prioritized = priorities is not None and self.cfg.replay.prioritized
            self.replay.add_batch(items, priorities if prioritized else None)

    def replay_need(self) -> int:
        """Items replay holds before it serves an update: the recipe's minimum (one item:
        none before, n-step windows still open at learning_starts < n_step; R2D2, MAPF: a
        batch of sequences), whichever runner holds the replay."""
        return replay_minimum(self.recipe.traits.serves_after, self.cfg.dqn.batch_size)

    def replay_ready(self) -> bool:
        """Whether replay holds :meth:`replay_need` items."""
        return len(self.replay) >= self.replay_need()

    def learn_steps(self, steps: int) -> Any:
        """``steps`` gradient steps on replay samples, with priority updates; returns the
        last loss (a device tensor, read at log ticks). Steps a failure or Ctrl-C cut off go
        back to the schedule."""
        if not self.replay_ready():  # owed ones are dropped
            return float("nan")
        loss = self.schedule.take(steps, self._learn_step)
        return float("nan") if loss is None else loss

    def _learn_step(self) -> Any:
        """One gradient step on a replay sample, with priority updates; its loss, still on
        the device. On a GPU the next batch is sampled and sent while this update runs."""
        indices, batch = self._next or self._sample_batch()
        self._next = None
        pending = self.learner.update(batch)
        if self.cfg.replay.prioritized:  # uniform replay: nothing to copy back, ever
            self.priorities.push(indices, pending.td_errors)
        if self._prefetch:
            self._next = self._sample_batch()
        return pending.loss

    def _sample_batch(self) -> tuple[Any, Any]:
        """A replay sample's indices and its batch on the learner's device (copied from
        pinned memory without blocking on a GPU)."""
        sample = self.replay.sample(self.cfg.dqn.batch_size)
        return sample["indices"], self.learner.make_batch(sample)

    def _set_priorities(self, indices: Any, td_errors: np.ndarray) -> None:
        # self.replay looked up at each call: the threads runner wraps it after __init__
        self.replay.update_priorities(indices, td_errors)

    def update_sources(self) -> list[Any]:
        """The learner."""
        return [self.learner]

    def learner_actor(self) -> Any:
        """An actor on the learner's own live weights (evaluation in serial runs)."""
        return self.recipe.learner_actor(self.cfg, self.spec, self.learner)

    def eval_actor(self) -> Any:
        """The actor whose greedy policy evaluations play (its ``params`` become best.pt)."""
        return self.learner_actor()

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """The recipe's greedy evaluation (``run.eval_episodes`` episodes; MAPF: held-out
        instances) of :meth:`eval_actor`, and the weights that played (for ``best.pt``).
        ``seed`` picks the episodes' starts (default ``run.seed``: every evaluation the
        same)."""
        actor = self.eval_actor()
        seed = self.cfg.run.seed if seed is None else seed
        return self.evaluator.evaluate(actor, seed), actor.params

    def eval_metrics(self) -> dict[str, float]:
        """What the evaluation and the tasks add (MAPF: success per target, the
        curriculum's reach)."""
        return {**self.evaluator.metrics(), **self.tasks.metrics()}

    def close(self) -> None:
        """Release what outlives :meth:`stop` (the evaluation envs); safe to call twice."""
        self.evaluator.close()

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Samples per second."""
        return {"samples_per_s": updates_per_s * self.cfg.dqn.batch_size}

    # --- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything of the runner a checkpoint holds: learner, replay, schedule, RNG
        states (the priorities still on their way first given to replay)."""
        self.priorities.flush()
        return {
            **super().state_dict(),
            "learner": self.learner.state_dict(),
            "replay": self.replay_state(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            },
            **({self.tasks.key: self.tasks.state_dict()} if self.tasks.key else {}),
        }

    def checkpoint_bytes(self) -> int:
        """Online and target weights with two Adam moments each, and the replay buffer's
        arrays (where it lives in this process)."""
        params = sum(t.numel() * t.element_size() for t in self.learner.weights().values())
        return 4 * params + self._replay_bytes()

    def _replay_bytes(self) -> int:
        """The bytes of the driver's replay arrays at capacity (0 where replay lives
        elsewhere or grows as it fills)."""
        storage = getattr(self.replay, "storage", None)
        arrays = getattr(storage, "arrays", None) or {}
        return sum(a.nbytes for a in arrays.values())

    def replay_state(self) -> Any:
        """What a checkpoint keeps of replay (a runner whose replay lives elsewhere, in a
        Ray actor say, overrides this and :meth:`load_replay_state`)."""
        return self.replay.state_dict()

    def load_replay_state(self, state: Any) -> None:
        """Restore what :meth:`replay_state` saved."""
        self.replay.load_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        super().load_state_dict(state)
        self.learner.load_state_dict(state["learner"])
        self.load_replay_state(state["replay"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        if self.tasks.key:
            self.tasks.load_state_dict(state[self.tasks.key])


def _check_memory(cfg: Config, replay_bytes: int) -> None:
    """A replay larger than the machine's memory is a config error now, not an OOM kill
    hours later: numpy's zeroed arrays cost nothing until the ring fills them."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not on this platform: no check
        return
    if replay_bytes > total:
        raise ConfigError(
            f"config key 'replay.capacity': {cfg.replay.capacity} items take "
            f"{replay_bytes / 2**30:.1f} GiB, more than this machine's {total / 2**30:.1f} GiB "
            "of memory; lower it"
        )
