"""Whole episodes recorded from a batch actor's steps, and their n-step transitions: the
``"episodes"`` :class:`~shoal.agent.writers.Writer`.

The actors that send episodes to a learner elsewhere (rollout worker processes, Ray
actors) send them whole: an actor that dies mid-episode loses that episode, never half of
it. Each env's running episode is kept here as plain lists (a row per step, one Python
append each), and the episodes that ended are turned into n-step transitions together,
with one :func:`~shoal.replay.nstep.nstep_episodes` call, when the actor sends them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.agent.batch_actor import Finished, Steps
from shoal.agent.writers import Taken, ended_taken
from shoal.replay.nstep import nstep_episodes

__all__ = ["EpisodeRecorder"]


class _Path:
    """One env's episode so far."""

    __slots__ = ("obs", "actions", "rewards", "terminated")

    def __init__(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.terminated = False


class EpisodeRecorder:
    """Each env's running episode, from :class:`~shoal.agent.batch_actor.BatchActor`
    steps, and the episodes that ended since the last :meth:`take`.

    Args:
        num_envs: the batch actor's envs.
        n, gamma: the n-step return's horizon and discount.
        hybrid: actions are ``(discrete, continuous)`` pairs.
    """

    def __init__(self, num_envs: int, n: int, gamma: float, hybrid: bool = False) -> None:
        self.hybrid, self.n, self.gamma = hybrid, n, gamma
        self._paths = [_Path() for _ in range(num_envs)]
        self._ended: list[tuple[_Path, Finished]] = []

    @property
    def ended(self) -> int:
        """Episodes ended and not yet taken."""
        return len(self._ended)

    def write(self, steps: Steps) -> None:
        """Add each env's step (rows that are steps); set aside the episodes it ended."""
        obs, next_obs, actions, rewards = steps.obs, steps.next_obs, steps.actions, steps.rewards
        for i in steps.rows():
            path = self._paths[i]
            if not path.obs:
                path.obs.append(obs[i])
            path.obs.append(next_obs[i])
            path.actions.append(actions[i])
            path.rewards.append(rewards[i])
        for end in steps.finished:
            path = self._paths[end.env]
            path.terminated = bool(steps.terminated[end.env])
            self._ended.append((path, end))
            self._paths[end.env] = _Path()

    def take(self) -> Taken:
        """The ended episodes' n-step transitions, episode after episode, no priorities
        (the recipe's ``initial_priorities``, or replay's largest, give them), the
        episodes and their env steps."""
        ended, self._ended = self._ended, []
        items = self._transitions([path for path, _ in ended]) if ended else {}
        return ended_taken(items, [end for _, end in ended])

    def flush(self) -> Taken:
        """The running episodes are dropped (whole episodes only: a cut one is lost, as
        an actor's that dies); the ended ones, as :meth:`take` gives them."""
        self._paths = [_Path() for _ in self._paths]
        return self.take()

    def state_dict(self) -> None:
        """Nothing: a checkpoint keeps no running episode of an actor that sends them."""
        return None

    def load_state_dict(self, state: None) -> None:
        """Nothing to restore (:meth:`state_dict`)."""

    def _transitions(self, paths: list[_Path]) -> dict[str, np.ndarray]:
        """The n-step transitions of whole episodes, with one vectorised call."""
        actions = [a for path in paths for a in path.actions]
        if self.hybrid:
            fields = {
                "action": np.array([a for a, _ in actions], np.int64),
                "action_cont": np.array([x for _, x in actions], np.float32),
            }
        else:
            fields = {"action": np.array(actions, np.int64)}
        rewards = np.array([r for path in paths for r in path.rewards], np.float64)
        lengths = np.array([len(path.actions) for path in paths])
        return nstep_episodes(
            np.stack([o for path in paths for o in path.obs]),
            fields,
            rewards,
            lengths,
            np.array([path.terminated for path in paths]),
            n=self.n,
            gamma=self.gamma,
        )
