"""MAPF evaluation: the shortest-path baseline's makespan and sum of costs on hand-made maps,
its head-on deadlock, sum of costs when an agent leaves its goal again, reproducible
generated instances and MovingAI scenario instances, every policy on the same instances,
GIF and PNG strip files, and the ``shoal mapf eval`` command with its bad-input errors."""

import json

import numpy as np
import pytest
from PIL import Image

from shoal.cli import main
from shoal.envs.mapf import bfs_distances
from shoal.envs.movingai import write_map, write_scen
from shoal.errors import ConfigError
from shoal.mapf.animation import STRIP_GAP, save_animation
from shoal.mapf.baselines import ShortestPathPolicy
from shoal.mapf.evaluate import (
    Instance,
    evaluate,
    generated_instances,
    play,
    scenario_instances,
)
from shoal.mapf.policy import RandomMoves, Unstick

pytestmark = pytest.mark.timeout(120)

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def parse(rows):
    """A bool obstacle grid from rows of '#' (obstacle) and '.' (free)."""
    return np.array([[ch == "#" for ch in row] for row in rows], dtype=bool)


def instance(rows, starts, goals):
    return Instance(parse(rows), starts, goals, "hand-made")


def distance(inst, i):
    r, c = inst.starts[i]
    return int(bfs_distances(inst.grid, tuple(inst.goals[i]))[r, c])


class Scripted:
    """Plays a fixed list of joint actions, then stays; records what it was reset on."""

    def __init__(self, script=(), name="scripted"):
        self.script = [np.array(a) for a in script]
        self.name = name
        self.seen = []

    def reset(self, env):
        self.seen.append((env.grid.copy(), env.starts.copy(), env.goals.copy()))

    def act(self, env):
        if env.steps < len(self.script):
            return self.script[env.steps]
        return np.zeros(env.max_num_agents, np.intp)


# -- the baseline and the metrics ---------------------------------------------------------------


def test_shortest_path_solves_one_agent_in_its_bfs_distance():
    inst = instance(["....", ".##.", "...."], [(0, 0)], [(2, 3)])
    result = play(ShortestPathPolicy(), inst)
    assert result.success and result.collisions == 0
    assert result.makespan == result.sum_of_costs == distance(inst, 0) == 5
    assert result.frames == ()


def test_shortest_path_without_conflicts_makespan_is_the_longest_path_soc_the_sum():
    inst = instance(["......", "......", "......"], [(0, 0), (2, 0)], [(0, 5), (2, 2)])
    result = play(ShortestPathPolicy(), inst)
    dists = [distance(inst, i) for i in range(2)]
    assert dists == [5, 2]
    assert result.success and result.collisions == 0 and result.on_goal == 2
    assert result.makespan == max(dists) and result.sum_of_costs == sum(dists)


def test_shortest_path_deadlocks_head_on_in_a_corridor():
    inst = instance(["....."], [(0, 0), (0, 4)], [(0, 4), (0, 0)])
    result = play(ShortestPathPolicy(), inst, max_steps=20)
    assert not result.success and result.steps == 20
    assert result.makespan is None and result.sum_of_costs is None
    assert result.on_goal == 0 and result.collisions > 0


def test_a_failure_is_stalled_only_when_nobody_moved_in_its_last_steps():
    corridor = instance(["....."], [(0, 0), (0, 4)], [(0, 4), (0, 0)])
    deadlock = play(ShortestPathPolicy(), corridor, max_steps=40)  # bumps head-on for ever
    assert not deadlock.success and deadlock.stalled
    # agent 0 walks right and back until step 9: 31 still steps are not 32
    pace = [[RIGHT, STAY], [LEFT, STAY]] * 4 + [[RIGHT, STAY]]
    assert not play(Scripted(pace), corridor, max_steps=40).stalled
    assert play(Scripted(pace), corridor, max_steps=41).stalled
    assert not play(ShortestPathPolicy(), instance(["...."], [(0, 0)], [(0, 3)])).stalled
    report = evaluate([ShortestPathPolicy()], [corridor, corridor], max_steps=40)
    assert report.summaries[0].stalled == 2
    assert report.to_json()["policies"][0]["stalled"] == 2
    assert report.to_json()["episodes"]["shortest-path"][0]["stalled"] is True


