"""MinAtar Breakout: wall time to the reference DQN's score, serial against 2 workers.

Trains the ``minatar-breakout`` preset for ``--minutes`` each with the serial runner and
with the processes runner at 2 workers of 8 envs (``--variants`` adds 2 workers of 4: 8
envs in all, as serial acts on); the same update schedule, one update of 64 per 4 env
steps, every learner on one torch thread. Evaluates 20 greedy episodes every
``--eval-every`` env steps.
Prints each run's curve, the wall time of its first evaluation at or above ``--target``
(9.2: what the MinAtar reference DQN reaches after 1M frames, read off MinAtar's README
figure) and the ratio serial / processes of those times (target: above 1, the processes
runner there first), then ``shoal eval --episodes 100`` of each run's best checkpoint
(target: at least 9.2). Draws seed 0's curves against wall time into ``--plot``.

``--seeds N`` repeats each for run seeds 0..N-1 (time to a score is noisy: one seed says
little) and compares the medians. ``--from DIR`` reads runs made before instead of
training those (missing ones are trained there, so an interrupted benchmark goes on):
``DIR/breakout-serial``, ``DIR/breakout-proc2`` and ``DIR/breakout-proc2x4``
for seed 0, with ``-s1``, ``-s2`` appended for the others (e.g. made by ``shoal train
minatar-breakout --set run.max_minutes=15 --set run.eval_every=25000 --run-dir
DIR/breakout-serial``, the same with ``--runner processes --workers 2``, and with
``--num-envs 4`` besides). Timings depend on anything else the machine runs: run it alone.
About 3 x ``--seeds`` x ``--minutes``.

Usage:
    python benchmarks/minatar_breakout.py [--minutes 15] [--seeds N] [--variants serial,...]
        [--from DIR] [--plot PNG] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

RUNS = {
    "serial": "breakout-serial",
    "processes 2": "breakout-proc2",
    "processes 2x4": "breakout-proc2x4",
}
OVERRIDES = {
    "serial": [],
    "processes 2": ["run.runner='processes'", "processes.workers=2"],
    # 2 workers x 4 envs: 8 envs in all, as serial acts on
    "processes 2x4": ["run.runner='processes'", "processes.workers=2", "env.num_envs=4"],
}


def train(name: str, run_dir: Path, minutes: float, eval_every: int, seed: int) -> None:
    import shoal

    shoal.train(
        "minatar-breakout",
        overrides=[
            *OVERRIDES[name],
            f"run.max_minutes={minutes}",
            f"run.eval_every={eval_every}",
            f"run.seed={seed}",
            "run.progress=false",
        ],
        run_dir=run_dir,
    )


def curve(run_dir: Path) -> list[tuple[int, float, float]]:
    """(env steps, wall seconds, mean greedy return) of every evaluation."""
    from shoal.run.metrics import read_metrics

    rows = read_metrics(run_dir / "metrics.csv")
    return [
        (int(float(r["step"])), float(r["wall_s"]), float(r["eval_mean"]))
        for r in rows
        if r["kind"] == "eval"
    ]


def first_at(points: list[tuple[int, float, float]], target: float) -> tuple[int, float] | None:
    for step, wall, mean in points:
        if mean >= target:
            return step, wall
    return None


def eval_best(run_dir: Path, episodes: int) -> tuple[float, float]:
    import numpy as np

    from shoal.api import evaluate_run

    returns = np.asarray(evaluate_run(run_dir, episodes=episodes))
    return float(returns.mean()), float(returns.std())


def plot(curves: dict[str, list], target: float, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, points in curves.items():
        ax.plot([w / 60 for _, w, _ in points], [m for *_, m in points], marker=".", label=name)
    ax.axhline(target, color="grey", linestyle="--", label=f"reference DQN at 1M frames ({target})")
    ax.set_xlabel("wall minutes (2 cores)")
    ax.set_ylabel("greedy return, 20 episodes")
    ax.set_title("MinAtar Breakout: shoal's minatar-breakout preset")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_name(sub: str, seed: int) -> str:
    """Seed 0's run is ``sub``, seed k's ``sub-s<k>``."""
    return sub if seed == 0 else f"{sub}-s{seed}"


def report(root: Path, name: str, sub: str, seed: int, args: argparse.Namespace) -> dict:
    run_dir = root / run_name(sub, seed)
    points = curve(run_dir)
    first = first_at(points, args.target)
    mean, std = eval_best(run_dir, args.episodes)
    print(f"\n{name}, seed {seed}: step, wall s, greedy return (20 episodes)")
    print("  " + "  ".join(f"{s // 1000}k/{w:.0f}s/{m:.1f}" for s, w, m in points))
    reached = "never" if first is None else f"at {first[0]:,} steps, {first[1]:.0f} s"
    verdict = "met" if mean >= args.target else "MISSED"
    print(f"  first at >= {args.target}: {reached}")
    print(f"  best checkpoint, {args.episodes} episodes: {mean:.2f} (std {std:.2f}) {verdict}")
    return {"seed": seed, "curve": points, "first_at_target": first, "best_eval": [mean, std]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 0..N-1 of each")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument(
        "--variants",
        default="serial,processes 2",
        help=f"comma-separated, of: {', '.join(RUNS)} (serial always)",
    )
    parser.add_argument("--target", type=float, default=9.2)
    parser.add_argument("--episodes", type=int, default=100, help="final evaluation")
    parser.add_argument(
        "--from", dest="source", metavar="DIR", help="runs here (those missing: trained here)"
    )
    parser.add_argument("--plot", metavar="PNG", help="draw seed 0's curves here")
    parser.add_argument("--json", metavar="PATH", help="write the figures here")
    args = parser.parse_args()
    variants = {"serial", *(v.strip() for v in args.variants.split(","))}
    unknown = variants - set(RUNS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; allowed: {', '.join(RUNS)}")
    runs = {name: sub for name, sub in RUNS.items() if name in variants}
    print(f"machine: cpus {os.cpu_count()}, python {platform.python_version()}")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="shoal-minatar-") as tmp:
        root = Path(args.source or tmp)
        for seed in range(args.seeds):
            for name, sub in runs.items():
                run_dir = root / run_name(sub, seed)
                if not (run_dir / "curve.png").exists():  # drawn once a run has ended
                    shutil.rmtree(run_dir, ignore_errors=True)  # a run cut short: again
                    train(name, run_dir, args.minutes, args.eval_every, seed)
        for name, sub in runs.items():
            out[name] = [report(root, name, sub, seed, args) for seed in range(args.seeds)]
    times = {
        name: [r["first_at_target"][1] if r["first_at_target"] else float("inf") for r in runs]
        for name, runs in out.items()
    }
    print(f"\nwall seconds to a 20-episode evaluation >= {args.target}, by seed:")
    for name, t in times.items():
        print(f"  {name:<12} " + "  ".join(f"{x:.0f}" for x in t) + f"   median {median(t):.0f}")
    for name in [n for n in runs if n != "serial"]:
        ratio = median(times["serial"]) / median(times[name])
        verdict = "met" if ratio > 1 else "MISSED"
        print(f"median serial / median {name} = {ratio:.2f}x {verdict} (target > 1)")
        out[f"ratio {name}"] = ratio
    if args.plot:
        plot({n: out[n][0]["curve"] for n in runs}, args.target, Path(args.plot))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
