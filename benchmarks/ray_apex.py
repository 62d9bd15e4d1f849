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
   actor over time in ``learn``). Goal: <= 10%. The same with 8 actors, with the replay
   actor's CPU load (``replay_cpu``, cores): near 1 would make it the bottleneck (shards).
4. CartPole time-to-solve (a greedy mean >= 475 over 20 episodes, confirmed on 20 more):
   ``--runner ray`` with 2 actors, then (5) RLlib's DQN with 2 env runners
   (``rllib_dqn.py``, run in its own venv ``benchmarks/.venv-rllib``, ``make rllib-venv``,
   because RLlib's pins are not the project's), seed by seed. Goal: shoal's median time
   <= 0.5x RLlib's. Neither clock includes Ray's start-up; only shoal's solve must be
   confirmed (``run.confirm_solve``), which can only lengthen its time.

Parts 1-4 share one local Ray started here (its start-up is printed, not timed), on
127.0.0.2; it is shut down before RLlib's runs, which start their own. Usage::

    python benchmarks/ray_apex.py [--workers 2] [--steps 20000] [--cost-us 200]
        [--solve-seeds 0,1] [--rllib-budget-s 900] [--parts 12345]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch

import shoal
from shoal.agent.builder import build_network, transition_fields
from shoal.config import load_config
from shoal.envs import make_env, probe_env
from shoal.recipes.dqn import DQNRecipe
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.ray import runner as apex
from shoal.sync.ray_weights import RayWeightStore
from shoal.sync.weight_server import WeightServer


def run(
    runner: str, args: argparse.Namespace, out: str, *, learn: bool, workers: int = 0
) -> dict[str, float]:
    steps, workers = args.steps, workers or args.workers
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
        f"processes.workers={workers}",
        f"ray.actors={workers}",
        f"ray.actor_cpus={args.actor_cpus}",
    ]
    t0 = time.perf_counter()
    result = shoal.train("cartpole", overrides=over)
    wall = time.perf_counter() - t0
    rows = [r for r in read_metrics(RunDir(result.run_dir).metrics) if r["kind"] == "tick"]
    sps = [float(r["steps_per_s"]) for r in rows[1:]] or [result.env_steps / wall]
    learning = [r for r in rows if float(r.get("updates") or 0) > 0]
    return {
        "sps": statistics.median(sps),
        "wall_sps": result.env_steps / wall,
        "idle": mean_of(learning, "learner_idle"),
        "replay_cpu": mean_of(learning, "replay_cpu"),
        "ups": mean_of(learning, "updates_per_s"),
        "updates": result.updates,
    }


def mean_of(rows: list[dict[str, str]], column: str) -> float:
    values = [float(r[column]) for r in rows if r.get(column)]
    return float(np.mean(values)) if values else float("nan")


def overhead(args: argparse.Namespace) -> tuple[float, float]:
    """Seconds per env step, the median of 3 alternating rounds: a ray actor's rollout
    calls, and a bare loop here."""
    cfg = load_config("cartpole", [f"env.step_cost_us={args.cost_us}", "env.step_cost_kind='spin'"])
    spec = probe_env(cfg.env)
    tag = f"bench-{os.getpid()}"
    remote = ray.remote(num_cpus=0)
    replay = (
        remote(apex.ReplayActor)
        .options(name=f"shoal-replay-{tag}")
        .remote(cfg, spec, transition_fields(spec))
    )
    server = remote(WeightServer).options(name=f"shoal-weights-{tag}").remote()
    learner = DQNRecipe().make_learner(cfg, spec)
    store = RayWeightStore(server)
    store.publish(learner.weights(), {"epsilon": 0.05})
    store.flush()
    actor = remote(apex.RolloutActor).remote(cfg, 0, 1, tag, 1)
    torch.set_num_threads(1)
    env, net = make_env(cfg.env), build_network(cfg, spec)
    net.load_state_dict({k: v.detach() for k, v in learner.weights().items()})
    ray.get(actor.rollout.remote(200))  # warm-up
    calls = args.overhead_steps // cfg.ray.steps_per_call
    n = calls * cfg.ray.steps_per_call
    rounds = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):  # as the runner asks: ray.steps_per_call at a time
            ray.get(actor.rollout.remote(cfg.ray.steps_per_call))
        ray.get(actor.flush.remote())
        rounds.append(((time.perf_counter() - t0) / n, bare_loop(env, net, n)))
    for handle in (actor, replay, server):
        ray.kill(handle)
    return statistics.median(a for a, _ in rounds), statistics.median(b for _, b in rounds)


def bare_loop(env: Any, net: torch.nn.Module, n: int) -> float:
    """Seconds per step of ``n`` greedy steps, nothing else."""
    obs, _ = env.reset(seed=0)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for _ in range(n):
            action = int(net(torch.as_tensor(obs, dtype=torch.float32)[None]).argmax())
            obs, _, term, trunc, _ = env.step(action)
            if term or trunc:
                obs, _ = env.reset()
    return (time.perf_counter() - t0) / n