def test_random_moves_break_a_deadlock_the_same_way_for_every_run():
    # Head-on in a corridor with one side pocket: greedy shortest paths wait for ever.
    inst = instance([".....", "##.##"], [(0, 0), (0, 4)], [(0, 4), (0, 0)])
    assert not play(ShortestPathPolicy(), inst, max_steps=100).success
    noisy = [play(RandomMoves(ShortestPathPolicy(), 0.2), inst, max_steps=100) for _ in range(2)]
    assert noisy[0].success and noisy[0] == noisy[1]
    calm = play(RandomMoves(ShortestPathPolicy(), 0.0), instance(["...."], [(0, 0)], [(0, 3)]))
    assert calm.success and calm.steps == 3  # epsilon 0 changes nothing
    with pytest.raises(ConfigError, match="epsilon 1.5"):
        RandomMoves(ShortestPathPolicy(), 1.5)
    report = evaluate([ShortestPathPolicy()], [inst], max_steps=100, epsilon=0.2)
    assert report.epsilon == 0.2 and report.summaries[0].solved == 1
    assert report.to_json()["epsilon"] == 0.2


def test_unstick_frees_a_standstill_the_same_way_for_every_run():
    inst = instance([".....", "##.##"], [(0, 0), (0, 4)], [(0, 4), (0, 0)])
    freed = [play(Unstick(ShortestPathPolicy(), 3), inst, max_steps=100) for _ in range(2)]
    assert freed[0].success and freed[0] == freed[1]
    assert not freed[0].stalled
    report = evaluate([ShortestPathPolicy()], [inst], max_steps=100, unstick=3)
    assert report.unstick == 3 and report.summaries[0].solved == 1
    assert report.to_json()["unstick"] == 3
    with pytest.raises(ConfigError, match="patience 0"):
        Unstick(ShortestPathPolicy(), 0)
    with pytest.raises(ConfigError, match="--unstick -1"):
        evaluate([ShortestPathPolicy()], [inst], unstick=-1)


def test_unstick_leaves_movers_and_agents_on_goal_alone():
    # agent 0 waits on its goal for ever; agent 1 walks two steps: nothing is randomised
    inst = instance(["...."], [(0, 0), (0, 3)], [(0, 0), (0, 1)])
    walk = Scripted([[STAY, LEFT], [STAY, LEFT]])
    got = play(Unstick(walk, 1), inst, max_steps=20)
    assert got.success and got.steps == 2 and got.collisions == 0


def test_unstick_waits_exactly_patience_still_steps_and_restarts_after_a_move():
    inst = instance([".....", ".....", "....."], [(1, 2)], [(0, 0)])
    first_random = set()
    for seed in range(20):
        policy = Unstick(Scripted(name="still"), 3, seed=seed)
        env = inst.env(max_steps=40)
        env.reset(seed=0)
        policy.reset(env)
        still = 0  # steps since the agent last changed cell
        for _ in range(12):
            action = int(policy.act(env)[0])
            if still < 3:
                assert action == STAY  # the wrapped policy's own action
            elif action != STAY:
                first_random.add(still)
            before = env.positions.copy()
            env.step({env.possible_agents[0]: action})
            still = still + 1 if (env.positions == before).all() else 0
    assert 3 in first_random  # from the third still step on, some draws move


def test_sum_of_costs_counts_the_last_arrival_of_each_agent():
    # agent 0 passes over its goal (0, 1) and comes back at step 3; agent 1 walks 4 steps;
    # agent 2 starts on its goal, steps off and back (step 2); agent 3 never moves off it
    inst = instance(
        [".....", ".....", "....."],
        [(0, 0), (2, 0), (1, 2), (1, 0)],
        [(0, 1), (2, 4), (1, 2), (1, 0)],
    )
    script = [
        [RIGHT, RIGHT, DOWN, STAY],
        [RIGHT, RIGHT, UP, STAY],
        [LEFT, RIGHT, STAY, STAY],
        [STAY, RIGHT, STAY, STAY],
    ]
    result = play(Scripted(script), inst)
    assert result.success and result.collisions == 0
    assert result.makespan == 4
    assert result.sum_of_costs == 3 + 4 + 2 + 0


