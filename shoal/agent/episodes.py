"""Whole episodes recorded from a batch actor's steps, and their n-step transitions.

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
from shoal.replay.nstep import nstep_episodes

__all__ = ["EpisodeRecorder", "Sent"]


class _Path:
    """One env's episode so far."""

    __slots__ = ("obs", "actions", "rewards", "terminated")

    def __init__(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.terminated = False


class Sent:
    """Episodes taken from an :class:`EpisodeRecorder`: their n-step transitions and what
    the batch actor said of each as it ended."""

    def __init__(self, items: dict[str, np.ndarray], ended: list[Finished]):
        self.items = items
        """The transitions, one array per replay field, episode after episode."""
        self.ended = ended


class EpisodeRecorder:
    """Each env's running episode, from :class:`~shoal.agent.batch_actor.BatchActor`
    steps, and the episodes that ended since the last :meth:`take`.

    Args:
        num_envs: the batch actor's envs.
        hybrid: actions are ``(discrete, continuous)`` pairs.
        n, gamma: the n-step return's horizon and discount.
    """

    def __init__(self, num_envs: int, hybrid: bool, n: int, gamma: float) -> None:
        self.hybrid, self.n, self.gamma = hybrid, n, gamma
        self._paths = [_Path() for _ in range(num_envs)]
        self._ended: list[tuple[_Path, Finished]] = []

    def __len__(self) -> int:
        """Episodes ended and not yet taken."""
        return len(self._ended)

    def record(self, steps: Steps) -> None:
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

    def take(self) -> Sent | None:
        """The ended episodes' n-step transitions (None: no episode ended)."""
        if not self._ended:
            return None
        ended, self._ended = self._ended, []
        paths = [path for path, _ in ended]
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
        items = nstep_episodes(
            np.stack([o for path in paths for o in path.obs]),
            fields,
            rewards,
            lengths,
            np.array([path.terminated for path in paths]),
            n=self.n,
            gamma=self.gamma,
        )
        return Sent(items, [end for _, end in ended])
