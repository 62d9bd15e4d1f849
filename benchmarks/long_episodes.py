"""Long episodes on the agents runner: how often it evaluates, what that costs, what it learns.

Trains independent DQN agents with shoal's defaults (no preset: what ``shoal train --env
pettingzoo:couriers --runner agents`` does) on couriers (``benchmarks/couriers.py``: 8 agents,
500-turn episodes, by default 1 ms of Python work a turn) for ``--minutes`` of wall time,
then reports:

- the evaluations during training and their share of the wall time;
- the learning curve, each evaluation's return per agent, beside uniformly random agents on
  the same world (played on the comparison seeds, neither training's nor evaluation's);
- ``best.pt`` against the last evaluations: best.pt and the final weights played greedily on
  the comparison seeds, beside the mean and spread of the last five evaluations.

Usage::

    python benchmarks/long_episodes.py                         # 20 minutes, 1 ms a turn
    python benchmarks/long_episodes.py --minutes 2 --step-us 0
    python benchmarks/long_episodes.py --set run.eval_episodes=20   # 20 episodes an evaluation
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import shoal
from shoal.config import load_config
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.agents.epochs import checkpoint_weights, play_epochs

COMPARE_SEED = 7_500_000
"""Episode seeds of the comparison: COMPARE_SEED + i (neither training's nor evaluation's)."""
LAST = 5
"""Evaluations at the end of the run that ``best.pt`` is compared with."""


def per_agent(cfg: Any, epsilon: float, episodes: int, params: Any = None) -> np.ndarray:
    """Mean return per agent of each comparison episode (``params``: stacked weights)."""
    seeds = [COMPARE_SEED + i for i in range(episodes)]
    return np.array(
        [np.mean(r.returns) for r in play_epochs(cfg, seeds, epsilon=epsilon, params=params)]
    )


def mean_sd(values: Any) -> tuple[float, float]:
    values = list(values)
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def stats(values: Any) -> str:
    return "{:.2f} +- {:.2f}".format(*mean_sd(values))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=20.0, help="training wall time")
    p.add_argument("--step-us", type=float, default=1000.0, help="extra Python work per turn")
    p.add_argument("--seed", type=int, default=0, help="run seed")
    p.add_argument("--episodes", type=int, default=10, help="comparison episodes per side")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--run-dir", help="run directory to create (default: a temporary one)")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)

    over = [
        "env.id='pettingzoo:couriers'",
        f"env.kwargs={{step_us = {args.step_us}}}",
        "run.runner='agents'",
        "agents.agents=8",
        "agents.max_turns=500",
        f"run.max_minutes={args.minutes}",
        "run.total_steps=1000000000",
        f"run.seed={args.seed}",
        "run.progress=false",
        *args.set,
    ]
    cfg = load_config(None, over)
    k = cfg.agents.agents
    torch.set_num_threads(max(cfg.run.torch_threads, 1))
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}", flush=True)
    print(f"config: {' '.join(over)}", flush=True)
    t = time.perf_counter()
    random = per_agent(cfg, 1.0, args.episodes)
    print(
        f"random agents, per agent: {stats(random)} ({time.perf_counter() - t:.0f} s)", flush=True
    )

    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(args.run_dir) if args.run_dir else Path(tmp) / "run")
        res = shoal.train(overrides=over, run_dir=run.path)
        latest = load_checkpoint(run.checkpoint)
        loop = latest["loop"]
        evals = [r for r in read_metrics(run.metrics) if r["kind"] == "eval"]
        best = per_agent(
            cfg, 0.0, args.episodes, checkpoint_weights(load_checkpoint(run.best)["learner"])
        )
        final = per_agent(cfg, 0.0, args.episodes, checkpoint_weights(latest["learner"]))
    curve = [(float(r["wall_s"]), int(r["step"]), float(r["eval_mean"]) / k) for r in evals]
    last = [ret for _, _, ret in curve[-LAST:]]
    share = loop["eval_s"] / loop["wall"]
    print(f"\ntraining: {res.env_steps} turns, {res.updates} updates, {loop['wall']:.0f} s")
    print(f"evaluations: {len(evals)}, {share:.1%} of the wall ({loop['eval_s']:.0f} s)")
    print("\n| minute | turns | eval return per agent |\n| ---: | ---: | ---: |")
    for wall, step, ret in curve:
        print(f"| {wall / 60:.1f} | {step} | {ret:.2f} |")
    print(f"\nrandom agents (comparison seeds): {stats(random)} per agent")
    print(f"last {len(last)} evaluations: {stats(last)} per agent")
    print(f"best.pt (comparison seeds): {stats(best)}; final weights: {stats(final)}")
    mean, sd = mean_sd(last)
    low = mean - 2 * sd
    print(f"best.pt / random agents: {best.mean() / random.mean():.1f}x")
    print(
        f"best.pt within the noise of the last evaluations (>= mean - 2 sd): "
        f"{'yes' if best.mean() >= low else 'NO'}"
    )
    if args.json:
        out = {
            "config": over,
            "turns": res.env_steps,
            "wall_s": loop["wall"],
            "evals": len(evals),
            "eval_share": share,
            "curve": curve,
            "random": random.tolist(),
            "best": best.tolist(),
            "final": final.tolist(),
            "last": last,
        }
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
