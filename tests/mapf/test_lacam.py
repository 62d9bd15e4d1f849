"""LaCAM: plans made of conflict-free joint moves, a solution where PIBT alone gets stuck,
and an exhausted search on an instance with no solution."""

import numpy as np
import pytest

from shoal.envs.mapf import MapfEnv, bfs_distances, resolve_moves
from shoal.mapf.baselines import distance_scores_at, lacam_policy
from shoal.mapf.evaluate import Instance, generated_instances, play
from shoal.mapf.lacam import lacam


def plan(grid, starts, goals, time_limit=10.0):
    starts, goals = np.array(starts), np.array(goals)
    distances = [bfs_distances(grid, tuple(g)) for g in goals.tolist()]
    ties = np.zeros(len(starts))
    return lacam(
        grid,
        starts,
        goals,
        lambda config: distance_scores_at(grid, distances, config),
        ties,
        time_limit=time_limit,
    )


def test_lacam_swaps_two_agents_through_a_side_pocket_in_the_fewest_steps():
    grid = np.array([[0, 0, 0, 0, 0], [1, 1, 0, 1, 1]], bool)
    pocket = Instance(grid, [(0, 0), (0, 4)], [(0, 4), (0, 0)], "corridor with a pocket")
    got = play(lacam_policy(), pocket, max_steps=32)
    assert (got.success, got.makespan, got.sum_of_costs, got.collisions) == (True, 6, 11, 0)


def test_lacam_says_so_when_no_solution_exists():
    grid = np.zeros((1, 3), bool)  # a corridor with no way past
    assert plan(grid, [(0, 0), (0, 2)], [(0, 2), (0, 0)]) is None


@pytest.mark.parametrize("seed", range(3))
def test_every_step_of_a_plan_is_a_conflict_free_joint_move(seed):
    env = MapfEnv(12, size=10, density=0.25)
    env.reset(seed=seed)
    configs = plan(env.grid, env.positions, env.goals)
    assert configs is not None
    assert np.array_equal(configs[0], env.positions) and np.array_equal(configs[-1], env.goals)
    for before, after in zip(configs, configs[1:]):
        step = np.abs(after - before).sum(axis=1)
        assert (step <= 1).all()  # one move or a wait per agent
        moves = {(1, 0): 2, (-1, 0): 1, (0, 1): 4, (0, -1): 3, (0, 0): 0}
        actions = [moves[tuple(d)] for d in (after - before).tolist()]
        new, collided = resolve_moves(env.grid, before, actions)
        assert not collided.any() and np.array_equal(new, after)


def test_lacam_solves_what_pibt_loses_on_generated_instances():
    # issue 12's 4 x 10 kind, where PIBT loses instance 24 of seed 0 in a dead end
    instances = generated_instances(4, 10, 25, seed=0)
    results = [play(lacam_policy(), i, max_steps=256) for i in instances]
    assert all(r.success and r.collisions == 0 for r in results)


def test_the_lacam_shield_needs_a_policy_that_scores_configurations():
    from shoal.mapf.lacam import LacamShield

    class Argmax:
        name = "argmax"

    with pytest.raises(TypeError, match="'argmax' does not score configurations"):
        LacamShield(Argmax())
