"""Connect Four self-play: train the ``connect4`` preset, then report its record.

Trains with the processes runner (2 rollout workers, an opponent pool of the learner's own
snapshots, and the preset's shares of random and heuristic opponents), then plays the final
greedy policy against a random player, a one-step-lookahead heuristic (win if possible,
else block, else random) and a depth-2 search player (the heuristic, and never a column
that hands the opponent a win), as first and as second player, and prints win/draw/loss
rates and the wall time on this machine. The heuristic's and the search player's own
records are printed alongside, for scale. The in-run evaluations (every tenth of the run,
against random and the heuristic) are the learning curve.

Usage:
    python benchmarks/connect4_selfplay.py [--steps N (the preset's)] [--games 500] [--seed 0]
        [--set KEY=VALUE ...] [--json PATH] [--resume RUN_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import shoal
from shoal.agent.builder import build_actor
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.envs.connect_four import heuristic_player, play_match, random_player, search2_player
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics

OPPONENTS = {"random": random_player, "heuristic": heuristic_player, "search2": search2_player}


def train(args: argparse.Namespace, out: str) -> tuple[Any, float]:
    """The preset trained for ``--steps`` with ``--set`` on top; its result and wall time."""
    t0 = time.perf_counter()
    if args.resume:  # the same run, on from its latest checkpoint (replay, pool, generators)
        steps = [f"run.total_steps={args.steps}", "run.progress=false", *args.sets]
        return shoal.train(resume=args.resume, overrides=steps), time.perf_counter() - t0
    result = shoal.train(
        "connect4",
        overrides=[
            f"run.total_steps={args.steps}",
            f"run.seed={args.seed}",
            "run.progress=false",
            f"run.out='{out}'",
            f"run.eval_every={max(args.steps // 10, 1)}",
            *args.sets,
        ],
    )
    return result, time.perf_counter() - t0


def records(actor: Any, games: int, seed: int) -> list[dict[str, Any]]:
    """Win/draw/loss of the greedy policy, and of the scripted players for scale."""
    rng = np.random.default_rng(seed)
    players = {
        "shoal (greedy)": lambda obs: int(actor.greedy(obs[None])[0]),
        "heuristic": lambda obs: heuristic_player(obs, rng),
        "search2": lambda obs: search2_player(obs, rng),
    }
    rows = []
    for name, player in players.items():
        for opp_name, opp in OPPONENTS.items():
            if name == opp_name or (name == "search2" and opp_name == "heuristic"):
                continue  # the search player against the heuristic: see its own row
            for first in (True, False):
                r = play_match(player, opp, games, learner_first=first, seed=10_000)
                rows.append({"player": name, "opponent": opp_name, "first": first, **r})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's)")
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--json")
    parser.add_argument(
        "--resume", help="a run directory to continue to --steps (its config and seed)"
    )
    args = parser.parse_args()
    args.steps = args.steps or load_config("connect4").run.total_steps
    out = tempfile.mkdtemp()
    result, wall = train(args, out)
    run = RunDir(result.run_dir)
    cfg = load_config(run.config)
    # The final greedy policy: the latest checkpoint's online weights, in an actor.
    weights = load_checkpoint(run.checkpoint)["learner"]["online"]
    actor = build_actor(cfg, probe_env(cfg.env), np.random.default_rng(args.seed), params=weights)
    print(
        f"machine: {os.cpu_count()} CPUs; seed {args.seed}, settings {args.sets or 'the preset'};"
        f" trained {result.env_steps:,} env steps ({result.updates:,} updates) in {wall:.0f} s"
    )
    curve = [
        {k: row[k] for k in row if k == "step" or k.startswith("win_")}
        for row in read_metrics(run.metrics)
        if row.get("kind") == "eval"
    ]
    for row in curve:
        print("eval", {k: round(float(v), 3) for k, v in row.items()})
    print(f"{'player':<22} {'opponent':<10} {'seat':<7} {'win':>6} {'draw':>6} {'loss':>6}")
    rows = records(actor, args.games, args.seed)
    for r in rows:
        seat = "first" if r["first"] else "second"
        print(
            f"{r['player']:<22} {r['opponent']:<10} {seat:<7} {r['win']:>6.1%} "
            f"{r['draw']:>6.1%} {r['loss']:>6.1%}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "settings": args.sets,
                    "steps": result.env_steps,
                    "wall_s": wall,
                    "cores": os.cpu_count(),
                    "curve": curve,
                    "records": rows,
                },
                indent=2,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
