"""``shoal bench``: the model's bounds on made-up parts, the parts timed on a real env, the
whole command end to end (it writes nothing and leaves nothing running), bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import threading
import time

import pytest
import torch

from shoal.bench import bench
from shoal.bench.model import pays_at, predict, processes, ray_from_modes, serial, threads
from shoal.bench.parts import Parts, measure_parts
from shoal.bench.plan import Sizes, estimate_startup, scheme_overrides, scheme_sizes
from shoal.bench.report import verdict
from shoal.bench.windows import Window
from shoal.cli import main
from shoal.config import load_config
from shoal.errors import ConfigError
from shoal.runners.processes import default_workers

pytestmark = pytest.mark.timeout(180)


def parts(**kw: float) -> Parts:
    """Parts of a made-up run: 1 env, a quarter update per env step, no contention, free
    transport; ``kw`` overrides."""
    values = dict(
        cores=2,
        gpu=None,
        num_envs=1,
        batch_size=32,
        ratio=0.25,
        env_step=1e-4,
        forward=1e-4,
        write=0.0,
        update=4e-3,
        update_beside_acting=4e-3,
        acting_beside_update=2e-4,
        update_beside_processes=4e-3,
        publish=0.0,
        pull=0.0,
        add=0.0,
        message=0.0,
        weight_bytes=1000,
    )
    values.update(kw)
    return Parts(**values)  # type: ignore[arg-type]


def test_serial_takes_acting_writing_and_updates_one_after_another():
    p = parts(write=1e-4)
    got = serial(p)
    assert got.steps_per_s == pytest.approx(1 / (2e-4 + 1e-4 + 0.25 * 4e-3))
    assert got.bound == "learner"
    assert serial(parts(update=1e-4)).bound == "acting"


def test_serial_takes_acting_as_timed_between_its_updates_where_it_was():
    """A serial run's acting after an update is slower than acting alone (colder caches,
    a GPU's queue): the acting timed between updates stands for acting and writing."""
    got = serial(parts(write=1e-4, acting_between_updates=6e-4))
    assert got.steps_per_s == pytest.approx(1 / (6e-4 + 0.25 * 4e-3))
    assert serial(parts(acting_between_updates=2e-3)).bound == "acting"


def test_workers_multiply_an_acting_bound_run_up_to_the_cores():
    slow_env = dict(
        env_step=1e-3, forward=0.0, update=1e-4, update_beside_processes=1e-4, ratio=1.0
    )
    alone = serial(parts(**slow_env)).steps_per_s
    four = processes(parts(cores=8, **slow_env), workers=4, publish_every=32)
    assert four.steps_per_s == pytest.approx(4 / 1e-3) and four.bound == "acting"
    assert four.steps_per_s / alone == pytest.approx(4 * 1.1e-3 / 1e-3)
    crowded = processes(parts(cores=2, **slow_env), workers=4, publish_every=32)
    assert crowded.bound == "cores"
    assert crowded.steps_per_s == pytest.approx(2 / 1.1e-3)
    slower = {**slow_env, "env_step": 2e-3}  # 1 worker reaches 0.95x of 1.1x serial: 2 do
    assert pays_at(parts(**slower), publish_every=32) == 3


def test_a_learner_bound_run_gains_from_no_number_of_cores():
    learner_bound = parts(env_step=1e-6, forward=1e-6, ratio=1.0, update=1e-3)
    assert pays_at(learner_bound, publish_every=32) is None
    got = processes(dataclasses.replace(learner_bound, cores=64), 63, publish_every=32)
    assert got.bound == "learner"
    assert got.steps_per_s < 1.1 * serial(learner_bound).steps_per_s


def test_threads_overlap_what_the_gil_lets_them():
    # Side by side, neither slowed: the two sides overlap fully.
    free = parts(update=1e-3, acting_beside_update=2e-4, update_beside_acting=1e-3, ratio=0.25)
    assert threads(free, 2).steps_per_s == pytest.approx(1 / max(2e-4, 0.25e-3))
    # Each side at half speed beside the other: the update holds the GIL throughout, and
    # threads are serial's pace.
    held = parts(update=1e-3, acting_beside_update=4e-4, update_beside_acting=2e-3)
    got = threads(held, 2)
    assert got.bound == "gil"
    assert got.steps_per_s == pytest.approx(serial(held).steps_per_s)


