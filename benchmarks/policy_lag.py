"""Rollout worker processes: policy lag with and without ``processes.max_ahead``.

A worker that may send any number of messages ahead of the learner is held back only by
its pipe's buffer (a few hundred KiB), so the episodes a busy learner takes in were played
with weights as old as that buffer holds steps: thousands for CartPole, tens for Atari.
``processes.max_ahead`` (4 messages) bounds it whatever an observation's size.

Side by side, interleaved: CartPole on the processes runner with 2 workers, the preset as
it is, at ``max_ahead=4`` and at ``max_ahead=1000000`` (only the pipe bounds it, as before
the bound). Each run's tick rows give the policy lag (the updates between the newest
weights behind a message and the learner's as it takes it in) and env steps/s over the run's
second half; the last 50 episodes' mean return shows what the lag does to learning.

Usage:
    python benchmarks/policy_lag.py [--steps 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

import numpy as np

import shoal
from shoal.run.metrics import read_metrics

BOUNDS = {"max_ahead=4": 4, "pipe only": 1_000_000}


def one_run(ahead: int, steps: int, out: Path) -> dict[str, float]:
    """A processes CartPole run: its second half's policy lag and pace, its last return."""
    result = shoal.train(
        "cartpole",
        overrides=[
            "run.runner=processes",
            "processes.workers=2",
            f"processes.max_ahead={ahead}",
            f"run.total_steps={steps}",
            "run.stop_return=none",
            "run.max_minutes=none",
            "run.progress=false",
            f"run.out='{out}'",
        ],
    )
    rows = read_metrics(Path(result.run_dir) / "metrics.csv")
    ticks = [r for r in rows if r["kind"] == "tick" and float(r["step"]) > steps / 2]
    lags = [float(r["policy_lag"]) for r in ticks if r.get("policy_lag")]
    returns = [float(r["return"]) for r in rows if r["kind"] == "episode"][-50:]
    return {
        "policy_lag": float(np.mean(lags)),
        "policy_lag_max": float(np.max(lags)),
        "steps_per_s": float(np.mean([float(r["steps_per_s"]) for r in ticks])),
        "last_return": float(np.mean(returns)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in BOUNDS}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):  # interleaved: a slow stretch of the VM hits both
            for name, ahead in BOUNDS.items():
                runs[name].append(one_run(ahead, args.steps, Path(out)))
                print(name, {k: round(v, 1) for k, v in runs[name][-1].items()}, flush=True)
    median = {n: {k: float(np.median([r[k] for r in rs])) for k in rs[0]} for n, rs in runs.items()}
    for name, m in median.items():
        print(
            f"{name:>12}: policy lag {m['policy_lag']:.0f} updates "
            f"(max {m['policy_lag_max']:.0f}), "
            f"{m['steps_per_s']:.0f} env steps/s, last 50 episodes' return {m['last_return']:.0f}"
        )
    bounded, pipe = median["max_ahead=4"], median["pipe only"]
    print(
        f"ratio (pipe only / max_ahead=4, medians of {args.repeats}): policy lag "
        f"{pipe['policy_lag'] / bounded['policy_lag']:.2f}x, env steps/s "
        f"{pipe['steps_per_s'] / bounded['steps_per_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
