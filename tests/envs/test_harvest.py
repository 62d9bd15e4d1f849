"""Commons harvest and its gridworld core: PettingZoo's API tests, determinism, the
regrowth law, the random action order, tagging, edge windows, leaving agents, speed and the
dilemma itself (greed kills the commons, restraint keeps it)."""

import time

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from shoal.envs.gridworld import DOWN, LEFT, RIGHT, UP, GridWorld
from shoal.envs.harvest import (
    DEFAULT_MAP,
    REGROWTH,
    HarvestEnv,
    generate_map,
    parse_map,
)
from shoal.errors import ConfigError, ShoalError

pytestmark = pytest.mark.timeout(120)

STAY, MOVE_UP, MOVE_DOWN, MOVE_LEFT, MOVE_RIGHT, TAG = range(6)


def random_actions(env, rng, n_actions=6):
    return dict(zip(env.agents, rng.integers(0, n_actions, len(env.agents)).tolist()))


def put(env, placements, facing=None):
    """Move agents to fixed cells (off the board first, so any order works)."""
    world = env.world
    for i in placements:
        world.remove(i)
    for i, (r, c) in placements.items():
        world.place(i, r, c)
    for i, d in (facing or {}).items():
        world.facing[i] = d


def naive_window(world, i):
    """Agent i's window by per-cell loops: the definition observe() must match."""
    v, h = world.view, world.view // 2
    out = np.zeros((v, v, world.channels), np.float32)
    pos = world.position(i)
    if pos is None:
        return out
    walls = world.walls
    layers = [world.layer(n) for n in world.layer_names]
    for dr in range(v):
        for dc in range(v):
            r, c = pos[0] + dr - h, pos[1] + dc - h
            if not (0 <= r < world.height and 0 <= c < world.width):
                out[dr, dc, 0] = 1
                continue
            out[dr, dc, 0] = walls[r, c]
            for k, layer in enumerate(layers):
                out[dr, dc, 1 + k] = layer[r, c]
            j = world.occupant(r, c)
            out[dr, dc, -2] = j >= 0 and j != i
            out[dr, dc, -1] = j == i
    return out


# -- API -----------------------------------------------------------------------------------


@pytest.mark.parametrize("leave", [False, True])
def test_pettingzoo_parallel_api(leave):
    env = HarvestEnv(8, max_turns=300, leave_when_tagged=leave, lives=2)
    parallel_api_test(env, num_cycles=400)


def test_pettingzoo_seed_test():
    parallel_seed_test(lambda: HarvestEnv(8, max_turns=200), num_cycles=200)
    parallel_seed_test(lambda: HarvestEnv(6, leave_when_tagged=True, max_turns=200))


def test_spaces_and_names():
    env = HarvestEnv(5, view=5)
    assert env.possible_agents == [f"agent_{i}" for i in range(5)]
    obs, infos = env.reset(seed=0)
    assert env.agents == env.possible_agents
    space = env.observation_space("agent_3")
    assert space.shape == (5 * 5 * 4 + 5,) and space.dtype == np.float32
    assert env.window_shape == (5, 5, 4)
    assert env.action_space("agent_3").n == 6
    assert np.array_equal(env.last_obs, np.stack([obs[a] for a in env.possible_agents]))
    kept = env.last_obs.copy()
    obs2, *_ = env.step({})
    assert np.array_equal(np.stack([obs[a] for a in env.possible_agents]), kept)  # not reused
    assert np.shares_memory(obs2["agent_0"], env.last_obs)
    for a in env.agents:
        assert space.contains(obs[a])
        assert infos[a] == {"tagged_out": False}
        assert obs[a][-1] == 0 and obs[a][-5:-1].sum() == 1  # facing one-hot, not out


def test_truncated_after_max_turns_never_terminated():
    env = HarvestEnv(4, max_turns=30)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for t in range(1, 31):
        _, rewards, terms, truncs, _ = env.step(random_actions(env, rng))
        assert not any(terms.values())
        assert all(truncs.values()) == (t == 30)
        assert set(rewards) == set(env.possible_agents)
    assert env.agents == [] and env.turn == 30
    with pytest.raises(ShoalError, match="call reset"):
        env.step({})


def test_actions_are_checked_and_missing_ones_stay():
    env = HarvestEnv(2)
    env.reset(seed=0)
    before = env.world.positions()
    env.step({})  # everyone stays
    assert (env.world.positions() == before).all()
    with pytest.raises(ShoalError, match="unknown agent"):
        env.step({"agent_9": 0})
    with pytest.raises(ShoalError, match="out of range"):
        env.step({"agent_0": 6})


