"""HybridTarget: a tiny env whose action is a discrete choice plus a continuous value.

It exists to test hybrid (discrete + continuous) learners such as
:class:`~shoal.agent.hybrid.HybridDQN`: it is pure numpy, steps in microseconds, and
doing well takes both parts of the action, so a learner that gets only one of them right
scores visibly less. Importing this module registers it with gymnasium as
``"shoal/HybridTarget-v0"``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ENV_ID", "HybridTargetEnv"]

ENV_ID = "shoal/HybridTarget-v0"
"""The gymnasium id this module registers."""


class HybridTargetEnv(gym.Env):
    """Pick the hidden mode and say the target number, every step.

    **Observations** are ``[one_hot(k), t]``, a float32 ``Box`` of size ``n_modes + 1``:
    the mode ``k`` in ``0..n_modes-1`` is shown one-hot and the target ``t`` is uniform in
    ``[-1, 1]``. Both are drawn afresh, from ``self.np_random``, at reset and after every
    step, independently of the action. **Actions** are ``Tuple(Discrete(n_modes),
    Box(-1, 1, (1,), float32))``: a discrete choice ``a`` and a value ``x`` (clipped to
    ``[-1, 1]``).

    ==========================  ====================================
    the action ``(a, x)`` ...   reward
    ==========================  ====================================
    ``a == k``                  ``1 - |x - t|`` (in ``[-1, 1]``)
    ``a != k``                  ``0``
    ==========================  ====================================

    Episodes never terminate; they are truncated after ``episode_steps`` steps (10), so a
    learner must bootstrap through the time limit. Why this design: the right discrete
    choice alone is worth only what the continuous part makes of it, and a perfect
    continuous value is worth nothing with the wrong choice; a right choice with a bad
    value (``|x - t| > 1``) is even worse than a wrong one, so the two cannot be learned
    in isolation. Per 10-step episode (measured over 20,000 episodes, seeds 0..19999):

    =============================================  ==========  ===================
    policy                                         measured    expected
    =============================================  ==========  ===================
    best (``a = k``, ``x = t``)                    10.0        10
    right choice, continuous part ignored (x = 0)  5.00        10 * E[1 - |t|] = 5
    uniformly random ``(a, x)``                    1.13        10 / 9 = 1.11
    =============================================  ==========  ===================

    Args:
        n_modes: number of hidden modes ``K`` (and of discrete actions).
        episode_steps: steps before the episode is truncated.

    Example:
        >>> env = HybridTargetEnv()
        >>> obs, info = env.reset(seed=0)
        >>> k, t = int(obs[:3].argmax()), float(obs[3])
        >>> obs, reward, terminated, truncated, info = env.step((k, np.array([t], np.float32)))
        >>> reward, terminated, truncated
        (1.0, False, False)
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, n_modes: int = 3, episode_steps: int = 10) -> None:
        if n_modes < 2:
            raise ValueError(f"n_modes must be >= 2, got {n_modes}")
        if episode_steps < 1:
            raise ValueError(f"episode_steps must be >= 1, got {episode_steps}")
        self.n_modes = n_modes
        self.episode_steps = episode_steps
        low = np.zeros(n_modes + 1, np.float32)
        low[-1] = -1.0
        self.observation_space = gym.spaces.Box(low, np.ones(n_modes + 1, np.float32))
        self.action_space = gym.spaces.Tuple(
            (gym.spaces.Discrete(n_modes), gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
        )
        self._mode = 0
        self._target = np.float32(0.0)
        self._t = 0

    def _draw(self) -> np.ndarray:
        """Draw a new mode and target and return the observation showing them."""
        self._mode = int(self.np_random.integers(self.n_modes))
        # Stored as float32, the value the agent sees, so that x = obs[-1] scores exactly 1.
        self._target = np.float32(self.np_random.uniform(-1.0, 1.0))
        obs = np.zeros(self.n_modes + 1, np.float32)
        obs[self._mode] = 1.0
        obs[-1] = self._target
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: draw the first mode and target (seeded by ``seed``)."""
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Score ``action = (a, x)`` against the current mode and target, then draw anew.

        ``info["correct"]`` says whether ``a`` was the hidden mode.
        """
        a, x = action
        correct = int(a) == self._mode
        value = float(np.clip(np.asarray(x, np.float32).reshape(-1)[0], -1.0, 1.0))
        reward = 1.0 - abs(value - float(self._target)) if correct else 0.0
        self._t += 1
        return self._draw(), reward, False, self._t >= self.episode_steps, {"correct": correct}


# Guarded: re-importing the module (importlib reload, pytest's importlib mode) must not
# make gymnasium warn about overriding an existing id.
if ENV_ID not in gym.registry:
    gym.register(
        id=ENV_ID,
        entry_point="shoal.envs.hybrid_target:HybridTargetEnv",
        max_episode_steps=10,
    )
