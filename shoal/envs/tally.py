"""A diagnostic env whose observations say which episode and step they come from.

Collection code has to keep episodes apart: with a batch of envs and autoreset, it is easy
to store a transition whose ``next_obs`` is the next episode's first observation, or to
bootstrap from a terminal state. Here every observation is ``(tag, t, 0, 0)``: ``tag`` is
drawn at reset (from the reset seed), ``t`` counts the episode's steps. An episode lasts
``3 + tag % 5`` steps and then terminates when ``tag`` is even and is truncated (a time
limit) when it is odd, so a stored n-step transition can be checked on its own: the same
tag at both ends, ``next_obs.t - obs.t`` steps apart, discount 0 only when it reaches a
terminated episode's end. Importing this module registers it as ``shoal/Tally-v0``.

Example:
    >>> env = gym.make(ENV_ID)
    >>> obs, _ = env.reset(seed=0)
    >>> obs[1], episode_length(obs[0]) >= 3
    (np.float32(0.0), True)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ENV_ID", "TallyEnv", "episode_length", "terminates", "transition_errors"]

ENV_ID = "shoal/Tally-v0"
"""The gymnasium id this module registers."""


def episode_length(tag: float) -> int:
    """Steps of an episode with this tag."""
    return 3 + int(tag) % 5


def terminates(tag: float) -> bool:
    """Whether an episode with this tag terminates (else it is truncated)."""
    return int(tag) % 2 == 0


class TallyEnv(gym.Env):
    """See the module docstring. Two actions; the reward is the action taken (so a
    return also says which actions were played)."""

    observation_space = gym.spaces.Box(0.0, 1e6, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.tag, self.t = 0, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.tag, self.t, 0, 0], np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """A new episode with a tag drawn from the seeded generator."""
        super().reset(seed=seed)
        self.tag, self.t = int(self.np_random.integers(1_000_000)), 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; the episode ends at its length (terminated or truncated by its tag)."""
        self.t += 1
        end = self.t >= episode_length(self.tag)
        term = end and terminates(self.tag)
        return self._obs(), float(action), term, end and not term, {}


def transition_errors(items: dict[str, np.ndarray], gamma: float) -> list[str]:
    """What is wrong with stored n-step transitions of this env (``obs``, ``next_obs``,
    ``discount`` arrays, one row per item): a window spanning two episodes, a bootstrap
    from a terminal state, or a truncated end that does not bootstrap. Empty: all right."""
    errors = []
    for i, (obs, nxt, disc) in enumerate(zip(items["obs"], items["next_obs"], items["discount"])):
        tag, k = obs[0], int(nxt[1] - obs[1])
        if nxt[0] != tag or not k >= 1:
            errors.append(f"item {i}: spans episodes {obs[:2]} -> {nxt[:2]}")
            continue
        end = int(nxt[1]) == episode_length(tag)
        want = 0.0 if end and terminates(tag) else gamma**k
        if not np.isclose(disc, want):
            errors.append(f"item {i}: discount {disc} from {obs[:2]} to {nxt[:2]}, not {want}")
    return errors


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=TallyEnv)
