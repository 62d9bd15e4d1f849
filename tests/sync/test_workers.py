"""Worker-process plumbing: stop with grace, then kill; the parent watch; restart budgets."""

from __future__ import annotations

import os
import signal
import time

import pytest

from shoal.sync.workers import SPAWN, RestartBudget, WorkerProcess, child_prologue, stop_processes

pytestmark = pytest.mark.timeout(120)


def _obedient(conn) -> None:
    child_prologue(torch_threads=None)
    while not conn.poll(0.05):
        pass
    conn.recv()  # asked to stop: leave


def _stubborn(conn) -> None:
    child_prologue(torch_threads=None)
    while True:
        time.sleep(0.05)


def _report_prologue(conn) -> None:
    alive = child_prologue(torch_threads=1)
    import torch

    conn.send((signal.getsignal(signal.SIGINT) == signal.SIG_IGN, torch.get_num_threads(), alive()))


def test_a_worker_asked_to_stop_leaves_within_its_grace_and_is_not_killed() -> None:
    worker = WorkerProcess(_obedient, (), name="obedient", duplex=True)
    assert worker.alive()
    assert worker.stop(grace=30.0, ask="stop") is False
    assert worker.proc.exitcode == 0 and worker.why() == "exit code 0"
    worker.stop()  # twice is fine


def test_a_worker_that_ignores_the_request_is_killed_after_its_grace() -> None:
    worker = WorkerProcess(_stubborn, (), name="stubborn", duplex=True)
    t0 = time.monotonic()
    assert worker.stop(grace=0.5, ask="stop") is True
    assert 0.4 < time.monotonic() - t0 < 10
    assert worker.proc.exitcode == -signal.SIGKILL


def test_stop_processes_shares_one_deadline_and_skips_processes_never_started() -> None:
    procs = [SPAWN.Process(target=time.sleep, args=(30,), daemon=True) for _ in range(3)]
    for p in procs[:2]:
        p.start()
    t0 = time.monotonic()
    killed = stop_processes(procs, grace=0.5)
    assert killed == procs[:2] and time.monotonic() - t0 < 5  # not 0.5 s per process
    assert all(not p.is_alive() for p in procs[:2])


def test_the_child_prologue_ignores_ctrl_c_sets_torch_threads_and_watches_its_parent() -> None:
    worker = WorkerProcess(_report_prologue, (), name="prologue")
    assert worker.conn.poll(60)
    assert worker.conn.recv() == (True, 1, True)
    worker.stop(grace=10)


def test_the_parent_watch_sees_a_new_parent() -> None:
    alive = child_prologue(torch_threads=None)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # undo for the test process
    assert alive()
    pid = os.fork()
    if pid == 0:  # the child: its parent is this test process until it exits
        os._exit(0 if alive() is False else 1)  # a forked child has another parent
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_restart_budget_counts_failures_in_a_row() -> None:
    budget = RestartBudget(2)
    assert budget.fail() and budget.restarts == 1
    budget.succeeded()
    assert budget.fail() and not budget.fail()
    assert budget.restarts == 2
