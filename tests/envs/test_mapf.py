"""The MAPF world and the MovingAI formats: PettingZoo's API tests, every collision rule on
hand-made grids, rewards and episode ends, observation windows against a per-cell
definition, the mutual-k-nearest communication mask, generated maps (connected start/goal
pairs, reproducibility), MovingAI round trips and errors, and the shortest-path action."""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from shoal.envs.mapf import (
    OBS_CHANNELS,
    UNREACHABLE,
    MapfEnv,
    bfs_distances,
    label_components,
    resolve_moves,
    room,
    shortest_path_action,
)
from shoal.envs.movingai import (
    ScenEntry,
    env_from_scenario,
    read_map,
    read_scen,
    write_map,
    write_scen,
)
from shoal.errors import ConfigError, ShoalError

pytestmark = pytest.mark.timeout(60)

STAY, UP, DOWN, LEFT, RIGHT = range(5)
MOVE, STAY_OFF, STAY_ON, COLLISION, FINISH = -0.075, -0.075, 0.0, -0.5, 3.0


def parse(rows):
    """A bool obstacle grid from rows of '#' (obstacle) and '.' (free)."""
    return np.array([[ch == "#" for ch in row] for row in rows], dtype=bool)


def made(rows, starts, goals, **kwargs):
    """A reset env on a hand-made grid with fixed starts and goals."""
    env = MapfEnv(grid=parse(rows), starts=starts, goals=goals, **kwargs)
    env.reset(seed=0)
    return env


def step(env, *actions):
    """One step with actions in agent order; rewards, terminations, truncations as lists."""
    _, rewards, terms, truncs, _ = env.step(dict(zip(env.possible_agents, actions)))
    names = env.possible_agents
    return [rewards[a] for a in names], [terms[a] for a in names], [truncs[a] for a in names]


def random_actions(env, rng):
    return dict(zip(env.agents, rng.integers(0, 5, len(env.agents)).tolist()))


# -- API -----------------------------------------------------------------------------------


@pytest.mark.parametrize("density", [0.2, None])
def test_pettingzoo_parallel_api(density):
    parallel_api_test(MapfEnv(6, size=10, density=density, max_steps=50), num_cycles=200)


def test_pettingzoo_seed_test():
    parallel_seed_test(lambda: MapfEnv(6, size=10, density=None, max_steps=50), num_cycles=100)


def test_spaces_infos_and_fresh_observations():
    env = MapfEnv(4, size=8, fov=7)
    obs, infos = env.reset(seed=1)
    space = env.observation_space("agent_2")
    assert space.shape == (len(OBS_CHANNELS), 7, 7) and space.dtype == np.float32
    assert env.action_space("agent_2").n == 5
    assert env.possible_agents == [f"agent_{i}" for i in range(4)] == env.agents
    for i, a in enumerate(env.agents):
        assert space.contains(obs[a])
        assert infos[a]["pos"] == tuple(env.positions[i]) == tuple(env.starts[i])
        assert infos[a]["goal"] == tuple(env.goals[i])
        assert np.array_equal(infos[a]["comm"], env.comm_mask()[i])
    kept = env.last_obs.copy()
    obs2, *_ = env.step({})  # everyone stays
    assert np.array_equal(np.stack([obs[a] for a in env.possible_agents]), kept)
    assert np.shares_memory(obs2["agent_0"], env.last_obs)
    assert not np.shares_memory(obs2["agent_0"], kept)


def test_actions_are_checked_and_missing_ones_stay():
    env = MapfEnv(2, size=6)
    env.reset(seed=0)
    before = env.positions.copy()
    env.step({})
    assert np.array_equal(env.positions, before)
    with pytest.raises(ShoalError, match="unknown agent"):
        env.step({"agent_7": 0})
    with pytest.raises(ShoalError, match="out of range"):
        env.step({"agent_0": 5})


# -- collisions ----------------------------------------------------------------------------


def test_move_out_of_the_map_fails():
    env = made(["..."], [(0, 0)], [(0, 2)])
    for action in (UP, DOWN, LEFT):
        rewards, *_ = step(env, action)
        assert rewards == [COLLISION] and env.positions.tolist() == [[0, 0]]