def test_bad_config_names_the_key():
    with pytest.raises(ConfigError, match="spawn points"):
        HarvestEnv(13)  # the default map has 12
    with pytest.raises(ConfigError, match="timeout"):
        HarvestEnv(2, timeout=-1)
    with pytest.raises(ConfigError, match="regrowth"):
        HarvestEnv(2, regrowth=(0.0, 1.5))
    with pytest.raises(ConfigError, match="render_mode"):
        HarvestEnv(2, render_mode="human")
    with pytest.raises(ConfigError, match="equally long"):
        HarvestEnv(1, layout="PA\nA")
    with pytest.raises(ConfigError, match="allowed"):
        HarvestEnv(1, layout="PX")
    with pytest.raises(ConfigError, match="view"):
        HarvestEnv(1, view=4)


def test_default_map():
    walls, orchard, spawn = parse_map(DEFAULT_MAP)
    assert walls.shape == (17, 25) and orchard.sum() == 65 and len(spawn) == 12


@pytest.mark.parametrize("k", [1, 8, 32, 128])
def test_generated_layouts_scale_with_k(k):
    env = HarvestEnv(k, layout="generated", max_turns=5)
    walls, orchard, spawn = parse_map(env.layout)
    assert len(spawn) >= k
    assert orchard.sum() == 13 * max(1, -(-k * 5 // 8))
    assert generate_map(k, seed=3) == generate_map(k, seed=3)
    obs, _ = env.reset(seed=0)
    assert len(env.world.positions()) == k and env.apples == orchard.sum()
    env.step({a: MOVE_UP for a in env.agents})
    fixed = parse_map(generate_map(k, size=40))
    assert fixed[0].shape == (40, 40) and len(fixed[2]) >= k


def test_render_modes():
    env = HarvestEnv(3, render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    lines = text.split("\n")
    assert len(lines) == 17 and all(len(line) == 25 for line in lines)
    assert text.count("A") == 65 and all(str(i) in text for i in range(3))
    env = HarvestEnv(3, render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert image.shape == (17 * 8, 25 * 8, 3) and image.dtype == np.uint8
    assert HarvestEnv(3).render() is None


# -- determinism and the random order --------------------------------------------------------


def rollout(env, seed, steps=150):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(1234)  # the same actions whatever the env seed
    trace = [np.stack([obs[a] for a in env.possible_agents])]
    for _ in range(steps):
        obs, rewards, _, _, infos = env.step(random_actions(env, rng))
        trace.append(np.stack([obs[a] for a in env.possible_agents]))
        trace.append(np.array([rewards[a] for a in env.possible_agents]))
    return trace


def test_deterministic_given_the_seed():
    a = rollout(HarvestEnv(8), seed=7)
    b = rollout(HarvestEnv(8), seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    env = HarvestEnv(8)
    assert all(np.array_equal(x, y) for x, y in zip(a, rollout(env, seed=7)))  # after reuse
    c = rollout(HarvestEnv(8), seed=8)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_two_agents_one_apple_first_in_order_eats_it():
    """Agents on both sides of one apple step onto it: one eats, the other is blocked; each
    wins about half the time over seeds."""
    wins = 0
    seeds = 300
    for seed in range(seeds):
        env = HarvestEnv(2, layout="PAP", regrowth=(0.0,))
        env.reset(seed=seed)
        pos = env.world.positions()
        left = int(np.flatnonzero(pos[:, 1] == 0)[0])
        actions = {f"agent_{left}": MOVE_RIGHT, f"agent_{1 - left}": MOVE_LEFT}
        _, rewards, _, _, _ = env.step(actions)
        assert sorted(rewards.values()) == [0.0, 1.0]
        winner = 0 if rewards["agent_0"] == 1.0 else 1
        assert env.world.position(winner) == (0, 1)  # on the apple's cell
        assert env.world.position(1 - winner)[1] in (0, 2)  # blocked where it stood
        assert env.apples == 0
        wins += winner == 0
    # binomial(300, 1/2): mean 150, sd 8.7; 5 sd either side
    assert 106 < wins < 194


def test_sequential_moves_follow_a_vacated_cell_or_are_blocked():
    """A line of agents all moving right: each moves only if the one ahead moved first."""
    moved_counts = set()
    for seed in range(40):
        env = HarvestEnv(3, layout="PPP.")
        env.reset(seed=seed)
        put(env, {0: (0, 0), 1: (0, 1), 2: (0, 2)})
        env.step({a: MOVE_RIGHT for a in env.agents})
        pos = env.world.positions()
        assert len({tuple(p) for p in pos}) == 3  # never two on one cell
        assert pos[2].tolist() == [0, 3]  # the front agent always moves
        moved_counts.add(int((pos[:, 1] != [0, 1, 2]).sum()))
    assert moved_counts == {1, 2, 3}  # all orders happen


# -- regrowth --------------------------------------------------------------------------------


def test_neighbour_counts_match_brute_force():
    env = HarvestEnv(8, layout="generated")
    env.reset(seed=0)
    world = env.world
    rng = np.random.default_rng(0)
    apples = world.layer("apple")
    walls, orchard, _ = parse_map(env.layout)
    apples[:] = orchard & (rng.random(apples.shape) < 0.5)
    counts = world.neighbour_counts()
    for k, f in enumerate(world.orchard):
        r, c = world.coords(int(f))
        expected = sum(
            apples[r + dr, c + dc]
            for dr in range(-2, 3)
            for dc in range(-2, 3)
            if 0 < dr * dr + dc * dc <= 4
            and 0 <= r + dr < apples.shape[0]
            and 0 <= c + dc < apples.shape[1]
        )
        assert counts[k] == expected


SQUARE = "\n".join(["AAAAA"] * 5 + ["....P"])


@pytest.mark.parametrize("n", range(8))
def test_regrowth_probability_law(n):
    """The centre of a 5 x 5 orchard, empty with n apples within radius 2, regrows with
    probability REGROWTH[min(n, 5)] (0 for none: a bare patch stays bare)."""
    env = HarvestEnv(1, layout=SQUARE)
    env.reset(seed=n)
    world = env.world
    disk = [(2 + dr, 2 + dc) for dr in range(-2, 3) for dc in range(-2, 3)]
    disk = [(r, c) for r, c in disk if 0 < (r - 2) ** 2 + (c - 2) ** 2 <= 4]
    config = np.zeros((6, 5), np.float32)
    for r, c in disk[:n]:
        config[r, c] = 1
    apples = world.layer("apple")
    trials, grown = 6000, 0
    for _ in range(trials):
        apples[:] = config
        world._regrow()
        grown += int(apples[2, 2])
    p = REGROWTH[min(n, len(REGROWTH) - 1)]
    if p == 0:
        assert grown == 0
    else:
        sd = np.sqrt(p * (1 - p) / trials)
        assert abs(grown / trials - p) < 5 * sd


def test_no_regrowth_under_an_agent_and_a_bare_patch_is_dead_for_good():
    env = HarvestEnv(8)
    env.reset(seed=0)
    world = env.world
    apples = world.layer("apple")
    apples[:9, :9] = 0  # the top-left patch, harvested bare
    others = apples.sum()
    for _ in range(3000):
        world.transition()
    assert apples[:9, :9].sum() == 0
    assert apples.sum() == others  # full patches stay full (nothing to regrow)
    # an agent standing on an empty orchard cell with apples all around blocks its regrowth
    r, c = 5, 12  # centre of the top-middle patch
    apples[r, c] = 0
    put(env, {0: (r, c)})
    for _ in range(500):
        world.transition()
    assert apples[r, c] == 0
    world.remove(0)
    for _ in range(500):
        world.transition()
    assert apples[r, c] == 1


# -- tagging --------------------------------------------------------------------------------


def test_beam_hits_the_first_agent_only():
    env = HarvestEnv(3, layout="PPPPP")
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 2), 2: (0, 4)}, facing={0: RIGHT, 1: UP, 2: UP})
    obs, rewards, _, _, infos = env.step({"agent_0": TAG})
    assert infos["agent_1"]["tagged_out"] and not infos["agent_2"]["tagged_out"]
    assert not env.world.present(1) and env.world.present(2)
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0, "agent_2": 0.0}  # free by default


def test_beam_stops_at_walls_and_at_its_length():
    env = HarvestEnv(2, layout="P#P")
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 2)}, facing={0: RIGHT})
    env.step({"agent_0": TAG})
    assert env.world.present(1)
    env = HarvestEnv(2, layout="P.....P", beam=5)
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 6)}, facing={0: RIGHT})
    env.step({"agent_0": TAG})
    assert env.world.present(1)  # 6 cells away
    put(env, {1: (0, 5)})
    env.step({"agent_0": TAG})
    assert not env.world.present(1)  # 5 cells away
    env = HarvestEnv(2, layout="PP", tag_cost=0.5)
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 1)}, facing={0: LEFT})
    _, rewards, _, _, _ = env.step({"agent_0": TAG})
    assert rewards["agent_0"] == -0.5 and env.world.present(1)  # a miss costs too


