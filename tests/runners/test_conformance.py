"""Every registered runner passes the same checks: it solves CartPole (with a user's recipe
and network on the DQN runners), leaves a checkpoint on Ctrl-C that ``--resume`` continues
to a finished run with every artifact written, stops on a preemption signal, leaks no
process, thread or shared-memory segment, and has a bad config rejected before any work.
Variants (a user's recipe, IQN's, batched envs, pixels, MAPF's recipe on serial, processes
and ray) go through the Ctrl-C and artifact checks too.

A throwaway runner (``throwaway.py``, registered here) goes through the same suite, which
is what adding a runner costs.
"""

import multiprocessing as mp
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import shoal
from shoal.config import load_config
from shoal.errors import ConfigError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners import register_runner, runner_class, runner_for, runner_names

register_runner("episodes", "throwaway:EpisodeRunner")
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))  # user_code/: a recipe from outside shoal/

RUNNERS = runner_names()
ASYNC = ["agents.async_learning=true"]
MAPF = [
    "env.id='shoal/Mapf-v0'",
    "mapf.envs=2",
    "mapf.agents=2",
    "mapf.max_agents=2",
    "mapf.size=6",
    "mapf.max_size=6",
    "mapf.max_steps=24",
    "mapf.channels=4",
    "mapf.hidden=8",
    "mapf.heads=2",
    "r2d2.length=4",
    "r2d2.burn_in=2",
    "r2d2.period=4",
    "mapf.eval_agents=[2]",
    "mapf.eval_sizes=[6]",
    "run.train_freq=16",
]
"""A small MAPF world (2 agents on 6x6 maps): the MAPF recipe on the serial, processes
and ray runners."""
BATCHED = ["env.num_envs=4"]
ONE_WORKER = ["processes.workers=1"]
ONE_ACTOR = ["ray.actors=1", "ray.steps_per_call=50"]
"""One Ray actor. A call plays ray.steps_per_call steps of each env: at the default 250 the
first call of a 600-step run is the whole run; 50 lets the checks see several calls (a run
that ends on its first call is test_ray_runner's)."""
RECIPE = ["run.recipe='user_code.recipes:PseudoHuberDQN'"]
"""A new algorithm from outside shoal/ (a pseudo-Huber loss): one module, and it runs
on every DQN runner."""
DQN_RUNNERS = ("serial", "threads", "processes", "ray")
IQN = ["run.recipe='iqn'", "iqn.n_quantiles=4", "iqn.n_target_quantiles=4"]
"""shoal's IQN recipe: its learner draws quantile fractions, which a resume must continue."""
IQN_TORSO = "iqn.torso='user_code.qnets:layernorm_torso'"
NOISY = ["explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0"]
"""Noisy layers in place of epsilon: acting draws noise wherever an actor runs."""
R2D2 = [
    "run.recipe='r2d2'",
    "r2d2.length=4",
    "r2d2.burn_in=2",
    "r2d2.period=2",
    "r2d2.state_dim=8",
]
"""Recurrent DQN: memories carried per env, sequences cut per env, a resume that restores
both."""
C51 = ["run.recipe='c51'", "c51.v_min=0", "c51.v_max=100"]
"""Categorical DQN, the example of a new algorithm: its recipe, network and loss, config
section and one registry line, and no edit to a runner, the builder or the config core."""
PIXELS = ["run.train_freq=8"]
"""Pixel runs update every 8 env steps: a convolution's update costs what the checks need
no more of."""
MINATAR = ["env.id='MinAtar/Breakout-v1'", "dqn.encoder='minatar'", "env.num_envs=2", *PIXELS]
"""Pixels: MinAtar's 10 x 10 x 4 frames through the conv encoder."""
ATARI = [
    "env.id='ALE/Pong-v5'",
    "env.frame_stack=4",
    "dqn.encoder='nature'",
    "env.num_envs=2",
    "replay.capacity=2000",
    # ale-py reloads the ROM at every seeded reset (0.1 s): fewer, longer episodes
    "env.max_episode_steps=300",
    *PIXELS,
]
"""Atari: 4 stacked 84 x 84 screens through the Nature encoder, replay keeping frames once."""
COMPILE = ["run.compile='compile'"]
VARIANTS = {
    "agents/process": [*ASYNC, "agents.async_mode='process'"],
    "agents/thread": [*ASYNC, "agents.async_mode='thread'"],
    **{f"{name}/mapf": MAPF for name in ("serial", "processes", "ray")},
    # 4 envs per worker or Ray actor: the IQN and R2D2 cases below (the same batched
    # acting and transport)
    **{f"{name}/4envs": BATCHED for name in ("serial", "threads", "episodes")},
    # A user's recipe on every DQN runner: in the driver, its learner threads, spawned
    # workers and Ray actors.
    **{f"{name}/recipe": RECIPE for name in DQN_RUNNERS},
    # IQN on every runner (K stacked IQN agents on agents), one env or 4 (and
    # test_serial_runner's exact resume with 4)
    **{f"{name}/iqn": IQN for name in ("serial", "threads")},
    # ... with noisy layers where actors act elsewhere (each stacked agent its own noise),
    # and a user's torso under the quantile head where workers and actors build it (one
    # worker or actor: several are the plain cases')
    "agents/iqn": [*IQN, *NOISY],
    "processes/iqn": [*IQN, *BATCHED, *NOISY, IQN_TORSO, *ONE_WORKER],
    "ray/iqn": [*IQN, *BATCHED, *NOISY, IQN_TORSO, *ONE_ACTOR],
    # C51 on every DQN runner (the acting, transports and priorities are the shared ones),
    # and K stacked C51 agents
    **{f"{name}/c51": C51 for name in (*DQN_RUNNERS, "agents")},
    # R2D2 on every DQN runner, one env or 4 (and test_serial_runner's exact resume)
    **{f"{name}/r2d2": R2D2 for name in ("serial", "threads")},
    "processes/r2d2": [*R2D2, *BATCHED, *ONE_WORKER],
    "ray/r2d2": [*R2D2, *BATCHED, *ONE_ACTOR],
    # MinAtar's env and encoder in the driver; pixels through every transport are ATARI's.
    "serial/minatar": MINATAR,
    **{f"{name}/atari": ATARI for name in ("serial", "threads")},
    # one worker: the frames' way through the pipe is the same with two, at half the
    # emulators and conv networks on a 2-core machine
    "processes/atari": [*ATARI, *ONE_WORKER],
    "ray/atari": [*ATARI, "ray.steps_per_call=50"],
    # The update compiled (torch.compile of the loss; a CUDA graph is test_capture's, on a
    # stand-in): wherever the learner runs, and the K stacked agents'. The threads runner
    # stays eager (its learner threads split gradients from their step).
    **{f"{name}/compile": COMPILE for name in ("serial", "processes", "ray", "agents")},
}
"""Configurations of a runner that run on other threads or processes, or in worlds that
have their own version of it: they go through the artifact and Ctrl-C checks too."""
CASES = RUNNERS + list(VARIANTS)
pytestmark = pytest.mark.timeout(300)


