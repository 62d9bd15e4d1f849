"""R2D2's update: the recurrent network's own unroll (torch's fused LSTM or GRU after a
stepped burn-in) against the generic one that steps the network slot by slot, side by side
in one run.

Both train the same synthetic batch of the ``r2d2`` preset's shape (32 sequences of 10
burn-in and 20 training steps, MLP 128x128, LSTM 64; a few items begin inside the burn-in,
as the first items of episodes do) through the preset's learner: online and target unrolls,
backward, optimizer. Prints milliseconds per update of each and their ratio, and checks
first that both give the same loss.

Usage::

    python benchmarks/recurrent_update.py [--updates 200] [--cell gru]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np
import torch

from shoal.config import load_config
from shoal.envs import probe_env
from shoal.registry import recipe_for


class Stepwise:
    """The network seen through ``apply_params`` alone: the generic unroll steps it."""

    def __init__(self, network: Any) -> None:
        self.apply_params = network.apply_params


def batch(cfg: Any, obs_dim: int, state_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A replay sample of the preset's sequence shape."""
    rng = np.random.default_rng(seed)
    b, s = cfg.dqn.batch_size, cfg.r2d2.burn_in + cfg.r2d2.length
    mask = np.ones((b, s), bool)
    mask[:4, : cfg.r2d2.burn_in // 2] = False  # items that begin inside the burn-in
    mask[4:8, s - 5 :] = False  # items cut short by their episode's end
    return {
        "obs": rng.normal(size=(b, s + 1, obs_dim)).astype(np.float32),
        "action": rng.integers(2, size=(b, s)),
        "reward": np.ones((b, s), np.float32),
        "discount": mask.astype(np.float32),
        "mask": mask,
        "state": np.zeros((b, state_size), np.float32),
    }


def per_update_ms(learner: Any, sample: dict[str, np.ndarray], updates: int) -> float:
    learner.step(learner.make_batch(sample))  # warm-up
    start = time.perf_counter()
    for _ in range(updates):
        learner.step(learner.make_batch(sample))
    return (time.perf_counter() - start) / updates * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--cell", default="lstm", choices=("lstm", "gru"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = load_config("r2d2", overrides=[f"r2d2.cell='{args.cell}'", "run.device='cpu'"])
    spec = probe_env(cfg.env)
    recipe = recipe_for(cfg)
    learners = {}
    for name in ("fused", "stepwise"):
        torch.manual_seed(0)
        learners[name] = recipe.make_learner(cfg, spec)
    learners["stepwise"].loss.network = Stepwise(learners["stepwise"].online)
    sample = batch(cfg, spec.obs_dim, learners["fused"].online.state_size)
    losses = [lr.step(lr.make_batch(sample)).loss for lr in learners.values()]
    assert np.isclose(*losses, rtol=1e-4), losses
    times = {name: per_update_ms(lr, sample, args.updates) for name, lr in learners.items()}
    print(
        f"R2D2 update, {cfg.dqn.batch_size} sequences of {cfg.r2d2.burn_in} + "
        f"{cfg.r2d2.length} steps, MLP {cfg.dqn.hidden}, {args.cell.upper()} "
        f"{cfg.r2d2.state_dim}; {os.cpu_count()} CPU cores, {platform.machine()}, "
        f"torch {torch.__version__}, 1 thread, {args.updates} updates each"
    )
    for name, ms in times.items():
        print(f"  {name:9s} {ms:7.2f} ms per update")
    print(f"fused / stepwise speed-up: {times['stepwise'] / times['fused']:.2f}x")


if __name__ == "__main__":
    main()
