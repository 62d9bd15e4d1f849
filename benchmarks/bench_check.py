"""``shoal bench``'s predictions against full runs, on workloads of different shapes.

For each workload ``shoal bench`` runs (its parts, its predictions, its measured
windows, the scheme it names), then each scheme trains a full run of ``--steps`` env
steps at the config's replay ratio, ``--repeats`` times, interleaved across the schemes,
and the median stands for the scheme (single full runs of one scheme moved by up to 33% on
this VM; the same env steps and updates for every scheme; no
evaluation until the end; epsilon at its end value throughout, as bench times them). A
full run's pace is its steady rate: env steps per wall second from its first tick row
with updates to its last (metrics.csv), so start-up and the warm-up before learning
starts do not count, as they do not in the prediction.

Workloads: ``cartpole`` (the preset: a small MLP, a cheap env, learner-bound),
``slow-env`` (the same with 200 us of CPU work in every env step, ``env.step_cost_us``:
an env in slow Python) and ``minatar`` (``minatar-breakout``: 8 envs, a conv network).

Prints, per workload and scheme: predicted, bench-measured and full-run steps/s, the
prediction's error against the full run, and whether the named scheme was the fastest
median full run (or within 10% of it). Writes the figures as JSON with ``--json``.

Usage:
    python benchmarks/bench_check.py [--workloads cartpole,slow-env,minatar]
        [--seconds 120] [--steps 30000] [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any

import shoal
from shoal.bench import at_end_epsilon, bench
from shoal.bench.parts import replay_ratio
from shoal.config import load_config
from shoal.run.metrics import read_metrics

WORKLOADS = {
    "cartpole": ("cartpole", []),
    "slow-env": ("cartpole", ["env.step_cost_us=200", "env.step_cost_kind='spin'"]),
    "minatar": ("minatar-breakout", []),
}
"""Each workload's preset and overrides."""

SCHEMES = ["serial", "threads", "processes", "ray"]
"""Every scheme ``shoal bench`` weighs for a single-agent env (Ray is installed with shoal)."""


def full_run(preset: str, overrides: list[str], scheme: str, steps: int, out: Path) -> float:
    """A full run of ``scheme``'s: its steady env steps per second, with epsilon at its end
    value from the first step, as ``shoal bench`` times every scheme (a real run's steps
    go mostly past the decay; a short check's would not: MinAtar decays over 100k)."""
    result = shoal.train(
        preset,
        overrides=[
            *overrides,
            *at_end_epsilon(load_config(preset, overrides)),
            f"run.runner='{scheme}'",
            f"run.total_steps={steps}",
            f"run.eval_every={10 * steps}",
            "run.eval_episodes=2",
            f"run.checkpoint_every={10 * steps}",
            "run.stop_return=none",
            "run.max_minutes=none",
            "run.progress=false",
            f"run.out='{out}'",
        ],
    )
    ticks = [
        r
        for r in read_metrics(Path(result.run_dir) / "metrics.csv")
        if r["kind"] == "tick" and float(r["updates"] or 0) > 0
    ]
    if len(ticks) < 2:
        raise SystemExit(f"{scheme}: fewer than two tick rows with updates; raise --steps")
    first, last = ticks[0], ticks[-1]
    seconds = float(last["wall_s"]) - float(first["wall_s"])
    steps = float(last["step"]) - float(first["step"])
    updates = float(last["updates"]) - float(first["updates"])
    ratio = replay_ratio(load_config(Path(result.run_dir) / "config.toml"))
    return min(steps, updates / ratio) / seconds  # as shoal bench's pace


def check(name: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One workload: bench, then a full run per scheme."""
    preset, overrides = WORKLOADS[name]
    report = bench(preset, overrides=overrides, seconds=args.seconds, schemes=args.schemes)
    print("\n".join(report.lines()), flush=True)
    runs: dict[str, list[float]] = {p.scheme: [] for p in report.predictions}
    for _ in range(args.repeats):  # interleaved: a slow stretch of the VM hits one repeat
        for scheme, rates in runs.items():
            rates.append(full_run(preset, overrides, scheme, args.steps, out))
            print(f"  full run {scheme}: {rates[-1]:,.0f} steps/s", flush=True)
    rows = []
    for pred, window in zip(report.predictions, report.windows, strict=True):
        rate = statistics.median(runs[pred.scheme])
        rows.append(
            {
                "scheme": pred.scheme,
                "predicted": pred.steps_per_s,
                "bound": pred.bound,
                "bench_measured": window.pace,
                "full_run": rate,
                "full_runs": runs[pred.scheme],
                "error": pred.steps_per_s / rate - 1,
            }
        )
    fastest = max(rows, key=lambda r: r["full_run"])
    named = next(r for r in rows if r["scheme"] == report.winner)
    return {
        "workload": name,
        "named": report.winner,
        "reason": report.reason,
        "fastest_full_run": fastest["scheme"],
        "named_within_10pct": named["full_run"] >= 0.9 * fastest["full_run"],
        "schemes": rows,
        "bench": report.to_json(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--seconds", type=float, default=120.0, help="shoal bench's budget")
    parser.add_argument("--steps", type=int, default=30_000, help="env steps of a full run")
    parser.add_argument(
        "--repeats", type=int, default=3, help="full runs per scheme, interleaved; the median"
    )
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    args.schemes = args.schemes.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-check-") as out:
        for name in args.workloads.split(","):
            results.append(check(name, args, Path(out)))
    print(f"\n{os.cpu_count()} CPU cores, {platform.machine()}, Python {platform.python_version()}")
    print("| workload | scheme | predicted | bench window | full run | full runs | error | named |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | --- |")
    for w in results:
        for r in w["schemes"]:
            mark = "**named**" if r["scheme"] == w["named"] else ""
            if r["scheme"] == w["fastest_full_run"]:
                mark += " (fastest)"
            print(
                f"| {w['workload']} | {r['scheme']} | {r['predicted']:,.0f} | "
                f"{r['bench_measured']:,.0f} | {r['full_run']:,.0f} | "
                f"{' / '.join(f'{x:,.0f}' for x in r['full_runs'])} | {r['error']:+.0%} | {mark} |"
            )
    for w in results:
        print(
            f"{w['workload']}: named {w['named']}, fastest full run {w['fastest_full_run']}, "
            f"within 10%: {w['named_within_10pct']} ({w['reason']})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