def test_agents_all_starting_on_their_goals_are_solved_in_zero_steps():
    inst = instance(["..."], [(0, 0), (0, 2)], [(0, 0), (0, 2)])
    result = play(ShortestPathPolicy(), inst, frames=True)
    assert result.success and result.makespan == 0 and result.sum_of_costs == 0
    assert len(result.frames) == 1


def test_collisions_count_failed_moves():
    inst = instance(["...", "#.."], [(0, 0), (0, 2)], [(0, 1), (1, 2)])
    # step 1: agent 0 walks into the obstacle below it, agent 1 off the map: two failures
    result = play(Scripted([[DOWN, RIGHT], [RIGHT, DOWN]]), inst)
    assert result.success and result.collisions == 2 and result.makespan == 2


def test_policy_returning_a_wrong_shape_is_reported():
    inst = instance(["..."], [(0, 0)], [(0, 2)])
    with pytest.raises(ValueError, match="shape"):
        play(Scripted([[RIGHT, RIGHT]]), inst)


# -- instances ---------------------------------------------------------------------------------


def test_generated_instances_are_reproducible_and_differ_across_k():
    a = generated_instances(3, 8, 4, seed=5)
    b = generated_instances(3, 8, 2, seed=5)
    other = generated_instances(3, 8, 1, seed=6)
    assert len(a) == 4
    for x, y in zip(a, b):  # instance k does not depend on the count
        assert np.array_equal(x.grid, y.grid) and np.array_equal(x.starts, y.starts)
        assert np.array_equal(x.goals, y.goals) and x.source == y.source
    grids = {x.grid.tobytes() for x in a}
    assert len(grids) == 4
    assert not np.array_equal(a[0].grid, other[0].grid)
    for x in a:
        assert x.grid.shape == (8, 8) and x.num_agents == 3
        density = float(x.source.split("density ")[1].split(",")[0])
        assert 0.1 <= density <= 0.3
        assert not x.grid.flags.writeable


def test_generated_instances_with_a_fixed_density_and_bad_arguments():
    (x,) = generated_instances(2, 6, 1, density=0.0, seed=0)
    assert not x.grid.any()
    for bad in (1.0, -0.1, (0.3, 0.1)):
        with pytest.raises(ConfigError, match="density"):
            generated_instances(2, 6, 1, density=bad, seed=0)
    with pytest.raises(ConfigError, match="instances"):
        generated_instances(2, 6, 0, seed=0)


def test_every_policy_plays_the_same_instances():
    instances = generated_instances(2, 6, 3, seed=1)
    a, b = Scripted(name="a"), Scripted(name="b")
    report = evaluate([a, b, ShortestPathPolicy()], instances, max_steps=10)
    assert len(a.seen) == len(b.seen) == 3
    for inst, seen_a, seen_b in zip(instances, a.seen, b.seen):
        for got in (seen_a, seen_b):
            assert np.array_equal(got[0], inst.grid)
            assert np.array_equal(got[1], inst.starts) and np.array_equal(got[2], inst.goals)
    assert [s.name for s in report.summaries] == ["a", "b", "shortest-path"]
    # the scripted policies never move: nothing is solved by all, so no fair-comparison means
    assert report.common == () and report.summaries[2].common_makespan is None
    assert report.summaries[0].solved == 0 and report.summaries[0].makespan is None
    assert all(len(report.episodes[n]) == 3 for n in ("a", "b", "shortest-path"))


def test_report_means_over_own_and_over_commonly_solved_instances():
    easy = instance(["...."], [(0, 1)], [(0, 0)])
    far = instance(["...."], [(0, 0)], [(0, 3)])
    always_right = Scripted([[RIGHT]] * 3, name="right")
    report = evaluate([ShortestPathPolicy(), always_right], [easy, far], max_steps=3)
    # "right" walks away from the easy goal, so only the far instance is solved by both
    assert report.common == (1,)
    sp, right = report.summaries
    assert sp.solved == 2 and sp.success_rate == 1.0 and sp.makespan == 2.0
    assert sp.common_makespan == 3.0 and sp.common_sum_of_costs == 3.0
    assert right.solved == 1 and right.makespan == right.common_makespan == 3.0
    with pytest.raises(ConfigError, match="distinct"):
        evaluate([ShortestPathPolicy(), ShortestPathPolicy()], [easy])


