"""The shared-table Sudoku scheme on puzzles no training run saw: its greedy solve rate on
held-out easy, medium and hard puzzles, per seed (issue 56's starting point).

Per seed: ``--train`` generated 9x9 puzzles (an equal mix of the ``--train-givens``
levels) are learned into one shared table by ``--workers`` processes (the scheme's
defaults otherwise, or ``--set key=value`` of ``[sudoku]``); then ``--held-out`` fresh
puzzles of each level, generated from another stream, are played once each with the
table's greedy policy (``solve_sudoku``). Levels are named by their givens: easy 45
(singles solve them), medium 34, hard 26 (guesses needed; 17 is the fewest a unique
puzzle can have).

Prints one row per seed (each level's solve rate, the table's size, the wall time) and the
median and range over seeds; writes the figures as JSON with ``--json``.

Usage:
    python benchmarks/sudoku_held_out.py [--seeds 0 1 2 3 4] [--train 200]
        [--held-out 50] [--workers 2] [--set episodes_per_puzzle=60] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tomllib

from shoal.envs.sudoku_puzzles import generate
from shoal.tabular.sudoku_training import SudokuConfig, solve_sudoku, train_sudoku

LEVELS = {"easy": 45, "medium": 34, "hard": 26}
"""Held-out levels by their givens."""


def puzzles(givens: list[int], count: int, seed: int) -> list[np.ndarray]:
    """``count`` generated puzzles, cycling through ``givens``, from stream ``seed``."""
    rng = np.random.default_rng(seed)
    return [generate(givens[i % len(givens)], rng=rng) for i in range(count)]


def one_seed(seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train on this seed's puzzles, then score the held-out ones."""
    train = puzzles(args.train_givens, args.train, seed)
    cfg = dataclasses.replace(SudokuConfig(), workers=args.workers, seed=seed, progress=False)
    cfg = dataclasses.replace(cfg, **args.settings)
    t0 = time.perf_counter()
    result = train_sudoku(train, cfg, run_dir=out / f"seed{seed}")
    wall = time.perf_counter() - t0
    rates = {}
    for level, givens in LEVELS.items():
        # held-out streams: seeds no training stream uses
        held = puzzles([givens], args.held_out, 10_000 + 100 * seed + givens)
        rates[level] = float(np.mean(solve_sudoku(held, result.run_dir, seed=seed)))
    return {
        "seed": seed,
        "train_solve_rate": result.solve_rate,
        "held_out": rates,
        "table_size": result.table_size,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--train", type=int, default=200)
    parser.add_argument("--train-givens", type=int, nargs="+", default=[45, 34, 26])
    parser.add_argument("--held-out", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--json")
    args = parser.parse_args()
    args.settings = {k: v for s in args.sets for k, v in tomllib.loads(s).items()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="shoal-sudoku-held-out-") as out:
        for seed in args.seeds:
            rows.append(one_seed(seed, args, Path(out)))
            r = rows[-1]
            levels = ", ".join(f"{k} {v:.0%}" for k, v in r["held_out"].items())
            print(
                f"seed {seed}: held out {levels}; training solve rate "
                f"{r['train_solve_rate']:.0%}, table {r['table_size']:,}, {r['wall_s']:.0f} s",
                flush=True,
            )
    print(f"\n{os.cpu_count()} CPU cores; settings {args.settings or 'the defaults'}")
    print("\n".join(summary(rows)))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Each level's median and range of held-out solve rates over the seeds."""
    out = []
    for level, givens in LEVELS.items():
        rates = [r["held_out"][level] for r in rows]
        out.append(
            f"{level} ({givens} givens): median {statistics.median(rates):.0%}, "
            f"range {min(rates):.0%}-{max(rates):.0%} over {len(rates)} seeds"
        )
    return out


if __name__ == "__main__":
    main()
