"""CartPole without its velocities, a partially observed benchmark: the agent sees the
cart's position and the pole's angle (gymnasium's ``CartPole-v1`` observation 0 and 2)
and must infer both velocities from what it remembers. Rewards, dynamics, termination and
the 500-step limit are CartPole-v1's, so its returns read as CartPole's (475: solved).
A feed-forward Q-network on one observation cannot tell a pole falling left from one
rising back; a recurrent agent, or a stack of recent frames, can. Importing this module
registers it as ``shoal/CartPoleNoVelocity-v0``.

Example:
    >>> env = gym.make(ENV_ID)
    >>> env.reset(seed=0)[0].shape, env.spec.max_episode_steps
    ((2,), 500)
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["ENV_ID", "POSITIONS", "CartPoleNoVelocity"]

ENV_ID = "shoal/CartPoleNoVelocity-v0"
"""The gymnasium id this module registers."""

POSITIONS = [0, 2]
"""The CartPole observation entries kept: cart position, pole angle."""


class CartPoleNoVelocity(gym.ObservationWrapper):
    """``CartPole-v1`` (its own time limit included) observing positions only."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(gym.make("CartPole-v1", render_mode=render_mode).unwrapped)
        high = self.env.observation_space.high[POSITIONS]
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The cart's position and the pole's angle."""
        return np.asarray(observation, np.float32)[POSITIONS]


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CartPoleNoVelocity, max_episode_steps=500)