def test_threads_own_loop_where_timed_is_their_pace():
    """The threads runner's own loop timed stands for the model of their GIL: slower than
    serial's step is bound by the GIL, faster by the learner."""
    p = parts(update=1e-3, threads_step=2e-3)
    got = threads(p, 2)
    assert got.steps_per_s == pytest.approx(500) and got.bound == "gil"
    fast = threads(parts(update=1e-3, threads_step=2e-4), 2)
    assert fast.steps_per_s == pytest.approx(5000) and fast.bound == "learner"


def predicted(schemes: tuple[str, ...]) -> list:
    """``predict`` on :func:`parts` with one worker, two actors and two learner threads."""
    return predict(
        parts(),
        learner_threads=2,
        workers=1,
        publish_every=32,
        actors=2,
        ray_publish_every=10,
        ray_pull_every=100,
        schemes=schemes,
    )


def test_predict_keeps_the_schemes_order():
    got = predicted(("processes", "serial", "ray"))
    assert [p.scheme for p in got] == ["processes", "serial", "ray"]
    assert got[2].workers == 2


def test_the_parts_of_a_real_run_are_timed(tiny):
    cfg = load_config("cartpole", tiny(env__num_envs=2))
    p = measure_parts(cfg, seconds=2.0, compare_cpu=True)  # the GPU's path, on the CPU
    assert p.update_cpu is not None and p.update_cpu > 0
    assert p.num_envs == 2 and p.batch_size == 16 and p.ratio == 0.25
    for name in ("env_step", "forward", "update", "update_beside_acting", "publish", "pull"):
        value = getattr(p, name)
        assert math.isfinite(value) and value > 0, name
    assert p.message > 0 and p.add > 0 and p.weight_bytes > 0
    assert p.serial_step > p.ratio * p.update
    assert math.isfinite(p.acting_between_updates) and p.acting_between_updates > 0


def test_each_part_is_timed_in_blocks_spread_over_the_budget(tiny, monkeypatch):
    """The serial loop, the update alone and the threads runner's loop are each timed
    three times, interleaved, so a slow stretch of the machine lands in one block of each
    and the median leaves it out."""
    import shoal.bench.parts as parts_module

    order: list[str] = []
    for name in ("time_rounds", "per_update", "run_rounds"):
        real = getattr(parts_module, name)

        def spy(*args, _real=real, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            order.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(parts_module, name, spy)
    cfg = load_config("cartpole", tiny())
    p = measure_parts(cfg, seconds=2.0, threads=1.0, blocks=3)
    assert order.count("time_rounds") == 3
    rounds = [i for i, name in enumerate(order) if name == "time_rounds"]
    # between two blocks of the serial loop: the update alone, crowded, the threads' loop
    between = [order[a + 1 : b] for a, b in zip(rounds, rounds[1:])]
    assert all(b.count("per_update") == 2 and b.count("run_rounds") == 1 for b in between)
    assert p.threads_step > 0 and p.update_beside_acting == 0


def test_bench_end_to_end_writes_nothing_and_leaves_nothing_running(
    tmp_path, tiny, capsys, monkeypatch, no_shm_leak
):
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "cartpole", "--seconds", "6", "--runners", "serial,processes", "--json"]
    t0 = time.perf_counter()
    code = main([*argv, *[x for o in tiny() for x in ("--set", o)]])
    wall = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert code == 0
    report = json.loads(out)
    assert report["winner"] in ("serial", "processes") and report["reason"]
    schemes = {s["scheme"]: s for s in report["schemes"]}
    assert set(schemes) == {"serial", "processes"}
    for s in schemes.values():
        assert s["steps_per_s"] > 0 and s["measured"]["steps_per_s"] > 0
        assert s["measured"]["updates_per_s"] > 0
        assert len(s["paces"]) == 2  # the close call is the only other scheme: both again
    # said before any timing, on stderr (stdout is the JSON), and in the report
    assert "shoal bench: --seconds 6 of measuring, plus about" in err
    assert any("sizes: processes 1 worker, ray 1 actor" in n for n in report["notes"])
    assert any("start-ups (estimated beforehand: about" in n for n in report["notes"])
    startups = sum(s["measured"]["startup"] for s in schemes.values())
    assert wall < 6 * 1.5 + startups + 10  # the budget, start-up aside (loaded machines)
    assert list(tmp_path.iterdir()) == []  # no run directory, no file
    assert multiprocessing.active_children() == []


