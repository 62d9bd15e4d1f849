"""Wall-clock time-to-solve on CartPole-v1: shoal's serial DQN against Stable-Baselines3.

What is measured: for each method and seed, the wall-clock seconds from the start of
training until the first greedy evaluation whose mean return over 20 episodes is >= 475
(CartPole-v1's "solved" threshold), and the env steps taken by then. Methods:

- ``shoal``: shoal's serial DQN with the ``cartpole`` preset (50k step budget).
- ``sb3-dqn``: SB3 DQN with the RL-Zoo hyperparameters for CartPole-v1 (50k step budget).
- ``sb3-ppo``: SB3 PPO with default hyperparameters, MlpPolicy (100k step budget, since
  the defaults need more env steps).

Why it is fair: every method uses the same evaluation protocol, ``shoal.run.evaluation.evaluate``
with the run's seed on 20 ``CartPole-v1`` envs (so all see the same 20 starts), every
1000 env steps, and stops at the first evaluation that solves. The clock starts when
training starts (process start, imports and model/env construction are excluded) and
counts the time spent in evaluations, the solving one included (shoal's
``TrainResult.solved_wall_seconds`` is read after that evaluation, and so is SB3's clock).
Each (method, seed) runs in a fresh subprocess, one after another, so threads and memory
of one run cannot slow the next. shoal uses its preset's ``run.torch_threads``; SB3 uses
torch's default thread count, set explicitly so that it is recorded. A seed that does not
solve counts as its full-budget time in the medians and is flagged.

Usage:
    python benchmarks/cartpole_time_to_solve.py
    python benchmarks/cartpole_time_to_solve.py --seeds 0 --methods shoal --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

METHODS = ("shoal", "sb3-dqn", "sb3-ppo", "shoal-8envs", "shoal-processes-8envs", "shoal-c51")
SHOAL_VARIANTS = {
    "shoal": [],
    "shoal-8envs": ["env.num_envs=8"],
    "shoal-processes-8envs": ["env.num_envs=8", "run.runner=processes", "processes.workers=2"],
    "shoal-c51": ["run.recipe='c51'", "c51.v_min=0", "c51.v_max=100"],
}
"""shoal's runs: the preset (one env, serial), 8 envs per actor on serial and on processes
(2 workers), C51 in place of DQN (its support over CartPole's discounted returns, 0 to
100), everything else the preset's."""
SB3_BUDGETS = {"sb3-dqn": 50_000, "sb3-ppo": 100_000}
"""Env step budgets of the SB3 runs (shoal's comes from its preset)."""
EVAL_EVERY = 1000
EVAL_EPISODES = 20
SOLVE_RETURN = 475.0
TARGET_SECONDS = 10.0
"""Target: shoal's median time-to-solve at most this many seconds."""
TARGET_RATIO_PPO = 0.5
"""Target: shoal's median at most this fraction of SB3 PPO's."""
RESULT_PREFIX = "RESULT_JSON "
"""Marks the line on which a child process reports its result."""

# RL-Zoo hyperparameters for DQN on CartPole-v1 (rl-baselines3-zoo, hyperparams/dqn.yml).
SB3_DQN_KWARGS: dict[str, Any] = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


@dataclass
class RunResult:
    """One (method, seed) run."""

    method: str
    seed: int
    solved: bool
    solve_step: int | None
    """Env step of the first solving evaluation (None: never solved)."""
    solve_seconds: float | None
    """Training seconds when the solving evaluation finished (None: never solved)."""
    total_seconds: float
    """Training seconds of the whole run (to the solve, or to the end of the budget)."""
    env_steps: int
    """Env steps taken in all."""
    budget: int
    """Env step budget."""
    torch_threads: int
    """torch intra-op threads during training."""
    process_seconds: float | None = None
    """The child process's whole life, start to exit (imports, set-up, training to the
    solve, the end of run: for shoal its last checkpoint and curve), timed by the parent."""

    @property
    def counted_seconds(self) -> float:
        """Seconds that enter the medians: time to solve, or the full run if unsolved."""
        return self.solve_seconds if self.solve_seconds is not None else self.total_seconds


