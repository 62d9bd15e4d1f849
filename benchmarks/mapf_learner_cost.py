"""MAPF learner cost: seconds per update of the ``mapf`` preset's learner, against variants
of its network, side by side in one run.

Each variant is the preset with ``[mapf]`` overrides (the residual block, the channels, the
memory size); every one trains the same synthetic batch of full-size sequences (8 agents,
each with a random binary view; a ring of mutual neighbours for the communication mask;
32 items of 8 burn-in and 16 training steps), so only the network differs. An update is
:meth:`~shoal.agent.learner.Learner.step`: online and target unrolls, backward, optimizer.
The learner's cost caps a 2-core run's updates per hour, and so its learning (see
RESULTS.md, "MAPF").

Usage::

    python benchmarks/mapf_learner_cost.py                 # torch threads 1 and 2
    python benchmarks/mapf_learner_cost.py --threads 2 --updates 10
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from shoal.config import Config, load_config
from shoal.mapf.network import JointLayout
from shoal.mapf.player import build_learner, sequence_specs

VARIANTS = {
    "preset": [],
    "no residual block": ["mapf.blocks=0"],
    "32 channels": ["mapf.channels=32"],
    "memory 128": ["mapf.hidden=128", "mapf.heads=4"],
}
"""Name -> ``[mapf]`` overrides of the preset; the first is the reference of the ratios."""


def synthetic_sample(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """A replay sample of a batch (``dqn.batch_size``) of full sequences in the run's layout."""
    m, batch = cfg.extra["mapf"], cfg.dqn.batch_size
    specs = sequence_specs(cfg)
    rng = np.random.default_rng(seed)
    layout = JointLayout(m.max_agents, m.fov)
    n = m.max_agents
    comm = np.eye(n, dtype=bool) | np.roll(np.eye(n, dtype=bool), 1, 1)
    comm |= comm.T
    slots = specs["obs"][0][0]
    views = rng.random((batch, slots, n, layout.channels, m.fov, m.fov)) < 0.3
    obs = np.stack([[layout.pack(v, comm) for v in item] for item in views])
    length = specs["mask"][0][0]
    return {
        "obs": obs,
        "action": rng.integers(0, 5, (batch, length, n)),
        "reward": rng.normal(-0.075, 0.1, (batch, length, n)).astype(np.float32),
        "discount": np.ones((batch, length), np.float32),
        "mask": np.ones((batch, length), bool),
        "burn_in": np.full(batch, cfg.r2d2.burn_in),
        "state": np.zeros((batch, n, m.hidden), np.float32),
    }


def seconds_per_update(overrides: list[str], threads: int, updates: int) -> float:
    """Median seconds of ``updates`` learner steps (after two warm-up steps)."""
    torch.set_num_threads(threads)
    cfg = load_config("mapf", overrides=["run.device=cpu", *overrides])
    learner = build_learner(cfg)
    batch = learner.make_batch(synthetic_sample(cfg))
    for _ in range(2):
        learner.step(batch)
    times = []
    for _ in range(updates):
        start = time.perf_counter()
        learner.step(batch)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--updates", type=int, default=5, help="timed updates per variant")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}")
    print(f"torch {torch.__version__}; 8 agents, batch 32, 8 + 16 steps; median of updates")
    for threads in args.threads:
        print(f"\ntorch threads {threads}")
        base = None
        for name, overrides in VARIANTS.items():
            s = seconds_per_update(overrides, threads, args.updates)
            base = base or s
            print(f"  {name:18s} {s:6.3f} s per update   {s / base:5.2f}x the preset")


if __name__ == "__main__":
    main()