def test_move_into_an_obstacle_fails():
    env = made(["..", "#."], [(0, 0)], [(1, 1)])
    rewards, *_ = step(env, DOWN)
    assert rewards == [COLLISION] and env.positions.tolist() == [[0, 0]]
    rewards, *_ = step(env, RIGHT)
    assert rewards == [MOVE] and env.positions.tolist() == [[0, 1]]


def test_vertex_conflict_both_stay():
    env = made(["...", "..."], [(0, 0), (0, 2)], [(1, 0), (1, 2)])
    rewards, *_ = step(env, RIGHT, LEFT)
    assert rewards == [COLLISION, COLLISION]
    assert env.positions.tolist() == [[0, 0], [0, 2]]


def test_swap_conflict_both_stay():
    env = made(["...."], [(0, 1), (0, 2)], [(0, 3), (0, 0)])
    rewards, *_ = step(env, RIGHT, LEFT)
    assert rewards == [COLLISION, COLLISION]
    assert env.positions.tolist() == [[0, 1], [0, 2]]


def test_chain_into_a_staying_agent_stays_and_only_movers_collide():
    env = made(["....."], [(0, 0), (0, 1), (0, 2), (0, 3)], [(0, 4), (0, 2), (0, 3), (0, 1)])
    rewards, *_ = step(env, RIGHT, RIGHT, RIGHT, STAY)
    assert rewards == [COLLISION, COLLISION, COLLISION, STAY_OFF]
    assert env.positions.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]


def test_chain_behind_a_vertex_conflict_takes_several_rounds():
    # agents 2 and 3 both want (0, 3); once 2 is sent back, 1 runs into it, then 0 into 1
    new, hit = resolve_moves(
        parse(["....."]), np.array([[0, 0], [0, 1], [0, 2], [0, 4]]), [RIGHT, RIGHT, RIGHT, LEFT]
    )
    assert new.tolist() == [[0, 0], [0, 1], [0, 2], [0, 4]] and hit.all()
    # a leader blocked by an obstacle stops its followers too
    new, hit = resolve_moves(parse(["...#"]), np.array([[0, 0], [0, 1], [0, 2]]), [RIGHT] * 3)
    assert new.tolist() == [[0, 0], [0, 1], [0, 2]] and hit.all()


def test_following_a_leaving_agent_succeeds():
    env = made(["...."], [(0, 0), (0, 1), (0, 2)], [(0, 1), (0, 2), (0, 3)])
    rewards, terms, _ = step(env, RIGHT, RIGHT, RIGHT)
    assert env.positions.tolist() == [[0, 1], [0, 2], [0, 3]]
    assert rewards == [FINISH] * 3 and all(terms)
    # a rotation round a 2 x 2 block: each follows one that really leaves
    cells = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    new, hit = resolve_moves(parse(["..", ".."]), cells, [RIGHT, DOWN, LEFT, UP])
    assert new.tolist() == np.roll(cells, -1, axis=0).tolist() and not hit.any()


def test_resolution_does_not_depend_on_agent_order():
    rng = np.random.default_rng(0)
    grid = rng.random((6, 6)) < 0.2
    free = np.argwhere(~grid)
    for _ in range(200):
        pos = free[rng.choice(len(free), 12, replace=False)]
        acts = rng.integers(0, 5, 12)
        new, hit = resolve_moves(grid, pos, acts)
        assert len({tuple(p) for p in new.tolist()}) == 12  # no two agents on one cell
        assert not grid[new[:, 0], new[:, 1]].any()
        perm = rng.permutation(12)
        new_p, hit_p = resolve_moves(grid, pos[perm], acts[perm])
        assert np.array_equal(new_p, new[perm]) and np.array_equal(hit_p, hit[perm])


# -- rewards and episode ends ----------------------------------------------------------------