def collection(args: argparse.Namespace, out: str) -> None:
    print(
        f"\n1. collection, {args.workers} workers, CartPole + {args.cost_us:g} us spin a step, "
        f"{args.steps} steps, no learning"
    )
    got = {name: run(name, args, out, learn=False) for name in ("processes", "ray")}
    for name, g in got.items():
        print(f"  {name:<10} {g['sps']:>8.0f} steps/s steady ({g['wall_sps']:.0f} with start-up)")
    ratio = got["ray"]["sps"] / got["processes"]["sps"]
    print(f"  ray / processes: {ratio:.2f}x (goal >= 0.8x: {verdict(ratio >= 0.8)})")


def actor_overhead(args: argparse.Namespace) -> None:
    print(f"\n2. actor overhead, median of 3 alternating rounds of {args.overhead_steps} steps")
    t_actor, t_bare = overhead(args)
    over = t_actor / t_bare - 1
    print(
        f"  ray actor {1e6 * t_actor:.0f} us/step, bare loop {1e6 * t_bare:.0f} us/step: "
        f"overhead {100 * over:.1f}% (goal <= 15%: {verdict(over <= 0.15)})"
    )


def learner_idle(args: argparse.Namespace, out: str) -> None:
    print("\n3. learner idle and replay load, learning from step 1000")
    for n in sorted({args.workers, 8}):
        g = run("ray", args, out, learn=True, workers=n)
        goal = f" (goal <= 10%: {verdict(g['idle'] <= 0.10)})" if n == args.workers else ""
        print(
            f"  {n} actors: learner idle {100 * g['idle']:.1f}% of its time in learn{goal}; "
            f"{g['ups']:.0f} updates/s, {g['sps']:.0f} env steps/s, replay actor "
            f"{g['replay_cpu']:.2f} cores"
        )


def time_to_solve(args: argparse.Namespace, out: str) -> list[float | None]:
    """Seconds from the run's start (the shared Ray already up) to a confirmed solve."""
    print("\n4. CartPole time-to-solve (greedy mean >= 475 over 20 episodes), 2 actors")
    times: list[float | None] = []
    for seed in [int(x) for x in args.solve_seeds.split(",")]:
        over = ["run.runner=ray", "ray.actors=2", f"run.seed={seed}", "run.progress=false"]
        result = shoal.train("cartpole", overrides=[*over, f"run.out='{out}'"])
        times.append(result.solved_wall_seconds)
        print(
            f"  shoal ray, seed {seed}: solved at {result.solved_step} env steps, "
            f"{result.solved_wall_seconds or float('nan'):.1f} s"
        )
    return times


def against_rllib(args: argparse.Namespace, shoal_times: list[float | None]) -> None:
    """RLlib's DQN with 2 env runners, each seed in its own process and venv."""
    python = Path(__file__).parent / ".venv-rllib" / "bin" / "python"
    if not python.exists():
        print(f"  RLlib: not run, {python} is missing (make rllib-venv)")
        return
    times = []
    for seed in [int(x) for x in args.solve_seeds.split(",")]:
        cmd = [str(python), str(Path(__file__).parent / "rllib_dqn.py"), "--json"]
        cmd += ["--seed", str(seed), "--budget-s", str(args.rllib_budget_s)]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.rllib_budget_s + 300
        )
        got = json.loads(done.stdout.strip().splitlines()[-1])
        times.append(got["time_to_solve_s"] if got["solved"] else args.rllib_budget_s)
        print(
            f"  RLlib DQN {got['rllib']}, seed {seed}: "
            + (
                f"solved at {got['env_steps']} env steps, {got['time_to_solve_s']:.1f} s"
                if got["solved"]
                else f"not solved in {args.rllib_budget_s:.0f} s"
            )
        )
    if None in shoal_times:
        print("  shoal did not solve every seed: no ratio")
        return
    ratio = statistics.median(shoal_times) / statistics.median(times)
    print(
        f"  median time-to-solve, shoal ray / RLlib DQN: {ratio:.2f}x "
        f"(an unsolved RLlib seed counts as its budget) (goal <= 0.5x: {verdict(ratio <= 0.5)})"
    )


def verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--cost-us", type=float, default=200.0, help="spin per env step")
    parser.add_argument("--actor-cpus", type=float, default=0.5)
    parser.add_argument("--overhead-steps", type=int, default=5000)
    parser.add_argument("--solve-seeds", default="0,1", help="CartPole time-to-solve seeds")
    parser.add_argument("--rllib-budget-s", type=float, default=900.0)
    parser.add_argument(
        "--parts", default="12345", help="which parts to run (4: shoal's solves, 5: RLlib's)"
    )
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"torch {torch.__version__}, ray {ray.__version__}, load {os.getloadavg()[0]:.2f}"
    )
    t0 = time.perf_counter()
    ray.init(**apex.local_ray_options(node_ip_address="127.0.0.2"))  # as a run starts it
    print(f"local Ray start-up {time.perf_counter() - t0:.1f} s (not in any figure below)")
    out = tempfile.mkdtemp(prefix="shoal-bench-ray-")
    if "1" in args.parts:
        collection(args, out)
    if "2" in args.parts:
        actor_overhead(args)
    if "3" in args.parts:
        learner_idle(args, out)
    shoal_solves = time_to_solve(args, out) if "4" in args.parts else []
    ray.shutdown()  # RLlib starts its own
    if "4" in args.parts and "5" in args.parts:
        against_rllib(args, shoal_solves)


if __name__ == "__main__":
    main()
