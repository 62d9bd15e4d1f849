"""A run starts clean: bad input is one line with exit 2 and no run directory, a failed start
leaves nothing that blocks the retry, default names never collide, and what killed writers
and processes left behind (temp files, shared-memory segments) is swept."""

import os
import secrets

import pytest

import shoal
from shoal.cli import main
from shoal.run.directory import RunDir
from shoal.run.files import sweep_stale_temps
from shoal.sync.segments import create_segment, sweep_dead_segments
from shoal.sync.workers import SPAWN

pytestmark = pytest.mark.timeout(300)


def _dead_pid():
    """The pid of a process that has exited."""
    proc = SPAWN.Process(target=os.getpid)
    proc.start()
    proc.join()
    return proc.pid


def _one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("shoal: error: ")


@pytest.mark.parametrize(
    "extra",
    [
        ["--device", "cuda"],
        ["--set", "replay.capacity=1099511627776"],  # 2**40 items: numpy cannot allocate
        ["--set", "replay.capacity=2147483648"],  # 2**31: allocated lazily, > this machine
        ["--set", "run.seed=18446744073709551616"],
    ],
)
def test_bad_input_is_one_line_and_creates_no_run_directory(
    tmp_path, tiny, capsys, monkeypatch, extra
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "runs"
    sets = [x for o in tiny() for x in ("--set", o)]
    code = main(["train", "cartpole", *sets, "--set", f"run.out='{out}'", *extra])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err), err
    assert not out.exists() or not any(out.iterdir())


def test_out_naming_a_file_is_one_line(tmp_path, tiny, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    sets = [x for o in tiny() for x in ("--set", o)]
    code = main(["train", "cartpole", *sets, "--set", f"run.out='{afile}'"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and "is a file" in err, err
    assert afile.read_text() == "x"


def test_a_failed_start_leaves_no_run_directory(tmp_path, tiny, monkeypatch):
    from shoal.runners.serial import SerialRunner

    def broken(self):
        raise RuntimeError("cannot start")

    monkeypatch.setattr(SerialRunner, "start", broken)
    with pytest.raises(RuntimeError, match="cannot start"):
        shoal.train("cartpole", overrides=tiny(), run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    monkeypatch.undo()
    assert shoal.train("cartpole", overrides=tiny(), run_dir=tmp_path / "r").env_steps >= 600


def test_default_names_never_collide(tmp_path):
    runs = [RunDir.create(tmp_path, "same") for _ in range(5)]
    assert len({r.path for r in runs}) == 5
    with pytest.raises(Exception, match="already exists.*--resume"):
        RunDir.create(tmp_path, "x", runs[0].path)


def test_an_unwritable_run_directory_is_found_before_training(tmp_path, monkeypatch):
    import errno

    import shoal.run.directory as directory

    def read_only(path, data):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(directory, "atomic_write_bytes", read_only)
    run = RunDir.create(tmp_path, "r")
    with pytest.raises(Exception, match="cannot hold checkpoints: Read-only file system"):
        run.check_writable()
    monkeypatch.undo()
    with pytest.raises(Exception, match="MiB free"):
        run.check_writable(need_bytes=1 << 60)


def test_stale_temp_files_of_dead_writers_are_swept(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    stale = tmp_path / f".latest.pt.{dead}-{secrets.token_hex(4)}.tmp"
    busy = tmp_path / f".latest.pt.{live}-{secrets.token_hex(4)}.tmp"
    other = tmp_path / "notes.tmp"
    for path in (stale, busy, other):
        path.write_bytes(b"x")
    assert sweep_stale_temps(tmp_path) == [stale]
    assert busy.exists() and other.exists() and not stale.exists()


def test_segments_of_dead_processes_are_swept_and_live_ones_kept():
    dead = _dead_pid()
    orphan = f"shoal_w_{dead}_{secrets.token_hex(4)}"
    fd = os.open(f"/dev/shm/{orphan}", os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    mine = create_segment("t", 8)
    try:
        swept = sweep_dead_segments()
        assert orphan in swept and mine.name not in swept
        assert not os.path.exists(f"/dev/shm/{orphan}")
        assert os.path.exists(f"/dev/shm/{mine.name}")
    finally:
        mine.close()
        mine.unlink()


def test_a_run_directory_left_by_a_start_that_died_is_taken_by_a_retry(tmp_path, tiny, capsys):
    """Ray can end a driver from C++ as its node dies at start, past any cleanup: the
    directory it leaves (a lock no one holds, a config, a metrics header) does not refuse
    a retry with the same --run-dir; one with a checkpoint, a metrics row or a live holder
    still does."""
    import shoal
    from shoal.errors import RunDirError
    from shoal.run.lock import DirectoryLock

    run = tmp_path / "r"
    run.mkdir()
    (run / ".lock").write_text("999999999\n")
    (run / "config.toml").write_text("")
    (run / "metrics.csv").write_text("kind,step\n")
    (run / "checkpoints").mkdir()
    shoal.train("cartpole", overrides=tiny(), run_dir=run)
    assert "left by a start whose process died" in capsys.readouterr().err
    with pytest.raises(RunDirError, match="already exists"):
        shoal.train("cartpole", overrides=tiny(), run_dir=run)  # it has checkpoints now
    other = tmp_path / "held"
    other.mkdir()
    (other / "metrics.csv").write_text("kind,step\n")
    with DirectoryLock(other), pytest.raises(RunDirError, match="already exists"):
        shoal.train("cartpole", overrides=tiny(), run_dir=other)
