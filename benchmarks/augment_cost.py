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
import sys
from collections.abc import Callable

import numpy as np
import torch

from shoal.agent.augment import Augment
from shoal.agent.learner import Learner
from shoal.agent.losses import DQNLoss
from shoal.agent.networks import make_q_network
from shoal.config import load_config

sys.path.insert(0, os.path.dirname(__file__))
from learner_update import alternated_ms, machine, random_sample  # noqa: E402

CASES = {
    "atari-100k": {"kind": "shift", "obs_dim": 4 * 84 * 84, "actions": 4, "image": (4, 84, 84)},
    "connect4": {"kind": "mirror", "obs_dim": 6 * 7 * 2 + 7, "actions": 7, "board": (6, 7, 2)},
}
"""Each preset's augmentation and observations (an image, or a board then a legal mask)."""


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
    rng = np.random.default_rng(0)
    b, dim = cfg.dqn.batch_size, case["obs_dim"]
    if image:
        obs = rng.integers(0, 256, (2, b, dim), dtype=np.uint8)
    else:  # a board's planes and its legal mask: zeros and ones
        obs = rng.integers(0, 2, (2, b, dim)).astype(np.float32)
    sample = random_sample(obs, case["actions"], rng)

    def way(aug: Augment | None) -> Callable[[], None]:
        def update() -> None:
            learner.augment = aug
            learner.step(learner.make_batch(sample))

        return update

    return alternated_ms({"none": way(None), case["kind"]: way(augment)}, reps, updates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="rounds; the median is reported")
    parser.add_argument("--updates", type=int, default=20, help="updates per way per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine())
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
