"""A shield's guide: a policy's scores of its moves plus a weight times the distance each
move leaves to the agent's goal.

A learned policy's Q-values rank moves well where training took it and badly elsewhere
(bigger maps, more agents, a crowd it never met); PIBT's own ranking, the distance to goal,
is never badly wrong but leaves moves of equal distance to chance. The guided score
``q - weight * distance`` lets each side settle what the other cannot: with ``weight`` 0 the
policy alone ranks, with a large one the distance ranks and the policy only orders moves of
equal distance. Heuristic search over a learned local policy's preferences is CS-PIBT's
idea (Veerapaneni et al., ICAPS 2024); this weight is shoal's knob between the two rankings,
measured in ``benchmarks/RESULTS.md``. The weight is in the policy's score units per cell:
DHC's rewards charge 0.075 a step.
"""

from __future__ import annotations

import numpy as np

from shoal.envs.mapf import MapfEnv
from shoal.mapf.pibt import distance_scores, distance_scores_at

__all__ = ["GuidedPolicy", "guide_scores", "guided_scores"]


def guide_scores(scores: np.ndarray, distances: np.ndarray, weight: float) -> np.ndarray:
    """float ``(K, 5)``: ``scores`` plus ``weight`` times ``distances`` (minus the distance
    each move leaves, -inf where it leaves the map or hits an obstacle, as
    :func:`~shoal.mapf.pibt.distance_scores` gives them); ``scores`` unchanged at
    weight 0."""
    scores = np.asarray(scores, np.float64)
    if weight == 0:
        return scores
    return np.where(np.isneginf(distances), -np.inf, scores + weight * distances)


def guided_scores(env: MapfEnv, scores: np.ndarray, weight: float) -> np.ndarray:
    """float ``(K, 5)``: an env's agents' ``scores`` guided by the distances their moves
    leave (:func:`guide_scores`); at weight 0 the scores as they are, no distance looked up
    (the training player calls this every step)."""
    if weight == 0:
        return np.asarray(scores, np.float64)
    return guide_scores(scores, distance_scores(env), weight)


class GuidedPolicy:
    """``policy`` with its scores guided by the distance to goal (:func:`guide_scores`);
    it acts on the guided scores' argmax and keeps the policy's name. A shield wraps it."""

    def __init__(self, policy: object, weight: float) -> None:
        if not weight >= 0:
            raise ValueError(f"shield guide: weight {weight!r} must be >= 0")
        self.policy, self.weight = policy, float(weight)
        self.name: str = policy.name  # type: ignore[attr-defined]
        self.env_rules = dict(getattr(policy, "env_rules", {}))

    def reset(self, env: MapfEnv) -> None:
        """Pass on to the wrapped policy."""
        self.policy.reset(env)  # type: ignore[attr-defined]

    def scores(self, env: MapfEnv) -> np.ndarray:
        """float ``(K, 5)``: the policy's scores, guided."""
        raw = self.policy.scores(env)  # type: ignore[attr-defined]
        return guided_scores(env, raw, self.weight)

    def scores_at(self, env: MapfEnv, positions: np.ndarray) -> np.ndarray:
        """float ``(K, 5)``: the policy's scores at a configuration, guided."""
        raw = self.policy.scores_at(env, positions)  # type: ignore[attr-defined]
        distances = [env.distance(i) for i in range(env.max_num_agents)]
        return guide_scores(raw, distance_scores_at(env.grid, distances, positions), self.weight)

    def act(self, env: MapfEnv) -> np.ndarray:
        """int ``(K,)``: each agent's best move by the guided scores."""
        return self.scores(env).argmax(axis=1)
