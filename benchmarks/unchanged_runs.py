"""Short runs whose ``metrics.csv`` must not change across a refactor.

A change that only moves code (a runner split into components, a writer injected, a rule
written once) must leave every seeded run's numbers as they were. This script trains a few
hundred to a few thousand steps of each preset and learning mode with a fixed seed and
keeps each ``metrics.csv`` without its timing columns: ``--save FILE`` on the old tree,
``--against FILE`` on the new one prints, per case, ``same`` or the first row that differs
(exit 1 if any differs). Cases whose schedule depends on timing (learning beside
collection) are run twice with ``--save`` to see whether they repeat at all: the file says
so per case, and such a case is compared on its row count and columns only.

    python benchmarks/unchanged_runs.py --save /tmp/before.json   # on the old tree
    python benchmarks/unchanged_runs.py --against /tmp/before.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMING = frozenset({"eval_share", "staleness_mean", "staleness_max"})
"""Columns that measure time, not learning, left out of the comparison: these and every
``*_s``, ``*_per_s`` and ``*_ms`` column (wall seconds, rates, waits)."""

SHORT = ["--set", "run.eval_every=1000", "--set", "run.log_every=500"]
AGENTS = ["harvest", "--agents", "3", "--steps", "1500", "--set", "agents.max_turns=50"]

CASES: dict[str, list[str]] = {
    "cartpole": ["cartpole", "--steps", "3000", *SHORT],
    "hybrid": ["hybrid", "--steps", "2000", *SHORT, "--set", "run.eval_episodes=2"],
    "iqn": ["iqn", "--steps", "2000", *SHORT],
    "r2d2": ["r2d2", "--steps", "2000", *SHORT, "--set", "run.eval_episodes=2"],
    "c51": ["cartpole", "--steps", "2000", *SHORT, "--set", "run.recipe=c51"],
    "mapf": [
        "mapf",
        "--runner",
        "serial",
        "--steps",
        "1500",
        "--set",
        "run.learning_starts=300",
        "--set",
        "run.eval_every=750",
        "--set",
        "run.log_every=500",
        "--set",
        "run.eval_episodes=4",
        "--set",
        "mapf.envs=4",
    ],
    "agents-stacked": [*AGENTS, *SHORT],
    "agents-per-agent": [*AGENTS, *SHORT, "--set", "agents.parallel_training=false"],
    "agents-thread": [
        *AGENTS,
        *SHORT,
        "--set",
        "agents.async_learning=true",
        "--set",
        "agents.async_mode=thread",
    ],
    "agents-process": [
        *AGENTS,
        *SHORT,
        "--set",
        "agents.async_learning=true",
        "--set",
        "agents.async_mode=process",
    ],
}
"""Each case's ``shoal train`` arguments (seed and run directory are added)."""


def timing(column: str) -> bool:
    """Whether a column measures time (see :data:`TIMING`)."""
    return column in TIMING or column.endswith(("_s", "_ms"))


def rows_of(metrics: Path) -> list[dict[str, str]]:
    """The file's rows without timing columns."""
    with metrics.open(newline="") as f:
        return [{k: v for k, v in row.items() if not timing(k)} for row in csv.DictReader(f)]


def run_case(name: str, args: list[str], parent: Path) -> tuple[list[dict[str, str]], float]:
    """Train one case and return its rows and wall seconds."""
    run_dir = parent / name
    shoal = Path(sys.executable).with_name("shoal")
    cmd = [str(shoal), "train", *args, "--seed", "0", "--run-dir", str(run_dir), "--no-progress"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return rows_of(run_dir / "metrics.csv"), seconds


def first_difference(old: list[dict[str, str]], new: list[dict[str, str]]) -> str | None:
    """Where two runs' rows first differ, in words (None if they are equal)."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return f"row {i}: " + ", ".join(f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in keys)
    if len(old) != len(new):
        return f"{len(old)} rows -> {len(new)}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", type=Path, help="write the runs' rows here")
    parser.add_argument("--against", type=Path, help="compare with rows saved by --save")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    opts = parser.parse_args()
    saved = json.loads(opts.against.read_text()) if opts.against else {}
    result: dict[str, dict] = {}
    differ = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.cases:
            rows, seconds = run_case(name, CASES[name], Path(tmp) / "a")
            repeats = None
            if opts.save:  # a second run says whether the case is deterministic at all
                again, _ = run_case(name, CASES[name], Path(tmp) / "b")
                repeats = first_difference(rows, again) is None
            result[name] = {"rows": rows, "repeats": repeats}
            verdict = f"{len(rows)} rows, {seconds:.1f} s"
            if name in saved:
                old = saved[name]
                if old["repeats"]:
                    diff = first_difference(old["rows"], rows)
                else:  # timing decides its schedule: compare its shape only
                    diff = None if len(old["rows"]) == len(rows) else "row count differs"
                differ |= diff is not None
                verdict += ": same" if diff is None else f": DIFFERS at {diff}"
                if not old["repeats"]:
                    verdict += " (shape only: it does not repeat run to run)"
            elif repeats is not None:
                verdict += ", repeats" if repeats else ", does NOT repeat run to run"
            print(f"{name}: {verdict}", flush=True)
    if opts.save:
        opts.save.write_text(json.dumps(result))
    print(f"machine: {os.cpu_count()} cores")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