def test_scenario_instances_take_the_first_n_entries_of_each_file(tmp_path):
    grid = parse(["....", ".#..", "...."])
    write_map(tmp_path / "m.map", grid)
    write_scen(
        tmp_path / "a.scen", "m.map", grid, [(0, 0), (2, 3), (0, 3)], [(2, 0), (0, 0), (2, 2)]
    )
    write_scen(tmp_path / "b.scen", "m.map", grid, [(0, 0), (2, 0)], [(0, 3), (2, 1)])
    scens = [tmp_path / "a.scen", tmp_path / "b.scen"]
    a, b = scenario_instances(tmp_path / "m.map", scens, 2)
    assert np.array_equal(a.grid, grid) and np.array_equal(b.grid, grid)
    assert a.starts.tolist() == [[0, 0], [2, 3]] and a.goals.tolist() == [[2, 0], [0, 0]]
    assert b.starts.tolist() == [[0, 0], [2, 0]] and b.goals.tolist() == [[0, 3], [2, 1]]
    assert a.source == "m.map + a.scen"
    assert play(ShortestPathPolicy(), b).success
    with pytest.raises(ConfigError, match="has 2 entries"):
        scenario_instances(tmp_path / "m.map", scens, 3)
    with pytest.raises(ConfigError, match="does not exist"):
        scenario_instances(tmp_path / "nope.map", scens, 2)
    write_map(tmp_path / "small.map", grid[:2])
    with pytest.raises(ConfigError, match="entry 0"):
        scenario_instances(tmp_path / "small.map", scens, 2)
    walled = grid.copy()
    walled[0, 0] = True
    write_map(tmp_path / "walled.map", walled)
    with pytest.raises(ConfigError, match="a.scen.*obstacle"):
        scenario_instances(tmp_path / "walled.map", scens, 2)


# -- animation ---------------------------------------------------------------------------------


def test_gif_and_png_strip_are_written(tmp_path):
    inst = instance(["....", "....", "...."], [(0, 0), (2, 0)], [(0, 3), (2, 2)])
    result = play(ShortestPathPolicy(), inst, frames=True)
    frames = result.frames
    assert len(frames) == result.steps + 1 == 4
    assert frames[0].shape == (24, 32, 3) and frames[0].dtype == np.uint8
    gif = save_animation(frames, tmp_path / "ep.gif", scale=3)
    with Image.open(gif) as im:
        assert im.format == "GIF" and im.n_frames == 4 and im.size == (96, 72)
        assert im.info["loop"] == 0
    strip = save_animation(frames, tmp_path / "ep.png", scale=2, strip_frames=3)
    with Image.open(strip) as im:
        assert im.format == "PNG" and im.size == (3 * 64 + 2 * STRIP_GAP, 48)
        pixels = np.asarray(im.convert("RGB"))
    # first and last frames are in the strip
    assert np.array_equal(pixels[:, :64], np.repeat(np.repeat(frames[0], 2, 0), 2, 1))
    assert np.array_equal(pixels[:, -64:], np.repeat(np.repeat(frames[-1], 2, 0), 2, 1))
    with Image.open(save_animation(frames, tmp_path / "auto.gif")) as im:
        assert min(im.size) >= 24 and max(im.size) >= 320  # small maps are scaled up
    with pytest.raises(ConfigError, match=".gif or a .png"):
        save_animation(frames, tmp_path / "ep.mp4")


# -- the command -------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


GENERATE = ("--generate", "--agents", 2, "--size", 6, "--instances", 3, "--max-steps", 32)
BASELINES = ["shortest-path", "pibt", "pibt-noswap", "lacam"]


def test_cli_baseline_only_prints_a_table_and_writes_json(tmp_path, capsys):
    out_file = tmp_path / "report.json"
    code, out, err = run_cli(capsys, "mapf", "eval", "-", *GENERATE, "--out", out_file)
    assert code == 0, err
    assert "shortest-path" in out and "makespan" in out and "(all solved)" in out
    report = json.loads(out_file.read_text())
    assert [p["name"] for p in report["policies"]] == BASELINES
    assert len(report["instances"]) == 3 and len(report["episodes"]["pibt"]) == 3
    assert report["max_steps"] == 32 and report["epsilon"] == 0.0
    code, out, err = run_cli(capsys, "mapf", "eval", "-", *GENERATE, "--epsilon", 0.1)
    assert code == 0 and "random moves 0.1" in out, err
    code, out, err = run_cli(capsys, "mapf", "eval", "-", *GENERATE, "--unstick", 2)
    assert code == 0 and "unstuck after 2 still steps" in out, err


