"""Rollout worker processes: collection throughput and weight broadcast cost.

Side by side in one run:

1. Env steps/s of experience collection on an env whose step costs real CPU inside the GIL
   (CartPole + 200 us of pure-Python work per step, ``env.step_cost_kind=spin``): the
   serial runner's collection loop (act, step, write to replay) against the processes
   runner with 1 and 2 rollout workers (the learner only stores the episodes). Learning
   is left out on purpose: this measures how collection scales.
2. Broadcasting 1M and 10M float32 parameters: ``SharedWeightStore.publish`` (the
   learner's side) and ``pull`` (a worker's copy), against ``Queue.put(state_dict)`` to a
   child process (put + the child's get, pickling through a pipe) and against serializing
   with ``torch.save`` into bytes.

Usage:
    python benchmarks/rollout_scaling.py [--seconds 6]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import time
from typing import Any

import numpy as np
import torch

from shoal.agent.builder import (
    build_actor,
    build_epsilon,
    build_nstep,
    build_replay,
)
from shoal.config import load_config
from shoal.envs import make_env, probe_env
from shoal.recipes.dqn import DQNRecipe
from shoal.runners.processes import ProcessesRunner
from shoal.sync.weights import SharedWeightStore
from shoal.sync.workers import SPAWN

COST = ["env.step_cost_us=200", "env.step_cost_kind=spin", "env.max_episode_steps=200"]


def serial_collection(seconds: float) -> float:
    cfg = load_config("cartpole", COST)
    spec = probe_env(cfg.env)
    learner = DQNRecipe().make_learner(cfg, spec)
    replay, nstep = build_replay(cfg, spec), build_nstep(cfg)
    env, rng, eps = make_env(cfg.env), np.random.default_rng(0), build_epsilon(cfg)
    # The serial runner's actor: the learner's own live weights.
    actor = build_actor(cfg, spec, rng, params=learner.params, network=learner.online)
    obs, _ = env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        actor.epsilon = eps(steps)
        action, _ = actor.select_action(obs)
        nxt, r, term, trunc, _ = env.step(action)
        for tr in nstep.append(obs, action, r, nxt, term, trunc):
            replay.add(tr)
        obs = nxt
        steps += 1
        if term or trunc:
            obs, _ = env.reset()
    return steps / (time.perf_counter() - t0)


def process_collection(workers: int, seconds: float) -> float:
    cfg = load_config(
        "cartpole",
        [
            *COST,
            f"processes.workers={workers}",
            "run.progress=false",
            "processes.episodes_per_batch=2",
        ],
    )
    runner = ProcessesRunner(cfg)
    try:
        runner.start()  # publish the first weights, spawn the workers
        runner.collect(0)  # warm-up: processes started, imports done
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            # episodes_per_batch (2) whole episodes from every worker, stored into replay;
            # no learn(): collection only
            steps += runner.collect(steps).steps
        return steps / (time.perf_counter() - t0)
    finally:
        runner.stop()


def _queue_child(q: Any, done: Any) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        done.put(True)


def broadcast(n_params: int, reps: int) -> dict[str, float]:
    state = {"a": torch.randn(n_params // 2), "b": torch.randn(n_params - n_params // 2)}
    store = SharedWeightStore(state, meta_keys=("epsilon",))
    store.publish(state)
    t0 = time.perf_counter()
    for _ in range(reps):
        store.publish(state, {"epsilon": 0.1})
    publish = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        store.pull(-1)
    pull = (time.perf_counter() - t0) / reps
    store.close()
    q, done = SPAWN.Queue(), SPAWN.Queue()
    child = SPAWN.Process(target=_queue_child, args=(q, done), daemon=True)
    child.start()
    q.put({"warm": torch.zeros(1)})
    done.get()
    t0 = time.perf_counter()
    for _ in range(reps):
        q.put(state)
        done.get()
    queue = (time.perf_counter() - t0) / reps
    q.put(None)
    child.join(10)
    t0 = time.perf_counter()
    for _ in range(reps):
        buf = io.BytesIO()
        torch.save(state, buf)
    save = (time.perf_counter() - t0) / reps
    return {"publish": publish, "pull": pull, "queue": queue, "torch_save": save}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )
    print("\n1. collection, CartPole + 200 us of Python per step")
    serial = serial_collection(args.seconds)
    one = process_collection(1, args.seconds)
    two = process_collection(2, args.seconds)
    print(f"serial runner collection   {serial:>8,.0f} env steps/s")
    print(f"processes, 1 worker        {one:>8,.0f} env steps/s")
    print(f"processes, 2 workers       {two:>8,.0f} env steps/s")
    print(
        f"2 workers / 1 worker = {two / one:.2f}x (target >= 1.7x: "
        f"{'MET' if two / one >= 1.7 else 'MISSED'}); 2 workers / serial = {two / serial:.2f}x"
    )
    print("\n2. weight broadcast (ms per broadcast)")
    print(f"{'params':>12} {'publish':>9} {'pull':>9} {'Queue.put':>10} {'torch.save':>11}")
    for n, reps in ((1_000_000, 50), (10_000_000, 10)):
        b = broadcast(n, reps)
        print(
            f"{n:>12,} {1e3 * b['publish']:>9.3f} {1e3 * b['pull']:>9.3f} "
            f"{1e3 * b['queue']:>10.3f} {1e3 * b['torch_save']:>11.3f}"
        )
        if n == 1_000_000:
            ok = b["publish"] <= 0.5e-3
            print(
                f"{'':>12} publish of 1M params <= 0.5 ms: {'MET' if ok else 'MISSED'}; "
                f"Queue.put is {b['queue'] / b['publish']:.0f}x slower"
            )


if __name__ == "__main__":
    main()
