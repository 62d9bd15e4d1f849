"""Runs SIGKILLed with their whole process group (the OOM killer, ``docker kill``) at random
points of training, evaluation and checkpointing, then resumed, again and again: every
``latest.pt`` loads, ``best.pt``'s score never goes down, and the next start sweeps the temp
files and shared-memory segments the killed processes left."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(600)

KILLS = 6


def _start(run, overrides, resume):
    argv = [sys.executable, "-m", "shoal.cli", "train"]
    argv += ["--resume", str(run.path)] if resume else ["cartpole", "--run-dir", str(run.path)]
    argv += [x for o in overrides for x in ("--set", o)]
    return subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )


def _wait_for(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, f"no {path.name} in {timeout} s"
        time.sleep(0.05)


def _best_score(run):
    return load_checkpoint(run.best, best=True)["eval_mean"] if run.best.is_file() else None


def _group_pids(pgid):
    """Pids of live processes in process group ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


@pytest.mark.parametrize("runner", ["serial", "processes"])
def test_killed_anywhere_a_run_resumes_and_its_best_never_gets_worse(runner, tmp_path, tiny):
    rng = random.Random(f"kill-{runner}")
    run = RunDir(tmp_path / "r")
    overrides = tiny(
        run__runner=runner,
        run__total_steps=10_000_000,
        run__checkpoint_every=60,
        run__eval_every=80,
        run__eval_episodes=3,
        dqn__hidden="[256, 256]",  # checkpoints big enough to be caught mid-write
        env__max_episode_steps=200,  # scores that vary from one evaluation to the next
    )
    if runner == "processes":
        overrides += ["processes.workers=2"]
    killed, scores, leftovers = [], [], 0
    for k in range(KILLS):
        proc = _start(run, overrides, resume=k > 0)
        try:
            _wait_for(run.checkpoint, proc)
            time.sleep(rng.uniform(0.0, 2.5))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        deadline = time.monotonic() + 10
        while _group_pids(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        killed.append(proc.pid)
        state = load_checkpoint(run.checkpoint)  # always loads: written atomically
        assert state["loop"]["step"] > 0
        scores.append(_best_score(run))
        leftovers += len(list(run.checkpoint.parent.glob(".*.tmp")))
    present = [s for s in scores if s is not None]
    assert present == sorted(present), scores  # best.pt only ever improved
    # The next start sweeps what the killed writers and processes left behind.
    step = load_checkpoint(run.checkpoint)["loop"]["step"]
    shoal.train(resume=run.path, overrides=[f"run.total_steps={step + 200}"])
    assert not list(run.path.rglob("*.tmp"))
    shm = os.listdir("/dev/shm")
    assert not [n for n in shm if n.startswith("shoal_") and any(f"_{p}_" in n for p in killed)]
    final = _best_score(run)
    assert final is None or not present or final >= present[-1]
    print(f"{runner}: {KILLS} kills, temp files left by them {leftovers}, best {scores}")


def test_a_sigterm_during_a_checkpoint_write_stops_the_run_after_it(tmp_path):
    """SIGTERM raised inside torch.save left the zip writer half-closed, and its error
    replaced the stop (exit 1): a preemption signal during a checkpoint write is held until
    the file is whole, then stops the run as usual."""
    import torch

    from shoal.run.checkpoint import save_checkpoint
    from shoal.run.preemption import Preempted, preemption_signals

    original = torch.save

    def save_with_a_signal_inside(obj, f, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode, mid-write
        return original(obj, f, *args, **kwargs)

    path = tmp_path / "latest.pt"
    state = {"config": {}, "loop": {"step": 3}, "weights": torch.ones(100_000)}
    with preemption_signals():
        torch.save = save_with_a_signal_inside
        try:
            with pytest.raises(Preempted):
                save_checkpoint(path, state)
        finally:
            torch.save = original
    assert load_checkpoint(path)["loop"]["step"] == 3  # whole, and then the stop