def test_every_scheme_is_timed_with_epsilon_at_its_end_value(monkeypatch):
    """Random acting until the bench's learning start (256 steps: replay fills at once,
    whole episodes end), then epsilon at its end value for every step timed."""
    import shoal.bench
    from shoal.agent.builder import build_epsilon

    seen: list[tuple[float, float, float]] = []

    def epsilons(cfg):
        schedule = build_epsilon(cfg)
        seen.append((schedule(0), schedule(256), schedule(10**6)))

    def fake_parts(cfg, seconds, threads=0.0):
        epsilons(cfg)
        return parts()

    def fake_window(cfg, scheme, *args):
        epsilons(cfg)
        return Window(scheme, 500.0, 125.0, 1.0, 0.5, 0.25)

    monkeypatch.setattr(shoal.bench, "measure_parts", fake_parts)
    monkeypatch.setattr(shoal.bench, "measure_window", fake_window)
    users = load_config("cartpole", ["explore.eps_end=0.1"])
    bench(users, seconds=2, schemes=["serial", "threads"])
    assert seen == [(1.0, 0.1, 0.1)] * 5  # the parts, each scheme's window, two again
    assert users.explore.eps_decay_steps == 10_000  # the user's config is left as it was
    # an untrained network's one action over and over must not stop episodes ending
    breakout = shoal.bench.at_end_epsilon(load_config("atari"))
    assert breakout == ["explore.eps_end=0.05", "explore.eps_decay_steps=256"]
    noisy = ["explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0"]
    assert shoal.bench.at_end_epsilon(load_config("cartpole", noisy)) == ["explore.eps_start=0.0"]


def test_a_scheme_is_named_only_where_it_beats_the_one_thread_one_by_the_margin():
    pred = predicted(("serial", "ray", "processes"))
    cfg = load_config("cartpole")

    def named(*paces: float) -> str:
        windows = [
            Window(s, v, v / 4, 5.0, 1.0, 0.25)
            for s, v in zip(("serial", "ray", "processes"), paces, strict=True)
        ]
        return verdict(cfg, parts(), pred, windows).winner

    assert named(800.0, 840.0, 700.0) == "serial"  # 1.05x: within the windows' noise
    windows = [
        Window(s, v, v / 4, 5.0, 1.0, 0.25)
        for s, v in (("serial", 800.0), ("ray", 840.0), ("processes", 700.0))
    ]
    reason = verdict(cfg, parts(), pred, windows).reason
    assert reason.startswith("too close to call: serial is the safe choice (ray 1.05x serial")
    assert named(800.0, 900.0, 700.0) == "ray"
    assert named(800.0, 900.0, 1000.0) == "processes"
    assert "too close" not in verdict(cfg, parts(), pred, windows[:1] + windows[2:]).reason


def test_a_close_call_is_weighed_on_both_windows_of_each():
    """A lead the first windows show but the second windows do not (or whose windows
    overlap) is too close to call, with its margin; one every window confirms is named."""
    pred = predicted(("serial", "processes"))
    cfg = load_config("cartpole")

    def judged(first, again):
        windows = [Window(s, v, v / 4, 5.0, 1.0, 0.25) for s, v in zip(PAIR, first)]
        repeats = [Window(s, v, v / 4, 5.0, 1.0, 0.25) for s, v in zip(PAIR[::-1], again)]
        return verdict(cfg, parts(), pred, windows, repeats)

    noisy = judged((800.0, 960.0), (800.0, 850.0))  # processes again 800, serial again 850
    assert noisy.winner == "serial" and noisy.paces("processes") == [960.0, 800.0]
    assert "too close to call: serial is the safe choice (processes 1.07x serial over 2" in (
        noisy.reason
    )
    assert "0.94-1.20x window to window" in noisy.reason
    overlapping = judged((800.0, 1000.0), (890.0, 900.0))  # 1.11x, but 890 < 900
    assert overlapping.winner == "serial" and "too close to call" in overlapping.reason
    clear = judged((800.0, 1000.0), (980.0, 790.0))
    assert clear.winner == "processes" and clear.pace("processes") == 990.0
    text = "\n".join(clear.lines())
    assert "| processes | 1 | " in text and "990 (1,000 / 980)" in text


