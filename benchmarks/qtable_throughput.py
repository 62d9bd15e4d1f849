"""Shared Q-table throughput and correctness: SharedQTable against the Manager().dict() design.

Measured side by side in one run, with 1 and 2 worker processes (spawned, released
together by an Event; throughput = all updates / the slowest worker's time):

- the naive design from the user's notes: ``Manager().dict()`` for Q and N plus a
  ``Manager().Lock()``, one Q-learning step per key under the lock;
- ``SharedQTable`` in each lock mode (global, striped, none), with the single-key API
  (``update``) and the batched API (``update_many``, 4096 keys a call).

Then correctness under contention:

- lost updates: 10^6 Q-learning steps in total on 8 hot keys from 2 and 4 processes; with
  exact locking the visit counts must add up to 10^6 (Hogwild's losses are reported);
- lost inserts: 4 processes insert disjoint keys at once: 20,000 random keys, and 1,000
  keys whose home slots are only 4, so that every probe sequence crosses many stripes.

Usage:
    python benchmarks/qtable_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

from shoal.agent.qlearning import constant
from shoal.sync.workers import SPAWN
from shoal.tabular import LOCK_MODES, SharedQTable, pair_keys
from shoal.tabular.stress import hammer, run_workers

KEY_SPACE = 100_000
BATCH = 4096
ALPHA = 0.5


def manager_worker(q: Any, n: Any, lock: Any, keys: np.ndarray, start: Any) -> float:
    """The naive design: every access is a round trip to the manager process."""
    start.wait()
    t0 = time.perf_counter()
    for k in keys.tolist():
        with lock:
            visits = n.get(k, 0) + 1
            n[k] = visits
            old = q.get(k, 0.0)
            q[k] = old + ALPHA * (1.0 - old)
    return time.perf_counter() - t0


def workload(n_procs: int, per_proc: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [pair_keys(rng.integers(0, KEY_SPACE, per_proc), np.uint64(0)) for _ in range(n_procs)]


def rate(per_proc: int, n_procs: int, seconds: list[float]) -> float:
    return per_proc * n_procs / max(seconds)


def bench_manager(n_procs: int, per_proc: int) -> float:
    with SPAWN.Manager() as manager:
        q, n, lock = manager.dict(), manager.dict(), manager.Lock()
        keys = workload(n_procs, per_proc, 0)
        secs = run_workers(manager_worker, [(q, n, lock, k) for k in keys], timeout=600)
        assert sum(n.values()) == per_proc * n_procs
    return rate(per_proc, n_procs, secs)


def bench_table(lock: str, n_procs: int, per_proc: int, batch: int) -> float:
    keys = workload(n_procs, per_proc, 1)
    with SharedQTable(2 * KEY_SPACE, lock=lock) as table:
        # Insert the key space first so that every run measures updates, not inserts.
        everything = pair_keys(np.arange(KEY_SPACE), np.uint64(0))
        table.update_many(everything, np.zeros(KEY_SPACE), constant(ALPHA))
        secs = run_workers(hammer, [(table.handle, k, batch) for k in keys], timeout=600)
    return rate(per_proc, n_procs, secs)


def lost_updates(lock: str, n_procs: int, total: int, batch: int) -> int:
    hot = pair_keys(np.uint64(99), np.arange(8))
    rng = np.random.default_rng(2)
    per = total // n_procs
    streams = [hot[rng.integers(0, 8, per)] for _ in range(n_procs)]
    with SharedQTable(64, lock=lock, stripes=4) as table:
        run_workers(hammer, [(table.handle, s, batch) for s in streams], timeout=600)
        return per * n_procs - table.total_visits()


def lost_inserts(lock: str, crafted: bool, n_procs: int = 4) -> int:
    """Keys missing after n_procs processes insert disjoint key sets at once (batches of 16).

    ``crafted``: 1,000 keys whose home slots are only 4, so every probe sequence is long and
    crosses many stripes; otherwise 20,000 random keys filling 61% of the slots, where
    collision clusters cross stripes all the time."""
    n_keys = 1_000 if crafted else 20_000
    with SharedQTable(n_keys, lock=lock, stripes=64) as table:
        if crafted:
            high = np.arange(1, n_keys + 1, dtype=np.uint64) << np.uint64(32)
            keys = high | (np.arange(n_keys, dtype=np.uint64) % np.uint64(4) + np.uint64(1))
        else:
            keys = pair_keys(np.arange(n_keys), np.uint64(5))
        parts = [keys[i::n_procs] for i in range(n_procs)]
        run_workers(hammer, [(table.handle, p, 16) for p in parts], timeout=600)
        _, n = table.get_many(keys)
        return int((n == 0).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads (smoke run)")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    per_manager = int(5_000 * scale)
    per_single = int(200_000 * scale)
    per_batched = int(4_000_000 * scale)

    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(f"\nthroughput (Q-learning steps/s; keys uniform over {KEY_SPACE:,} pairs)")
    print(f"{'design':<34} {'1 proc':>12} {'2 procs':>12}")
    results: dict[str, dict[int, float]] = {}
    results["Manager().dict() + Manager().Lock()"] = {
        p: bench_manager(p, per_manager) for p in (1, 2)
    }
    for lock in LOCK_MODES:
        results[f"SharedQTable {lock}, single"] = {
            p: bench_table(lock, p, per_single, 1) for p in (1, 2)
        }
        results[f"SharedQTable {lock}, batched {BATCH}"] = {
            p: bench_table(lock, p, per_batched, BATCH) for p in (1, 2)
        }
    for name, r in results.items():
        print(f"{name:<34} {r[1]:>12,.0f} {r[2]:>12,.0f}")
    manager2 = results["Manager().dict() + Manager().Lock()"][2]
    best = max(
        ("global", "striped"), key=lambda m: results[f"SharedQTable {m}, batched {BATCH}"][2]
    )
    best2 = results[f"SharedQTable {best}, batched {BATCH}"][2]
    print(
        f"\nbest locked batched, 2 procs ({best}): {best2:,.0f} steps/s "
        f"(target >= 1,000,000: {'MET' if best2 >= 1e6 else 'MISSED'})"
    )
    print(
        f"ratio to Manager design, 2 procs: {best2 / manager2:,.0f}x "
        f"(target >= 100x: {'MET' if best2 / manager2 >= 100 else 'MISSED'})"
    )
    for lock in ("global", "striped"):
        single2 = results[f"SharedQTable {lock}, single"][2]
        print(f"single-key API, {lock}, 2 procs vs Manager: {single2 / manager2:,.0f}x")

    total = int(1_000_000 * scale)
    print(f"\nlost updates: {total:,} steps in total on 8 hot keys")
    print(f"{'lock':<8} {'API':<8} {'2 procs':>10} {'4 procs':>10}")
    for lock in LOCK_MODES:
        for api, batch in (("single", 1), ("batched", 1000)):
            lost = {p: lost_updates(lock, p, total, batch) for p in (2, 4)}
            print(
                f"{lock:<8} {api:<8} {lost[2]:>10,} {lost[4]:>10,}"
                f"   ({100 * lost[4] / total:.2f}% at 4 procs)"
            )
    print("\nlost inserts: 4 processes insert disjoint keys at once")
    print(f"{'lock':<8} {'20,000 random keys':>20} {'1,000 keys, 4 home slots':>26}")
    for lock in LOCK_MODES:
        print(f"{lock:<8} {lost_inserts(lock, False):>20,} {lost_inserts(lock, True):>26,}")


if __name__ == "__main__":
    main()
