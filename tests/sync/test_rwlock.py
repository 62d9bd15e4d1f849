"""RWLock: exclusion, writer preference, timeouts, re-entry errors, telemetry, and a stress run.

Every test carries a timeout and every blocking call in a helper thread has its own, so a
deadlock fails the test instead of hanging the suite.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.sync.rwlock import LockReentryError, LockSideStats, RWLock, RWLockStats

JOIN_S = 5.0  # generous bound on any helper thread; only reached if something is broken


class Worker(threading.Thread):
    """Runs ``fn`` in a thread, keeping its result or exception for the test to inspect."""

    def __init__(self, fn, name: str = "worker") -> None:
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.result = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            self.error = e

    def finish(self):
        """Join, fail if still running, and re-raise the thread's exception here."""
        self.join(JOIN_S)
        assert not self.is_alive(), f"thread {self.name} still running (deadlock?)"
        if self.error is not None:
            raise self.error
        return self.result


def start(fn, name: str = "worker") -> Worker:
    w = Worker(fn, name)
    w.start()
    return w


def in_thread(fn, name: str = "worker"):
    """Run ``fn`` in another thread (the lock tracks holders per thread) and return its result."""
    return start(fn, name).finish()


def wait_until(pred, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def raises_in_thread(exc_type, fn, name: str = "worker") -> BaseException:
    with pytest.raises(exc_type) as info:
        in_thread(fn, name)
    return info.value


# -- basics ------------------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_many_readers_hold_the_lock_at_once():
    lock = RWLock(timeout=2.0)
    n = 4
    # Every reader waits at the barrier while holding the lock: the barrier only opens if
    # all n hold it at the same time.
    barrier = threading.Barrier(n, timeout=2.0)
    seen = []

    def reader():
        with lock.read():
            barrier.wait()
            seen.append(lock.readers)
            barrier.wait()  # nobody leaves before everyone has looked

    workers = [start(reader, f"r{i}") for i in range(n)]
    for w in workers:
        w.finish()
    assert seen == [n] * n
    assert lock.readers == 0 and not lock.writer_active


@pytest.mark.timeout(10)
def test_writer_excludes_readers_and_writers():
    lock = RWLock(timeout=2.0)
    with lock.write():
        assert lock.writer_active and lock.readers == 0
        raises_in_thread(TimeoutError, lambda: lock.acquire_read(timeout=0))
        raises_in_thread(TimeoutError, lambda: lock.acquire_write(timeout=0))
        got_in = threading.Event()

        def blocked_reader():
            with lock.read():
                got_in.set()

        w = start(blocked_reader)
        assert not got_in.wait(0.1)
    w.finish()
    assert got_in.is_set()
    assert lock.stats().read.acquisitions == 1


@pytest.mark.timeout(10)
def test_reader_excludes_writer():
    lock = RWLock()
    with lock.read():
        raises_in_thread(TimeoutError, lambda: lock.acquire_write(timeout=0))
        assert lock.readers == 1 and lock.writers_waiting == 0
    in_thread(lambda: lock.acquire_write(timeout=0) or lock.release_write())


@pytest.mark.timeout(10)
def test_context_managers_release_on_exception():
    lock = RWLock(timeout=1.0)
    with pytest.raises(ValueError):
        with lock.read():
            raise ValueError("boom")
    assert lock.readers == 0
    with pytest.raises(KeyError):
        with lock.write():
            raise KeyError("boom")
    assert not lock.writer_active
    # Still usable from this and other threads.
    with lock.write():
        pass
    in_thread(lambda: lock.acquire_write(timeout=0) or lock.release_write())
    assert "readers=0" in repr(lock) and "'rwlock'" in repr(lock)


# -- writer preference -------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_waiting_writer_blocks_new_readers():
    lock = RWLock(timeout=5.0)
    order = []
    lock.acquire_read()

    def writer():
        with lock.write():
            order.append("writer")

    def late_reader():
        with lock.read():
            order.append("reader")

    w = start(writer, "writer")
    wait_until(lambda: lock.writers_waiting == 1)
    # A reader arriving now must wait behind the writer, even though only readers hold it.
    raises_in_thread(TimeoutError, lambda: lock.acquire_read(timeout=0.05))
    r = start(late_reader, "late-reader")
    time.sleep(0.1)
    assert order == [] and lock.readers == 1
    lock.release_read()
    w.finish()
    r.finish()
    assert order == ["writer", "reader"]


@pytest.mark.timeout(15)
def test_writer_not_starved_by_overlapping_readers():
    """Readers re-acquire in tight loops with overlapping holds, so without writer preference
    the lock would almost never be free; the writer must still get in quickly, every time."""
    lock = RWLock(timeout=5.0, name="weights")
    stop = threading.Event()
    reads = [0] * 4

    def reader(i):
        while not stop.is_set():
            with lock.read():
                reads[i] += 1
                time.sleep(0.002)

    readers = [start(lambda i=i: reader(i), f"reader-{i}") for i in range(len(reads))]
    try:
        wait_until(lambda: all(reads))
        waits = []
        for _ in range(10):
            t0 = time.perf_counter()
            with lock.write(timeout=5.0):
                waits.append(time.perf_counter() - t0)
                assert lock.readers == 0
            time.sleep(0.01)
        before = sum(reads)
        time.sleep(0.05)
        assert sum(reads) > before, "readers stopped making progress"
    finally:
        stop.set()
        for w in readers:
            w.finish()
    max_wait = lock.stats().write.max_wait
    print(f"\nmax write wait under 4 looping readers: {max_wait * 1e3:.1f} ms")
    assert max(waits) < 1.0 and max_wait < 1.0
    assert lock.stats().write.acquisitions == 10


@pytest.mark.timeout(10)
def test_writers_enter_in_arrival_order():
    lock = RWLock(timeout=5.0)
    order = []

    def writer(i):
        with lock.write():
            order.append(i)

    lock.acquire_read()
    workers = []
    for i in range(4):
        workers.append(start(lambda i=i: writer(i), f"writer-{i}"))
        wait_until(lambda i=i: lock.writers_waiting == i + 1)
    lock.release_read()
    for w in workers:
        w.finish()
    assert order == [0, 1, 2, 3]


# -- timeouts ----------------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_read_times_out_while_writer_holds():
    lock = RWLock(name="weights")
    with lock.write():
        t0 = time.perf_counter()
        err = raises_in_thread(TimeoutError, lambda: lock.acquire_read(timeout=0.1))
        assert time.perf_counter() - t0 >= 0.09
        assert lock.writer_active and lock.readers == 0 and lock.writers_waiting == 0
    msg = str(err)
    assert "'weights'" in msg and "read lock" in msg and "0.1 s" in msg
    assert "held by a writer" in msg and "'MainThread'" in msg
    assert lock.stats().read.timeouts == 1 and lock.stats().read.acquisitions == 0


@pytest.mark.timeout(10)
def test_write_times_out_while_reader_holds():
    lock = RWLock(name="table")
    with lock.read():
        err = raises_in_thread(TimeoutError, lambda: lock.acquire_write(timeout=0.1), "learner")
        assert lock.readers == 1 and not lock.writer_active and lock.writers_waiting == 0
    msg = str(err)
    assert "'table'" in msg and "write lock" in msg and "0.1 s" in msg
    assert "1 reader(s)" in msg and "'MainThread'" in msg and "no writer" in msg
    assert "0 other writer(s) waiting" in msg
    assert lock.stats().write.timeouts == 1
    # Nothing left behind: a writer gets straight in.
    in_thread(lambda: lock.acquire_write(timeout=0) or lock.release_write())


@pytest.mark.timeout(10)
def test_writer_timeout_wakes_readers_blocked_behind_it():
    lock = RWLock(timeout=5.0)
    lock.acquire_read()
    writer_gave_up = []
    reader_in = []
    release_reader = threading.Event()

    def writer():
        try:
            lock.acquire_write(timeout=0.3)
        except TimeoutError:
            writer_gave_up.append(time.perf_counter())

    def reader():
        with lock.read():  # default 5 s: must not need it
            reader_in.append(time.perf_counter())
            release_reader.wait(JOIN_S)

    w = start(writer, "writer")
    wait_until(lambda: lock.writers_waiting == 1)
    r = start(reader, "reader")
    time.sleep(0.1)
    assert not reader_in, "reader got in past a waiting writer"
    w.finish()
    wait_until(lambda: reader_in)
    assert writer_gave_up and reader_in[0] - writer_gave_up[0] < 0.5
    # State is as if the writer had never come: two readers, nobody waiting.
    assert lock.readers == 2 and lock.writers_waiting == 0 and not lock.writer_active
    release_reader.set()
    r.finish()
    lock.release_read()
    assert lock.readers == 0
    with lock.write(timeout=0):
        pass


@pytest.mark.timeout(10)
def test_timed_out_head_writer_lets_the_next_writer_in():
    lock = RWLock(timeout=5.0)
    lock.acquire_read()
    order = []

    def impatient():
        with pytest.raises(TimeoutError):
            lock.acquire_write(timeout=0.2)
        order.append("gave up")

    def patient():
        with lock.write():
            order.append("patient")

    a = start(impatient, "impatient")
    wait_until(lambda: lock.writers_waiting == 1)
    b = start(patient, "patient")
    wait_until(lambda: lock.writers_waiting == 2)
    a.finish()
    assert lock.writers_waiting == 1
    lock.release_read()
    b.finish()
    assert order == ["gave up", "patient"]


@pytest.mark.timeout(10)
def test_default_timeout_and_explicit_none_waits_forever():
    lock = RWLock(timeout=0.05)
    got_in = threading.Event()
    with lock.write():
        # Omitted: the lock's default (0.05 s).
        t0 = time.perf_counter()
        raises_in_thread(TimeoutError, lambda: lock.acquire_read())
        raises_in_thread(TimeoutError, lambda: lock.acquire_write())
        assert time.perf_counter() - t0 < 1.0

        def patient():
            with lock.read(timeout=None):
                got_in.set()

        w = start(patient)
        # Well past the default timeout, the explicit None is still waiting.
        assert not got_in.wait(0.3)
    w.finish()
    assert got_in.is_set() and lock.stats().read.timeouts == 1


@pytest.mark.timeout(10)
@pytest.mark.parametrize("bad", [-1, -0.001, float("nan"), float("inf")])
def test_bad_timeouts_are_rejected(bad):
    with pytest.raises(ValueError, match="timeout"):
        RWLock(timeout=bad)
    lock = RWLock()
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire_read(timeout=bad)
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire_write(timeout=bad)
    assert lock.readers == 0 and not lock.writer_active and lock.stats() == RWLockStats()


# -- re-entry and bad releases -----------------------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("held", "asked", "match"),
    [
        ("write", "read", "holds the write lock .* asked for the read lock"),
        ("write", "write", "holds the write lock .* asked for the write lock"),
        ("read", "write", "holds a read lock .* asked for the write lock; upgrading"),
        ("read", "read", "holds a read lock .* asked for another read lock"),
    ],
)
def test_reentry_raises_at_once(held, asked, match):
    lock = RWLock(timeout=None)  # would hang forever if the check were missing
    getattr(lock, f"acquire_{held}")()
    with pytest.raises(LockReentryError, match=match):
        getattr(lock, f"acquire_{asked}")()
    with pytest.raises(LockReentryError, match=match):
        with getattr(lock, asked)():
            pass
    # The failed attempts changed nothing: still exactly what was held.
    assert lock.readers == (held == "read") and lock.writer_active == (held == "write")
    assert lock.writers_waiting == 0
    getattr(lock, f"release_{held}")()
    stats = lock.stats()
    assert getattr(stats, held).acquisitions == 1 and getattr(stats, asked).timeouts == 0


