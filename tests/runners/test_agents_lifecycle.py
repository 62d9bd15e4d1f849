"""The agents runner's lifecycle: a hung or slow learning thread (``agents.step_timeout``),
Ctrl-C during async learning and ``--resume``, agents that leave mid-episode (their buffers
hold their transitions up to their departure and nothing after), and worlds the runner
must reject (agent names that change between resets, continuous actions).

The small worlds are in ``leaving_world.py``; ``env.id='pettingzoo:MODULE'`` imports
``MODULE`` and calls its ``parallel_env()``, so this folder goes on ``sys.path`` and the
variants are put in modules of their own (``world_id``).
"""

import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import shoal
from shoal.envs.harvest import HarvestEnv
from shoal.errors import EnvError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.agents import AgentsRunner, LearningThreadError

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent


@pytest.fixture
def worlds(monkeypatch):
    """``leaving_world`` importable by a ``pettingzoo:`` id (this folder on ``sys.path``)."""
    monkeypatch.syspath_prepend(str(HERE))
    import leaving_world

    monkeypatch.setattr(leaving_world.CountingHarvest, "made", [])
    return leaving_world


def world_id(monkeypatch, name, factory):
    """An env id for a module ``name`` whose ``parallel_env`` is ``factory``."""
    module = types.ModuleType(name)
    module.parallel_env = factory
    monkeypatch.setitem(sys.modules, name, module)
    return f"env.id='pettingzoo:{name}'"


@pytest.fixture
def harvest(harvest):
    """The small harvest run; async learning here means the learning thread."""
    return lambda **extra: [*harvest(**extra), "agents.async_mode='thread'"]


def shoal_threads():
    return [t for t in threading.enumerate() if t.name.startswith("shoal-")]


def join_shoal_threads(timeout=10.0):
    for t in shoal_threads():
        t.join(timeout)
    assert not shoal_threads(), "a shoal- thread is still alive"


def episode_rows(run_dir):
    return [r for r in read_metrics(RunDir(run_dir).metrics) if r["kind"] == "episode"]


# --- a hung or slow learning thread ----------------------------------------------------------


def hang_learning(monkeypatch, release):
    def hung(self, replays):
        release.wait()  # until the test lets it go (its finally)
        return 0.0

    monkeypatch.setattr(AgentsRunner, "train_round", hung)


def test_a_hung_learning_step_fails_the_run_within_step_timeout(
    tmp_path, tiny, monkeypatch, harvest
):
    # No periodic checkpoint: the hang shows when the run ends and waits for the scheduled
    # rounds (finish); the only checkpoint is the one RunLoop writes after the error
    # (beside latest.pt, as error.pt).
    release = threading.Event()
    hang_learning(monkeypatch, release)
    over = harvest(agents__async_learning="true", agents__step_timeout=1.0)
    over.append("run.checkpoint_every=100000")
    timer = threading.Timer(10.0, release.set)  # with the bug, the run waits for this
    timer.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(LearningThreadError, match="no progress for 1.0 s"):
            shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
        elapsed = time.monotonic() - t0
        assert elapsed < 8.0, f"the hung run took {elapsed:.1f} s to fail"
        state = load_checkpoint(RunDir(tmp_path / "r").error_checkpoint)
        assert state["loop"]["step"] == 600
    finally:
        release.set()
        timer.cancel()
        join_shoal_threads()


def test_a_hung_learning_step_does_not_hang_a_periodic_checkpoint(
    tmp_path, tiny, monkeypatch, harvest
):
    release = threading.Event()
    hang_learning(monkeypatch, release)
    over = harvest(agents__async_learning="true", agents__step_timeout=1.0)
    timer = threading.Timer(10.0, release.set)
    timer.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(LearningThreadError, match="no progress for 1.0 s"):
            shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
        elapsed = time.monotonic() - t0
        assert elapsed < 8.0, f"the hung run took {elapsed:.1f} s to fail"
        assert RunDir(tmp_path / "r").error_checkpoint.is_file()
    finally:
        release.set()
        timer.cancel()
        join_shoal_threads()


def test_a_slow_but_progressing_learning_thread_is_not_declared_hung(
    tmp_path, tiny, monkeypatch, harvest
):
    # Every round of the last phase takes 0.3 s (well under step_timeout=1.0), but the
    # last epoch took 2 s to collect while the thread, with nothing to do, sat idle.
    original_round, original_collect = AgentsRunner.train_round, AgentsRunner.collect
    slow = threading.Event()

    def slow_round(self, replays):
        if slow.is_set():
            time.sleep(0.3)
        return original_round(self, replays)

    def slow_last_epoch(self, step):
        got = original_collect(self, step)
        if step + got.steps >= 600:
            time.sleep(2.0)
            slow.set()
        return got

    monkeypatch.setattr(AgentsRunner, "train_round", slow_round)
    monkeypatch.setattr(AgentsRunner, "collect", slow_last_epoch)
    over = harvest(
        agents__async_learning="true",
        agents__step_timeout=1.0,
        run__train_freq=20,  # 3 rounds an epoch
        run__eval_every=250,  # no evaluation between the last epoch and the end
        run__checkpoint_every=100000,
    )
    try:
        result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
        assert result.updates == (600 - 120) // 20 + 1  # the schedule's points 120..600
    finally:
        join_shoal_threads()