def runner_overrides(case, tiny=None, **extra):
    name = case.split("/")[0]
    base = [f"run.runner={name}"]
    if runner_class(name).multi_agent:  # a small multi-agent world instead of CartPole
        base += ["env.id='shoal/Harvest-v0'", "agents.agents=2", "agents.max_turns=50"]
    if name == "processes":
        base.append("processes.workers=2")
    if name == "ray":  # the session's one local Ray (share_ray), which each run joins
        base += ["ray.actors=2", "ray.node_ip_address='127.0.0.2'"]
    if name == "threads":
        base.append("threads.learner_threads=2")
    # the variant's settings after the tiny run's (PIXELS' and MAPF's train_freq)
    return base + (tiny(**extra) if tiny is not None else []) + VARIANTS.get(case, [])


def no_leftovers():
    assert mp.active_children() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-")]


def episode_steps(run: RunDir) -> int:
    """Env steps in the run's episode rows and in the episodes its checkpoint has running."""
    rows = read_metrics(run.metrics)
    running = load_checkpoint(run.checkpoint).get("acting", {"lengths": [0]})["lengths"]
    return sum(int(r["length"]) for r in rows if r["kind"] == "episode") + int(sum(running))


def check_artifacts(run: RunDir, result, case: str, cut: int = 0) -> None:
    """Every artifact of a finished run is there and agrees with the run's result; ``cut``
    env steps were in the episodes a Ctrl-C ended (put in replay, with no episode row)."""
    for path in (run.config, run.metrics, run.checkpoint, run.best, run.curve):
        assert path.is_file(), path
    assert any(run.tensorboard.glob("events.out.tfevents.*"))
    rows = read_metrics(run.metrics)
    assert {r["kind"] for r in rows} == {"episode", "eval", "tick"}
    if not case.endswith("/mapf"):  # MAPF's worlds count steps their own way
        # every other env step is in a logged episode or in one still running at the end
        assert episode_steps(run) + cut == result.env_steps
    assert result.updates > 0 and np.isfinite(result.eval_return)
    evals = [float(r["eval_mean"]) for r in rows if r["kind"] == "eval"]
    assert result.best_eval_return == max(evals)
    assert load_checkpoint(run.best)["eval_mean"] == max(evals)