@pytest.mark.timeout(10)
def test_nested_read_with_writer_waiting_names_the_deadlock():
    lock = RWLock(timeout=5.0)
    lock.acquire_read()
    w = start(lambda: lock.acquire_write() or lock.release_write(), "writer")
    wait_until(lambda: lock.writers_waiting == 1)
    with pytest.raises(LockReentryError, match=r"1 writer\(s\) waiting now.*deadlock"):
        lock.acquire_read()
    lock.release_read()
    w.finish()
    assert issubclass(LockReentryError, RuntimeError)


@pytest.mark.timeout(10)
def test_releasing_what_is_not_held_raises():
    lock = RWLock(name="q")
    with pytest.raises(RuntimeError, match="released the read lock of rwlock 'q'.*holds nothing"):
        lock.release_read()
    with pytest.raises(RuntimeError, match="released the write lock.*holds nothing"):
        lock.release_write()
    with lock.read():
        with pytest.raises(RuntimeError, match="holds a read lock"):
            lock.release_write()
    with lock.write():
        with pytest.raises(RuntimeError, match="holds the write lock"):
            lock.release_read()
        # Another thread cannot release this thread's write lock.
        raises_in_thread(RuntimeError, lock.release_write)
        assert lock.writer_active
    lock.acquire_read()
    raises_in_thread(RuntimeError, lock.release_read)
    assert lock.readers == 1
    lock.release_read()
    assert lock.stats().read.releases == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ar", "aw", "rr", "rw"]), max_size=30))
