"""Connect Four self-play: train the ``connect4`` preset, then report its record.

Trains with the processes runner (2 rollout workers, an opponent pool of the learner's own
snapshots), then plays the final greedy policy against a random player and against a
one-step-lookahead heuristic (win if possible, else block, else random), as first and as
second player, and prints win/draw/loss rates and the wall time on this machine. The
heuristic's own record against the random player is printed alongside, for scale.

Usage:
    python benchmarks/connect4_selfplay.py [--steps 400000] [--games 500]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import shoal
from shoal.agent.builder import build_actor
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.envs.connect_four import heuristic_player, play_match, random_player
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400_000)
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = tempfile.mkdtemp()
    t0 = time.perf_counter()
    result = shoal.train(
        "connect4",
        overrides=[
            f"run.total_steps={args.steps}",
            f"run.seed={args.seed}",
            "run.progress=false",
            f"run.out='{out}'",
            f"run.eval_every={args.steps}",
        ],
    )
    wall = time.perf_counter() - t0
    run = RunDir(result.run_dir)
    cfg = load_config(run.config)
    # The final greedy policy: the latest checkpoint's online weights, in an actor.
    weights = load_checkpoint(run.checkpoint)["learner"]["online"]
    rng = np.random.default_rng(args.seed)
    actor = build_actor(cfg, probe_env(cfg.env), rng, params=weights)
    print(
        f"machine: {os.cpu_count()} CPUs; trained {result.env_steps:,} env steps "
        f"({result.updates:,} updates) in {wall:.0f} s"
    )
    print(f"{'player':<22} {'opponent':<10} {'seat':<7} {'win':>6} {'draw':>6} {'loss':>6}")
    players = {
        "shoal (greedy)": lambda obs: int(actor.greedy(obs[None])[0]),
        "heuristic": lambda obs: heuristic_player(obs, rng),
    }
    for name, player in players.items():
        for opp_name, opp in (("random", random_player), ("heuristic", heuristic_player)):
            if name == "heuristic" and opp_name == "heuristic":
                continue
            for first in (True, False):
                r = play_match(player, opp, args.games, learner_first=first, seed=10_000)
                seat = "first" if first else "second"
                print(
                    f"{name:<22} {opp_name:<10} {seat:<7} {r['win']:>6.1%} {r['draw']:>6.1%} "
                    f"{r['loss']:>6.1%}"
                )


if __name__ == "__main__":
    main()
