"""Training speed of the agents runner on the field's worlds: stacked agents against a
per-agent loop of the same agents, beside the world's own step cost.

For each ``--tasks`` preset (LBF, RWARE, mpe2; the presets of benchmarks/marl_tasks.py),
side by side in one run, timed in turn (world, stacked, loop, world, stacked, loop, ...) so
that load from other work falls on all three alike, each the median of ``--reps``:

- **world**: the world alone, every agent a uniformly random action each turn (what
  stepping it costs, the bound on any trainer's turns/s);
- **stacked**: the preset as it trains (``agents.parallel_actions`` and
  ``parallel_training`` true: one forward picks every agent's action, one stacked update
  trains them all), ``--steps`` turns from the start of learning;
- **loop**: the same run with both false (a forward and an update per agent).

Both training runs take the same turns and updates (printed). Evaluations and checkpoints
are pushed past the budget (the closing evaluation plays one episode); one torch thread.
Printed: turns/s of each, stacked / loop, and the share of a stacked turn the world's step
takes.

Usage:
    python benchmarks/marl_speed.py [--tasks lbf-8x8-2p-2f-coop,rware-tiny-4ag,mpe-spread]
        [--steps 10000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import shoal
from shoal.config import load_config
from shoal.envs.parallel import make_parallel_env

TASKS = "lbf-8x8-2p-2f-coop,lbf-15x15-4p-3f,rware-tiny-4ag,mpe-spread"


def world_turns_per_s(preset: str, turns: int) -> float:
    """Turns per second of the preset's world under uniformly random actions."""
    cfg = load_config(preset)
    env = make_parallel_env(cfg.env, num_agents=cfg.agents.agents, max_turns=cfg.agents.max_turns)
    rng, done, seed = np.random.default_rng(0), 0, 0
    t0 = time.perf_counter()
    while done < turns:
        env.reset(seed=seed)
        seed += 1
        while env.agents and done < turns:
            env.step({a: int(rng.integers(env.action_space(a).n)) for a in env.agents})
            done += 1
    env.close()
    return turns / (time.perf_counter() - t0)


def train_turns_per_s(preset: str, steps: int, stacked: bool, root: Path) -> tuple[float, int]:
    """Turns per second of ``steps`` turns of the preset's training; its updates."""
    flag = "true" if stacked else "false"
    over = [
        f"run.total_steps={steps}",
        "run.learning_starts=200",
        f"run.eval_every={steps * 10}",
        "run.eval_episodes=1",  # the run's closing evaluation: one episode, not the preset's
        f"run.checkpoint_every={steps * 10}",
        "run.progress=false",
        "run.torch_threads=1",
        f"agents.parallel_actions={flag}",
        f"agents.parallel_training={flag}",
    ]
    run_dir = Path(tempfile.mkdtemp(dir=root)) / "run"  # a run directory is made, not found
    result = shoal.train(preset, overrides=over, run_dir=run_dir)
    return steps / result.wall_seconds, result.updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    root = Path(tempfile.mkdtemp(prefix="shoal-marl-speed-"))
    for preset in args.tasks.split(","):
        world, stacked, loop, updates = [], [], [], set()
        for _ in range(args.reps):
            world.append(world_turns_per_s(preset, args.steps))
            rate, n = train_turns_per_s(preset, args.steps, True, root)
            stacked.append(rate)
            updates.add(n)
            rate, n = train_turns_per_s(preset, args.steps, False, root)
            loop.append(rate)
            updates.add(n)
        w, s, lo = (statistics.median(x) for x in (world, stacked, loop))
        print(
            f"{preset}: stacked {s:.0f} turns/s, per-agent loop {lo:.0f} turns/s, ratio"
            f" {s / lo:.2f}; world alone {w:.0f} turns/s (its step {100 * s / w:.0f}% of a"
            f" stacked turn); updates {sorted(updates)} (same on both sides)",
            flush=True,
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