@pytest.mark.parametrize("name", CASES)
def test_ctrl_c_checkpoints_resume_continues_and_every_artifact_is_written(
    name, tmp_path, tiny, monkeypatch, no_shm_leak
):
    """One run per case (a run on Ray or of Atari takes seconds to start): Ctrl-C in its
    learning leaves a checkpoint, ``--resume`` continues it to the end, and the finished run
    has every artifact."""
    cls = runner_for(load_config("cartpole", runner_overrides(name)))
    original = cls.learn
    calls = {"n": 0}

    def interrupting(self, step, new_steps):
        calls["n"] += 1
        if step >= 400:
            raise KeyboardInterrupt
        return original(self, step, new_steps)

    monkeypatch.setattr(cls, "learn", interrupting)
    overrides = runner_overrides(name, tiny, run__total_steps=5000)
    with pytest.raises(KeyboardInterrupt):
        shoal.train("cartpole", overrides=overrides, run_dir=tmp_path / "r")
    no_leftovers()
    run = RunDir(tmp_path / "r")
    step = load_checkpoint(run.checkpoint)["loop"]["step"]
    assert step >= 400
    cut = step - episode_steps(run)
    # only the episodes running at the Ctrl-C: at most 2 workers or actors x 4 envs x 300 steps
    assert 0 <= cut <= 2 * 4 * 300, cut
    monkeypatch.setattr(cls, "learn", original)
    # a runner that takes in whole episodes may be past 900 at its first learn after 400
    total = max(900, step + 200)
    result = shoal.train(
        resume=tmp_path / "r", overrides=[f"run.total_steps={total}"], trust_code=True
    )
    assert result.env_steps >= total
    assert load_checkpoint(run.checkpoint)["loop"]["step"] == result.env_steps
    check_artifacts(run, result, name, cut)
    no_leftovers()


@pytest.mark.parametrize("name", RUNNERS)
def test_bad_config_is_rejected_before_any_work(name, tmp_path, tiny):
    section = getattr(runner_class(name), "section", None)
    bad = ["run.total_steps=0"] + ([f"{section[0]}.no_such_key=1"] if section else [])
    for override in bad:
        with pytest.raises(ConfigError, match="total_steps|no_such_key"):
            shoal.train(
                "cartpole",
                overrides=[*runner_overrides(name, tiny), override],
                run_dir=tmp_path / "r",
            )
        assert not (tmp_path / "r").exists()
    no_leftovers()


def test_unknown_runner_names_the_registered_ones(tmp_path):
    with pytest.raises(ConfigError, match="'serial', 'threads', 'processes'"):
        shoal.train("cartpole", overrides=["run.runner=nope"], run_dir=tmp_path / "r")


UNREPRODUCIBLE = ("threads", "processes", "ray")
"""Runners whose runs with one seed differ (learners and actors race)."""
USERS = [*RECIPE, "dqn.network='user_code.qnets:layernorm_mlp'"]
"""An algorithm and a network from outside shoal/: a pseudo-Huber loss, and an MLP with
LayerNorm (a shape shoal's config cannot describe)."""


SOLVES = [(name, 0) for name in RUNNERS] + [
    ("serial", 1),
    ("serial/compile", 1),
    ("serial/c51", 0),
]
"""Every runner on seed 0, where a DQN runner trains the user's recipe and network (USERS),
through its own transport; shoal's own recipe and network on seed 1 of the serial runner,
eager and with its loss compiled; C51 (a new algorithm) on the serial runner.
(Every runner on more seeds, and the time each takes, are
benchmarks/cartpole_time_to_solve.py's: here a second seed cost a minute and a half of the
suite, a threads run alone 30 s.)"""


