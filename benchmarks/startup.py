"""Start-up cost: a short CartPole run as a whole process against ``import torch`` alone.

Measured side by side in one run, alternating so that both see the same machine load:

- (a) ``python -c "import torch"``: the floor, since the learner needs torch;
- (b) ``shoal train cartpole --steps 500 --set run.learning_starts=10000 --no-progress``:
  a whole process that makes the env, steps it 500 times without learning (so the
  figure is mostly start-up), writes metrics, a checkpoint and the curve, and exits.

Each is run ``--repeats`` times (default 7) as a fresh subprocess; the medians, their ratio
(target: at most 1.8x), the machine (cores) and its load average are printed. Other work on
the machine slows both, but not by the same factor: compare figures taken at a low load.
It is a benchmark, not a test: it exits 0 whatever the ratio. ``--importtime`` also prints
where (b)'s import time goes, per top-level package, from ``python -X importtime``.

Usage:
    python benchmarks/startup.py [--repeats 7] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.8
TORCH_CMD = [sys.executable, "-c", "import torch"]
SHOAL_ARGS = [
    "train",
    "cartpole",
    "--steps",
    "500",
    "--set",
    "run.learning_starts=10000",
    "--no-progress",
]


def shoal_cmd(out: Path) -> list[str]:
    """The 500-step run through the ``shoal`` console script next to this Python.

    Where no such script is installed, the same entry point is started with ``-c``.
    """
    script = Path(sys.executable).with_name("shoal")
    if script.exists():
        return [sys.executable, str(script), *SHOAL_ARGS, "--out", str(out)]
    code = "import sys; from shoal.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, *SHOAL_ARGS, "--out", str(out)]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Wall-clock seconds of one subprocess run; a failing command aborts the benchmark."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def import_breakdown(out: Path) -> list[tuple[float, str]]:
    """Import seconds per top-level package in one run of (b), slowest first.

    Each module's own (self) time goes to its root package, so ``shoal`` counts only
    shoal's own modules and the figures add up to the process's whole import time.
    """
    cmd = [sys.executable, "-X", "importtime", *shoal_cmd(out)[1:]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    totals: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)", line)
        if m:
            root = m.group(2).split(".")[0]
            totals[root] = totals.get(root, 0.0) + int(m.group(1)) / 1e6
    return sorted(((s, name) for name, s in totals.items()), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each command")
    parser.add_argument("--importtime", action="store_true", help="also show import costs")
    args = parser.parse_args()

    torch_s: list[float] = []
    shoal_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="shoal-startup-") as tmp:
        timed(TORCH_CMD)  # warm the file cache once; not counted
        timed(shoal_cmd(Path(tmp) / "warm"))
        for i in range(args.repeats):
            torch_s.append(timed(TORCH_CMD))
            shoal_s.append(timed(shoal_cmd(Path(tmp) / f"run{i}")))
        breakdown = import_breakdown(Path(tmp) / "importtime") if args.importtime else []

    t, s = statistics.median(torch_s), statistics.median(shoal_s)
    py = platform.python_version()
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {py}, load {load}")
    print(f"runs: {args.repeats} of each, alternating; medians (min-max)")
    print(f"(a) import torch          : {t:6.2f} s  ({min(torch_s):.2f}-{max(torch_s):.2f})")
    print(f"(b) shoal train 500 steps : {s:6.2f} s  ({min(shoal_s):.2f}-{max(shoal_s):.2f})")
    verdict = "meets" if s / t <= TARGET else "misses"
    print(f"ratio (b)/(a): {s / t:.2f}x  ({verdict} the {TARGET}x target)")
    print(f"start-up over torch: {s - t:.2f} s")
    if breakdown:
        total = sum(secs for secs, _ in breakdown)
        print(f"import time of (b): {total:.2f} s; by package (self time, seconds):")
        for secs, name in breakdown[:15]:
            print(f"  {secs:6.3f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
