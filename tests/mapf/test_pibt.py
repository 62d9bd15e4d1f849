"""PIBT and the shield: joint moves free of vertex and swap conflicts whatever the rankings,
first choices kept where nothing conflicts, and PIBT solving instances with known answers."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.envs.mapf import MOVES, MapfEnv, bfs_distances, resolve_moves
from shoal.mapf.baselines import ShortestPathPolicy, pibt_policy
from shoal.mapf.evaluate import Instance, generated_instances, play, scenario_instances
from shoal.mapf.pibt import (
    PibtShield,
    distance_scores,
    distance_scores_at,
    pibt_step,
    rank_moves,
)
from shoal.mapf.swap import Swaps


def conflicts(grid, positions, actions):
    """Moves the env would refuse: into obstacles or off the map, onto one cell together,
    or swapping cells."""
    h, w = grid.shape
    target = positions + MOVES[actions]
    bad = []
    for i, (r, c) in enumerate(target.tolist()):
        if not (0 <= r < h and 0 <= c < w) or grid[r, c]:
            bad.append(("blocked", i))
    cells = [tuple(t) for t in target.tolist()]
    if len(set(cells)) < len(cells):
        bad.append(("vertex", cells))
    here = {tuple(p): i for i, p in enumerate(positions.tolist())}
    for i, cell in enumerate(cells):
        j = here.get(cell)
        if j is not None and j != i and cells[j] == tuple(positions[i]):
            bad.append(("swap", i, j))
    return bad


@settings(max_examples=300, deadline=None)
@given(
    h=st.integers(1, 6),
    w=st.integers(2, 6),
    density=st.floats(0.0, 0.5),
    fill=st.floats(0.1, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_joint_move_never_collides(h, w, density, fill, seed):
    rng = np.random.default_rng(seed)
    grid = rng.random((h, w)) < density
    free = np.argwhere(~grid)
    if len(free) == 0:
        return
    k = max(1, int(fill * len(free)))  # up to every free cell taken: crowds push hardest
    positions = free[rng.permutation(len(free))[:k]]
    priorities = rng.random(k)
    goals = free[rng.permutation(len(free))[:k]]  # swaps judge by distances to goals
    distances = [bfs_distances(grid, tuple(g)) for g in goals]
    swaps = Swaps(grid, distances, goals)
    if rng.random() < 0.5:
        rankings = np.array([rng.permutation(5) for _ in range(k)])
    else:  # by distance, as PIBT ranks: the swap's case comes up far more often
        rankings = rank_moves(distance_scores_at(grid, distances, positions), rng)
    for rules in (None, swaps):
        actions = pibt_step(grid, positions, rankings, priorities, rules)
        assert conflicts(grid, positions, actions) == []
        _, collided = resolve_moves(grid, positions, actions)  # the env agrees
        assert not collided.any()


def test_without_conflicts_every_agent_gets_its_first_choice():
    grid = np.zeros((7, 7), bool)
    grid[3, 3] = True
    positions = np.array([[0, 0], [0, 6], [6, 0], [6, 6], [3, 2]])
    rankings = np.array(
        [[2, 0, 1, 3, 4], [3, 0, 1, 2, 4], [1, 0, 2, 3, 4], [0, 1, 2, 3, 4], [4, 1, 0, 2, 3]]
    )
    # agent 4's first choice is an obstacle: it gets its first choice it can have (up)
    actions = pibt_step(grid, positions, rankings, np.zeros(5))
    assert actions.tolist() == [2, 3, 1, 0, 1]


def test_priority_decides_a_contested_cell_and_the_loser_takes_its_next_choice():
    grid = np.zeros((3, 3), bool)
    positions = np.array([[0, 1], [2, 1]])  # both want the centre
    rankings = np.array([[2, 3, 0, 1, 4], [1, 4, 0, 2, 3]])
    assert pibt_step(grid, positions, rankings, np.array([0.0, 1.0])).tolist() == [3, 1]
    assert pibt_step(grid, positions, rankings, np.array([1.0, 0.0])).tolist() == [2, 4]


def test_a_pushed_agent_moves_out_of_the_way():
    # agent 0 (high priority) wants right into agent 1, whose first choice is to stay
    grid = np.zeros((2, 3), bool)
    positions = np.array([[0, 0], [0, 1]])
    rankings = np.array([[4, 0, 1, 2, 3], [0, 4, 2, 1, 3]])
    actions = pibt_step(grid, positions, rankings, np.array([1.0, 0.0]))
    assert actions.tolist() == [4, 4]  # 1 steps on right, 0 follows


def test_pibt_crossing_agents_take_their_shortest_paths():
    # opposite corners of an open 3 x 3 grid: each goes round its own side, no waiting
    cross = Instance(np.zeros((3, 3), bool), [(0, 0), (2, 2)], [(2, 2), (0, 0)], "cross")
    got = play(pibt_policy(), cross, max_steps=32)
    assert (got.success, got.makespan, got.sum_of_costs, got.collisions) == (True, 4, 8, 0)


def test_pibt_one_waits_at_a_junction():
    # a plus-shaped junction both must cross: the first in priority goes, the other waits
    grid = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1]], bool)
    junction = Instance(grid, [(1, 0), (0, 1)], [(1, 2), (2, 1)], "junction")
    got = play(pibt_policy(), junction, max_steps=32)
    assert (got.success, got.makespan, got.sum_of_costs, got.collisions) == (True, 3, 5, 0)


POCKET = Instance(
    np.array([[0, 0, 0, 0, 0], [1, 1, 0, 1, 1]], bool),
    [(0, 0), (0, 4)],
    [(0, 4), (0, 0)],
    "corridor with a pocket",
)


def test_pibt_without_its_swap_is_incomplete_where_the_map_is_a_tree():
    """A corridor with a side pocket: the agent with the lead pushes the other into the
    corridor's end and both stop there. Completeness is LaCAM's part."""
    got = play(pibt_policy(swap=False), POCKET, max_steps=32)
    assert not got.success and got.collisions == 0
    assert not play(ShortestPathPolicy(), POCKET, max_steps=32).success


def test_the_swap_passes_two_agents_through_the_pocket():
    """The leader sees that the other cannot step aside before the corridor's end but can
    behind it (the pocket): it backs out, pulls the other after it, and one waits in the
    pocket while the other passes."""
    got = play(pibt_policy(), POCKET, max_steps=32)
    assert (got.success, got.makespan, got.sum_of_costs, got.collisions) == (True, 6, 11, 0)


def test_the_swap_needs_room_behind_the_pusher():
    """A corridor with no branch at all: no swap is possible, so none is tried and PIBT
    stays as it was (the two stand still, no collision)."""
    corridor = Instance(np.zeros((1, 4), bool), [(0, 0), (0, 3)], [(0, 3), (0, 0)], "line")
    with_swap = play(pibt_policy(), corridor, max_steps=16)
    without = play(pibt_policy(swap=False), corridor, max_steps=16)
    assert not with_swap.success and with_swap.collisions == 0
    assert with_swap.steps == without.steps


def test_a_pushed_agent_in_a_dead_end_is_pulled_out():
    """One PIBT step: agent 0 (the lead) wants the dead end's cell where agent 1 stands and
    agent 1 wants out past agent 0. Plain PIBT leaves both in place; with the swap agent 0
    steps back and agent 1 follows into the cell it left."""
    grid = np.array([[0, 0, 0], [1, 0, 1], [1, 0, 1]], bool)
    positions, goals = np.array([[1, 1], [2, 1]]), np.array([[2, 1], [0, 1]])
    swaps = Swaps(grid, [bfs_distances(grid, tuple(g)) for g in goals], goals)
    rankings = np.array([[2, 0, 1, 3, 4], [1, 0, 2, 3, 4]])  # 0 wants down, 1 wants up
    priorities = np.array([1.0, 0.0])
    assert pibt_step(grid, positions, rankings, priorities).tolist() == [0, 0]  # both stay
    assert pibt_step(grid, positions, rankings, priorities, swaps).tolist() == [1, 1]  # up


def test_pibt_solves_generated_instances_without_a_collision():
    """Issue 12's held-out kind (8 agents, 20 x 20, density 0.1-0.3). PIBT guarantees each
    agent reaches its goal, not all at once, so an instance now and then is lost."""
    results = [
        play(pibt_policy(), i, max_steps=256) for i in generated_instances(8, 20, 12, seed=5)
    ]
    assert sum(r.success for r in results) >= 11
    assert sum(r.collisions for r in results) == 0


def test_the_shield_keeps_a_policy_that_has_no_conflict():
    env = MapfEnv(grid=np.zeros((1, 4), bool), starts=[(0, 0)], goals=[(0, 3)])
    env.reset(seed=0)
    shield = PibtShield(ShortestPathPolicy())
    shield.reset(env)
    assert shield.name == "shortest-path+pibt"
    assert shield.act(env).tolist() == ShortestPathPolicy().act(env).tolist() == [4]


def test_the_shield_needs_a_policy_that_scores_its_moves():
    class Argmax:
        name = "argmax"

    with pytest.raises(TypeError, match="'argmax' does not score its moves"):
        PibtShield(Argmax())


def test_equal_scores_are_ranked_in_random_order_and_the_rest_by_score():
    rng = np.random.default_rng(0)
    scores = np.array([[0.0, 2.0, 2.0, -np.inf, 1.0]])
    seen = {tuple(rank_moves(scores, rng)[0]) for _ in range(50)}
    assert seen == {(1, 2, 4, 0, 3), (2, 1, 4, 0, 3)}


def test_pibt_solves_a_benchmark_map_crowd():
    """64 agents on MovingAI's random-32-32-10 (its first scenario): with moves that tie
    taken in a fixed order the crowd cycled past 1,000 steps; PIBT draws ties."""
    data = Path(__file__).parents[2] / "benchmarks" / "data" / "movingai"
    (instance,) = scenario_instances(
        data / "random-32-32-10.map", [data / "random-32-32-10-random-1.scen"], 64
    )
    got = play(pibt_policy(), instance, max_steps=256)
    assert got.success and got.collisions == 0


class UpFirst:
    """Shortest-path rankings that take "up" before any other equally short move, the same
    every step: a learned ranking's fixed order, where PIBT's is random."""

    name = "up-first"

    def reset(self, env):
        pass

    def scores(self, env):
        scores = distance_scores(env)
        scores[:, 1] += 0.5
        return scores


@pytest.mark.parametrize("swap", [True, False])
def test_a_fixed_order_of_equal_moves_that_loops_is_broken(swap):
    """A corridor with a side cell at its junction; agent 0's goal is in the corridor, agent
    1's is the junction. Pushed off the junction, agent 1 always takes the corridor (up)
    over the side cell, and the two would trade places for ever; a configuration seen
    before makes the step rank as PIBT does (equal moves in random order)."""
    grid = np.array([[1, 0], [1, 0], [0, 0], [1, 0]], bool)
    junction = Instance(grid, [(2, 1), (1, 1)], [(1, 1), (2, 1)], "junction with a side cell")
    got = play(PibtShield(UpFirst(), swap=swap), junction, max_steps=64)
    assert got.success and got.collisions == 0
