"""SharedQTable: exactness against the in-process oracle, concurrency (hot keys, insert
races) across processes, attach/detach, capacity, files, and shared-memory cleanup."""

import subprocess
import sys

import numpy as np
import pytest

from shoal.agent.qlearning import constant, harmonic, inverse_count
from shoal.tabular import (
    LocalQTable,
    SharedQTable,
    TableFileError,
    TableFullError,
    pair_keys,
)
from shoal.tabular.stress import hammer, run_workers

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_shm_leak")]
LOCKED = ["global", "striped"]


def sorted_snapshot(table):
    snap = table.snapshot()
    order = np.argsort(snap["keys"])
    return {k: v[order] for k, v in snap.items()}


@pytest.mark.parametrize("lock", ["global", "striped", "none"])
@pytest.mark.parametrize("alpha", [inverse_count(), harmonic(5.0), constant(0.3)])
def test_single_process_matches_oracle_bit_for_bit(lock, alpha):
    rng = np.random.default_rng(1)
    keys = pair_keys(rng.integers(0, 200, 3000), rng.integers(0, 5, 3000))  # many repeats
    targets = rng.normal(size=3000)
    oracle = LocalQTable()
    with SharedQTable(2000, lock=lock, stripes=8) as table:
        table.update_many(keys[:2000], targets[:2000], alpha)
        oracle.update_many(keys[:2000], targets[:2000], alpha)
        for k, t in zip(keys[2000:], targets[2000:]):
            assert table.update(k, t, alpha) == oracle.update(k, t, alpha)
        a, b = (
            sorted_snapshot(table),
            {k: v[np.argsort(oracle.snapshot()["keys"])] for k, v in oracle.snapshot().items()},
        )
        assert np.array_equal(a["keys"], b["keys"])
        assert np.array_equal(a["n"], b["n"])
        assert np.array_equal(a["q"], b["q"])
        q, n = table.get_many(keys[:10])
        q2, n2 = oracle.get_many(keys[:10])
        assert np.array_equal(q, q2) and np.array_equal(n, n2)
        assert table.max_q(keys[:10]) == oracle.max_q(keys[:10])
        assert table.get(keys[0]) == oracle.get(keys[0])


def test_unseen_keys_read_as_zero():
    with SharedQTable(10) as t:
        q, n = t.get_many(pair_keys(1, np.arange(3)))
        assert q.tolist() == [0.0, 0.0, 0.0] and n.tolist() == [0, 0, 0]
        assert t.max_q(np.array([], np.uint64)) == float("-inf")


@pytest.mark.parametrize("lock", LOCKED)
@pytest.mark.parametrize("batch", [1, 64])
def test_hot_keys_exact_counts_across_processes(lock, batch):
    """4 processes hammer 5 hot keys in random order: no update may be lost."""
    hot = pair_keys(np.uint64(7), np.arange(5))
    per_worker = 4000 if batch == 1 else 40000
    rng = np.random.default_rng(0)
    streams = [hot[rng.integers(0, 5, per_worker)] for _ in range(4)]
    with SharedQTable(100, lock=lock, stripes=4) as table:
        run_workers(hammer, [(table.handle, s, batch) for s in streams])
        _, n = table.get_many(hot)
        expected = sum(
            np.bincount(np.searchsorted(np.sort(hot), np.sort(s)), minlength=5) for s in streams
        )
        order = np.argsort(hot)
        assert n[order].tolist() == expected.tolist()
        assert table.total_visits() == 4 * per_worker


@pytest.mark.parametrize("lock", LOCKED)
def test_insert_race_loses_no_keys(lock):
    """Keys that all hash to the same few home slots, inserted by 4 processes at once:
    the probe sequences cross stripes, so only an insert lock over the whole probe keeps
    every key."""
    with SharedQTable(4000, lock=lock, stripes=16) as table:
        slots_mask = table.handle.slots - 1
        # craft keys whose home slot is one of 4 slots: low bits fixed, high bits vary
        base = np.arange(1, 3001, dtype=np.uint64) << np.uint64(32)
        keys = base | (np.arange(3000, dtype=np.uint64) % np.uint64(4)) + np.uint64(1)
        assert len(set((keys & np.uint64(slots_mask)).tolist())) == 4
        parts = [keys[i::4] for i in range(4)]
        run_workers(hammer, [(table.handle, p, 25) for p in parts])
        assert len(table) == 3000
        _, n = table.get_many(keys)
        assert (n == 1).all()


def test_hogwild_may_lose_but_never_gains():
    hot = pair_keys(np.uint64(3), np.arange(2))
    rng = np.random.default_rng(0)
    streams = [hot[rng.integers(0, 2, 20000)] for _ in range(2)]
    with SharedQTable(10, lock="none") as table:
        run_workers(hammer, [(table.handle, s, 1) for s in streams])
        assert table.total_visits() <= 40000


