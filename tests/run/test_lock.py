"""One process per run directory: a second process on a run stops in one line naming the
holder's pid and writes nothing; a lock left by a killed process blocks nothing."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shoal
from shoal.errors import RunInUseError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.lock import DirectoryLock

pytestmark = pytest.mark.timeout(180)


def test_a_held_lock_names_its_holder_and_a_released_one_is_free(tmp_path):
    first = DirectoryLock(tmp_path, "run directory").acquire()
    with pytest.raises(RunInUseError, match=f"in use by process {os.getpid()} "):
        DirectoryLock(tmp_path, "run directory").acquire()
    with pytest.raises(RunInUseError):
        DirectoryLock(tmp_path).check_free()
    first.release()
    first.release()  # twice is fine
    DirectoryLock(tmp_path).check_free()
    with DirectoryLock(tmp_path):
        pass


def test_a_lock_file_planted_as_a_link_is_refused_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"precious")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    with pytest.raises(shoal.errors.RunDirError, match="symbolic link"):
        DirectoryLock(run).acquire()
    assert target.read_bytes() == b"precious"


def _resume(run: Path, total: int, *extra: str) -> subprocess.Popen:
    argv = ["train", "--resume", str(run), "--set", f"run.total_steps={total}", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.cli", *argv, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _episodes(run: Path) -> list[int]:
    """The episode numbers of metrics.csv's whole episode rows."""
    text = (run / "metrics.csv").read_text()
    whole = text[: text.rfind("\n") + 1]
    rows = csv.DictReader(whole.splitlines())
    return [int(r["episode"]) for r in rows if r["kind"] == "episode"]


def test_two_resumes_at_once_one_trains_the_other_stops_and_a_kill_frees_the_run(tmp_path, tiny):
    run = tmp_path / "r"
    shoal.train("cartpole", overrides=tiny(run__checkpoint_every=100), run_dir=run)
    first = _resume(run, 10**8)
    try:
        deadline = time.monotonic() + 60
        lock = run / ".lock"
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first resume never took the run"
            time.sleep(0.1)
        second = _resume(run, 10**8)
        out, err = second.communicate(timeout=60)
        lines = [line for line in err.splitlines() if line.strip()]
        assert second.returncode == 2, err
        assert len(lines) == 1 and f"in use by process {first.pid} " in lines[0], err
        while load_checkpoint(RunDir(run).checkpoint)["loop"]["step"] <= 600:
            assert time.monotonic() < deadline + 60, "the first resume never checkpointed"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    episodes = _episodes(run)
    assert episodes == sorted(set(episodes)), "two histories in one metrics.csv"
    step = load_checkpoint(RunDir(run).checkpoint)["loop"]["step"]
    third = _resume(run, step + 100)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0, err
    assert load_checkpoint(RunDir(run).checkpoint)["loop"]["step"] >= step + 100