def test_stay_rewards_and_the_finishing_reward_replaces_the_step_reward():
    env = made(["....", ".#.."], [(0, 0), (0, 3)], [(0, 1), (1, 3)])
    rewards, terms, truncs = step(env, RIGHT, STAY)
    assert rewards == [MOVE, STAY_OFF] and not any(terms) and not any(truncs)
    rewards, terms, _ = step(env, STAY, STAY)
    assert rewards == [STAY_ON, STAY_OFF] and not any(terms)
    # agent 0 bumps into the obstacle below its goal in the finishing step: still +3 flat
    rewards, terms, truncs = step(env, DOWN, DOWN)
    assert rewards == [FINISH, FINISH] and all(terms) and not any(truncs)
    assert env.agents == []
    with pytest.raises(ShoalError, match="call reset"):
        env.step({})


def test_staying_off_goal_costs_what_the_env_is_given_and_nothing_else_changes():
    env = made(["....", ".#.."], [(0, 0), (0, 3)], [(0, 1), (1, 3)], stay_off_goal=-0.2)
    rewards, _, _ = step(env, RIGHT, STAY)
    assert rewards == [MOVE, -0.2]
    rewards, _, _ = step(env, STAY, LEFT)  # on goal stays free; a collision is a collision
    assert rewards == [STAY_ON, MOVE]
    rewards, _, _ = step(env, STAY, RIGHT)
    assert rewards == [STAY_ON, MOVE]
    rewards, _, _ = step(env, STAY, RIGHT)
    assert rewards == [STAY_ON, COLLISION]
    with pytest.raises(ConfigError, match="stay_off_goal: 0.1 is out of range"):
        MapfEnv(2, size=5, stay_off_goal=0.1)


def test_truncated_at_max_steps_never_terminated():
    env = made(["...."], [(0, 0)], [(0, 3)], max_steps=3)
    for t in range(1, 4):
        rewards, terms, truncs = step(env, STAY)
        assert rewards == [STAY_OFF] and not any(terms) and all(truncs) == (t == 3)
    assert env.agents == [] and env.steps == 3
    env.reset()
    assert env.agents == env.possible_agents and env.steps == 0


# -- observations --------------------------------------------------------------------------


def naive_window(env, i):
    """Agent i's observation by per-cell loops: the definition the sliced windows must match."""
    f, h = env.fov, env.fov // 2
    out = np.zeros((6, f, f), np.float32)
    r0, c0 = env.positions[i]
    others = {tuple(p) for j, p in enumerate(env.positions.tolist()) if j != i}
    height, width = env.grid.shape
    dist = env.distance(i)
    for a in range(f):
        for b in range(f):
            r, c = r0 + a - h, c0 + b - h
            if not (0 <= r < height and 0 <= c < width):
                out[1, a, b] = 1
                continue
            out[0, a, b] = (r, c) in others
            out[1, a, b] = env.grid[r, c]
            if env.grid[r, c]:
                continue
            for ch, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
                rr, cc = r + dr, c + dc
                inside = 0 <= rr < height and 0 <= cc < width
                out[2 + ch, a, b] = inside and dist[rr, cc] < dist[r, c]
    return out


def test_observation_channels_on_a_hand_made_map():
    rows = ["..#.", "....", "#..."]
    env = made(rows, [(1, 1), (0, 0)], [(1, 2), (2, 3)], fov=5)
    obs = env.last_obs[0]
    assert obs[1].tolist() == [
        [1, 1, 1, 1, 1],  # row -1: outside the map reads as obstacles
        [1, 0, 0, 1, 0],
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1],  # row 3: outside
    ]
    assert np.argwhere(obs[0]).tolist() == [[1, 1]]  # agent 1 at (0, 0); self not shown
    up, down, left, right = obs[2:]
    assert (right[2, 2], up[2, 2], down[2, 2], left[2, 2]) == (1, 0, 0, 0)  # goal is right
    assert obs[2:, 2, 3].sum() == 0  # on the goal no move shortens the distance
    assert up[3, 3] == 1 and left[2, 4] == 1  # below the goal: up; right of it: left
    assert obs[2:, 1, 3].sum() == 0  # the obstacle at (0, 2)
    assert obs[2:, 0].sum() == 0 and obs[2:, :, 0].sum() == 0  # outside the map
    for i in range(2):
        assert np.array_equal(env.last_obs[i], naive_window(env, i))


