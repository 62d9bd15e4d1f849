"""The runner contract, and what every DQN runner keeps whatever its transport: the
learner, the replay buffer, the exploration schedule and the learning step.

A runner supplies how experience is collected (:meth:`Runner.collect`) and how learning is
scheduled (:meth:`Runner.learn`); :class:`~shoal.run.loop.RunLoop` owns everything else
(clock, rows, evaluation, checkpoints, the curve, the result). The other methods have
do-nothing defaults that a runner overrides where its transport needs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import torch

from shoal.agent.builder import build_actor, build_epsilon, build_learner, build_replay
from shoal.config import Config
from shoal.envs import EnvSpec, make_env, probe_env
from shoal.run.evaluation import evaluate
from shoal.run.loop import Collected
from shoal.run.schedule import UpdateSchedule

__all__ = ["Collected", "Runner"]


class Runner:
    """Base of every runner: builds the learner, replay and schedule from the config and
    takes gradient steps on replay samples.

    Subclasses set :attr:`section` to own a config section and implement :meth:`collect`
    and :meth:`learn`; the first line of their docstring is their ``--help`` text.
    """

    section: ClassVar[tuple[str, type] | None] = None
    """(name, dataclass) of the runner's own config section, or None."""
    multi_agent: ClassVar[bool] = False
    """Whether the runner trains several agents in a multi-agent world."""

    @classmethod
    def check(cls, cfg: Config) -> None:
        """Validate what the config alone cannot (the env) before any work starts."""
        cls.probe(cfg)

    @classmethod
    def probe(cls, cfg: Config) -> EnvSpec:
        """What the learner needs to know of the env (made once to read it)."""
        return probe_env(cfg.env)

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.spec = self.probe(cfg)
        if cfg.run.torch_threads > 0:
            torch.set_num_threads(cfg.run.torch_threads)
        self.learner = build_learner(cfg, self.spec)
        self.replay: Any = build_replay(cfg, self.spec)
        self.epsilon = build_epsilon(cfg)
        """Exploration epsilon as a function of env steps."""
        self.schedule = UpdateSchedule.from_config(cfg.run)
        """The updates owed for the env steps taken (the serial rule)."""
        self.loss = float("nan")
        """The latest training loss (NaN before the first update)."""
        self._eval_envs: list[Any] | None = None

    @property
    def updates(self) -> int:
        """Optimizer steps taken so far."""
        return self.learner.updates

    def add_to_replay(self, transitions: Iterable[dict[str, Any]]) -> None:
        """Add n-step transitions to replay; a hybrid action ``(discrete, continuous)`` is
        stored as ``action`` and ``action_cont``."""
        hybrid = self.spec.hybrid
        for tr in transitions:
            if hybrid:
                discrete, cont = tr["action"]
                tr = {**tr, "action": discrete, "action_cont": cont}
            self.replay.add(tr)

    def learn_steps(self, steps: int) -> float:
        """``steps`` gradient steps on replay samples, with priority updates; returns the
        last loss."""
        loss = float("nan")
        if len(self.replay) == 0:  # n-step windows still open (learning_starts < n_step)
            return loss
        for _ in range(steps):
            sample = self.replay.sample(self.cfg.dqn.batch_size)
            info = self.learner.step(self.learner.make_batch(sample))
            self.replay.update_priorities(sample["indices"], info.td_errors)
            loss = info.loss
        return loss

    def learner_actor(self) -> Any:
        """An actor on the learner's own live weights (evaluation in serial runs)."""
        return build_actor(
            self.cfg,
            self.spec,
            np.random.default_rng(0),
            params=self.learner.params,
            network=self.learner.online,
            device=self.learner.device,
        )

    # --- what a runner supplies -------------------------------------------------------------
    def collect(self, step: int) -> Collected:
        """Take some env steps (``step`` were taken before) and store what they produced."""
        raise NotImplementedError

    def learn(self, step: int, new_steps: int) -> None:
        """Run the learning due now that ``step`` env steps were taken (``new_steps`` of
        them by the last collect); set :attr:`loss`."""
        raise NotImplementedError

    # --- hooks with do-nothing defaults -------------------------------------------------------
    def start(self) -> None:
        """Start threads or processes (called once, before the first collect)."""

    def at_boundary(self) -> bool:
        """Whether the run may stop or checkpoint here (serial: between episodes)."""
        return True

    def done(self, episodes: int) -> bool:
        """A runner's own reason to stop, given the episodes finished so far."""
        return False

    def finish(self) -> None:
        """The run ends normally: complete scheduled learning, flush partial episodes."""

    def interrupt(self) -> None:
        """The run is cut by Ctrl-C or an error: keep what can be kept (partial episode)."""

    def stop(self) -> None:
        """Stop and join threads or processes; called at every end, safe to call twice."""

    def eval_actor(self) -> Any:
        """The actor whose greedy policy evaluations play (its ``params`` become best.pt)."""
        return self.learner_actor()

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """Greedy returns of ``run.eval_episodes`` episodes on the runner's own evaluation
        envs (made on first use), and the weights that played them (for ``best.pt``).
        ``seed`` picks the episodes' starts (default ``run.seed``: every evaluation the
        same). A runner whose agents or envs differ (several agents, say) overrides this."""
        r = self.cfg.run
        if self._eval_envs is None:
            self._eval_envs = [make_env(self.cfg.env) for _ in range(min(r.eval_episodes, 32))]
        actor = self.eval_actor()
        seed = r.seed if seed is None else seed
        return evaluate(actor.greedy, self._eval_envs, r.eval_episodes, seed), actor.params

    def close(self) -> None:
        """Release what outlives :meth:`stop` (the evaluation envs); safe to call twice."""
        for env in self._eval_envs or ():
            env.close()
        self._eval_envs = None

    def eval_metrics(self) -> dict[str, float]:
        """Extra columns of each eval row."""
        return {}

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Extra columns of each tick row."""
        return {"samples_per_s": updates_per_s * self.cfg.dqn.batch_size}

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Extra figures for the progress bar."""
        return {}

    def checkpoint_guard(self) -> contextlib.AbstractContextManager[Any]:
        """Held while a checkpoint is taken (threads: the write lock)."""
        return contextlib.nullcontext()

    # --- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything of the runner a checkpoint holds: learner, replay, RNG states."""
        return {
            "learner": self.learner.state_dict(),
            "replay": self.replay_state(),
            "schedule": self.schedule.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            },
        }

    def replay_state(self) -> Any:
        """What a checkpoint keeps of replay (a runner whose replay lives elsewhere, in a
        Ray actor say, overrides this and :meth:`load_replay_state`)."""
        return self.replay.state_dict()

    def load_replay_state(self, state: Any) -> None:
        """Restore what :meth:`replay_state` saved."""
        self.replay.load_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.learner.load_state_dict(state["learner"])
        self.load_replay_state(state["replay"])
        self.schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
