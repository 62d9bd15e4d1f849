"""Greedy evaluation on separate envs, all episodes side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np

from shoal.run.seeding import SeedStream, derive_seed

__all__ = ["evaluate"]


def evaluate(
    policy: Callable[..., np.ndarray],
    envs: Sequence[gym.Env],
    episodes: int,
    seed: int,
    epsilon: float = 0.0,
) -> np.ndarray:
    """Returns of ``episodes`` episodes played by ``policy`` (a batch of observations ->
    a batch of actions). A policy with memory also has ``begin(env)``, called as env
    ``env`` begins an episode, and is called as ``policy(observations, envs)``. With
    ``epsilon``, each step is a uniformly random action instead with that chance, drawn
    from a generator of the episode's own (seeded from ``seed`` and k, as its reset).

    The envs run side by side, so one forward pass serves all of them: on CartPole with 20
    episodes that is 20x fewer forward passes than playing them one by one; an env whose
    episode ends takes the next one at once. Episode k is reset with a seed derived from
    (seed, k), so every evaluation of a run sees the same starts, two policies are compared
    on equal terms, and the returns do not depend on how many envs play them.
    """
    returns = np.zeros(episodes)
    todo = iter(range(episodes))
    memory = getattr(policy, "begin", None)
    live: dict[int, tuple[int, np.ndarray]] = {}  # env -> (episode, observation)
    explore: dict[int, np.random.Generator] = {}  # env -> its episode's random actions

    def begin(i: int) -> None:
        k = next(todo, None)
        if k is not None:
            live[i] = (k, envs[i].reset(seed=derive_seed(seed, SeedStream.EVAL, k))[0])
            if epsilon > 0:  # greedy evaluations build no generators
                explore[i] = np.random.default_rng(derive_seed(seed, SeedStream.EPSILON, k))
            if memory is not None:
                memory(i)

    for i in range(len(envs)):
        begin(i)
    while live:
        slots = list(live)
        obs = np.stack([live[i][1] for i in slots]).astype(np.float32)
        actions = policy(obs) if memory is None else policy(obs, slots)
        for i, a in zip(slots, actions):
            k = live[i][0]
            if epsilon > 0 and explore[i].random() < epsilon:
                a = explore[i].integers(envs[i].action_space.n)
            # hybrid policies return (discrete, continuous) pairs
            obs, r, term, trunc, _ = envs[i].step(a if isinstance(a, tuple) else int(a))
            returns[k] += r
            live[i] = (k, obs)
            if term or trunc:
                del live[i]
                begin(i)
    return returns