@pytest.mark.parametrize("fov", [1, 5, 9])
def test_windows_match_the_per_cell_definition(fov):
    env = MapfEnv(6, size=9, density=0.3, fov=fov, max_steps=40)
    rng = np.random.default_rng(fov)
    obs, _ = env.reset(seed=fov)
    for _ in range(40):
        for i, a in enumerate(env.possible_agents):
            assert np.array_equal(obs[a], naive_window(env, i))
        obs, *_ = env.step(random_actions(env, rng))
        if not env.agents:
            obs, _ = env.reset()


# -- communication -------------------------------------------------------------------------


def naive_mask(positions, fov, k):
    """Mutual k-nearest in view by plain loops."""
    n = len(positions)
    nearest = []
    for i in range(n):
        seen = [
            (float(np.sum((positions[i] - positions[j]) ** 2)), j)
            for j in range(n)
            if np.abs(positions[i] - positions[j]).max() <= fov // 2
        ]
        nearest.append({j for _, j in sorted(seen)[:k]})
    return np.array([[j in nearest[i] and i in nearest[j] for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("k_comm", [1, 3, 5])
def test_comm_mask_is_mutual_k_nearest_in_view(k_comm):
    env = MapfEnv(16, size=12, density=0.15, fov=5, k_comm=k_comm, max_steps=300)
    rng = np.random.default_rng(k_comm)
    env.reset(seed=k_comm)
    for t in range(300):
        mask = env.comm_mask()
        pos = env.positions
        assert mask.shape == (16, 16) and mask.dtype == bool
        assert np.array_equal(mask, mask.T) and mask.diagonal().all()
        assert (mask.sum(axis=1) <= k_comm).all()
        far = np.abs(pos[:, None] - pos[None, :]).max(axis=2) > 2
        assert not mask[far].any()
        if t % 10 == 0:
            assert np.array_equal(mask, naive_mask(pos, 5, k_comm))
        env.step(random_actions(env, rng))


def test_mutual_k_nearest_drops_one_sided_pairs_and_breaks_ties_by_index():
    # 1's two nearest others are 2 and 3, so 0 (who would pick 1) is left alone
    env = made(["......"], [(0, 0), (0, 3), (0, 4), (0, 5)], [(0, 1), (0, 2), (0, 0), (0, 3)])
    assert env.comm_mask().astype(int).tolist() == [
        [1, 0, 0, 0],
        [0, 1, 1, 1],
        [0, 1, 1, 1],
        [0, 1, 1, 1],
    ]
    # 0 has four neighbours at distance 1 and picks 1 and 2 (lowest indices); 3 and 4 each
    # have 0 among their two nearest, but 0 does not have them
    starts = [(2, 2), (1, 2), (3, 2), (2, 1), (2, 3)]
    env = made(["....."] * 5, starts, [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)])
    mask = env.comm_mask()
    assert mask[0].tolist() == [True, True, True, False, False]
    # 3 picks 0, then 1 over 2 (both at sqrt 2: the lower index); only 1 picks 3 back
    assert mask[3].tolist() == [False, True, False, True, False]
    _, infos = env.reset()
    assert np.array_equal(infos["agent_3"]["comm"], mask[3])


def test_agents_out_of_view_do_not_talk():
    env = made([".........."], [(0, 0), (0, 5), (0, 9)], [(0, 1), (0, 6), (0, 8)], fov=9)
    assert env.comm_mask().astype(int).tolist() == [[1, 0, 0], [0, 1, 1], [0, 1, 1]]


# -- generated maps ------------------------------------------------------------------------


def test_every_start_goal_pair_is_connected():
    for density in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, None):
        env = MapfEnv(8, size=12, density=density)
        for seed in range(15):
            env.reset(seed=seed)
            starts, goals = env.starts, env.goals
            assert len({tuple(s) for s in starts.tolist()}) == 8
            assert len({tuple(g) for g in goals.tolist()}) == 8
            assert not env.grid[starts[:, 0], starts[:, 1]].any()
            assert not env.grid[goals[:, 0], goals[:, 1]].any()
            for i, (r, c) in enumerate(starts.tolist()):
                assert 0 < env.distance(i)[r, c] < UNREACHABLE
                assert env.distance(i)[r, c] == bfs_distances(env.grid, tuple(goals[i]))[r, c]


def test_density_none_draws_per_episode():
    env = MapfEnv(2, size=20, density=None)
    drawn = []
    for seed in range(20):
        env.reset(seed=seed)
        drawn.append(env.episode_density)
        assert 0.0 <= env.episode_density <= 0.5
        assert abs(env.grid.mean() - env.episode_density) < 0.15
    assert len(set(drawn)) == 20


def test_components_are_labelled_once_by_4_neighbourhood():
    grid = parse(["..#.", "##..", ".###", "...."])
    assert label_components(grid).tolist() == [
        [0, 0, -1, 1],
        [-1, -1, 1, 1],
        [2, -1, -1, -1],
        [2, 2, 2, 2],
    ]
    grid = np.random.default_rng(0).random((30, 30)) < 0.4
    labels = label_components(grid)
    for r, c in np.argwhere(~grid)[::37].tolist():  # a cell reaches exactly its component
        assert np.array_equal(bfs_distances(grid, (r, c)) < UNREACHABLE, labels == labels[r, c])


def test_placement_fills_components_exactly():
    # components of exactly as many cells as agents: goals are a derangement of the starts
    grid = parse(["..#...", "######", "#....."])
    assert room(label_components(grid)) == 10 and room(label_components(parse([".#."]))) == 0
    env = MapfEnv(10, grid=grid)
    for seed in range(30):
        env.reset(seed=seed)
        starts = {tuple(p) for p in env.starts.tolist()}
        goals = {tuple(p) for p in env.goals.tolist()}
        assert starts == goals == {tuple(p) for p in np.argwhere(~grid).tolist()}
        assert not (env.starts == env.goals).all(axis=1).any()
    pair = MapfEnv(2, grid=parse([".."]))
    pair.reset(seed=0)
    assert pair.goals.tolist() == pair.starts[::-1].tolist()


def test_no_room_for_the_agents_is_a_clear_error():
    with pytest.raises(ConfigError, match="room for 24 agents"):
        MapfEnv(24, size=5, density=0.45).reset(seed=0)
    with pytest.raises(ConfigError, match="too small"):
        MapfEnv(30, size=5)
    with pytest.raises(ConfigError, match="no room"):
        MapfEnv(2, grid=parse([".#."]))


def rollout(env, seed, steps=60):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(99)  # the same actions whatever the env seed
    trace = [env.grid.copy(), env.goals.copy(), np.stack(list(obs.values()))]
    for _ in range(steps):
        if not env.agents:
            obs, _ = env.reset()
            trace.append(env.grid.copy())
        obs, rewards, _, _, _ = env.step(random_actions(env, rng))
        trace += [np.stack(list(obs.values())), np.array(list(rewards.values()))]
    return trace


def test_seeded_reproducibility():
    def same(a, b):
        return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))

    a = rollout(MapfEnv(5, size=8, density=None, max_steps=20), seed=3)
    assert same(a, rollout(MapfEnv(5, size=8, density=None, max_steps=20), seed=3))
    env = MapfEnv(5, size=8, density=None, max_steps=20)
    rollout(env, seed=11)
    assert same(a, rollout(env, seed=3))  # reseeding a used env
    assert not same(a, rollout(env, seed=4))


