"""The serial runner: collect, store and learn in one loop. The oracle for every other runner.

Each step: pick an epsilon-greedy action, step the env, push the transition through the
n-step writer into replay, and take the updates the update schedule owes
(``gradient_steps`` every ``train_freq`` steps).

Checkpoints fall on episode boundaries: an env's internals cannot be saved in general,
but a fresh episode can be re-created exactly because every reset is seeded from
(run seed, episode index). Resuming from such a checkpoint therefore continues exactly as
the uninterrupted run would. A run cut mid-episode (Ctrl-C, or stopping once solved) ends
that episode as truncated, so its transitions still bootstrap correctly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.agent.actor import Actor
from shoal.agent.builder import build_actor, build_nstep
from shoal.config import Config
from shoal.envs import make_env
from shoal.run.loop import Collected
from shoal.run.seeding import derive_seed
from shoal.runners.dqn import DQNRunner

__all__ = ["SerialRunner"]

TRAIN_STREAM = 0
"""Seed stream of training env resets."""
ACTION_STREAM = 3
"""Seed stream of exploration (epsilon-greedy) draws."""
_ONE_STEP = Collected(1)


class SerialRunner(DQNRunner):
    """Collect, store and learn in one loop in the calling thread (the oracle).

    Example:
        >>> from shoal.config import load_config
        >>> cfg = load_config("cartpole", ["run.total_steps=500", "run.progress=false"])
        >>> runner = SerialRunner(cfg)
        >>> runner.collect(0).steps
        1
    """

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.nstep = build_nstep(cfg)
        self.rng = np.random.default_rng(derive_seed(cfg.run.seed, ACTION_STREAM))
        self.env = make_env(cfg.env)
        self.actor = self.make_actor()
        self.resets = 0
        """Episodes started so far: episode k's reset is seeded from (seed, k)."""
        self.obs: np.ndarray | None = None
        self.state: Any = None
        """The actor's recurrent state in the current episode (None: feed-forward)."""
        self.ep_return, self.ep_len = 0.0, 0

    def eval_actor(self) -> Actor:
        """Evaluations play the behaviour actor's weights (serial: the learner's own)."""
        return self.actor

    def make_actor(self) -> Actor:
        """The behaviour policy (serial: acting on the learner's own live weights)."""
        return build_actor(
            self.cfg,
            self.spec,
            self.rng,
            params=self.learner.params,
            network=self.learner.online,
            device=self.learner.device,
        )

    def collect(self, step: int) -> Collected:
        """One env step with the epsilon of ``step``; its n-step transitions go to replay."""
        if self.obs is None:
            seed = derive_seed(self.cfg.run.seed, TRAIN_STREAM, self.resets)
            self.obs, _ = self.env.reset(seed=seed)
        self.actor.epsilon = self.epsilon(step)
        action, self.state = self.actor.select_action(self.obs, self.state)
        next_obs, reward, term, trunc, _ = self.env.step(action)
        self.ep_return += float(reward)
        self.ep_len += 1
        self.add_to_replay(self.nstep.append(self.obs, action, reward, next_obs, term, trunc))
        self.obs = next_obs
        if not (term or trunc):
            return _ONE_STEP
        episode = (self.ep_return, self.ep_len)
        self._next_episode()
        return Collected(1, (episode,))

    def _next_episode(self) -> None:
        self.resets += 1
        self.obs, self.state, self.ep_return, self.ep_len = None, None, 0.0, 0

    def learn(self, step: int, new_steps: int) -> None:
        """The updates the schedule owes (``gradient_steps`` every ``train_freq`` env steps
        once learning starts)."""
        owed = self.schedule.owe(step)
        if owed:
            self.on_train_point(owed)

    def on_train_point(self, updates: int) -> None:
        """``updates`` are due (serial: take them here and now)."""
        self.loss = self.learn_steps(updates)

    def at_boundary(self) -> bool:
        """Between episodes (the next reset is re-created exactly on resume)."""
        return self.obs is None

    def finish(self) -> None:
        """Flush a partial episode (stopped once solved)."""
        self.interrupt()

    def interrupt(self) -> None:
        """A cut mid-episode is a truncation: pending n-step transitions bootstrap from
        the last observation, and a resumed run starts the next episode (next seed)."""
        self.add_to_replay(self.nstep.flush())
        if self.ep_len > 0:
            self._next_episode()

    def state_dict(self) -> dict[str, Any]:
        """The base state plus exploration draws and the reset counter."""
        state = super().state_dict()
        state["rng"]["actions"] = self.rng.bit_generator.state
        state["resets"] = self.resets
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        super().load_state_dict(state)
        self.rng.bit_generator.state = state["rng"]["actions"]
        self.resets = int(state["resets"])
