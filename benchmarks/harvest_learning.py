"""Harvest learning: trained independent DQN agents against uniformly random agents.

Measures uniformly random agents (epsilon 1) on the training world's settings and a fixed
set of episode seeds (collective return, per-agent returns, the four social outcomes), then
trains the ``harvest`` preset (or a TOML config, with ``--set`` overrides on top) with the
agents runner and plays the trained agents greedily on the very same seeds. Prints both side
by side with the ratio of collective returns, the wall time of training and the machine.

Usage::

    python benchmarks/harvest_learning.py                      # the preset as it is
    python benchmarks/harvest_learning.py --steps 20000 --max-turns 200   # a short run
    python benchmarks/harvest_learning.py --random-only        # the random baseline alone
    python benchmarks/harvest_learning.py --set dqn.lr=1e-3 --set agents.agents=4

The trained agents are the run's final weights (``latest.pt``); ``--checkpoint best`` plays
the weights of the best training-time evaluation instead (chosen on other seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
from shoal.runners.agents.epochs import checkpoint_weights, play_epochs

SOCIAL = ("efficiency", "equality", "sustainability", "peace")
EVAL_SEED = 7_000_000
"""Episode seeds of the comparison: EVAL_SEED + i (neither training's nor evaluation's)."""


def play(cfg: Any, epsilon: float, episodes: int, params: Any = None) -> dict[str, Any]:
    """``episodes`` episodes of K agents (``params``: stacked weights, None: initial) at
    ``epsilon`` on the comparison seeds: collective returns, per-agent returns
    ``(episodes, K)`` and the mean social outcomes."""
    seeds = [EVAL_SEED + i for i in range(episodes)]
    results = play_epochs(cfg, seeds, epsilon=epsilon, params=params)
    per_agent_arr = np.array([r.returns for r in results])
    return {
        "collective": per_agent_arr.sum(axis=1),
        "per_agent": per_agent_arr,
        **{k: float(np.mean([r.social[k] for r in results])) for k in SOCIAL},
    }


def summary(name: str, res: dict[str, Any]) -> dict[str, Any]:
    agent_means = res["per_agent"].mean(axis=0)
    return {
        "who": name,
        "collective": float(res["collective"].mean()),
        "collective_std": float(res["collective"].std()),
        "agent_min": float(agent_means.min()),
        "agent_max": float(agent_means.max()),
        "agent_means": [round(float(x), 2) for x in agent_means],
        **{k: res[k] for k in SOCIAL},
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = "| agents | collective return | per-agent min / max | efficiency | equality "
    head += "| sustainability | peace |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['who']} | {r['collective']:.1f} +- {r['collective_std']:.1f} "
            f"| {r['agent_min']:.1f} / {r['agent_max']:.1f} | {r['efficiency']:.3f} "
            f"| {r['equality']:.3f} | {r['sustainability']:.1f} | {r['peace']:.2f} |"
        )
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores, {cpu}, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="harvest", help="preset name or TOML file")
    p.add_argument("--steps", type=int, help="training turns (sets run.total_steps)")
    p.add_argument("--max-turns", type=int, help="turns per episode (sets agents.max_turns)")
    p.add_argument("--agents", type=int, help="agents in the world (sets agents.agents)")
    p.add_argument("--seed", type=int, default=0, help="run seed (sets run.seed)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--episodes", type=int, default=10, help="comparison episodes per side")
    p.add_argument("--checkpoint", choices=("latest", "best"), default="latest")
    p.add_argument("--run-dir", help="run directory to create (default: a temporary one)")
    p.add_argument("--random-only", action="store_true", help="only the random baseline")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)

    over = [f"run.seed={args.seed}", "run.progress=false"]
    if args.steps is not None:
        over.append(f"run.total_steps={args.steps}")
    if args.max_turns is not None:
        over.append(f"agents.max_turns={args.max_turns}")
    if args.agents is not None:
        over.append(f"agents.agents={args.agents}")
    over += args.set
    cfg = load_config(args.config, over)
    torch.set_num_threads(max(cfg.run.torch_threads, 1))
    a = cfg.agents
    print(f"machine: {machine()}", flush=True)
    print(f"config: {args.config} {' '.join(over)}", flush=True)
    print(
        f"world: {cfg.env.id}, {a.agents} agents, {a.max_turns} turns per episode; "
        f"{args.episodes} comparison episodes (seeds {EVAL_SEED}+i)",
        flush=True,
    )

    t = time.perf_counter()
    rand = summary("random (eps 1)", play(cfg, 1.0, args.episodes))
    print(f"random agents: {time.perf_counter() - t:.1f} s", flush=True)
    rows = [rand]
    result: dict[str, Any] = {"machine": machine(), "overrides": over, "random": rand}
    if not args.random_only:
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(args.run_dir) if args.run_dir else Path(tmp) / "run"
            t = time.perf_counter()
            res = shoal.train(args.config, overrides=over, run_dir=run_dir)
            wall = time.perf_counter() - t
            run = RunDir.open(run_dir)
            path = run.best if args.checkpoint == "best" and run.best.is_file() else run.checkpoint
            weights = checkpoint_weights(load_checkpoint(path)["learner"])
            trained = summary(
                f"trained ({args.checkpoint})", play(cfg, 0.0, args.episodes, weights)
            )
        rows.append(trained)
        ratio = trained["collective"] / max(rand["collective"], 1e-9)
        above = trained["agent_min"] > rand["agent_max"]
        result.update(
            trained=trained,
            ratio=ratio,
            every_agent_above_random=above,
            train_wall_s=wall,
            env_steps=res.env_steps,
            updates=res.updates,
            train_eval_last=res.eval_return,
            train_eval_best=res.best_eval_return,
        )
        print(
            f"training: {res.env_steps} turns, {res.updates} rounds, {wall:.0f} s wall; "
            f"training-time greedy eval last {res.eval_return:.1f}, best "
            f"{res.best_eval_return:.1f}",
            flush=True,
        )
    print()
    print(table(rows))
    print()
    for r in rows:
        print(f"{r['who']} per-agent means: {r['agent_means']}")
    if not args.random_only:
        print(
            f"ratio trained / random collective return: {result['ratio']:.2f}x "
            f"(target >= 3x: {'met' if result['ratio'] >= 3 else 'MISSED'}); every agent "
            f"above the best random agent: {'yes' if result['every_agent_above_random'] else 'NO'}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
