"""Learner threads on one network: learner throughput and end-to-end wall-clock.

Side by side in one run, on the CartPole preset's network (MLP [128, 128], dueling,
batch 128), torch limited to 1 intra-op thread everywhere:

1. Learner throughput (updates/s) on a pre-filled replay buffer, no acting:
   - serial: one plain loop of ``DQN.step``;
   - one global lock: K threads, each whole update under one mutex (the naive fix);
   - shoal: K threads, gradients under the read lock, apply under the write lock
   (the threads runner's learner), for K = 1, 2, 4.
2. End-to-end: the serial runner and the threads runner (1 and 2 learner threads, default
   settings) for the same fixed number of env steps and updates, on CartPole as is and
   with 200 us added to each step, spent outside the GIL (sleep) or inside it (spin), and
   on envpool's CartPole x 32 (batched acting, the env's step in C++ outside the GIL). The
   threads runner completes every scheduled update before it stops. From the serial run,
   t_act (acting, env, replay writes) and t_learn (time inside learning) give the best
   any overlap of acting with learning can do: (t_act + t_learn) / max(t_act, t_learn).

Usage:
    python benchmarks/learner_threads.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import threading
import time

import numpy as np
import torch

from shoal.agent.builder import build_replay
from shoal.agent.learner import DQN
from shoal.agent.losses import Batch
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.run.directory import RunDir
from shoal.run.loop import RunLoop
from shoal.runners.serial import SerialRunner
from shoal.runners.threads import ThreadsRunner
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rwlock import RWLock


def filled_replay(cfg, spec) -> LockedReplay:
    buf = build_replay(cfg, spec)
    rng = np.random.default_rng(0)
    for _ in range(20_000):
        buf.add(
            {
                "obs": rng.normal(size=4),
                "action": int(rng.integers(2)),
                "reward": 1.0,
                "next_obs": rng.normal(size=4),
                "discount": 0.97,
            }
        )
    return LockedReplay(buf)


def learner_throughput(mode: str, k: int, updates: int) -> float:
    cfg = load_config("cartpole")
    spec = probe_env(cfg.env)
    torch.manual_seed(0)
    dqn = DQN(spec.obs_dim, spec.n_actions, cfg.dqn, device="cpu")
    replay = filled_replay(cfg, spec)
    bs = cfg.dqn.batch_size

    def one_update_serial() -> None:
        s = replay.sample(bs)
        info = dqn.step(Batch.from_numpy(s, "cpu"))
        replay.update_priorities(s["indices"], info.td_errors)

    if mode == "serial":
        t0 = time.perf_counter()
        for _ in range(updates):
            one_update_serial()
        return updates / (time.perf_counter() - t0)

    rw, mutex = RWLock(timeout=60), threading.Lock()
    per = updates // k

    def worker() -> None:
        torch.set_num_threads(1)  # per OS thread (OpenMP), like the threads runner does
        for _ in range(per):
            if mode == "global":
                with mutex:
                    one_update_serial()
            else:
                s = replay.sample(bs)
                with rw.read():
                    grads, info = dqn.gradients(Batch.from_numpy(s, "cpu"))
                with rw.write():
                    dqn.apply(grads)
                replay.update_priorities(s["indices"], info.td_errors)

    threads = [threading.Thread(target=worker) for _ in range(k)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * k / (time.perf_counter() - t0)


COST_US = 200


class TimedSerial(SerialRunner):
    """The serial runner, timing the time it spends learning."""

    learn_seconds = 0.0

    def on_train_point(self, updates: int) -> None:
        t0 = time.perf_counter()
        super().on_train_point(updates)
        self.learn_seconds += time.perf_counter() - t0


def end_to_end(runner: str, steps: int, cost: str, k: int = 1) -> tuple[float, float, int]:
    overrides = [
        f"run.total_steps={steps}",
        "run.progress=false",
        "run.stop_return=none",
        f"run.eval_every={10 * steps}",
        f"run.checkpoint_every={10 * steps}",
        f"threads.learner_threads={k}",
        "env.max_episode_steps=200",
    ]
    if cost == "envpool":  # 32 envs in C++, stepped outside the GIL, one batched forward
        overrides += ["env.vector=envpool", "env.num_envs=32"]
    elif cost != "none":
        overrides += [f"env.step_cost_us={COST_US}", f"env.step_cost_kind={cost}"]
    cfg = load_config("cartpole", overrides)
    run = RunDir.create(tempfile.mkdtemp(), "bench")
    cls = TimedSerial if runner == "serial" else ThreadsRunner
    r = cls(cfg)
    try:  # as shoal.train drives a runner
        loop = RunLoop(r, run)
        t0 = time.perf_counter()
        result = loop.run()
        wall = time.perf_counter() - t0
    finally:
        r.stop()
        r.close()
    learn = r.learn_seconds if runner == "serial" else float("nan")
    return wall, learn, result.updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--updates", type=int, default=2_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__} (1 intra-op thread), "
        f"Python {platform.python_version()}"
    )

    print(f"\n1. learner throughput ({args.updates} updates, pre-filled replay)")
    serial = learner_throughput("serial", 1, args.updates)
    print(f"{'serial loop':<36} {serial:>10,.0f} updates/s")
    rates = {}
    for k in (1, 2, 4):
        g = learner_throughput("global", k, args.updates)
        rates[k] = learner_throughput("rwlock", k, args.updates)
        print(f"{f'{k} thread(s), one global lock':<36} {g:>10,.0f} updates/s")
        print(f"{f'{k} thread(s), shoal read/write split':<36} {rates[k]:>10,.0f} updates/s")
    worst = min(rates[2], rates[4]) / rates[1]
    print(
        f"K threads vs 1 thread (shoal): worst {worst:.2f}x "
        f"(target: never below 1 thread: {'MET' if worst >= 1 else 'MISSED'})"
    )

    print(f"\n2. end to end: {args.steps} env steps, same updates")
    end_to_end("serial", 2_000, "none")  # one-time imports (plotting, TensorBoard) first
    for cost, what in (
        ("none", "CartPole as is (5 us steps)"),
        ("sleep", f"+{COST_US} us per step outside the GIL (like a simulator in C)"),
        ("spin", f"+{COST_US} us per step inside the GIL (like a pure-Python env)"),
        ("envpool", "envpool CartPole x 32, one batched forward per step"),
    ):
        print(f"-- {what}")
        wall_s, learn_s, upd_s = end_to_end("serial", args.steps, cost)
        act_s = wall_s - learn_s
        bound = wall_s / max(act_s, learn_s)
        print(
            f"   serial runner: {wall_s:.2f} s ({upd_s} updates); t_act {act_s:.2f} s, "
            f"t_learn {learn_s:.2f} s -> best overlap speed-up {bound:.2f}x"
        )
        for k in (1, 2):
            wall_t, _, upd_t = end_to_end("threads", args.steps, cost, k)
            speedup = wall_s / wall_t
            print(
                f"   threads runner, {k} learner(s): {wall_t:.2f} s ({upd_t} updates), "
                f"speed-up {speedup:.2f}x = {speedup / bound:.2f} of the bound "
                f"(target >= 0.8: {'MET' if speedup / bound >= 0.8 else 'MISSED'})"
            )


if __name__ == "__main__":
    main()