def test_given_grid_without_starts_draws_them_each_episode():
    grid = parse(["....#", ".##.#", "....#", "#####"])
    env = MapfEnv(3, grid=grid)
    placements = set()
    for seed in range(10):
        env.reset(seed=seed)
        assert env.grid is not None and np.array_equal(env.grid, grid)
        placements.add((env.starts.tobytes(), env.goals.tobytes()))
        for i, (r, c) in enumerate(env.starts.tolist()):
            assert 0 < env.distance(i)[r, c] < UNREACHABLE
    assert len(placements) > 1


def test_given_placements_are_validated():
    rows = ["..#", "###", "..."]
    with pytest.raises(ConfigError, match="agent 1's start .0, 2. is an obstacle"):
        made(rows, [(0, 0), (0, 2)], [(0, 1), (0, 0)])
    with pytest.raises(ConfigError, match="agent 0's goal .3, 0. is outside"):
        made(rows, [(0, 0)], [(3, 0)])
    with pytest.raises(ConfigError, match="agents 0 and 1 share the start"):
        made(rows, [(0, 0), (0, 0)], [(0, 1), (0, 0)])
    with pytest.raises(ConfigError, match="agents 0 and 1 share the goal"):
        made(rows, [(0, 0), (0, 1)], [(0, 1), (0, 1)])
    with pytest.raises(ConfigError, match="agent 0's goal .2, 2. cannot be reached"):
        made(rows, [(0, 0)], [(2, 2)])
    with pytest.raises(
        ConfigError,
        match=r"expected 3 .row, col. pairs, one per agent; got an array of shape \(2, 2\)",
    ):
        MapfEnv(3, grid=parse(rows), starts=[(0, 0), (0, 1)], goals=[(0, 1), (0, 0)])
    with pytest.raises(ConfigError, match="both or neither"):
        MapfEnv(grid=parse(rows), starts=[(0, 0)])
    with pytest.raises(ConfigError, match="fov"):
        MapfEnv(2, fov=4)
    with pytest.raises(ConfigError, match="density"):
        MapfEnv(2, density=1.0)


