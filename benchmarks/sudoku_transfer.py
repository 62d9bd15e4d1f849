"""Knowledge transfer through a shared Q-table, measured: shared vs independent tables.

For each setting, the same puzzles are split into one chunk per worker process and
learned (1) into one shared table and (2) into one private table per worker. A worker
moves to its next puzzle at the first solve, so "episodes to first solve" against the
puzzle's position in its chunk is a learning curve, and the difference between the two
curves is what sharing buys. Printed per setting, averaged over seeds:

- mean episodes to first solve (an unsolved puzzle counts as the episode budget), over
  all puzzles and over the first 5 puzzles of each chunk (where sharing can help most);
- learning cost: episodes beyond the first, summed over all puzzles (0 would mean every
  puzzle solved at the first try), and its ratio independent / shared;
- for the generalising (local) encoder on 9x9, the greedy solve rate of the learned shared
  table on held-out easy (45 givens) and medium (34 givens) puzzles.

Settings: the local encoder (cell/digit constraint features) on 9x9 with 2 and 4 workers,
on easy puzzles only (solvable by singles: every extra episode is learning) and on a mix of
easy and medium (where medium puzzles need guesses, so search adds its own cost);
the exact encoder (whole board) against the local one on 4x4, where exact can solve at all.
A plot of the curves goes to benchmarks/out/sudoku_transfer.png.

Usage:
    python benchmarks/sudoku_transfer.py [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from shoal.envs.sudoku_puzzles import bundled_puzzles
from shoal.tabular.sudoku_training import SudokuConfig, solve_sudoku, train_sudoku

OUT = Path(__file__).parent / "out"


def run(
    puzzles: list[np.ndarray], seed: int, **kw: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Episodes to first solve (budget if unsolved) per puzzle, solved flags, each
    puzzle's position in its worker's chunk, and the output directory."""
    cfg = SudokuConfig(seed=seed, progress=False, **kw)  # type: ignore[arg-type]
    out = Path(tempfile.mkdtemp()) / "run"
    result = train_sudoku(puzzles, cfg, out)
    eps = np.array([r.episodes if r.solved else cfg.episodes_per_puzzle for r in result.rows])
    workers = np.array([r.worker for r in result.rows])
    position = np.zeros(len(eps), int)
    for w in np.unique(workers):
        position[workers == w] = np.arange((workers == w).sum())
    solved = np.array([r.solved for r in result.rows])
    return eps, solved, position, str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    easy, medium = bundled_puzzles("easy9"), bundled_puzzles("medium9")
    train9 = [p for pair in zip(easy[:100], medium[:100]) for p in pair]  # mixed, 200
    small = bundled_puzzles("easy4")
    exact_kw = {"epsilon": 0.05, "bonus": 0.1, "capacity": 4_000_000}
    settings = {
        "9x9 easy, local, 2 w": (easy[:100], {"workers": 2, "encoder": "local"}),
        "9x9 easy, local, 4 w": (easy[:100], {"workers": 4, "encoder": "local"}),
        "9x9 mixed, local, 2 w": (train9, {"workers": 2, "encoder": "local"}),
        "9x9 mixed, local, 4 w": (train9, {"workers": 4, "encoder": "local"}),
        "4x4 local, 2 w": (
            small,
            {"workers": 2, "encoder": "local", "episodes_per_puzzle": 100},
        ),
        "4x4 exact, 2 w": (
            small,
            {"workers": 2, "encoder": "exact", "episodes_per_puzzle": 100, **exact_kw},
        ),
    }
    print(f"machine: {os.cpu_count()} CPUs; seeds {args.seeds}")
    print(f"{'setting':<22} {'table':<12} {'mean eps':>9} {'first 5':>8} {'cost':>7} {'solved':>7}")
    curves: dict[str, dict[str, np.ndarray]] = {}
    held_out: list[tuple[float, float]] = []
    for name, (puzzles, kw) in settings.items():
        stats = {}
        for mode in ("shared", "independent"):
            eps_all, pos_all, solved_all = [], [], []
            for seed in args.seeds:
                eps, ok, pos, out = run(puzzles, seed, independent=mode == "independent", **kw)
                eps_all.append(eps)
                solved_all.append(ok)
                pos_all.append(pos)
                if name == "9x9 mixed, local, 2 w" and mode == "shared":
                    held_out.append(
                        (
                            float(np.mean(solve_sudoku(easy[100:], out, seed=seed))),
                            float(np.mean(solve_sudoku(medium[100:], out, seed=seed))),
                        )
                    )
            eps = np.stack(eps_all)
            cost = float((eps - 1).sum(axis=1).mean())
            solved = float(np.mean(solved_all))
            pos = pos_all[0]
            first5 = float(eps[:, pos < 5].mean())
            stats[mode] = cost
            print(
                f"{name:<22} {mode:<12} {eps.mean():>9.3f} {first5:>8.2f} {cost:>7.1f} "
                f"{solved:>7.1%}"
            )
            curves.setdefault(name, {})[mode] = np.array(
                [eps[:, pos == i].mean() for i in range(pos.max() + 1)]
            )
        ratio = stats["independent"] / max(stats["shared"], 1e-9)
        print(f"{'':<22} learning cost independent / shared = {ratio:.2f}x")
    easy_rate = np.mean([h[0] for h in held_out])
    medium_rate = np.mean([h[1] for h in held_out])
    print(
        f"\nheld-out greedy solve rate of the shared local table (9x9, trained on 100 easy + "
        f"100 medium): easy {easy_rate:.1%}, medium {medium_rate:.1%} (100 puzzles each)"
    )
    plot(curves)


def plot(curves: dict[str, dict[str, np.ndarray]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6), squeeze=False)
    for ax, (name, modes) in zip(axes[0], curves.items()):
        for mode, curve in modes.items():
            k = min(len(curve), 40)
            ax.plot(np.arange(1, k + 1), curve[:k], marker=".", label=mode)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("puzzle position in the worker's chunk")
        ax.set_ylabel("episodes to first solve (mean)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "sudoku_transfer.png", dpi=100)
    print(f"plot: {OUT / 'sudoku_transfer.png'}")


if __name__ == "__main__":
    main()
