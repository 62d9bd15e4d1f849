"""Greedy evaluation: episodes side by side against one after another, same returns.

Side by side in one run, torch on 1 thread:

1. CartPole-v1, 20 episodes of a trained policy (the ``cartpole`` preset trained until it
   solves, seed 0, its ``best.pt``), played by ``shoal.run.evaluation.evaluate`` on 1 env
   (one episode after another, one forward per step) and on 20 envs (side by side, one
   batched forward per step).
2. The harvest world of the agents runner (``harvest`` preset's world, 500-turn episodes),
   20 episodes of the initial agents: ``EpochPlayer.play`` one after another (how the
   agents runner evaluated before) against ``greedy_returns`` on 20 worlds side by side.

Each prints the seconds, the speed-up and whether the returns are identical.

Usage:
    python benchmarks/evaluation.py [--episodes 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch


def cartpole(episodes: int) -> None:
    import gymnasium as gym

    import shoal
    from shoal.agent.builder import build_actor, build_network
    from shoal.config import load_config
    from shoal.envs import probe_env
    from shoal.run.checkpoint import load_checkpoint
    from shoal.run.directory import RunDir
    from shoal.run.evaluation import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        run = shoal.train("cartpole", overrides=["run.progress=false"], run_dir=f"{tmp}/r")
        weights = load_checkpoint(RunDir(run.run_dir).best)["learner"]["online"]
    cfg = load_config("cartpole")
    spec = probe_env(cfg.env)
    network = build_network(cfg, spec)
    network.load_state_dict(weights)
    actor = build_actor(cfg, spec, np.random.default_rng(0), network=network)
    timings, returns = {}, {}
    for n in (1, episodes):
        envs = [gym.make("CartPole-v1") for _ in range(n)]
        t0 = time.perf_counter()
        returns[n] = evaluate(actor.greedy, envs, episodes, seed=1)
        timings[n] = time.perf_counter() - t0
    same = np.array_equal(returns[1], returns[episodes])
    print(
        f"CartPole, {episodes} episodes (mean return {returns[1].mean():.1f}): one by one "
        f"{timings[1]:.3f} s, side by side {timings[episodes]:.3f} s -> "
        f"{timings[1] / timings[episodes]:.1f}x; same returns: {same}"
    )


def harvest(episodes: int) -> None:
    from shoal.config import load_config
    from shoal.envs.parallel import make_parallel_env
    from shoal.run.seeding import SeedStream, derive_seed
    from shoal.runners.agents.epochs import build_player, greedy_returns

    cfg = load_config("harvest", ["agents.max_turns=500"])  # a new user's long episodes
    a = cfg.agents
    seeds = [derive_seed(0, SeedStream.EVAL, k) for k in range(episodes)]
    env = make_parallel_env(cfg.env.id, num_agents=a.agents, max_turns=a.max_turns)
    player = build_player(cfg, env)
    t0 = time.perf_counter()
    one_by_one = np.array([player.play(0.0, s, store=False).returns.sum() for s in seeds])
    t_one = time.perf_counter() - t0
    worlds = [
        make_parallel_env(cfg.env.id, num_agents=a.agents, max_turns=a.max_turns)
        for _ in range(episodes)
    ]
    t0 = time.perf_counter()
    side = greedy_returns(cfg, worlds, player.spec, player.actor, seeds)
    t_side = time.perf_counter() - t0
    print(
        f"harvest ({a.agents} agents, {a.max_turns}-turn episodes), {episodes} episodes: one "
        f"by one {t_one:.2f} s, side by side {t_side:.2f} s -> {t_one / t_side:.1f}x; same "
        f"returns: {np.array_equal(one_by_one, side)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__} (1 thread)")
    cartpole(args.episodes)
    harvest(args.episodes)


if __name__ == "__main__":
    main()
