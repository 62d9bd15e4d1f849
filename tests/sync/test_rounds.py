"""Round threads: every scheduled round runs once, pauses hold every thread, failures and
hangs reach the caller, and stopping is safe at any moment; random interleavings."""

from __future__ import annotations

import random
import threading
import time

import pytest

from shoal.sync.rounds import RoundThreads, RoundThreadsError

pytestmark = pytest.mark.timeout(60)


class Err(RoundThreadsError):
    pass


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("seed", range(3))
def test_every_round_runs_once_and_pauses_hold_every_thread(threads: int, seed: int) -> None:
    rng = random.Random(seed)
    lock = threading.Lock()
    runs, inside, paused = [0], [0], threading.Event()
    overlap = []

    def work(start: bool, end: bool) -> None:
        with lock:
            inside[0] += 1
            runs[0] += 1
            if paused.is_set():
                overlap.append(runs[0])
        time.sleep(rng.random() * 0.002)
        with lock:
            inside[0] -= 1

    rounds = RoundThreads(work, threads=threads, name="t", error=Err)
    rounds.start()
    total = 0
    try:
        for _ in range(60):
            n = rng.randint(0, 5)
            rounds.schedule(n)
            total += n
            if rng.random() < 0.2:
                with rounds.paused():
                    paused.set()
                    with lock:
                        assert inside[0] == 0  # no round in flight inside a pause
                    time.sleep(0.002)
                    paused.clear()
            rounds.wait(behind=rng.randint(0, 8))
        rounds.wait(behind=0)
    finally:
        rounds.stop()
    assert runs[0] == total and overlap == []
    rounds.stop()  # twice is fine


def test_phases_are_the_rounds_scheduled_when_one_starts() -> None:
    gate, seen = threading.Event(), []

    def work(start: bool, end: bool) -> None:
        gate.wait(5)
        seen.append((start, end))

    rounds = RoundThreads(work, name="t")
    rounds.start()
    rounds.schedule(2)  # phase 1: rounds 0-1 (round 0 is taken at once and blocks)
    time.sleep(0.05)
    rounds.schedule(3)  # scheduled during phase 1: phase 2
    gate.set()
    rounds.wait(0)
    rounds.stop()
    assert seen == [(True, False), (False, True), (True, False), (False, False), (False, True)]


def test_a_failure_reaches_the_caller_with_its_cause_and_stops_every_thread() -> None:
    def work(start: bool, end: bool) -> None:
        raise ValueError("boom in a round")

    rounds = RoundThreads(work, threads=3, name="t", what="a test thread", error=Err)
    rounds.start()
    rounds.schedule(5)
    with pytest.raises(Err, match="a test thread failed: .*boom in a round") as info:
        rounds.wait(0)
    assert isinstance(info.value.__cause__, ValueError)
    rounds.stop(5)


def test_a_round_that_makes_no_progress_is_reported_as_a_hang() -> None:
    release = threading.Event()
    rounds = RoundThreads(
        lambda s, e: release.wait(10), name="t", timeout=0.3, timeout_key="x.timeout", error=Err
    )
    rounds.start()
    rounds.schedule(1)
    try:
        with pytest.raises(Err, match=r"no progress for 0.3 s \(x.timeout\)"):
            rounds.wait(0)
        with pytest.raises(Err, match="no progress"), rounds.paused():
            pass  # a pause waits for the round in flight: the same hang
    finally:
        release.set()
        rounds.stop()


def test_idle_time_before_a_schedule_is_not_a_hang() -> None:
    rounds = RoundThreads(lambda s, e: time.sleep(0.05), name="t", timeout=0.3)
    rounds.start()
    time.sleep(0.5)  # idle longer than the timeout: nothing was due
    rounds.schedule(3)
    rounds.wait(0)
    rounds.stop()


def test_reset_takes_the_rounds_due_after_a_resume_first() -> None:
    count = [0]
    rounds = RoundThreads(lambda s, e: count.__setitem__(0, count[0] + 1), name="t")
    rounds.reset(completed=10, scheduled=13)
    rounds.start()
    rounds.wait(0)
    rounds.stop()
    assert count[0] == 3


def test_a_thread_that_will_not_stop_is_reported() -> None:
    release = threading.Event()
    rounds = RoundThreads(lambda s, e: release.wait(10), name="slow", error=Err)
    rounds.start()
    rounds.schedule(1)
    time.sleep(0.05)
    with pytest.raises(Err, match="did not stop within 0.2 s"):
        rounds.stop(0.2)
    release.set()