def test_tagged_out_for_timeout_steps_with_zero_obs_and_reward_then_back_at_a_spawn():
    layout = "AAAAAAA\nP.P.P.P"
    timeout = 3
    env = HarvestEnv(2, layout=layout, timeout=timeout)
    env.reset(seed=0)
    put(env, {0: (1, 0), 1: (1, 2)}, facing={0: RIGHT})
    obs, rewards, _, _, infos = env.step({"agent_0": TAG, "agent_1": STAY})
    spawns = {(1, 0), (1, 2), (1, 4), (1, 6)}
    outs = [(obs["agent_1"], rewards["agent_1"], infos["agent_1"]["tagged_out"])]
    for _ in range(timeout):
        # the tagged agent tries to eat: a no-op while it is out
        obs, rewards, _, _, infos = env.step({"agent_0": STAY, "agent_1": MOVE_UP})
        outs.append((obs["agent_1"], rewards["agent_1"], infos["agent_1"]["tagged_out"]))
    for o, r, flag in outs[:timeout]:  # `timeout` zero observations (the flag aside)
        assert flag and r == 0.0
        assert o[:-1].sum() == 0 and o[-1] == 1
    o, r, flag = outs[timeout]
    assert not flag and o[-1] == 0 and o[-5:-1].sum() == 1  # back
    assert env.world.position(1) in spawns - {(1, 0)}
    assert env.world.times_tagged[1] == 1
    _, rewards, _, _, _ = env.step({"agent_1": MOVE_UP})  # acts again: eats
    assert rewards["agent_1"] == 1.0


