"""The standard value-based tasks: each preset over seeds, against rl-baselines3-zoo's DQN.

Trains every ``--tasks`` preset (acrobot, mountaincar, lunarlander) for ``--seeds`` run
seeds at its own step budget, then scores each run's ``best.pt`` with ``shoal eval``'s
20 greedy episodes on starts no evaluation saw (seed = run seed + 1). Prints one row per
run (score, steps, wall seconds), and per task the mean, spread, worst and median seed
beside the zoo's published DQN score and the floor the issue set for the preset.

``--defaults`` trains with shoal's defaults instead of the preset (the preset's env and
step budget only): what a user gets from ``shoal train --env ID --steps N``.
``--runner processes --workers 2`` runs the same configs on rollout workers; ``--set
KEY=VALUE`` (repeatable) changes the config of every run, and ``--label`` names the runs.
``--jobs 2`` trains two runs at a time (each learner on one torch thread): the wall
seconds are then those of a shared machine. ``--from DIR`` keeps the runs in DIR and
reads the finished ones instead of training them again (an interrupted sweep goes on).

Usage:
    python benchmarks/standard_tasks.py [--tasks acrobot,mountaincar,lunarlander]
        [--seeds 3] [--defaults] [--runner serial] [--workers 2] [--jobs 1]
        [--from DIR] [--json PATH] [--set KEY=VALUE ...] [--label NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# rl-baselines3-zoo's benchmark.md (DQN, one seed; LunarLander on v2) and the floor every
# seed of the preset must reach.
ZOO = {
    "acrobot": ("Acrobot-v1", -76.6, 11.8, -85.0),
    "mountaincar": ("MountainCar-v0", -100.8, 9.9, -111.0),
    "lunarlander": ("LunarLander-v3", 154.4, 79.2, 139.0),
}


def run_name(task: str, seed: int, args: argparse.Namespace) -> str:
    kind = args.label or ("defaults" if args.defaults else "preset")
    return f"{task}-{kind}-{args.runner}-s{seed}"


def overrides(task: str, seed: int, args: argparse.Namespace) -> list[str]:
    from shoal.config import load_config

    preset = load_config(task)
    values = [f"run.seed={seed}", "run.progress=false", f"run.runner='{args.runner}'"]
    if args.runner == "processes":
        values.append(f"processes.workers={args.workers}")
    if args.defaults:
        values += [f"env.id='{preset.env.id}'", f"run.total_steps={preset.run.total_steps}"]
    return values + args.overrides


def train_one(task: str, seed: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Train one run in a fresh process (unless it finished before) and score best.pt."""
    run_dir = root / run_name(task, seed, args)
    if not (run_dir / "result.json").is_file():
        source = "None" if args.defaults else repr(task)
        code = (
            "import json, shoal, time\n"
            "t = time.perf_counter()\n"
            f"r = shoal.train({source}, overrides={overrides(task, seed, args)!r}, "
            f"run_dir={str(run_dir)!r})\n"
            "s = shoal.evaluate_run(r.run_dir, 20)\n"
            "out = dict(score=float(s.mean()), std=float(s.std()), steps=r.env_steps, "
            "wall=r.wall_seconds, process=time.perf_counter() - t, "
            "last=r.eval_return, best=r.best_eval_return)\n"
            f"open({str(run_dir / 'result.json')!r}, 'w').write(json.dumps(out))\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    result = json.loads((run_dir / "result.json").read_text())
    result.update(task=task, seed=seed)
    print(
        f"{task} seed {seed}: best.pt {result['score']:.1f} +- {result['std']:.1f} "
        f"(last eval {result['last']:.1f}, best eval {result['best']:.1f}), "
        f"{result['steps']} steps, {result['wall']:.0f} s",
        flush=True,
    )
    return result


def summary(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.label or ('defaults' if args.defaults else 'presets')} on {args.runner}"
        f"{' with ' + ' '.join(args.overrides) if args.overrides else ''}"
        f"{f' ({args.workers} workers)' if args.runner == 'processes' else ''}, "
        f"{os.cpu_count()} CPU cores, {platform.machine()}, Python {platform.python_version()}"
    )
    print(
        "| task | steps | best.pt, 20 episodes: mean +- sd over seeds | worst | median "
        "| wall s (mean) | zoo DQN | floor |"
    )
    for task in args.tasks:
        rows = [r for r in results if r["task"] == task]
        scores = [r["score"] for r in rows]
        env_id, zoo, zoo_sd, floor = ZOO[task]
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        worst = min(scores)
        verdict = "" if args.defaults else (" met" if worst >= floor else " MISSED")
        print(
            f"| {env_id} | {rows[0]['steps']} | {statistics.mean(scores):.1f} +- {spread:.1f} "
            f"| {worst:.1f}{verdict} | {statistics.median(scores):.1f} "
            f"| {statistics.mean(r['wall'] for r in rows):.0f} | {zoo} +- {zoo_sd} | {floor} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="acrobot,mountaincar,lunarlander")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--defaults", action="store_true")
    parser.add_argument("--runner", default="serial", choices=("serial", "processes"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--from", dest="root", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], help="a config override"
    )
    parser.add_argument("--label", default="", help="the runs' name (default: preset/defaults)")
    args = parser.parse_args()
    args.tasks = args.tasks.split(",")
    unknown = [t for t in args.tasks if t not in ZOO]
    if unknown:
        parser.error(f"--tasks: unknown {unknown}; allowed: {', '.join(ZOO)}")
    root = args.root or Path(tempfile.mkdtemp(prefix="shoal-standard-"))
    root.mkdir(parents=True, exist_ok=True)
    jobs = [(t, s) for t in args.tasks for s in range(args.seeds)]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda ts: train_one(*ts, args, root), jobs))
    summary(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
