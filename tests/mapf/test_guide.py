"""The shield's distance guide and PIBT's leader: a learned ranking keeps PIBT's way to
every goal, and the guide lets the distance overrule rankings that are badly wrong."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.envs.mapf import ACTIONS, MapfEnv
from shoal.mapf.baselines import ShortestPathPolicy, distance_scores
from shoal.mapf.evaluate import Instance, generated_instances, play
from shoal.mapf.guide import GuidedPolicy, guide_scores
from shoal.mapf.pibt import PibtShield

STAY = ACTIONS.index("stay")


class Fixed:
    """A policy with the same scores of the five moves for every agent, every step."""

    def __init__(self, row: list[float], name: str = "fixed") -> None:
        self.row, self.name = np.array(row, float), name

    def reset(self, env: MapfEnv) -> None:
        pass

    def scores(self, env: MapfEnv) -> np.ndarray:
        return np.tile(self.row, (env.max_num_agents, 1))

    def scores_at(self, env: MapfEnv, positions: np.ndarray) -> np.ndarray:
        return np.tile(self.row, (len(positions), 1))

    def act(self, env: MapfEnv) -> np.ndarray:
        return self.scores(env).argmax(axis=1)


def lazy() -> Fixed:
    """Prefers to stay, everywhere: the ranking of a policy that learned to wait."""
    row = [0.0] * len(ACTIONS)
    row[STAY] = 1.0
    return Fixed(row, "lazy")


def corridor_env() -> MapfEnv:
    env = MapfEnv(grid=np.zeros((3, 5), bool), starts=[(1, 0)], goals=[(1, 4)])
    env.reset(seed=0)
    return env


def test_guide_scores_add_the_weighted_distance_and_keep_walls_out():
    scores = np.array([[1.0, 0.0, 0.5, 2.0, -1.0]])
    dist = np.array([[-3.0, -np.inf, -2.0, -4.0, -3.0]])
    assert guide_scores(scores, dist, 0.0).tolist() == scores.tolist()
    got = guide_scores(scores, dist, 10.0)
    assert np.isneginf(got[0, 1])
    np.testing.assert_allclose(got[0, [0, 2, 3, 4]], [-29.0, -19.5, -38.0, -31.0])


def test_a_heavy_guide_ranks_by_distance_and_the_policy_orders_equal_distances():
    env = MapfEnv(grid=np.zeros((3, 3), bool), starts=[(0, 0)], goals=[(2, 2)])
    env.reset(seed=0)
    # down and right are both a step closer; the policy prefers stay, then right, then down
    row = [0.0] * 5
    row[STAY], row[ACTIONS.index("right")], row[ACTIONS.index("down")] = 3.0, 2.0, 1.0
    guided = GuidedPolicy(Fixed(row), 100.0)
    order = np.argsort(-guided.scores(env)[0])
    assert [ACTIONS[a] for a in order[:3]] == ["right", "down", "stay"]
    assert GuidedPolicy(Fixed(row), 0.0).act(env).tolist() == [STAY]
    assert guided.name == "fixed" and guided.act(env).tolist() == [ACTIONS.index("right")]
    at = guided.scores_at(env, env.positions)
    np.testing.assert_array_equal(at, guided.scores(env))


def test_a_negative_guide_is_refused():
    with pytest.raises(ValueError, match="weight -1.0 must be >= 0"):
        GuidedPolicy(lazy(), -1.0)


def test_the_leader_follows_its_shortest_path_whatever_the_ranking():
    """A policy that only wants to wait still solves instances through the shield: the
    agent with the lead ranks by distance, so it arrives, and the next one leads."""
    env = corridor_env()
    shield = PibtShield(lazy())
    shield.reset(env)
    assert shield.act(env).tolist() == [ACTIONS.index("right")]
    for instance in generated_instances(4, 8, 6, density=0.0, seed=3):
        got = play(PibtShield(lazy()), instance, max_steps=128)
        assert got.success and got.collisions == 0


def test_only_the_leader_is_overruled():
    """Two agents off their goals, far apart: the one with further to go leads and moves;
    the other keeps its own ranking (stay)."""
    grid = np.zeros((1, 9), bool)
    instance = Instance(grid, [(0, 0), (0, 8)], [(0, 5), (0, 6)], "two")
    env = instance.env(max_steps=32)
    env.reset(seed=0)
    shield = PibtShield(lazy())
    shield.reset(env)
    assert shield.act(env).tolist() == [ACTIONS.index("right"), STAY]


def test_shortest_path_rankings_are_unchanged_by_a_guide():
    env = generated_instances(6, 10, 1, seed=4)[0].env(max_steps=64)
    env.reset(seed=0)
    plain = ShortestPathPolicy().scores(env)
    guided = GuidedPolicy(ShortestPathPolicy(), 2.0).scores(env)
    finite = np.isfinite(plain)
    np.testing.assert_allclose(guided[finite], 3.0 * plain[finite])
    assert (np.isneginf(guided) == ~finite).all()
    np.testing.assert_array_equal(distance_scores(env), plain)
