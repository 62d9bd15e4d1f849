"""Independent agents on the field's cooperative benchmarks, scored as EPyMARL scores them.

Trains each ``--tasks`` preset (the agents runner on Level-Based Foraging, the multi-robot
warehouse and mpe2's particle worlds, as the packages ship them) for ``--seeds`` run
seeds, then reads every run's greedy evaluations from its ``metrics.csv`` and prints, per
task, the two figures of Papoudakis et al. 2021 ("Benchmarking Multi-Agent Deep RL
Algorithms in Cooperative Tasks", EPyMARL):

- **maximum return**: the best evaluation's mean over the seeds (evaluations at the same
  env step averaged across seeds, then the largest), with the seeds' spread there;
- **average return**: the mean of those seed-averaged evaluations over the whole run
  (it rewards learning early as well as well).

A return is the team's: the sum of every agent's rewards over the episode (LBF's sums to
1 when every food is loaded). For MPE it is divided by the number of agents, as the paper
reports it. mpe2's Spread is not the paper's MPE Spread (PettingZoo's port: its rewards'
scale and local/global mix differ), so its figures stand beside the paper's, not against
them.

The paper's IQL figures are the ``PAPER`` table (None where they were not retrieved; the
print says so). Each task's budget is printed beside the paper's (2M env steps; 4M on
RWARE): the presets fit an hour a run on 2 cores.

``--jobs 2`` trains two runs at a time (each on one torch thread). ``--from DIR`` keeps
the runs in DIR and reads the finished ones instead of training them again. ``--set
KEY=VALUE`` (repeatable) changes every run's config and ``--label`` names such runs:
sharing against no sharing on one task, at the same budget::

    python benchmarks/marl_tasks.py --tasks lbf-8x8-2p-2f-coop --seeds 3 --jobs 2
    python benchmarks/marl_tasks.py --tasks lbf-8x8-2p-2f-coop --seeds 3 --jobs 2 \\
        --set agents.share=true --label shared

Usage:
    python benchmarks/marl_tasks.py [--tasks lbf,rware,mpe] [--seeds 3 | --seed-list 1,2]
        [--jobs 1] [--from DIR] [--steps N] [--set KEY=VALUE ...] [--label NAME]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
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


@dataclasses.dataclass(frozen=True)
class Task:
    agents: int
    """Agents in the world (MPE's returns are divided by it)."""
    paper_steps: int
    """The paper's budget for off-policy methods."""
    paper_max: tuple[float, float] | None = None
    """The paper's IQL maximum return and its 95% interval (None: not retrieved)."""
    paper_table: str = ""
    """Where the paper gives it."""
    per_agent: bool = False
    """Returns reported per agent (MPE)."""


TASKS = {
    "lbf-8x8-2p-2f-coop": Task(2, 2_000_000),
    "lbf-10x10-3p-3f": Task(3, 2_000_000),
    "lbf-15x15-4p-3f": Task(4, 2_000_000),
    "rware-tiny-4ag": Task(4, 4_000_000),
    "mpe-spread": Task(3, 2_000_000, per_agent=True),
    "mpe-speaker-listener": Task(2, 2_000_000, per_agent=True),
}
GROUPS = {
    "lbf": [t for t in TASKS if t.startswith("lbf-")],
    "rware": ["rware-tiny-4ag"],
    "mpe": ["mpe-spread", "mpe-speaker-listener"],
}


def evaluations(run_dir: Path) -> list[tuple[int, float]]:
    """A run's greedy evaluations: (env step, mean team return) in step order."""
    import csv

    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "eval"]
    return [(int(r["step"]), float(r["eval_mean"])) for r in rows]