def test_single_thread_sequences_match_a_model(ops):
    """From one thread the outcome of each call is fully determined by what it holds."""
    lock = RWLock(timeout=0)
    held = None
    reads = writes = 0
    for op in ops:
        kind, side = op
        if kind == "a":
            if held is not None:
                with pytest.raises(LockReentryError):
                    getattr(lock, f"acquire_{'read' if side == 'r' else 'write'}")()
            else:
                getattr(lock, f"acquire_{'read' if side == 'r' else 'write'}")()
                held = side
                reads += side == "r"
                writes += side == "w"
        else:
            if held != side:
                with pytest.raises(RuntimeError):
                    getattr(lock, f"release_{'read' if side == 'r' else 'write'}")()
            else:
                getattr(lock, f"release_{'read' if side == 'r' else 'write'}")()
                held = None
        assert lock.readers == (held == "r") and lock.writer_active == (held == "w")
    stats = lock.stats()
    assert (stats.read.acquisitions, stats.write.acquisitions) == (reads, writes)
    assert stats.read.timeouts == stats.write.timeouts == 0


# -- telemetry ---------------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_stats_record_plausible_waits_and_holds():
    lock = RWLock(timeout=5.0)
    assert lock.stats() == RWLockStats()
    lock.acquire_read()

    def writer():
        with lock.write():
            time.sleep(0.1)

    w = start(writer, "writer")
    wait_until(lambda: lock.writers_waiting == 1)
    time.sleep(0.2)
    lock.release_read()
    w.finish()
    lock.acquire_read()  # still held at the snapshot: counts as acquired, not yet as a hold
    raises_in_thread(TimeoutError, lambda: lock.write(timeout=0).__enter__())
    s = lock.stats()
    lock.release_read()

    assert s.read.acquisitions == 2 and s.read.releases == 1 and s.read.timeouts == 0
    assert 0.15 <= s.read.max_hold < 2.0 and s.read.mean_hold == s.read.total_hold
    assert s.read.max_wait < 0.1
    assert s.write.acquisitions == 1 and s.write.timeouts == 1
    assert 0.15 <= s.write.max_wait < 2.0 and s.write.mean_wait == pytest.approx(s.write.max_wait)
    assert 0.08 <= s.write.max_hold < 2.0
    flat = s.as_dict()
    assert flat["write_max_wait"] == s.write.max_wait and flat["read_acquisitions"] == 2
    assert len(flat) == 16

    lock.reset_stats()
    assert lock.stats() == RWLockStats()
    assert LockSideStats().mean_wait == 0.0 and LockSideStats().mean_hold == 0.0


