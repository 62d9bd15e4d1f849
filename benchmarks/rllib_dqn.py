"""Baseline: wall-clock time for RLlib's DQN (new API stack) to solve CartPole-v1.

What is measured: the seconds from just after ``ray.init`` (Ray's start-up excluded; the
algorithm's build included) until the first greedy evaluation whose mean return over 20
episodes is >= 475, and the env steps sampled by then. This gives shoal's
``benchmarks/cartpole_time_to_solve.py`` a figure to compare against for a distributed
library on the same machine.

How: one local Ray on loopback (127.0.0.2), ``DQNConfig`` with ``--env-runners`` remote
env runners (learner in the driver), and a loop of ``algo.train()``. One iteration samples
about 1000 env steps (DQN's ``min_sample_timesteps_per_iteration``), so evaluating after
each one matches shoal's protocol of an evaluation every 1000 env steps. The evaluation
runs in the driver: the local env runner's RLModule (weights synced after each update)
acts greedily (``forward_inference``, the argmax of Q) on 20 ``CartPole-v1`` envs, reset
with seeds derived from ``--seed``, stepped as one batch; its time is on the clock.

Hyperparameters: those of RLlib's own tuned example for DQN on CartPole (Ray's repository,
``rllib/tuned_examples/dqn/cartpole_dqn.py``, since moved to
``rllib/examples/algorithms/dqn/cartpole_dqn.py``; the pip wheel does not ship it):
lr 5e-4, batch 32, prioritized episode replay (capacity 50k, alpha 0.6, beta 0.4),
n-step sampled from [2, 5], double and dueling Q, epsilon 1.0 -> 0.02 over 10k steps,
a 256-unit tanh encoder and a 256-unit head. The rest are ``DQNConfig`` defaults (gamma
0.99, target update every 500 steps, learning from 1000 steps, rollout fragment = 5).

Runs only in a venv with RLlib (see ``benchmarks/requirements-rllib.txt``); it does not
import shoal. Usage::

    benchmarks/.venv-rllib/bin/python benchmarks/rllib_dqn.py [--seed 0] [--budget-s 600]
        [--env-runners 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

EVAL_EPISODES = 20
SOLVE_RETURN = 475.0


def build(seed: int, env_runners: int) -> Algorithm:
    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=env_runners)
        .training(
            lr=5e-4,
            train_batch_size_per_learner=32,
            replay_buffer_config={
                "type": "PrioritizedEpisodeReplayBuffer",
                "capacity": 50_000,
                "alpha": 0.6,
                "beta": 0.4,
            },
            n_step=(2, 5),
            double_q=True,
            dueling=True,
            epsilon=[(0, 1.0), (10_000, 0.02)],
        )
        .rl_module(
            model_config=DefaultModelConfig(
                fcnet_hiddens=[256],
                fcnet_activation="tanh",
                fcnet_bias_initializer="zeros_",
                head_fcnet_hiddens=[256],
                head_fcnet_bias_initializer="zeros_",
            )
        )
        .debugging(seed=seed)
    )
    return config.build_algo()


def evaluate(algo: Algorithm, seed: int) -> float:
    """Mean return of the greedy policy over EVAL_EPISODES episodes, stepped as a batch."""
    module = algo.get_module()
    envs = [gym.make("CartPole-v1") for _ in range(EVAL_EPISODES)]
    obs = [env.reset(seed=seed * 1000 + i)[0] for i, env in enumerate(envs)]
    returns = np.zeros(EVAL_EPISODES)
    live = list(range(EVAL_EPISODES))
    with torch.no_grad():
        while live:
            batch = torch.as_tensor(np.stack([obs[i] for i in live]), dtype=torch.float32)
            actions = module.forward_inference({"obs": batch})["actions"].numpy()
            still = []
            for i, action in zip(live, actions, strict=True):
                obs[i], reward, term, trunc, _ = envs[i].step(int(action))
                returns[i] += float(reward)
                if not (term or trunc):
                    still.append(i)
            live = still
    return float(returns.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=600.0)
    parser.add_argument("--env-runners", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    ray.init(
        address="local",
        include_dashboard=False,
        num_cpus=os.cpu_count(),
        _node_ip_address="127.0.0.2",
        log_to_driver=False,
    )
    t0 = time.perf_counter()
    algo = build(args.seed, args.env_runners)
    evals: list[dict[str, Any]] = []
    solved_at: float | None = None
    env_steps = 0
    while time.perf_counter() - t0 < args.budget_s:
        result = algo.train()
        env_steps = int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
        mean = evaluate(algo, args.seed)
        elapsed = time.perf_counter() - t0
        evals.append({"env_steps": env_steps, "mean_return": mean, "wall_s": round(elapsed, 3)})
        print(
            f"iter {len(evals):4d}  env steps {env_steps:7d}  eval mean {mean:6.1f}  "
            f"{elapsed:7.1f} s",
            file=sys.stderr,
            flush=True,
        )
        if mean >= SOLVE_RETURN:
            solved_at = elapsed
            break
    wall = time.perf_counter() - t0
    algo.stop()
    ray.shutdown()

    summary = {
        "solved": solved_at is not None,
        "time_to_solve_s": None if solved_at is None else round(solved_at, 3),
        "env_steps": env_steps,
        "evals": evals,
        "wall_s": round(wall, 3),
        "rllib": ray.__version__,
        "seed": args.seed,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        status = f"solved in {solved_at:.1f} s" if solved_at is not None else "not solved"
        print(f"RLlib DQN seed {args.seed}: {status}, {env_steps} env steps, {len(evals)} evals")


if __name__ == "__main__":
    main()
