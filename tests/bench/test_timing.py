"""The timing tools under ``shoal bench``: a failing learner thread is raised, not waited
for; a patched method comes back whatever happens; a runner that never updates is a
one-line config error; busy processes end with the block."""

from __future__ import annotations

import os
import subprocess

import pytest

from shoal.bench import timing
from shoal.errors import ConfigError
from shoal.run.runner import Collected

pytestmark = pytest.mark.timeout(60)


class FakeRunner:
    """Collects 10 steps a call; updates only if ``learns``."""

    def __init__(self, learns: bool) -> None:
        self.learns, self.updates = learns, 0
        self.cfg = type("Cfg", (), {"run": type("Run", (), {"learning_starts": 5})()})()

    def collect(self, step: int) -> Collected:
        return Collected(10)

    def learn(self, step: int, new_steps: int) -> None:
        self.updates += self.learns


def test_a_failing_learner_thread_is_raised_not_waited_for():
    def update() -> None:
        raise RuntimeError("the update broke")

    with pytest.raises(RuntimeError, match="the update broke"):
        timing.beside(update, lambda: 0, lambda n: 1, seconds=30.0)


def test_beside_counts_updates_and_env_steps():
    count = [0]

    def update() -> None:
        count[0] += 1

    per_update, per_step = timing.beside(update, lambda: count[0], lambda n: 1, seconds=0.2)
    assert 0 < per_update < 0.2 and 0 < per_step < 0.2


def test_a_patched_attribute_comes_back_after_an_error():
    class Thing:
        def act(self) -> str:
            return "class"

    thing = Thing()
    thing.own = "mine"
    with pytest.raises(ValueError), timing.patched(thing, "act", lambda: "patched"):
        assert thing.act() == "patched"
        raise ValueError
    assert thing.act() == "class" and "act" not in vars(thing)
    with timing.patched(thing, "own", "other"):
        assert thing.own == "other"
    assert thing.own == "mine"


def test_a_runner_that_never_updates_is_a_config_error():
    with pytest.raises(ConfigError, match="no update in 0 s.*run.learning_starts"):
        timing.warm_up(FakeRunner(learns=False), seconds=0.0, limit=0.05)
    assert timing.warm_up(FakeRunner(learns=True), seconds=0.0) == 10


def test_per_update_counts_only_updates_taken():
    runner = FakeRunner(learns=True)
    calls = [0]

    def update() -> None:  # every other call takes an update
        calls[0] += 1
        runner.updates += calls[0] % 2

    seconds = timing.per_update(update, lambda: runner.updates, seconds=0.05)
    assert runner.updates >= 3 and seconds > 0


def test_busy_processes_end_with_the_block():
    # this process's own (another test beside it under xdist may run a block of its own)
    mine = ["pgrep", "-P", str(os.getpid()), "-f", "while os.getppid"]
    with timing.busy_cores(5.0):
        busy = subprocess.run(mine, capture_output=True, text=True).stdout.split()
        assert len(busy) >= max(timing.cores() - 1, 1)
    left = subprocess.run(mine, capture_output=True, text=True)
    assert set(left.stdout.split()) & set(busy) == set()


def test_rounds_hand_out_the_updates_a_serial_run_owes():
    """Collect 3 env steps a call at 0.25 updates per step: the updates come as they fall
    due (one every 4 steps, carried over between calls), never ahead of the steps."""
    learned: list[int] = []
    taken = [0]

    def collect(n: int) -> int:
        assert n == taken[0]  # told the steps so far
        taken[0] += 3
        return 3

    seconds, steps = timing.time_rounds(collect, learned.append, 0.25, 0.05)
    assert steps == taken[0] and seconds >= 0.05
    assert sum(learned) == steps // 4 and all(k >= 1 for k in learned)


def test_the_median_block_stands_for_each_part():
    """One block a third slow (a shared machine's hiccup) moves no part."""
    blocks = [
        {"update": 3e-3, "env_step": 2e-4},
        {"update": 4e-3, "env_step": 3e-4},  # the slow block
        {"update": 3.1e-3, "env_step": 2.1e-4},
    ]
    assert timing.median_timings(blocks) == {"update": 3.1e-3, "env_step": 2.1e-4}


def test_a_collector_carries_the_env_steps_across_timings():
    seen: list[int] = []

    class Counting(FakeRunner):
        def collect(self, step: int) -> Collected:
            seen.append(step)
            return Collected(10)

    collect = timing.collector(Counting(learns=True), 100)
    assert [collect(0), collect(0), collect(5)] == [10, 10, 10]
    assert seen == [100, 110, 120]