# -- stress ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_stress_random_operations_keep_the_invariants():
    """8 threads, 10^5 random reads and writes in all, invariants checked inside each one."""
    n_threads, total_ops, p_write = 8, 100_000, 0.2
    lock = RWLock(timeout=5.0, name="stress")  # a deadlock raises instead of hanging
    guard = threading.Lock()  # protects the counters below, independently of `lock`
    active = {"readers": 0, "writers": 0, "peak_readers": 0}
    violations: list[str] = []
    shared = [0]  # written non-atomically by writers: torn updates would show
    done = [[0, 0] for _ in range(n_threads)]  # per thread: reads, writes

    def hold(rng):
        for _ in range(rng.randrange(8)):
            pass
        if rng.random() < 0.1:
            time.sleep(0)  # give the GIL away inside the critical section

    def worker(i):
        rng = random.Random(1234 + i)
        for _ in range(total_ops // n_threads):
            if rng.random() < p_write:
                with lock.write():
                    with guard:
                        active["writers"] += 1
                        if active["writers"] != 1 or active["readers"]:
                            violations.append(f"writer with {active}")
                    if lock.readers or not lock.writer_active:
                        violations.append(f"writer sees {lock!r}")
                    value = shared[0]
                    hold(rng)
                    shared[0] = value + 1
                    with guard:
                        active["writers"] -= 1
                done[i][1] += 1
            else:
                with lock.read():
                    with guard:
                        active["readers"] += 1
                        active["peak_readers"] = max(active["peak_readers"], active["readers"])
                        if active["writers"]:
                            violations.append(f"reader with {active}")
                    value = shared[0]
                    hold(rng)
                    if shared[0] != value:
                        violations.append("value changed under a reader")
                    with guard:
                        if active["writers"]:
                            violations.append(f"reader with {active}")
                        active["readers"] -= 1
                done[i][0] += 1

    t0 = time.perf_counter()
    workers = [start(lambda i=i: worker(i), f"stress-{i}") for i in range(n_threads)]
    for w in workers:
        w.join(100)
        assert not w.is_alive(), "stress worker still running (deadlock?)"
    elapsed = time.perf_counter() - t0
    for w in workers:
        w.finish()

    assert violations == []
    # The run really interleaved: readers overlapped and some writers had to wait.
    assert active["peak_readers"] >= 2
    reads = sum(d[0] for d in done)
    writes = sum(d[1] for d in done)
    assert reads + writes == total_ops and shared[0] == writes
    s = lock.stats()
    assert (s.read.acquisitions, s.write.acquisitions) == (reads, writes)
    assert (s.read.releases, s.write.releases) == (reads, writes)
    assert s.read.timeouts == s.write.timeouts == 0
    assert s.write.max_wait > 0.0005
    assert lock.readers == 0 and not lock.writer_active and lock.writers_waiting == 0
    print(
        f"\nstress: {total_ops} ops ({writes} writes) in {elapsed:.2f} s; "
        f"max write wait {s.write.max_wait * 1e3:.1f} ms, "
        f"mean write wait {s.write.mean_wait * 1e6:.0f} us, "
        f"max read wait {s.read.max_wait * 1e3:.1f} ms; peak readers {active['peak_readers']}"
    )
    assert s.write.max_wait < 1.0