@pytest.mark.slow
@pytest.mark.parametrize("name, seed", SOLVES)
def test_solves_cartpole(name, seed, tmp_path, no_shm_leak):
    """To the bar (a runner whose runs differ run to run gets a second run)."""
    if runner_class(name.split("/")[0]).multi_agent:
        pytest.skip("a multi-agent runner learns in its own worlds (test_agents_runner.py)")
    users = seed == 0 and name in DQN_RUNNERS
    overrides = [*runner_overrides(name), f"run.seed={seed}", "run.progress=false"]
    overrides += USERS if users else []
    run_dir = tmp_path / "r"
    result = shoal.train("cartpole", overrides=overrides, run_dir=run_dir)
    if result.solved_step is None and name in UNREPRODUCIBLE:
        # Thread and process timing make each such run a different run: one threads run in
        # about 25 stalled near 100 for 40k steps. A second run must solve; a runner that
        # does not learn fails both.
        run_dir = tmp_path / "again"
        result = shoal.train("cartpole", overrides=overrides, run_dir=run_dir)
    assert result.solved_step is not None and result.solved_step <= 50_000, result
    assert result.eval_return >= 475
    # best.pt, the evaluation that solved it, on 20 episodes no evaluation saw: the solve was
    # already confirmed on fresh starts (run.confirm_solve), so this checks that the policy
    # holds up, not a third time that it clears the bar. A 20-episode mean of a policy at
    # the bar varies by ~10 (one 350-return episode costs 7.5): a ray run's best.pt scored
    # 473.35 here once after clearing 475 twice, and a processes run's 448.7 (7 of 20
    # episodes at 300-380) after a confirmed solve; an unsolved policy scores far lower.
    returns = shoal.evaluate_run(run_dir, episodes=20, trust_code=True)
    assert returns.mean() >= 425, returns
    if users:  # the run names them, and the weights are the user's module's
        saved = (run_dir / "config.toml").read_text()
        assert 'recipe = "user_code.recipes:PseudoHuberDQN"' in saved
        online = load_checkpoint(RunDir(run_dir).best, best=True)["learner"]["online"]
        assert {"1.weight", "4.weight", "6.bias"} <= set(online)  # LayerNorms at 1 and 4
    no_leftovers()


def _session_processes(sid):
    """Pids of live processes in session ``sid`` (the run started its own)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":  # the session id, not a zombie
            pids.append(int(entry.name))
    return pids


def _wait_for_step(metrics, step, proc, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        if metrics.is_file():
            rows = [r for r in read_metrics(metrics) if r["kind"] == "tick"]
            if rows and int(rows[-1]["step"]) >= step:
                return
        time.sleep(0.2)
    raise AssertionError(f"no tick past step {step} in {timeout} s")


PREEMPTIONS = [
    ("serial", "SIGUSR1", "process"),
    ("threads", "SIGTERM", "process"),
    ("agents", "SIGTERM", "process"),
    ("processes", "SIGTERM", "group"),
    ("ray", "SIGTERM", "group"),
]
"""A preemption signal on every runner: SIGTERM to the run's process (docker stop,
Kubernetes), or to its whole process group where it has children of its own, workers or a
local Ray (Slurm, systemd); Slurm's SIGUSR1 warning on the serial runner."""


def test_every_registered_runner_is_preempted_above():
    assert {name for name, _, _ in PREEMPTIONS} == set(RUNNERS) - {"episodes"}


@pytest.mark.parametrize("name, sig, target", PREEMPTIONS)
def test_a_preemption_signal_checkpoints_stops_everything_and_resume_continues(
    name, sig, target, tmp_path, tiny
):
    run = RunDir(tmp_path / "r")
    overrides = runner_overrides(
        name, tiny, run__total_steps=1_000_000, run__checkpoint_every=500_000
    )
    argv = [sys.executable, "-m", "shoal.cli", "train", "cartpole", "--run-dir", str(run.path)]
    argv += [x for o in overrides for x in ("--set", o)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env
    )
    try:
        _wait_for_step(run.metrics, 200, proc)
        signum = getattr(signal, sig)
        os.killpg(proc.pid, signum) if target == "group" else proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert f"stopped by {sig}" in err and f"--resume {run.path}" in err, err
    # shoal's line alone: no warning or log line of Ray's, Python's or a library's
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()], err
    deadline = time.monotonic() + 30  # a local Ray's daemons take a moment to leave
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _session_processes(proc.pid) == []
    step = load_checkpoint(run.checkpoint)["loop"]["step"]
    assert step >= 200  # no periodic checkpoint was due before step 500,000
    result = shoal.train(
        resume=run.path, overrides=[f"run.total_steps={step + 100}"], trust_code=True
    )
    assert result.env_steps >= step + 100
    no_leftovers()
