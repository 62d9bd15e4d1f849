"""The shared-memory segment lifecycle: the owner unlinks (close, garbage collection, exit,
crash via the resource tracker); attaching from any kind of process never unlinks."""

import gc
import subprocess
import sys
import time

import numpy as np
import pytest

from shoal.sync.segments import Segment, attach_segment, create_segment, release_segment
from shoal.sync.workers import SPAWN

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_shm_leak")]


def _gone(name, shm_names, wait=5.0):
    deadline = time.monotonic() + wait
    while name in shm_names() and time.monotonic() < deadline:
        time.sleep(0.05)
    return name not in shm_names()


def test_create_names_zero_fills_and_close_unlinks(shm_names):
    seg = Segment.create("t", 100)
    assert seg.owner and not seg.closed
    prefix, pid = seg.name.split("_")[1:3]
    assert (prefix, pid) == ("t", str(__import__("os").getpid()))
    assert seg.name in shm_names()
    assert not seg.array((12,), np.int64, 4).any()
    other = Segment.create("t", 100)
    assert other.name != seg.name
    seg.close()
    seg.close()  # twice is fine
    other.close()
    assert seg.closed and seg.name not in shm_names() and other.name not in shm_names()


def test_zero_size_gets_one_byte():
    seg = Segment.create("t", 0)
    assert len(seg.buf) >= 1
    seg.close()


def test_garbage_collection_unlinks(shm_names):
    seg = Segment.create("t", 64)
    name = seg.name
    del seg
    gc.collect()
    assert name not in shm_names()


def test_attacher_sees_writes_and_its_close_does_not_unlink(shm_names):
    seg = Segment.create("t", 32)
    reader = Segment.attach(seg.name)
    assert not reader.owner
    seg.array((4,), np.int64)[:] = [1, 2, 3, 4]
    assert reader.array((4,), np.int64).tolist() == [1, 2, 3, 4]
    reader.close()
    assert seg.name in shm_names()
    seg.close()
    assert seg.name not in shm_names()


def test_close_with_live_views_still_unlinks(shm_names):
    seg = Segment.create("t", 32)
    view = seg.array((4,), np.int64)
    seg.close()  # the name is gone at once; the mapping lives on for the view
    view[:] = 5
    assert seg.name not in shm_names()


def test_primitives_round_trip(shm_names):
    shm = create_segment("t", 16)
    other = attach_segment(shm.name)
    other.buf[0] = 9
    assert shm.buf[0] == 9
    release_segment(other, owner=False)
    assert shm.name in shm_names()
    release_segment(shm, owner=True)
    release_segment(shm, owner=True)  # already unlinked: tolerated
    assert shm.name not in shm_names()


class _AttachOnUnpickle:
    """Attaches while a spawned child unpickles its arguments (the known trap)."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return (Segment.attach, (self.name,))


def _child_reads(seg, out):
    out.put(int(seg.array((1,), np.int64)[0]))
    seg.close()


def test_spawned_child_attaching_while_unpickling_does_not_unlink(shm_names):
    seg = Segment.create("t", 8)
    seg.array((1,), np.int64)[0] = 42
    out = SPAWN.Queue()
    p = SPAWN.Process(target=_child_reads, args=(_AttachOnUnpickle(seg.name), out))
    p.start()
    assert out.get(timeout=60) == 42
    p.join(timeout=60)
    assert p.exitcode == 0
    time.sleep(0.2)
    assert seg.name in shm_names()  # the child's exit did not take the segment with it
    seg.close()


OWNER = """
import os, signal, subprocess, sys, multiprocessing as mp
from shoal.sync.segments import Segment
from shoal.sync.workers import SPAWN

class AttachOnUnpickle:
    def __init__(self, name):
        self.name = name
    def __reduce__(self):
        return (Segment.attach, (self.name,))

def child(seg):
    seg.close()

if __name__ == '__main__':
    seg = Segment.create("t", 8)
    p = SPAWN.Process(target=child, args=(AttachOnUnpickle(seg.name),))
    p.start(); p.join()
    # an unrelated process attaching and exiting must not unlink it either
    code = "from shoal.sync.segments import Segment; Segment.attach(%r).close()" % seg.name
    subprocess.run([sys.executable, "-c", code], check=True)
    again = Segment.attach(seg.name)  # a second handle in the owner: harmless
    again.close()
    print(seg.name, flush=True)
    if sys.argv[1] == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    seg.close()
"""


@pytest.mark.parametrize("end", ["clean", "crash"])
def test_owner_process_cleanup_survives_attachers(end, tmp_path, shm_names):
    """Attachers of every kind (same process, spawned child while unpickling, unrelated
    process) leave the owner's responsibility intact: a clean exit unlinks, and after a
    SIGKILL the shared resource tracker still does; no tracker warnings either way."""
    script = tmp_path / "owner.py"  # a file, so that the spawned child can import its main
    script.write_text(OWNER)
    proc = subprocess.run(
        [sys.executable, str(script), end], capture_output=True, text=True, timeout=90
    )
    name = proc.stdout.split()[0]
    assert proc.returncode == (0 if end == "clean" else -9), proc.stderr
    assert _gone(name, shm_names)
    assert "Traceback" not in proc.stderr, proc.stderr  # e.g. a tracker KeyError
    if end == "clean":  # after a crash, the tracker's leak warning is the cleanup working
        assert "leaked" not in proc.stderr, proc.stderr
