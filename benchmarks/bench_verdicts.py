"""Does ``shoal bench`` give an answer to act on? The same verdict run after run, within its
budget plus the start-up estimate it prints first, at the sizes it prints.

Runs ``shoal bench`` as a user does (the CLI, a fresh process, ``--json``) on three
workloads, ``--repeats`` times each, interleaved (a slow stretch of the machine hits one
repeat of each, not every repeat of one): ``cartpole`` (the preset: a small MLP, a cheap
env, learner-bound), ``slow-env`` (the same with 20 ms of CPU work in every env step,
``env.step_cost_us``: an env in slow Python) and ``minatar`` (``minatar-breakout``: 8 envs,
a conv network). Each run's wall time is measured around the whole command.

Prints, per run: the scheme named, whether it was too close to call, each scheme's
measured pace (both windows where there were two), the sizes, the wall seconds against
``--seconds`` plus the printed estimate; then per workload whether every verdict agreed and
every run was within its bound. Writes the figures as JSON with ``--json``.

Usage:
    python benchmarks/bench_verdicts.py [--workloads cartpole,slow-env,minatar]
        [--seconds 120] [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORKLOADS = {
    "cartpole": ["cartpole"],
    "slow-env": [
        "cartpole",
        "--set",
        "env.step_cost_us=20000",
        "--set",
        "env.step_cost_kind='spin'",
    ],
    "minatar": ["minatar-breakout"],
}
"""Each workload's config and flags."""

CLI = str(Path(sys.executable).parent / "shoal")
ESTIMATE = re.compile(r"plus about (\d+) s of start-ups")


def one_bench(name: str, seconds: float) -> dict[str, Any]:
    """One ``shoal bench --json`` of workload ``name``: its report, the estimate it printed
    first, and the command's wall seconds."""
    args = [CLI, "bench", *WORKLOADS[name], "--seconds", f"{seconds:g}", "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{name}: shoal bench failed ({out.returncode}):\n{out.stderr}")
    found = ESTIMATE.search(out.stderr)
    if found is None:
        raise SystemExit(f"{name}: no start-up estimate on stderr:\n{out.stderr}")
    report = json.loads(out.stdout)
    estimate = float(found.group(1))
    return {
        "workload": name,
        "winner": report["winner"],
        "reason": report["reason"],
        "close": report["reason"].startswith("too close to call"),
        "paces": {s["scheme"]: s["paces"] for s in report["schemes"]},
        "sizes": {s["scheme"]: s["workers"] for s in report["schemes"]},
        "notes": report["notes"],
        "wall_s": wall,
        "estimate_s": estimate,
        "bound_s": seconds + estimate,
        "within": wall <= seconds + estimate,
        "report": report,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--seconds", type=float, default=120.0, help="shoal bench's budget")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    names = args.workloads.split(",")
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for name in names:
            run = one_bench(name, args.seconds)
            runs.append(run)
            paces = "; ".join(
                f"{s} {' / '.join(f'{x:,.0f}' for x in v)}" for s, v in run["paces"].items()
            )
            print(
                f"{name} run {repeat + 1}: use {run['winner']}"
                f"{' (too close to call)' if run['close'] else ''}; {paces}; "
                f"{run['wall_s']:.0f} s against {args.seconds:g} + {run['estimate_s']:.0f} s",
                flush=True,
            )
    print(f"\n{os.cpu_count()} CPU cores, {platform.machine()}, Python {platform.python_version()}")
    print("\n".join(summary(runs, names)))
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))


def summary(runs: list[dict[str, Any]], names: list[str]) -> list[str]:
    """Per workload: the verdicts, whether they agree, each wall time against its bound."""
    lines = []
    for name in names:
        mine = [r for r in runs if r["workload"] == name]
        verdicts = [r["winner"] + (" (close)" if r["close"] else "") for r in mine]
        walls = ", ".join(f"{r['wall_s']:.0f}/{r['bound_s']:.0f}" for r in mine)
        same = len({r["winner"] for r in mine}) == 1
        within = all(r["within"] for r in mine)
        lines.append(
            f"{name}: verdicts {', '.join(verdicts)} (the same: {same}); wall/bound s {walls} "
            f"(all within: {within}); {mine[0]['notes'][0].strip()}"
        )
    return lines


if __name__ == "__main__":
    main()
