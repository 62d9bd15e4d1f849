"""Greedy evaluation on separate envs, all episodes side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np

from shoal.run.seeding import derive_seed

__all__ = ["CONFIRM_STREAM", "EVAL_STREAM", "evaluate"]

EVAL_STREAM = 1
"""Seed stream of evaluation resets (training resets use 0)."""
CONFIRM_STREAM = 8
"""Seed stream of the evaluations that confirm a solve (``run.confirm_solve``)."""


def evaluate(
    policy: Callable[[np.ndarray], np.ndarray],
    envs: Sequence[gym.Env],
    episodes: int,
    seed: int,
) -> np.ndarray:
    """Returns of ``episodes`` episodes played by ``policy`` (a batch of observations ->
    a batch of actions).

    The envs run in lock-step, so one forward pass serves all of them: on CartPole with 20
    episodes that is 20x fewer forward passes than playing them one by one. Episode k is
    reset with a seed derived from (seed, k), so every evaluation of a run sees the same
    starts and two policies are compared on equal terms.
    """
    returns = np.zeros(episodes)
    for wave in range(0, episodes, len(envs)):
        ids = list(range(wave, min(wave + len(envs), episodes)))
        live = {}
        for env, k in zip(envs, ids):
            obs, _ = env.reset(seed=derive_seed(seed, EVAL_STREAM, k))
            live[k] = (env, obs)
        while live:
            keys = list(live)
            actions = policy(np.stack([live[k][1] for k in keys]).astype(np.float32))
            for k, a in zip(keys, actions):
                env = live[k][0]
                # hybrid policies return (discrete, continuous) pairs
                obs, r, term, trunc, _ = env.step(a if isinstance(a, tuple) else int(a))
                returns[k] += r
                if term or trunc:
                    del live[k]
                else:
                    live[k] = (env, obs)
    return returns