# --- one run (in a child process) -----------------------------------------------------------
def run_shoal(seed: int, method: str = "shoal") -> RunResult:
    """Train shoal's DQN with the ``cartpole`` preset (and the variant's overrides)."""
    import torch

    import shoal

    budget = shoal.load_config("cartpole").run.total_steps
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmpdir:
        r = shoal.train(
            "cartpole",
            # SB3's side has no confirming evaluation (run.confirm_solve): equal terms.
            overrides=[
                f"run.seed={seed}",
                "run.progress=false",
                "run.confirm_solve=false",
                f"run.out='{tmpdir}'",
                *SHOAL_VARIANTS[method],
            ],
        )
    return RunResult(
        method=method,
        seed=seed,
        solved=r.solved_step is not None,
        solve_step=r.solved_step,
        solve_seconds=r.solved_wall_seconds,
        total_seconds=r.wall_seconds,
        env_steps=r.env_steps,
        budget=budget,
        torch_threads=torch.get_num_threads(),
    )


def run_sb3(method: str, seed: int) -> RunResult:
    """Train SB3 DQN (RL-Zoo hyperparameters) or PPO (defaults), evaluating like shoal."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from shoal.run.evaluation import evaluate

    threads = torch.get_num_threads()  # torch's default; set explicitly so it is on record
    torch.set_num_threads(threads)
    eval_envs = [gym.make("CartPole-v1") for _ in range(EVAL_EPISODES)]

    class SolveCallback(BaseCallback):
        """Evaluates every EVAL_EVERY env steps; stops training at the first solve."""

        def __init__(self, t0: float) -> None:
            super().__init__()
            self.t0 = t0
            self.solve_step: int | None = None
            self.solve_seconds: float | None = None

        def _on_step(self) -> bool:
            if self.num_timesteps % EVAL_EVERY != 0:
                return True
            returns = evaluate(
                lambda obs: self.model.predict(obs, deterministic=True)[0],
                eval_envs,
                episodes=EVAL_EPISODES,
                seed=seed,
            )
            if float(np.mean(returns)) >= SOLVE_RETURN:
                self.solve_step = self.num_timesteps
                self.solve_seconds = time.perf_counter() - self.t0
                return False
            return True

    budget = SB3_BUDGETS[method]
    if method == "sb3-dqn":
        model = DQN("MlpPolicy", "CartPole-v1", seed=seed, device="cpu", **SB3_DQN_KWARGS)
    else:
        model = PPO("MlpPolicy", "CartPole-v1", seed=seed, device="cpu")
    t0 = time.perf_counter()
    callback = SolveCallback(t0)
    model.learn(total_timesteps=budget, callback=callback)
    total = time.perf_counter() - t0
    for env in eval_envs:
        env.close()
    return RunResult(
        method=method,
        seed=seed,
        solved=callback.solve_step is not None,
        solve_step=callback.solve_step,
        solve_seconds=callback.solve_seconds,
        total_seconds=total,
        env_steps=model.num_timesteps,
        budget=budget,
        torch_threads=torch.get_num_threads(),
    )


def run_one(method: str, seed: int) -> RunResult:
    """Run one (method, seed) in this process."""
    return run_shoal(seed, method) if method in SHOAL_VARIANTS else run_sb3(method, seed)


# --- the driver -----------------------------------------------------------------------------
def run_isolated(method: str, seed: int) -> RunResult:
    """Run one (method, seed) in a fresh Python process and wait for it."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", method, str(seed)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    process_seconds = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{method} seed {seed} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )
    fields = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return RunResult(**{**fields, "process_seconds": process_seconds})