def test_render_draws_obstacles_goals_and_agents():
    env = made(["..#"], [(0, 0)], [(0, 1)], render_mode="rgb_array")
    image = env.render()
    assert image.shape == (8, 24, 3) and image.dtype == np.uint8
    agent, goal, obstacle = image[4, 4], image[4, 12], image[4, 20]
    assert obstacle.max() < 100 and goal.min() > agent.min()  # the goal is a paler square
    assert MapfEnv(2).render() is None


# -- shortest paths ------------------------------------------------------------------------


def test_shortest_path_action_reaches_the_goal():
    for seed in range(10):
        env = MapfEnv(1, size=15, density=0.3, max_steps=400)
        env.reset(seed=seed)
        (r, c), goal = env.starts[0], tuple(env.goals[0])
        length = int(env.distance(0)[r, c])
        for t in range(1, length + 1):
            rewards, terms, _ = step(env, shortest_path_action(env, 0))
            assert env.distance(0)[tuple(env.positions[0])] == length - t
        assert tuple(env.positions[0]) == goal and terms == [True] and rewards == [FINISH]
    env = made(["..."], [(0, 0)], [(0, 2)])
    env.positions = env.goals.copy()
    assert shortest_path_action(env, 0) == STAY


# -- MovingAI formats ----------------------------------------------------------------------


def test_movingai_round_trip(tmp_path):
    env = MapfEnv(6, size=14, density=0.3)
    env.reset(seed=5)
    write_map(tmp_path / "g.map", env.grid)
    written = write_scen(tmp_path / "g.scen", "g.map", env.grid, env.starts, env.goals)
    assert np.array_equal(read_map(tmp_path / "g.map"), env.grid)
    entries = read_scen(tmp_path / "g.scen")
    assert entries == written and all(isinstance(e, ScenEntry) for e in entries)
    assert [e.start for e in entries] == [tuple(s) for s in env.starts.tolist()]
    assert [e.goal for e in entries] == [tuple(g) for g in env.goals.tolist()]
    for i, e in enumerate(entries):
        assert (
            e.optimal_length == env.distance(i)[e.start] == bfs_distances(env.grid, e.goal)[e.start]
        )
        assert (e.map_name, e.width, e.height) == ("g.map", 14, 14)
        assert e.bucket == int(e.optimal_length) // 4
    text = (tmp_path / "g.scen").read_text().splitlines()
    e = entries[0]
    assert text[0] == "version 1"
    assert text[1].split("\t")[4:8] == [str(v) for v in (e.start_x, e.start_y, e.goal_x, e.goal_y)]
    loaded = env_from_scenario(tmp_path / "g.map", tmp_path / "g.scen", 4, fov=5)
    loaded.reset(seed=0)
    assert np.array_equal(loaded.grid, env.grid) and loaded.fov == 5
    assert np.array_equal(loaded.starts, env.starts[:4])
    assert np.array_equal(loaded.goals, env.goals[:4])