# --- Ctrl-C during async learning -----------------------------------------------------------


def test_ctrl_c_during_async_learning_checkpoints_stops_the_thread_and_resumes(
    tmp_path, tiny, monkeypatch, harvest
):
    # Ctrl-C lands in the main thread in the middle of epoch 5 (turn 30 of 60) while the
    # learning thread is in a round: shoal.train re-raises KeyboardInterrupt (the CLI turns
    # it into exit code 130) after stopping the thread and writing a checkpoint; resume then
    # plays the run to its end.
    original_round, original_collect, original_step = (
        AgentsRunner.train_round,
        AgentsRunner.collect,
        HarvestEnv.step,
    )
    armed, in_round, interrupted = threading.Event(), threading.Event(), threading.Event()

    def round_(self, replays):
        if armed.is_set() and not in_round.is_set():
            in_round.set()
            interrupted.wait(5.0)  # hold this round until Ctrl-C has landed
        return original_round(self, replays)

    def collect(self, step):
        if self.epochs == 4:  # rounds are scheduled (since step 120): the thread has work
            armed.set()
        try:
            return original_collect(self, step)
        finally:
            armed.clear()

    def step(self, actions):
        if armed.is_set() and self.turn == 30 and not interrupted.is_set():
            assert in_round.wait(5.0), "the learning thread took no round"
            interrupted.set()
            raise KeyboardInterrupt
        return original_step(self, actions)

    monkeypatch.setattr(AgentsRunner, "train_round", round_)
    monkeypatch.setattr(AgentsRunner, "collect", collect)
    monkeypatch.setattr(HarvestEnv, "step", step)
    over = harvest(
        agents__async_learning="true",
        run__total_steps=3000,
        run__checkpoint_every=100000,  # the only checkpoint is the one Ctrl-C writes
    )
    with pytest.raises(KeyboardInterrupt):
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert interrupted.is_set()
    assert not shoal_threads()
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["loop"]["step"] == 240  # the cut epoch is not counted: it is replayed
    assert state["loop"]["episode"] == state["epochs"] == 4
    assert state["learner"]["updates"] > 0

    monkeypatch.undo()
    result = shoal.train(resume=tmp_path / "r", overrides=["run.total_steps=600"])
    assert result.env_steps == 600
    assert result.updates > state["learner"]["updates"]
    assert load_checkpoint(RunDir(tmp_path / "r").checkpoint)["loop"]["step"] == 600
    rows = episode_rows(tmp_path / "r")
    assert [int(r["episode"]) for r in rows] == list(range(10))  # none lost, none twice
    assert [int(r["step"]) for r in rows] == list(range(60, 601, 60))
    assert not shoal_threads()


def test_ctrl_c_does_not_wait_for_the_learning_threads_whole_phase(
    tmp_path, tiny, monkeypatch, capfd, harvest
):
    # The first phase is the first training point's rounds (learning starts at turn 1200,
    # one point, 300 gradient steps): 300 rounds of 10 ms, 3 s. Ctrl-C lands just after it
    # has begun.
    original_round, original_collect = AgentsRunner.train_round, AgentsRunner.collect
    in_round, pressed = threading.Event(), {}

    def slow_round(self, replays):
        in_round.set()
        time.sleep(0.01)
        return original_round(self, replays)

    def collect(self, step):
        if step >= 1200:
            assert in_round.wait(5.0), "the learning thread took no round"
            pressed["at"] = time.monotonic()
            raise KeyboardInterrupt
        return original_collect(self, step)

    monkeypatch.setattr(AgentsRunner, "train_round", slow_round)
    monkeypatch.setattr(AgentsRunner, "collect", collect)
    over = harvest(
        agents__async_learning="true",
        agents__step_timeout=1.0,
        run__total_steps=3000,
        run__learning_starts=1200,
        run__train_freq=4,
        run__gradient_steps=300,
        run__eval_every=100000,
        run__checkpoint_every=100000,
    )
    try:
        with pytest.raises(KeyboardInterrupt):
            shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
        elapsed = time.monotonic() - pressed["at"]
        assert "cleanup after the error failed" not in capfd.readouterr().err
        assert not shoal_threads()
        assert load_checkpoint(RunDir(tmp_path / "r").checkpoint)["loop"]["step"] == 1200
        assert elapsed < 1.5, f"Ctrl-C took {elapsed:.1f} s to end the run"
    finally:
        join_shoal_threads()