def machine_info() -> dict[str, Any]:
    """CPU count, torch's default threads and library versions of this machine."""
    import gymnasium
    import stable_baselines3
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_default_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "gymnasium": gymnasium.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def summarize(results: list[RunResult], methods: list[str]) -> dict[str, Any]:
    """Median counted seconds per method and the shoal/SB3 ratios."""
    medians = {
        m: statistics.median(r.counted_seconds for r in results if r.method == m)
        for m in methods
        if any(r.method == m for r in results)
    }
    whole = {
        m: statistics.median(r.process_seconds for r in results if r.method == m)
        for m in medians
        if all(r.process_seconds is not None for r in results if r.method == m)
    }
    ratios = {}
    if "shoal" in medians:
        for other in ("sb3-ppo", "sb3-dqn"):
            if other in medians:
                ratios[f"shoal/{other}"] = medians["shoal"] / medians[other]
            if "shoal" in whole and other in whole:
                ratios[f"shoal/{other} whole process"] = whole["shoal"] / whole[other]
    return {"median_seconds": medians, "median_process_seconds": whole, "ratios": ratios}


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_report(results: list[RunResult], summary: dict[str, Any], info: dict[str, Any]) -> None:
    """The per-run table, the medians, the ratios against the targets, and the machine."""
    header = (
        f"{'method':<22} {'seed':>4} {'solved':>6} {'steps@solve':>11} {'s@solve':>8} "
        f"{'total s':>8} {'process s':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        at_solve = _fmt(r.solve_seconds, ".2f") if r.solved else f"{r.total_seconds:.2f}*"
        print(
            f"{r.method:<22} {r.seed:>4} {'yes' if r.solved else 'NO':>6} "
            f"{_fmt(r.solve_step, 'd'):>11} {at_solve:>8} {r.total_seconds:>8.2f} "
            f"{_fmt(r.process_seconds, '.2f'):>9}"
        )
    if any(not r.solved for r in results):
        print("* not solved within the budget: counted as the full-budget time")
    print()
    print("median seconds to solve:")
    for m, med in summary["median_seconds"].items():
        flag = "" if all(r.solved for r in results if r.method == m) else "  (includes unsolved*)"
        print(f"  {m:<22} {med:8.2f}{flag}")
    medians, ratios = summary["median_seconds"], summary["ratios"]
    if "shoal" in medians:
        ok = medians["shoal"] <= TARGET_SECONDS
        print(
            f"  target: shoal median <= {TARGET_SECONDS:.0f} s: "
            f"{medians['shoal']:.2f} s -> {'MET' if ok else 'NOT MET'}"
        )
    if ratios:
        print("ratios of medians:")
    if "shoal/sb3-ppo" in ratios:
        x = ratios["shoal/sb3-ppo"]
        ok = x <= TARGET_RATIO_PPO
        print(
            f"  shoal / sb3-ppo = {x:.2f}x  (target <= {TARGET_RATIO_PPO}x: "
            f"{'MET' if ok else 'NOT MET'})"
        )
    if "shoal/sb3-ppo whole process" in ratios:
        x = ratios["shoal/sb3-ppo whole process"]
        print(
            f"  shoal / sb3-ppo, whole process = {x:.2f}x  (target <= {TARGET_RATIO_PPO}x: "
            f"{'MET' if x <= TARGET_RATIO_PPO else 'NOT MET'})"
        )
    if "shoal/sb3-dqn" in ratios:
        print(f"  shoal / sb3-dqn = {ratios['shoal/sb3-dqn']:.2f}x")
    print()
    threads = {r.method: r.torch_threads for r in results}
    print(
        f"machine: {info['cpu_count']} CPUs (os.cpu_count), torch default threads "
        f"{info['torch_default_threads']}, threads used: "
        + ", ".join(f"{m}={t}" for m, t in threads.items())
    )
    print(
        f"versions: torch {info['torch']}, stable-baselines3 {info['stable_baselines3']}, "
        f"gymnasium {info['gymnasium']}, python {info['python']} ({info['platform']})"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds to run")
    p.add_argument(
        "--methods", nargs="+", choices=METHODS, default=list(METHODS), help="methods to run"
    )
    p.add_argument("--json", metavar="PATH", help="write the raw results to this JSON file")
    p.add_argument(
        "--one",
        nargs=2,
        metavar=("METHOD", "SEED"),
        help="internal: run one (method, seed) in this process and print its result",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run every (method, seed) sequentially, each in its own process, and report."""
    args = parse_args(argv)
    if args.one is not None:
        method, seed = args.one
        if method not in METHODS:
            raise SystemExit(f"--one: method {method!r} is not one of {', '.join(METHODS)}")
        result = run_one(method, int(seed))
        print(RESULT_PREFIX + json.dumps(asdict(result)), flush=True)
        return
    results = []
    for method in args.methods:
        for seed in args.seeds:
            print(f"running {method} seed {seed} ...", file=sys.stderr, flush=True)
            r = run_isolated(method, seed)
            print(
                f"  {'solved' if r.solved else 'NOT solved'} at step {r.solve_step}, "
                f"{_fmt(r.solve_seconds, '.2f')} s (total {r.total_seconds:.2f} s)",
                file=sys.stderr,
                flush=True,
            )
            results.append(r)
    info = machine_info()
    summary = summarize(results, args.methods)
    print_report(results, summary, info)
    if args.json:
        with open(args.json, "w") as f:
            payload = {"machine": info, "results": [asdict(r) for r in results], **summary}
            json.dump(payload, f, indent=2)


if __name__ == "__main__":
    main()