PAIR = ("serial", "processes")


def test_bench_text_report_names_the_fastest(tiny):
    report = bench("cartpole", overrides=tiny(), seconds=4, schemes=["serial", "threads"])
    text = "\n".join(report.lines())
    assert f"use: {report.winner} (" in text
    assert "| serial |" in text and "| threads |" in text


def test_a_learner_on_a_gpu_is_reported_against_the_cpu():
    p = parts(gpu="NVIDIA H100", update=1e-3, update_cpu=8e-3)
    settings = dict(workers=1, publish_every=32, actors=2, ray_publish_every=10, ray_pull_every=1)
    pred = predict(p, learner_threads=2, **settings, schemes=("serial",))
    window = Window("serial", 700.0, 175.0, 5.0, 1.0, 0.25)
    text = "\n".join(verdict(load_config("cartpole"), p, pred, [window]).lines())
    assert "learner on NVIDIA H100" in text
    assert "an update 1.00 ms against 8.00 ms on the CPU (8.0x)" in text
    on_cpu = serial(dataclasses.replace(p, update=8e-3)).steps_per_s
    assert f"against {on_cpu:,.0f} with the learner on the CPU" in text
    assert "the GPU" not in "\n".join(
        verdict(load_config("cartpole"), parts(), pred, [window]).lines()
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["cartpole", "--seconds", "0"], "--seconds"),
        (["cartpole", "--seconds", "inf"], "--seconds"),
        (["cartpole", "--device", "cuda"], "cuda"),
        (["--env", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (["cartpole", "--runners", "agents"], "--runners"),
        (["cartpole", "--runners", "serial,bogus"], "bogus"),
        (["harvest", "--runners", "serial"], "agents-thread"),
        (["harvest", "--runners", "agents,agents-thread", "--seconds", "-1"], "--seconds"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # --device cuda: none
    code = main(["bench", *args, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seconds", ["1e12", "86400.5", "nan"])
def test_a_budget_past_a_day_is_refused_before_any_timing(capsys, monkeypatch, seconds):
    """``shoal bench --seconds 1e12`` was accepted; it fails at once now, on one line naming
    the flag, the value and the range, before the config is even loaded."""
    import shoal.bench

    def timing(*args, **kw):
        raise AssertionError("timing started")

    monkeypatch.setattr(shoal.bench, "_config", timing)
    monkeypatch.setattr(shoal.bench, "measure_parts", timing)
    code = main(["bench", "cartpole", "--seconds", seconds, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"shoal: error: --seconds {float(seconds)} is out of range; allowed: "
        "0 < seconds <= 86400 (a day)\n"
    )
    with pytest.raises(ConfigError, match=r"^--seconds 1000000000000\.0 is out of range"):
        bench("cartpole", seconds=1e12)
    shoal.bench.check_seconds(86_400)  # a day is allowed


@pytest.mark.parametrize("flag", ["--steps", "--out"])
def test_bench_takes_no_flag_it_would_ignore(capsys, flag):
    """It runs no run to an end and writes nothing: train's --steps and --out are not its."""
    with pytest.raises(SystemExit) as e:
        main(["bench", "cartpole", flag, "100"])
    assert e.value.code == 2 and f"unrecognized arguments: {flag}" in capsys.readouterr().err


HARVEST = [
    "env.id='shoal/Harvest-v0'",
    "run.runner='agents'",
    "agents.agents=3",
    "agents.max_turns=60",
]


def test_a_world_weighs_the_agents_runner_s_ways_of_learning(tiny, no_shm_leak):
    report = bench("harvest", overrides=[*tiny(), *HARVEST], seconds=9)
    assert [w.scheme for w in report.windows] == ["agents", "agents-thread", "agents-process"]
    assert [p.scheme for p in report.predictions] == [w.scheme for w in report.windows]
    for w in report.windows:
        assert w.pace > 0 and w.updates_per_s > 0
    assert report.parts.update > 0 and report.parts.env_step > 0
    assert report.winner in {w.scheme for w in report.windows}
    assert multiprocessing.active_children() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-")]


def test_the_ray_scheme_is_weighed_on_ray(tiny, ray_session):
    report = bench("cartpole", overrides=tiny(), seconds=6, schemes=["serial", "ray"])
    ray = next(w for w in report.windows if w.scheme == "ray")
    assert ray.steps_per_s > 0 and ray.updates_per_s > 0
    (acting, none), (nothing, learning), (steps, updates) = ray.modes
    assert acting > 0 and learning > 0 and steps > 0 and updates > 0 and none == nothing == 0
    pred = next(p for p in report.predictions if p.scheme == "ray")
    # one actor: the size processes gets too (cpu_count() - 2, at least 1, on 2 cores)
    assert pred == ray_from_modes(list(ray.modes), report.parts.ratio, default_workers())
    assert "ray on its own runner: actors alone" in "\n".join(report.lines())


def test_the_parallel_schemes_are_weighed_at_one_size_unless_the_config_chose():
    n = default_workers()
    assert scheme_sizes(load_config("cartpole")) == Sizes(n, n, scheme_sizes(load_config()).how)
    for over in (["processes.workers=3"], ["ray.actors=3"]):
        sizes = scheme_sizes(load_config("cartpole", over))
        assert (sizes.workers, sizes.actors, sizes.how) == (3, 3, "equal, as the config sets")
    sizes = scheme_sizes(load_config("cartpole", ["processes.workers=3", "ray.actors=5"]))
    assert "processes 3 workers, ray 5 actors (each as the config sets)" in sizes.line()


def test_a_slow_envs_ray_call_is_cut_to_fit_a_window_and_its_start_up_is_said_first():
    cfg = load_config("cartpole")
    slow = parts(env_step=0.02, forward=1e-4)
    assert scheme_overrides(cfg, "ray", Sizes(1, 1, ""), slow) == [
        "ray.actors=1",
        "ray.steps_per_call=24",
    ]
    assert scheme_overrides(cfg, "ray", Sizes(1, 1, ""), parts())[1] == "ray.steps_per_call=250"
    assert scheme_overrides(cfg, "processes", Sizes(2, 2, ""), slow) == ["processes.workers=2"]
    fast = estimate_startup(cfg, ["serial", "processes"], Sizes(1, 1, ""), 1e-5)
    slow_env = estimate_startup(cfg, ["serial", "processes"], Sizes(1, 1, ""), 0.02)
    # 256 steps to the first update, 6 runners (parts, 2 windows, 2 again) at 20 ms a step
    assert slow_env.fill == pytest.approx(5 * 256 * 0.0205, rel=0.01)
    assert slow_env.seconds - fast.seconds == pytest.approx(1.3 * 5 * 256 * 0.02, rel=0.01)
    assert "plus about" in slow_env.line(120) and "20.00 ms an env step" in slow_env.line(120)


def test_ray_s_loop_comes_before_its_window_and_its_sides_after(monkeypatch):
    """The actors alone and the learner alone leave the runner faster than a run finds
    it for a while, so nothing that predicts or measures it may follow them."""
    import contextlib

    import shoal.bench.windows as windows

    order: list[str] = []

    class Built:
        cfg = load_config("cartpole")

        def start(self) -> None:
            order.append("start")

    def loop(runner, step, seconds):
        order.append("loop")
        return (800.0, 200.0), step

    def rounds(runner, step, seconds):
        order.append("window")
        return 800, 200, 1.0, step + 800

    def sides(runner, step, seconds):
        order.append("sides")
        return [(4000.0, 0.0), (0.0, 250.0)]

    monkeypatch.setattr(windows, "bench_runner", lambda *a: contextlib.nullcontext(Built()))
    monkeypatch.setattr(windows, "warm_up", lambda runner, seconds: 0)
    monkeypatch.setattr(windows, "time_loop", loop)
    monkeypatch.setattr(windows, "run_rounds", rounds)
    monkeypatch.setattr(windows, "time_sides", sides)
    got = windows.measure_window(Built.cfg, "ray", "ray", [], 10.0, 4.0)
    assert order == ["start", "loop", "window", "sides"]
    assert got.modes == ((4000.0, 0.0), (0.0, 250.0), (800.0, 200.0))


def test_ray_is_predicted_from_its_own_loop_bound_by_the_slower_side():
    """Its loop's pace with its updates done; the learner alone keeping up with 800 env
    steps against the actors' 1,000 bounds it by the learner."""
    modes = [(1000.0, 0.0), (0.0, 200.0), (600.0, 100.0)]
    got = ray_from_modes(modes, 0.25, actors=2)
    assert got.steps_per_s == pytest.approx(400.0) and got.bound == "learner"
    assert got.scheme == "ray" and got.workers == 2
    fast_learner = ray_from_modes([(1000.0, 0.0), (0.0, 400.0), (600.0, 180.0)], 0.25, 2)
    assert fast_learner.steps_per_s == pytest.approx(600.0) and fast_learner.bound == "acting"


def test_a_stopped_bench_prints_what_it_measured_so_far(monkeypatch, capsys):
    """SIGTERM or Ctrl-C in the third window: the parts and the two windows timed are
    printed, the rest marked not measured, and the exit code is the signal's."""
    import shoal.bench
    from shoal.run.preemption import Preempted

    def fake_parts(cfg, seconds, threads=0.0):
        return parts(update_mode="CUDA graph", update_eager=8e-3)

    def fake_window(cfg, scheme, *args):
        if scheme == "processes":
            raise Preempted(15)
        return Window(scheme, 500.0, 125.0, 1.0, 0.5, 0.25)

    monkeypatch.setattr(shoal.bench, "measure_parts", fake_parts)
    monkeypatch.setattr(shoal.bench, "measure_window", fake_window)
    code = main(["bench", "cartpole", "--seconds", "3", "--runners", "serial,threads,processes"])
    out, err = capsys.readouterr()
    assert code == 128 + 15
    assert "shoal bench: stopped; measured the parts and serial, threads" in out
    assert "update 4.00 ms (CUDA graph)" in out
    assert "the update as CUDA graph: 4.00 ms against 8.00 ms eager (2.0x)" in out
    assert "| processes |" in out and "not measured" in out and "use: serial (" in out
    assert "stopped by" in err and "(shoal bench writes nothing)" in err


def test_a_bench_stopped_in_its_parts_says_nothing_was_measured(monkeypatch, capsys):
    import shoal.bench

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(shoal.bench, "measure_parts", interrupted)
    assert main(["bench", "cartpole", "--seconds", "3", "--runners", "serial"]) == 130
    assert "stopped while timing the parts; nothing measured yet" in capsys.readouterr().out


def test_of_two_schemes_that_clear_serial_within_the_margin_the_simpler_is_named():
    """MinAtar here: threads 1.33x serial, processes 1.20x, one window apart by noise;
    naming whichever measured faster would flip run to run. Both clear serial, and within
    the margin of each other the simpler scheme (threads: no extra process) is named."""
    from shoal.bench import _close_others

    schemes = ("serial", "threads", "processes", "ray")
    pred = predicted(schemes)
    cfg = load_config("cartpole")
    first = [Window(s, v, v / 4, 5.0, 1.0, 0.25) for s, v in zip(schemes, (1000, 1250, 1330, 900))]
    assert _close_others(first) == ["threads", "processes"]  # both again; ray is not close
    again = [
        Window(s, v, v / 4, 5.0, 1.0, 0.25)
        for s, v in (("threads", 1300), ("processes", 1350), ("serial", 1050))
    ]
    report = verdict(cfg, parts(), pred, first, again)
    assert report.winner == "threads"
    assert "processes (1.05x it) is within the 10% windows move by, and threads is the simpler" in (
        report.reason
    )
    far = [*again[:1], Window("processes", 1900, 475, 5.0, 1.0, 0.25), again[2]]
    assert verdict(cfg, parts(), pred, first, far).winner == "processes"  # 1.5x threads


def test_workers_sets_the_one_size_processes_and_ray_are_weighed_at(monkeypatch):
    import shoal.bench

    seen = []

    def fake_bench(config, *, overrides, **kwargs):
        seen.append(list(overrides))
        raise ConfigError("stopped here")

    monkeypatch.setattr(shoal.bench, "bench", fake_bench)
    assert main(["bench", "cartpole", "--workers", "3", "--no-progress"]) == 2
    sizes = scheme_sizes(load_config("cartpole", seen[0]))
    assert (sizes.workers, sizes.actors) == (3, 3)