def test_ctrl_c_during_an_evaluation_loses_no_episode_row(tmp_path, tiny, monkeypatch, harvest):
    original = AgentsRunner.evaluate

    def interrupted_evaluation(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(AgentsRunner, "evaluate", interrupted_evaluation)
    over = harvest(agents__async_learning="true")  # evaluates at step 300
    with pytest.raises(KeyboardInterrupt):
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert not shoal_threads()
    monkeypatch.setattr(AgentsRunner, "evaluate", original)
    result = shoal.train(resume=tmp_path / "r")
    assert result.env_steps == 600
    rows = episode_rows(tmp_path / "r")
    assert [int(r["step"]) for r in rows] == list(range(60, 601, 60))
    assert sum(int(r["length"]) for r in rows) == result.env_steps


# --- agents that leave mid-episode ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "thread", "process"])
def test_an_agent_that_leaves_stores_only_its_transitions_up_to_its_departure(
    tmp_path, tiny, worlds, mode
):
    turns, leave_at = worlds.TURNS, worlds.LEAVE_AT
    over = [
        "run.runner=agents",
        "env.id='pettingzoo:leaving_world'",
        "dqn.n_step=1",  # one transition per turn played
        f"agents.async_learning={str(mode != 'sync').lower()}",
        f"agents.async_mode={'thread' if mode == 'sync' else mode!r}",
        *tiny(run__total_steps=160, run__learning_starts=40, run__eval_every=80),
    ]
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert result.env_steps == 160 and result.updates > 0
    epochs = 160 // turns
    # Greedy evaluation: each agent earns 1 a turn while it is in the game.
    assert result.eval_return == 2 * turns + leave_at

    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["epochs"] == epochs
    fields = [r["storage"]["fields"] for r in state["replays"]]
    for agent in (0, 1):  # they play every turn and are truncated, never terminated
        f = fields[agent]
        assert len(f["discount"]) == epochs * turns
        assert np.all(f["discount"] > 0)
        assert np.all(f["obs"][:, 1] == agent)
    leaver = fields[2]
    played = np.rint(leaver["obs"][:, 0] * turns)  # the turn each transition started in
    assert len(played) == epochs * leave_at
    assert sorted(set(played.tolist())) == list(range(leave_at))
    assert np.all(np.rint(leaver["next_obs"][:, 0] * turns) <= leave_at)
    assert np.all(leaver["obs"][:, 1] == 2)  # its own observations, never the zeros filler
    # Its last transition of every episode ends it: nothing to bootstrap from.
    assert np.array_equal(leaver["discount"] == 0, played == leave_at - 1)

    for row in episode_rows(tmp_path / "r"):
        assert int(row["length"]) == turns
        assert float(row["return_leaver"]) == leave_at
        assert float(row["return_agent_0"]) == float(row["return_agent_1"]) == turns


def test_harvest_agents_that_leave_when_tagged_store_only_their_live_turns(
    tmp_path, tiny, monkeypatch, worlds
):
    # env.id='shoal/Harvest-v0' has no option for leave_when_tagged; a pettingzoo: module
    # can make harvest with it (as a user would), here one that counts who played when.
    env = world_id(monkeypatch, "leaving_harvest", worlds.CountingHarvest)
    over = ["run.runner=agents", env, "dqn.n_step=1", *tiny(run__learning_starts=120)]
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert result.updates > 0
    (train_env,) = [e for e in worlds.CountingHarvest.made if e.turns == result.env_steps]
    assert sum(train_env.left.values()) > 0, "nobody was tagged out of the game"
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    for agent, replay in zip(train_env.possible_agents, state["replays"]):
        discount = replay["storage"]["fields"]["discount"]
        assert len(discount) == train_env.live_turns[agent], agent
        assert int((discount == 0).sum()) == train_env.left[agent], agent
    rows = episode_rows(tmp_path / "r")
    assert sum(int(r["length"]) for r in rows) == result.env_steps


# --- worlds the runner rejects ----------------------------------------------------------------


def test_agent_names_that_change_between_resets_are_a_one_line_env_error(
    tmp_path, tiny, monkeypatch, worlds
):
    env = world_id(monkeypatch, "renaming_world", worlds.renaming_env)
    over = ["run.runner=agents", env, *tiny()]
    with pytest.raises(EnvError, match="'pettingzoo:renaming_world'.*agent list changed") as info:
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert "\n" not in str(info.value)


def test_continuous_actions_are_rejected_before_any_work(tmp_path, tiny, monkeypatch, worlds):
    env = world_id(monkeypatch, "continuous_world", worlds.continuous_env)
    over = ["run.runner=agents", env, *tiny()]
    with pytest.raises(EnvError, match="agent 'agent_0' acts in Box.*Discrete action") as info:
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "r").exists()
    assert not shoal_threads()


def test_rounds_pending_at_a_checkpoint_are_taken_after_the_resume(tmp_path, tiny, harvest):
    # A checkpoint pauses the learning thread between rounds: rounds handed to it and not
    # yet taken are in the schedule's count, so the checkpoint must keep them too.
    cfg = shoal.load_config("cartpole", harvest(agents__async_learning="true"))
    cfg.agents.async_mode = "thread"
    runner = AgentsRunner(cfg)
    runner.start()
    try:
        with runner.checkpoint_guard():
            runner.learning.rounds.schedule(3)  # no round can start while paused
            state = runner.state_dict()
            runner.stop()
    finally:
        runner.stop()
        runner.close()
    assert state["pending_rounds"] == 3
    resumed = AgentsRunner(cfg)
    resumed.load_state_dict({**state, "loop": {"step": 0}})
    assert resumed.learning.pending == 3
    resumed.close()