def test_cli_with_a_run_plays_five_policies_and_animates_the_first(tmp_path, capsys, monkeypatch):
    calls = []

    def fake_load_policy(run_dir, *, comm=True, checkpoint="best", trust_code=False):
        calls.append((str(run_dir), comm))
        policy = ShortestPathPolicy()
        policy.name = "dhc"  # both alike: the command renames the no-comm one
        return policy

    monkeypatch.setattr("shoal.mapf.policy.load_policy", fake_load_policy)
    run = tmp_path / "run"
    run.mkdir()
    gif = tmp_path / "ep.gif"
    out_file = tmp_path / "r.json"
    code, out, err = run_cli(
        capsys, "mapf", "eval", run, *GENERATE, "--gif", gif, "--out", out_file
    )
    assert code == 0, err
    assert calls == [(str(run), True), (str(run), False)]
    rows = [line for line in out.splitlines() if "/3" in line]
    assert [r.split()[1] for r in rows] == ["dhc", "no-comm", *BASELINES]
    names = [p["name"] for p in json.loads(out_file.read_text())["policies"]]
    assert names == ["dhc", "no-comm", *BASELINES]
    with Image.open(gif) as im:
        assert im.n_frames >= 2
    assert "animation:" in out and "dhc" in out
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--no-baselines")
    assert code == 0, err
    assert len([line for line in out.splitlines() if "/3" in line]) == 1
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--shield", "pibt")
    assert code == 0, err
    rows = [line.split()[1] for line in out.splitlines() if "/3" in line]
    assert rows == ["dhc", "dhc+pibt", "no-comm", "no-comm+pibt", *BASELINES]
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--shield", "lacam")
    assert code == 0, err
    rows = [line.split()[1] for line in out.splitlines() if "/3" in line]
    assert rows[:4] == ["dhc", "dhc+lacam", "no-comm", "no-comm+lacam"]
    guided = ("--shield", "pibt", "--shield-guide", 0.5)
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, *guided)
    assert code == 0, err
    rows = [line.split()[1] for line in out.splitlines() if "/3" in line]
    assert rows[:4] == ["dhc", "dhc+pibt", "no-comm", "no-comm+pibt"]


def test_cli_plays_through_the_runs_own_shield_and_guide_by_default(tmp_path, capsys, monkeypatch):
    """A run that trained through the PIBT shield is evaluated through it without
    --shield, guided by the run's mapf.shield_guide (today's default, 3)."""
    from shoal.config import load_config, save_config
    from shoal.mapf import evaluate

    def fake_load_policy(run_dir, *, comm=True, checkpoint="best", trust_code=False):
        policy = ShortestPathPolicy()
        policy.name, policy.shield_guide = ("shoal" if comm else "no-comm"), 3.0
        return policy

    monkeypatch.setattr("shoal.mapf.policy.load_policy", fake_load_policy)
    played, real = [], evaluate.evaluate
    monkeypatch.setattr(
        evaluate,
        "evaluate",
        lambda policies, *a, **k: played.append(policies) or real(policies, *a, **k),
    )
    run = tmp_path / "run"
    run.mkdir()
    save_config(load_config("mapf", ["mapf.shield='pibt'"]), run / "config.toml")
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--no-baselines")
    assert code == 0, err
    assert [p.name for p in played[-1]] == ["shoal", "shoal+pibt"]
    assert played[-1][1].policy.weight == 3.0  # guided by the run's weight
    save_config(load_config("mapf"), run / "config.toml")  # trained without a shield
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--no-baselines")
    assert code == 0, err
    assert [p.name for p in played[-1]] == ["shoal"]
    code, out, err = run_cli(capsys, "mapf", "eval", run, *GENERATE, "--shield-guide", 1)
    assert code == 2 and "--shield-guide goes with --shield" in err