def test_rewards_earned_before_a_tag_in_the_same_step_are_kept():
    outcomes = set()
    for seed in range(30):
        env = HarvestEnv(2, layout="PPA")
        env.reset(seed=seed)
        put(env, {0: (0, 0), 1: (0, 1)}, facing={0: RIGHT})
        _, rewards, _, _, infos = env.step({"agent_0": TAG, "agent_1": MOVE_RIGHT})
        assert infos["agent_1"]["tagged_out"]  # the beam reaches it before or after its move
        outcomes.add(rewards["agent_1"])
    assert outcomes == {0.0, 1.0}  # tagged first: no apple; ate first: keeps it


def test_a_map_always_has_a_free_spawn_point_for_each_agent_out():
    """K <= spawn points, so the agents out are never more than the free spawn points."""
    env = HarvestEnv(3, layout="PPP", timeout=0)
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 1), 2: (0, 2)}, facing={0: RIGHT})
    for _ in range(20):
        env.step({"agent_0": TAG})  # agent 1 out and straight back (timeout 0) each step
        assert env.world.present(1) and env.world.times_tagged[1] >= 1
        put(env, {0: (0, 0), 1: (0, 1)}, facing={0: RIGHT})
    assert env.world.times_tagged[1] == 20


# -- observations ---------------------------------------------------------------------------


def test_window_at_the_map_edge_reads_walls():
    env = HarvestEnv(1, layout="PA.\n...\n..#", view=5)
    env.reset(seed=0)
    obs, _ = env.reset(seed=0)
    window = obs["agent_0"][: 5 * 5 * 4].reshape(5, 5, 4)
    walls = np.ones((5, 5))
    walls[2:, 2:] = [[0, 0, 0], [0, 0, 0], [0, 0, 1]]
    assert (window[:, :, 0] == walls).all()
    apple = np.zeros((5, 5))
    apple[2, 3] = 1
    assert (window[:, :, 1] == apple).all()
    assert window[:, :, 2].sum() == 0  # no other agent
    assert window[:, :, 3].sum() == 1 and window[2, 2, 3] == 1  # self at the centre


def test_windows_match_a_per_cell_loop():
    env = HarvestEnv(32, layout="generated", view=7)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for _ in range(60):
        obs, *_ = env.step(random_actions(env, rng))
    world = env.world
    windows = world.observe()
    assert any(not world.present(i) for i in range(32))  # some are tagged out
    for i in range(32):
        assert np.array_equal(windows[i], naive_window(world, i))
        flat = obs[f"agent_{i}"]
        assert np.array_equal(flat[: 7 * 7 * 4], naive_window(world, i).reshape(-1))
        if world.present(i):
            assert flat[7 * 7 * 4 + world.facing[i]] == 1


