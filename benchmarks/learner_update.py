"""One DQN update on each preset's network: double DQN's next-state forward merged into the
online forward (one batch of obs and next_obs) or split (a second, gradient-free forward).

The merged forward halves a launch-bound update's launches (an MLP's), but its backward
runs over both halves (zeros flow back through next_obs), which doubles a convolution's
weight-gradient work. ``DQNLoss.merge_next`` picks by whether the network holds a
convolution; this measures both ways side by side on ``cartpole`` (MLP), ``minatar-breakout``
(one 3x3 conv, 10 x 10 x 4 frames), ``atari-100k`` (data-efficient Rainbow's two 5x5
convs of stride 5 on 84 x 84 x 4) and ``atari`` (the Nature network), at each preset's
batch size, one torch thread, a fixed batch of random observations (bytes for images).

Each figure is the median over ``--reps`` rounds of ``--updates`` updates; the two ways
alternate within every round, so load from other work falls on both alike. The machine's
cores and load average are printed: on a shared machine the absolute times move, the
ratios much less.

Usage:
    python benchmarks/learner_update.py [--presets cartpole minatar-breakout ...]
        [--reps 5] [--updates 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.agent.networks import make_q_network
from shoal.config import load_config

SHAPES = {
    "cartpole": (4, None),
    "minatar-breakout": (400, (4, 10, 10)),
    "atari-100k": (4 * 84 * 84, (4, 84, 84)),
    "atari": (4 * 84 * 84, (4, 84, 84)),
}
"""Each preset's observation size and image shape (None: a flat vector)."""


def make_learner(preset: str) -> tuple[Learner, object]:
    """The preset's network and double-DQN loss, and a batch of random transitions."""
    cfg = load_config(preset)
    obs_dim, image = SHAPES[preset]
    torch.manual_seed(0)
    net = make_q_network(cfg.dqn, obs_dim, 4, image=image, image_high=255.0 if image else 1.0)
    learner = Learner(net, DQNLoss(net, double=True), cfg.dqn, device="cpu")
    rng = np.random.default_rng(0)
    b = cfg.dqn.batch_size
    if image:
        obs = rng.integers(0, 256, (2, b, obs_dim), dtype=np.uint8)
    else:
        obs = rng.normal(size=(2, b, obs_dim)).astype(np.float32)
    return learner, learner.make_batch(random_sample(obs, 4, rng))


def random_sample(obs: np.ndarray, actions: int, rng: np.random.Generator) -> dict[str, Any]:
    """A replay sample around ``obs`` (``obs`` and ``next_obs`` stacked: 2 x batch x
    size), with random actions among ``actions`` and random rewards."""
    b = obs.shape[1]
    return {
        "obs": obs[0],
        "action": rng.integers(actions, size=b),
        "reward": rng.normal(size=b).astype(np.float32),
        "next_obs": obs[1],
        "discount": np.full(b, 0.97, np.float32),
        "weights": np.ones(b, np.float32),
    }


def alternated_ms(
    ways: Mapping[str, Callable[[], None]], reps: int, updates: int
) -> dict[str, float]:
    """Median ms per call of each way (one update), the ways alternated within each of
    ``reps`` rounds of ``updates`` calls, so load from other work falls on all alike."""
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(reps):
        for way, update in ways.items():
            update()  # warm-up of this path
            t0 = time.perf_counter()
            for _ in range(updates):
                update()
            times[way].append((time.perf_counter() - t0) / updates * 1e3)
    return {way: statistics.median(t) for way, t in times.items()}


def machine() -> str:
    """The machine line every figure is printed under."""
    return (
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min); "
        f"torch {torch.__version__}, 1 thread; Python {platform.python_version()}"
    )


def measure(preset: str, reps: int, updates: int) -> dict[str, float]:
    """Median ms per update, merged and split, alternated within each round."""
    learner, batch = make_learner(preset)
    loss = learner.loss

    def way(merge: bool) -> Callable[[], None]:
        def update() -> None:
            loss.merge_next = merge
            learner.step(batch)

        return update

    r = alternated_ms({"merged": way(True), "split": way(False)}, reps, updates)
    default = DQNLoss(learner.online).merge_next
    return {
        "merged_ms": r["merged"],
        "split_ms": r["split"],
        "default": "merged" if default else "split",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--reps", type=int, default=5, help="rounds; the median is reported")
    parser.add_argument("--updates", type=int, default=10, help="updates per way per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine())
    print(f"{'preset':<18} {'batch':>5} {'merged':>10} {'split':>10} {'merged/split':>13}  default")
    for preset in args.presets:
        r = measure(preset, args.reps, args.updates)
        batch = load_config(preset).dqn.batch_size
        print(
            f"{preset:<18} {batch:>5} {r['merged_ms']:>8.2f}ms {r['split_ms']:>8.2f}ms "
            f"{r['merged_ms'] / r['split_ms']:>12.2f}x  {r['default']}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