def test_cli_scenario_instances(tmp_path, capsys):
    grid = parse(["....", "....", "...."])
    write_map(tmp_path / "m.map", grid)
    write_scen(tmp_path / "a.scen", "m.map", grid, [(0, 0), (2, 0)], [(0, 3), (2, 3)])
    code, out, err = run_cli(
        capsys,
        "mapf",
        "eval",
        "-",
        "--map",
        tmp_path / "m.map",
        "--scen",
        tmp_path / "a.scen",
        "--agents",
        2,
    )
    assert code == 0, err
    assert "1/1" in out and "100.0%" in out


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--map", "{tmp}/none.map", "--scen", "{tmp}/a.scen", "--agents", 2), "does not exist"),
        (("--map", "{tmp}/m.map", "--scen", "{tmp}/a.scen", "--agents", 5), "has 2 entries"),
        (("--map", "{tmp}/m.map", "--agents", 2), "--map needs --scen"),
        (("--map", "{tmp}/m.map", "--scen", "{tmp}/a.scen", "--agents", 2, "--size", 5), "--size"),
        (("--generate", "--agents", 2), "--generate needs --size"),
        (("--generate", "--scen", "{tmp}/a.scen", "--agents", 2, "--size", 5), "--scen"),
        ((*GENERATE, "--density", 0.5, 0.2), "density"),
        ((*GENERATE, "--density", 0.1, 0.2, 0.3), "--density"),
        ((*GENERATE, "--gif", "{tmp}/ep.mp4"), ".gif or a .png"),
        ((*GENERATE, "--out", "{tmp}/no/dir/r.json"), "does not exist"),
        ((*GENERATE, "--no-baselines"), "nothing is left"),
        ((*GENERATE, "--epsilon", 1.5), "--epsilon 1.5"),
        ((*GENERATE, "--unstick", -1), "--unstick -1"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, args, needle):
    grid = parse(["....", "...."])
    write_map(tmp_path / "m.map", grid)
    write_scen(tmp_path / "a.scen", "m.map", grid, [(0, 0), (1, 0)], [(0, 3), (1, 3)])
    argv = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    code, out, err = run_cli(capsys, "mapf", "eval", "-", *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shoal: error:") and needle in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.scen", "m.map"]  # nothing written


def test_cli_missing_run_dir_and_argparse_errors(tmp_path, capsys):
    code, _, err = run_cli(capsys, "mapf", "eval", tmp_path / "nowhere", *GENERATE)
    assert code == 2 and "does not exist" in err
    for argv in (
        ("--map", "m.map", "--generate", "--agents", 2),  # both sources
        ("--size", 5, "--agents", 2),  # neither
    ):  # checked once, by the command: a one-line error naming both flags
        code, _, err = run_cli(capsys, "mapf", "eval", "-", *argv)
        assert code == 2 and "give either --map FILE.map --scen FILE.scen or --generate" in err
    with pytest.raises(SystemExit) as e:  # a required option: argparse says so
        run_cli(capsys, "mapf", "eval", "-", "--generate", "--size", 5)
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:  # a shield shoal does not have
        run_cli(capsys, "mapf", "eval", "-", *GENERATE, "--shield", "cbs")
    assert e.value.code == 2
    assert "argument --shield: invalid choice: 'cbs'" in capsys.readouterr().err
    for argv, needle in (
        (("--shield-guide", 1.0), "--shield-guide goes with --shield pibt|lacam"),
        (("--shield", "pibt", "--shield-guide", -1.0), "--shield-guide -1.0: the weight must"),
    ):
        code, out, err = run_cli(capsys, "mapf", "eval", "-", *GENERATE, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err


def test_a_shield_takes_the_runs_guide_unless_the_flag_sets_one(tmp_path, monkeypatch):
    from shoal.mapf.evaluate import _policies
    from shoal.mapf.guide import GuidedPolicy

    def fake_load_policy(run_dir, *, comm=True, checkpoint="best", trust_code=False):
        policy = ShortestPathPolicy()
        policy.name, policy.shield_guide = ("shoal" if comm else "no-comm"), 0.25
        return policy

    monkeypatch.setattr("shoal.mapf.policy.load_policy", fake_load_policy)
    run = tmp_path / "run"
    run.mkdir()
    shielded = _policies(run, True, shield="pibt")[1]
    assert isinstance(shielded.policy, GuidedPolicy) and shielded.policy.weight == 0.25
    shielded = _policies(run, True, shield="pibt", guide=2.0)[1]
    assert shielded.policy.weight == 2.0
    assert not isinstance(_policies(run, True, shield="pibt", guide=0.0)[1].policy, GuidedPolicy)
