"""The ray runner (Ape-X on Ray) against shoal's processes runner and a bare env loop.

Side by side in one run, on this machine:

1. Collection throughput: env steps/s of ``--runner ray`` vs ``--runner processes`` at equal
   worker counts (``--workers``), on CartPole made CPU-bound (``env.step_cost_us`` of
   Python spinning per step, GIL held, like a pure-Python simulator). No learning in the
   timed part (``learning_starts`` past the budget), so the figure is collection alone;
   steady state: the median of the runs' ``steps_per_s`` tick rows, start-up excluded (the
   wall time with start-up is printed too). Goal: ray >= 0.8x processes.
2. Actor overhead: one ray actor's ``rollout`` calls of ``ray.steps_per_call`` steps, as the
   runner makes them (epsilon-greedy action, n-step writer, weight pulls, the finished
   episodes' initial priorities and their send to replay, the call's round trip) against a
   bare loop of the same env and network (greedy forward, ``env.step``) in this process,
   per env step. Goal: <= 15%.
3. Learner idle fraction when actors outpace it: a learning run with ``--workers`` actors,
   the mean of the tick rows' ``learner_idle`` (time waiting for a batch from the replay
   actor over time in ``learn``). Goal: <= 10%.

Every run shares one local Ray started here (its start-up is printed, not timed), on
127.0.0.2. Usage::

    python benchmarks/ray_apex.py [--workers 2] [--steps 20000] [--cost-us 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

import numpy as np
import ray
import torch

import shoal
from shoal.agent.builder import build_learner, build_network
from shoal.config import load_config
from shoal.envs import make_env, probe_env
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners import apex
from shoal.sync.ray_weights import RayWeightStore, WeightServer


def run(runner: str, args: argparse.Namespace, out: str, *, learn: bool) -> dict[str, float]:
    steps = args.steps
    over = [
        f"run.runner={runner}",
        f"env.step_cost_us={args.cost_us}",
        "env.step_cost_kind='spin'",
        f"run.total_steps={steps}",
        f"run.learning_starts={1000 if learn else 10 * steps}",
        f"run.eval_every={10 * steps}",
        f"run.checkpoint_every={10 * steps}",
        "run.log_every=1000",
        "run.progress=false",
        "run.stop_return=none",
        f"run.out='{out}'",
        f"processes.workers={args.workers}",
        f"ray.actors={args.workers}",
        f"ray.actor_cpus={args.actor_cpus}",
    ]
    t0 = time.perf_counter()
    result = shoal.train("cartpole", overrides=over)
    wall = time.perf_counter() - t0
    rows = [r for r in read_metrics(RunDir(result.run_dir).metrics) if r["kind"] == "tick"]
    sps = [float(r["steps_per_s"]) for r in rows[1:]] or [result.env_steps / wall]
    idle = [float(r["learner_idle"]) for r in rows if r.get("learner_idle")]
    return {
        "sps": statistics.median(sps),
        "wall_sps": result.env_steps / wall,
        "idle": float(np.mean(idle)) if idle else float("nan"),
        "updates": result.updates,
    }


def overhead(args: argparse.Namespace) -> tuple[float, float]:
    """Seconds per env step: a ray actor's rollout, and a bare loop here."""
    cfg = load_config("cartpole", [f"env.step_cost_us={args.cost_us}", "env.step_cost_kind='spin'"])
    spec = probe_env(cfg.env)
    tag = f"bench-{os.getpid()}"
    remote = ray.remote(num_cpus=0)
    replay = remote(apex.ReplayActor).options(name=f"shoal-replay-{tag}").remote(cfg, spec)
    server = remote(WeightServer).options(name=f"shoal-weights-{tag}").remote()
    learner = build_learner(cfg, spec)
    store = RayWeightStore(server)
    store.publish(learner.weights(), {"epsilon": 0.05})
    store.flush()
    actor = remote(apex.RolloutActor).remote(cfg, 0, 1, tag, 1)
    n, per_call = args.overhead_steps, cfg.ray.steps_per_call
    ray.get(actor.rollout.remote(200))  # warm-up
    t0 = time.perf_counter()
    for _ in range(n // per_call):  # as the runner asks: ray.steps_per_call at a time
        ray.get(actor.rollout.remote(per_call))
    ray.get(actor.flush.remote())
    t_actor = (time.perf_counter() - t0) / (n // per_call * per_call)
    for handle in (actor, replay, server):
        ray.kill(handle)

    torch.set_num_threads(1)
    env, net = make_env(cfg.env), build_network(cfg, spec)
    net.load_state_dict({k: v.detach() for k, v in learner.weights().items()})
    obs, _ = env.reset(seed=0)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for _ in range(n):
            action = int(net(torch.as_tensor(obs, dtype=torch.float32)[None]).argmax())
            obs, _, term, trunc, _ = env.step(action)
            if term or trunc:
                obs, _ = env.reset()
    t_bare = (time.perf_counter() - t0) / n
    return t_actor, t_bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--cost-us", type=float, default=200.0, help="spin per env step")
    parser.add_argument("--actor-cpus", type=float, default=0.5)
    parser.add_argument("--overhead-steps", type=int, default=5000)
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"torch {torch.__version__}, ray {ray.__version__}, load {os.getloadavg()[0]:.2f}"
    )
    t0 = time.perf_counter()
    ray.init(
        address="local", include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.2"
    )
    print(f"local Ray start-up {time.perf_counter() - t0:.1f} s (not in any figure below)")
    out = tempfile.mkdtemp(prefix="shoal-bench-ray-")

    print(
        f"\n1. collection, {args.workers} workers, CartPole + {args.cost_us:g} us spin a step, "
        f"{args.steps} steps, no learning"
    )
    got = {name: run(name, args, out, learn=False) for name in ("processes", "ray")}
    for name, g in got.items():
        print(f"  {name:<10} {g['sps']:>8.0f} steps/s steady ({g['wall_sps']:.0f} with start-up)")
    ratio = got["ray"]["sps"] / got["processes"]["sps"]
    print(f"  ray / processes: {ratio:.2f}x (goal >= 0.8x: {'MET' if ratio >= 0.8 else 'MISSED'})")

    print(f"\n2. actor overhead, {args.overhead_steps} steps")
    t_actor, t_bare = overhead(args)
    over = t_actor / t_bare - 1
    print(
        f"  ray actor {1e6 * t_actor:.0f} us/step, bare loop {1e6 * t_bare:.0f} us/step: "
        f"overhead {100 * over:.1f}% (goal <= 15%: {'MET' if over <= 0.15 else 'MISSED'})"
    )

    print(f"\n3. learner idle, {args.workers} actors, learning from step 1000")
    g = run("ray", args, out, learn=True)
    print(
        f"  learner idle {100 * g['idle']:.1f}% of its time in learn ({g['updates']} updates) "
        f"(goal <= 10%: {'MET' if g['idle'] <= 0.10 else 'MISSED'})"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
