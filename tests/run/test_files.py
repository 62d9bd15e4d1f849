"""Atomic writes: content round trip, the old file survives a failed write, no temp files."""

import os
import threading

import pytest

from shoal.run.files import atomic_write, atomic_write_bytes, atomic_write_text


def test_round_trip_and_parent_created(tmp_path):
    path = tmp_path / "a" / "b" / "data.bin"
    assert atomic_write_bytes(path, b"\x00\x01payload") == path
    assert path.read_bytes() == b"\x00\x01payload"
    atomic_write_text(path, "tschüss\n")
    assert path.read_text(encoding="utf-8") == "tschüss\n"
    atomic_write(str(path), lambda f: (f.write(b"part 1, "), f.write(b"part 2")))
    assert path.read_bytes() == b"part 1, part 2"
    assert os.listdir(path.parent) == ["data.bin"]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, error):
    path = tmp_path / "config.toml"
    path.write_text("old = 1\n")

    def write(f):
        f.write(b"new = ")  # half written when it fails
        raise error("disk on fire")

    with pytest.raises(error, match="disk on fire"):
        atomic_write(path, write)
    assert path.read_text() == "old = 1\n"
    assert os.listdir(tmp_path) == ["config.toml"]


def test_failed_first_write_creates_nothing(tmp_path):
    with pytest.raises(ValueError):
        atomic_write(tmp_path / "x.npz", lambda f: int("nope"))
    assert os.listdir(tmp_path) == []


def test_file_mode_follows_the_umask(tmp_path):
    """Unlike tempfile.mkstemp (always 0600), the written file gets a plain write's mode."""
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "f.txt", "x")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_concurrent_writers_never_tear_or_collide(tmp_path):
    """Writers in several threads: every read sees one whole version, no temp file is left."""
    path = tmp_path / "shared.txt"
    atomic_write_text(path, "0" * 10_000)
    stop = threading.Event()
    torn = []

    def writer(digit: str) -> None:
        for _ in range(50):
            atomic_write_text(path, digit * 10_000)

    def reader() -> None:
        while not stop.is_set():
            text = path.read_text()
            if len(text) != 10_000 or len(set(text)) != 1:
                torn.append(text[:20])

    threads = [threading.Thread(target=writer, args=(d,)) for d in "123"]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop.set()
    watcher.join(timeout=60)
    assert torn == []
    assert path.read_text() in {d * 10_000 for d in "123"}
    assert os.listdir(tmp_path) == ["shared.txt"]