def test_gridworld_core_moves_and_beams():
    walls = np.zeros((3, 3), bool)
    walls[1, 1] = True
    world = GridWorld(walls, num_agents=2, view=3, seed=0)
    world.place(0, 0, 0)
    assert not world.move(0, UP) and world.facing[0] == UP  # the map's edge: turns only
    assert not world.move(0, LEFT)
    assert world.move(0, DOWN) and world.position(0) == (1, 0)
    assert not world.move(0, RIGHT)  # the wall
    world.place(1, 2, 0)
    world.facing[0] = DOWN
    assert world.cast(0, 1) == 1 and world.cast(0, 0) == -1
    world.remove(1)
    assert world.cast(0, 5) == -1 and world.positions()[1].tolist() == [-1, -1]
    with pytest.raises(ValueError, match="taken"):
        world.place(1, 1, 1)
    with pytest.raises(NotImplementedError):
        world.step([0, 0])


# -- leaving agents -------------------------------------------------------------------------


def test_leave_when_tagged_removes_the_agent_for_good():
    env = HarvestEnv(3, layout="PPPPP", leave_when_tagged=True, lives=2, timeout=0)
    env.reset(seed=0)
    put(env, {0: (0, 0), 1: (0, 1), 2: (0, 4)}, facing={0: RIGHT})
    _, _, terms, _, infos = env.step({"agent_0": TAG})  # first life
    assert not any(terms.values()) and env.agents == env.possible_agents
    put(env, {1: (0, 1)})
    obs, _, terms, truncs, infos = env.step({"agent_0": TAG})  # second: gone
    assert terms == {"agent_0": False, "agent_1": True, "agent_2": False}
    assert not any(truncs.values()) and infos["agent_1"]["tagged_out"]
    assert obs["agent_1"][:-1].sum() == 0 and obs["agent_1"][-1] == 1
    assert env.agents == ["agent_0", "agent_2"]
    obs, rewards, terms, truncs, infos = env.step(
        {"agent_0": MOVE_RIGHT, "agent_1": MOVE_RIGHT}  # a departed agent's action: ignored
    )
    for d in (obs, rewards, terms, truncs, infos):
        assert set(d) == {"agent_0", "agent_2"}
    assert not env.world.present(1) and env.world.position(0) == (0, 1)
    for _ in range(30):
        env.step({})
    assert not env.world.present(1)  # never comes back


def test_random_play_with_leaving_empties_the_game():
    env = HarvestEnv(8, layout="generated", leave_when_tagged=True, lives=1, max_turns=2000)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    sizes = [8]
    while env.agents:
        _, _, terms, truncs, _ = env.step(random_actions(env, rng))
        left = 0 if any(truncs.values()) else sizes[-1] - sum(terms.values())
        assert len(env.agents) == left
        sizes.append(len(env.agents))
    assert sizes == sorted(sizes, reverse=True) and sizes[-2] < 4  # most were tagged out


# -- speed and the dilemma ------------------------------------------------------------------


def greedy(env, rng, keep=0):
    """Walk toward the nearest apple with at least `keep` apples around it (keep=0: any)."""
    world = env.world
    ok = (world.layer_flat("apple")[world.orchard] > 0) & (world.neighbour_counts() >= keep)
    rows, cols = np.divmod(world.orchard[ok], world.padded_width)
    rows, cols = rows - world.pad, cols - world.pad
    actions = {}
    for a in env.agents:
        pos = world.position(int(a.split("_")[1]))
        if pos is None or len(rows) == 0:
            actions[a] = int(rng.integers(0, 5))
            continue
        j = int((np.abs(rows - pos[0]) + np.abs(cols - pos[1])).argmin())
        dr, dc = rows[j] - pos[0], cols[j] - pos[1]
        if dr != 0 and abs(dr) >= abs(dc):
            actions[a] = MOVE_UP if dr < 0 else MOVE_DOWN
        elif dc != 0:
            actions[a] = MOVE_LEFT if dc < 0 else MOVE_RIGHT
        else:
            actions[a] = STAY
    return actions


def play(policy, seed=0):
    env = HarvestEnv(8)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total = 0.0
    start = time.perf_counter()
    while env.agents:
        _, rewards, _, _, _ = env.step(policy(env, rng))
        total += sum(rewards.values())
    return total, env.apples, 1000 / (time.perf_counter() - start)


def test_random_episode_is_fast_and_wears_the_commons_down():
    total, apples, steps_per_s = play(random_actions)
    print(f"\nK=8 default map, random policy: {steps_per_s:.0f} steps/s, return {total}")
    assert steps_per_s > 1000  # measured ~9,000 on one busy core
    assert apples < 65 and total > 0


def test_greed_kills_the_commons_and_restraint_keeps_it():
    greedy_return, greedy_apples, _ = play(greedy)
    kind_return, kind_apples, _ = play(lambda env, rng: greedy(env, rng, keep=5))
    assert greedy_apples == 0  # every patch harvested bare, for good
    assert kind_apples > 0 and kind_return > 3 * greedy_return