def test_attach_sees_the_same_memory_and_detach_keeps_it(shm_names):
    with SharedQTable(100) as owner:
        other = SharedQTable.attach(owner.handle)
        assert not other.owner and owner.owner
        other.update(12345, 2.0, constant(1.0))
        assert owner.get(12345) == 2.0
        other.close()
        other.close()  # twice is fine
        assert owner.get(12345) == 2.0
        assert owner.name in shm_names()
    assert owner.name not in shm_names()


def test_full_table_raises_and_keeps_everything():
    with SharedQTable(10, lock="striped") as t:
        keys = pair_keys(1, np.arange(10))
        t.update_many(keys, np.ones(10), constant(1.0))
        with pytest.raises(TableFullError, match="full: 10 of 10"):
            t.update_many(pair_keys(2, np.arange(3)), np.ones(3), constant(1.0))
        with pytest.raises(TableFullError):
            t.update(pair_keys(3, 0), 1.0, constant(1.0))
        assert len(t) == 10
        q, n = t.get_many(keys)
        assert (q == 1).all() and (n == 1).all()


def test_bad_arguments():
    for kwargs, needle in [
        ({"capacity": 0}, "capacity"),
        ({"capacity": 10, "lock": "spin"}, "lock"),
        ({"capacity": 10, "stripes": 0}, "stripes"),
        ({"capacity": 10, "max_load": 1.5}, "max_load"),
    ]:
        with pytest.raises(ValueError, match=needle):
            SharedQTable(**kwargs)


def test_save_load_round_trip_and_damaged_files(tmp_path):
    path = tmp_path / "table.npz"
    rng = np.random.default_rng(0)
    keys = pair_keys(rng.integers(0, 50, 500), rng.integers(0, 4, 500))
    with SharedQTable(1000) as t:
        t.update_many(keys, rng.normal(size=500), inverse_count())
        t.save(path)
        before = sorted_snapshot(t)
    with SharedQTable.load(path, lock="global") as t2:
        after = sorted_snapshot(t2)
        assert all(np.array_equal(before[k], after[k]) for k in before)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(TableFileError, match="corrupt or truncated"):
        SharedQTable.load(path)
    path.write_bytes(b"garbage")
    with pytest.raises(TableFileError, match="corrupt or truncated"):
        SharedQTable.load(path)
    np.savez(path, keys=np.zeros(3, np.uint64))
    with pytest.raises(TableFileError, match="not a shoal Q-table"):
        SharedQTable.load(path)
    with pytest.raises(TableFileError, match="does not exist"):
        SharedQTable.load(tmp_path / "missing.npz")


def test_save_without_locks_when_a_dead_worker_holds_one(tmp_path):
    """A worker killed inside a critical section never releases its lock: a locked save
    would wait for the timeout, an unlocked one (what is left after the kill) does not."""
    with SharedQTable(100, lock="striped", lock_timeout=0.2) as t:
        t.update_many(pair_keys(np.uint64(1), np.arange(3)), np.ones(3), constant(0.5))
        assert t.handle.locks[0].acquire(timeout=1)  # as if held by a killed process
        try:
            with pytest.raises(TimeoutError, match="not acquired"):
                t.save(tmp_path / "locked.npz")
            assert not (tmp_path / "locked.npz").exists()  # nothing half written
            t.save(tmp_path / "t.npz", locked=False)
        finally:
            t.handle.locks[0].release()
    assert len(SharedQTable.read(tmp_path / "t.npz")["keys"]) == 3


def test_pickling_outside_spawn_is_refused():
    import pickle

    with SharedQTable(10, lock="global") as t, pytest.raises(RuntimeError):
        pickle.dumps(t)


@pytest.mark.parametrize("how", ["exception", "sigkill", "sigkill-after-child-attached"])
def test_segment_released_when_owner_crashes(how, tmp_path, shm_names):
    code = (
        "import os, signal, sys, multiprocessing as mp\n"
        "from shoal.tabular import SharedQTable\n"
        "from shoal.sync.workers import SPAWN\n"
        "def child(t):\n"
        "    t.get(1)\n"
        "if __name__ == '__main__':\n"
        "    t = SharedQTable(100)\n"
        + (
            # a spawned child attaching must not drop the owner's crash-cleanup registration
            "    p = SPAWN.Process(target=child, args=(t,))\n    p.start(); p.join()\n"
            if how == "sigkill-after-child-attached"
            else ""
        )
        + "    print(t.name, flush=True)\n"
        + (
            "    raise RuntimeError('boom')\n"
            if how == "exception"
            else "    os.kill(os.getpid(), signal.SIGKILL)\n"
        )
    )
    script = tmp_path / "owner.py"  # a file, so that a spawned child can import its main
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    name = proc.stdout.split()[0]
    assert proc.returncode != 0
    # SIGKILL: the resource tracker notices its client is gone and unlinks the segment.
    import time

    for _ in range(100):
        if name not in shm_names():
            break
        time.sleep(0.05)
    assert name not in shm_names()