def train_one(task: str, seed: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Train one run in a fresh process (unless it finished before); its evaluations."""
    run_dir = root / f"{task}-{args.label}-s{seed}"
    if not (run_dir / "done.json").is_file():
        over = [f"run.seed={seed}", "run.progress=false", "run.torch_threads=1", *args.overrides]
        if args.steps:
            over.append(f"run.total_steps={args.steps}")
        code = (
            "import json, shoal\n"
            f"r = shoal.train({task!r}, overrides={over!r}, run_dir={str(run_dir)!r})\n"
            "out = dict(steps=r.env_steps, wall=r.wall_seconds, updates=r.updates)\n"
            f"open({str(run_dir / 'done.json')!r}, 'w').write(json.dumps(out))\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    done = json.loads((run_dir / "done.json").read_text())
    scale = TASKS[task].agents if TASKS[task].per_agent else 1
    curve = [(step, value / scale) for step, value in evaluations(run_dir)]
    print(
        f"{task} seed {seed}: best eval {max(v for _, v in curve):.3f}, last {curve[-1][1]:.3f},"
        f" {done['steps']} steps, {done['updates']} updates, {done['wall']:.0f} s",
        flush=True,
    )
    return {"task": task, "seed": seed, "curve": curve, **done}


def score(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """EPyMARL's maximum and average returns of one task's runs (see the docstring). The
    k-th evaluations of the seeds are averaged together (an evaluation waits for its epoch
    to end, so seeds evaluate a few turns apart); runs cut short count up to the shortest."""
    n = min(len(r["curve"]) for r in runs)
    at = [[r["curve"][k] for r in runs] for k in range(n)]
    means = [statistics.fmean(v for _, v in evals) for evals in at]
    best = max(range(n), key=lambda k: means[k])
    spread = statistics.stdev(v for _, v in at[best]) if len(runs) > 1 else 0.0
    return {
        "maximum": means[best],
        "maximum_sd": spread,
        "maximum_at": min(step for step, _ in at[best]),
        "average": statistics.fmean(means),
        "steps": min(step for step, _ in at[-1]),
        "wall_mean": statistics.fmean(r["wall"] for r in runs),
        "seeds": len(runs),
    }


def random_return(task: str, episodes: int = 100) -> float:
    """The mean team return (scaled as the task's) of uniformly random agents over
    ``episodes`` episodes: the floor a trained run must clear."""
    from shoal.config import load_config
    from shoal.runners.agents.epochs import play_epochs

    played = play_epochs(load_config(task), list(range(episodes)), epsilon=1.0)
    scale = TASKS[task].agents if TASKS[task].per_agent else 1
    return statistics.fmean(float(r.returns.sum()) / scale for r in played)


def report(task: str, s: dict[str, Any]) -> str:
    t = TASKS[task]
    paper = (
        f"paper IQL {t.paper_max[0]:.2f} +- {t.paper_max[1]:.2f} ({t.paper_table})"
        if t.paper_max
        else "paper IQL: not retrieved"
    )
    return (
        f"{task}: maximum return {s['maximum']:.3f} +- {s['maximum_sd']:.3f} (at {s['maximum_at']}"
        f" steps), average {s['average']:.3f}; {s['seeds']} seeds, {s['steps']} steps"
        f" (paper: {t.paper_steps}), {s['wall_mean'] / 60:.1f} min a run; random agents"
        f" {s['random']:.3f}; {paper}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="lbf")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed-list", default="")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--from", dest="root", default="")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--label", default="preset")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    tasks = [t for name in args.tasks.split(",") for t in GROUPS.get(name, [name])]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        parser.error(f"unknown tasks {unknown}; known: {sorted(TASKS)} or {sorted(GROUPS)}")
    given = args.seed_list.split(",") if args.seed_list else range(args.seeds)
    seeds = [int(s) for s in given]
    root = Path(args.root or tempfile.mkdtemp(prefix="shoal-marl-"))
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores;"
        f" runs in {root}",
        flush=True,
    )
    jobs = [(t, s) for t in tasks for s in seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda job: train_one(*job, args, root), jobs))
    scores = {}
    for task in tasks:
        scores[task] = score([r for r in runs if r["task"] == task])
        scores[task]["random"] = random_return(task)
        print(report(task, scores[task]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"scores": scores, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