def test_movingai_reads_x_as_column_and_all_terrain_letters(tmp_path):
    header = "type octile\r\nwidth 4\r\nheight 3\r\nmap\r\n"  # either order, CRLF lines
    (tmp_path / "t.map").write_text(header + ".GS@\r\nT...\r\nOW..\r\n")
    grid = read_map(tmp_path / "t.map")
    assert grid.astype(int).tolist() == [[0, 0, 0, 1], [1, 0, 0, 0], [1, 1, 0, 0]]
    (tmp_path / "t.scen").write_text("version 1.0\n0\tt.map\t4\t3\t0\t0\t3\t2\t5.41421356\n")
    (entry,) = read_scen(tmp_path / "t.scen")
    assert entry.start == (0, 0) and entry.goal == (2, 3) and entry.optimal_length == 5.41421356
    env = env_from_scenario(tmp_path / "t.map", tmp_path / "t.scen", 1)
    env.reset(seed=0)
    assert env.goals.tolist() == [[2, 3]] and env.distance(0)[0, 0] == 5


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("type octile\nheight 2\nwidth 2\nmap\n..\n.x\n", r"line 6: map row 1 has \['x'\]"),
        ("type octile\nheight 3\nwidth 2\nmap\n..\n..\n", "line 5: expected 3 map rows"),
        ("type octile\nheight 1\nwidth 2\nmap\n..\n..\n", "line 5: expected 1 map rows"),
        ("type octile\nheight 2\nwidth 2\nmap\n..\n...\n", "line 6: map row 1 has 3 char"),
        ("type octile\nheight two\nwidth 2\nmap\n..\n", "height 'two' is not a whole"),
        ("type octile\nwidth 2\nmap\n..\n", "line 3: the header has no 'height'"),
        ("height 1\nwidth 2\nmap\n..\n", "no 'type'"),
        ("type octile\nheight 1\nwidth 2\n", "line 4: the file ends before the 'map' line"),
        ("type octile\nsize 1\n", "line 2: expected 'type T'"),
    ],
)
def test_malformed_map_files_name_the_line(tmp_path, text, match):
    (tmp_path / "bad.map").write_text(text)
    with pytest.raises(ConfigError, match=match):
        read_map(tmp_path / "bad.map")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "line 1: expected 'version 1'"),
        ("0\tm.map\t4\t2\t0\t0\t3\t1\t4\n", "line 1: expected 'version 1'"),
        ("version 1\n0\tm.map\t4\t2\t0\t0\t3\t1\n", "line 2: expected 9 tab-separated fields"),
        ("version 1\n\n0\tm.map\t4\t2\tx\t0\t3\t1\t4\n", r"line 3: field 5 \(start x\) 'x'"),
        ("version 1\n0\tm.map\t4\t2\t0\t0\t3\t1\tfar\n", "field 9 .optimal length. 'far'"),
        ("version 1\n0\tm.map\t4\t2\t0\t-1\t3\t1\t4\n", "field 6 .start y. '-1' is negative"),
    ],
)
def test_malformed_scen_files_name_the_line(tmp_path, text, match):
    (tmp_path / "bad.scen").write_text(text)
    with pytest.raises(ConfigError, match=match):
        read_scen(tmp_path / "bad.scen")


def test_scenario_errors(tmp_path):
    grid = parse(["....", ".#..", "...."])
    write_map(tmp_path / "m.map", grid)
    write_scen(tmp_path / "m.scen", "m.map", grid, [(0, 0), (2, 3)], [(2, 0), (0, 3)])
    with pytest.raises(ConfigError, match="num_agents: 3 is out of range; .* has 2 entries"):
        env_from_scenario(tmp_path / "m.map", tmp_path / "m.scen", 3)
    write_map(tmp_path / "small.map", grid[:2])
    with pytest.raises(ConfigError, match="entry 0 .* is for a 4 x 3"):
        env_from_scenario(tmp_path / "small.map", tmp_path / "m.scen", 1)
    with pytest.raises(ConfigError, match="entry 0's start .1, 1. is outside or blocked"):
        write_scen(tmp_path / "x.scen", "m.map", grid, [(1, 1)], [(0, 0)])
    walled = parse(["..#.."])
    with pytest.raises(ConfigError, match="entry 0's goal .0, 4. is unreachable"):
        write_scen(tmp_path / "x.scen", "m.map", walled, [(0, 0)], [(0, 4)])
