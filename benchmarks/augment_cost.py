"""What ``dqn.augment`` adds to a learner update: the whole update (the sample made into a
batch, then one gradient step) with and without the augmentation, side by side.

``shift`` (DrQ's random shifts) on ``atari-100k``'s 84 x 84 x 4 frame stacks and ``mirror``
on ``connect4``'s boards, at each preset's batch size, one torch thread, a fixed sample of
random observations. The augmentation runs on the host before the sample becomes tensors,
so on a GPU its cost is host time beside a captured update; on a CPU it adds to the update.

Each figure is the median over ``--reps`` rounds of ``--updates`` updates; the two ways
alternate within every round, so load from other work falls on both alike.

Usage:
    python benchmarks/augment_cost.py [--reps 5] [--updates 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import numpy as np
import torch

from shoal.agent.augment import Augment
from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.agent.networks import make_q_network
from shoal.config import load_config

CASES = {
    "atari-100k": {"kind": "shift", "obs_dim": 4 * 84 * 84, "actions": 4, "image": (4, 84, 84)},
    "connect4": {"kind": "mirror", "obs_dim": 6 * 7 * 2 + 7, "actions": 7, "board": (6, 7, 2)},
}
"""Each preset's augmentation and observations (an image, or a board then a legal mask)."""


def make_sample(case: dict[str, Any], b: int, rng: np.random.Generator) -> dict[str, Any]:
    """A replay sample of ``b`` random transitions shaped like the preset's."""
    if "image" in case:
        obs = rng.integers(0, 256, (2, b, case["obs_dim"]), dtype=np.uint8)
    else:
        obs = rng.integers(0, 2, (2, b, case["obs_dim"])).astype(np.float32)
    return {
        "obs": obs[0],
        "action": rng.integers(case["actions"], size=b),
        "reward": rng.normal(size=b).astype(np.float32),
        "next_obs": obs[1],
        "discount": np.full(b, 0.97, np.float32),
        "weights": np.ones(b, np.float32),
    }


def measure(preset: str, reps: int, updates: int) -> dict[str, float]:
    """Median ms per update with the augmentation and without, alternated each round."""
    cfg, case = load_config(preset), CASES[preset]
    image = case.get("image")
    torch.manual_seed(0)
    net = make_q_network(
        cfg.dqn, case["obs_dim"], case["actions"], image=image, image_high=255.0 if image else 1.0
    )
    learner = Learner(net, DQNLoss(net, double=True), cfg.dqn, device="cpu")
    augment = Augment(
        case["kind"],
        0,
        image=image,
        board=case.get("board", ()),
        n_actions=case["actions"],
        action_mask="board" in case,
    )
    sample = make_sample(case, cfg.dqn.batch_size, np.random.default_rng(0))
    times: dict[str, list[float]] = {"none": [], case["kind"]: []}
    for _ in range(reps):
        for way, aug in (("none", None), (case["kind"], augment)):
            learner.augment = aug
            learner.step(learner.make_batch(sample))  # warm-up of this path
            t0 = time.perf_counter()
            for _ in range(updates):
                learner.step(learner.make_batch(sample))
            times[way].append((time.perf_counter() - t0) / updates * 1e3)
    return {way: statistics.median(t) for way, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="rounds; the median is reported")
    parser.add_argument("--updates", type=int, default=20, help="updates per way per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min); "
        f"torch {torch.__version__}, 1 thread; Python {platform.python_version()}"
    )
    print(f"{'preset':<12} {'augment':<8} {'batch':>5} {'none':>10} {'augmented':>10} {'ratio':>7}")
    for preset, case in CASES.items():
        r = measure(preset, args.reps, args.updates)
        plain, aug = r["none"], r[case["kind"]]
        batch = load_config(preset).dqn.batch_size
        print(
            f"{preset:<12} {case['kind']:<8} {batch:>5} {plain:>8.2f}ms {aug:>8.2f}ms "
            f"{aug / plain:>6.2f}x"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
