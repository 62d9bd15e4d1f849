"""Collection speed on CartPole-v1: batched acting against bare loops and Stable-Baselines3.

Everything acts with the ``cartpole`` preset's Q-network (one seeded init, so every shoal
case plays the same policy), torch on 1 thread, epsilon-greedy at epsilon 0.05 (nearly
every step runs a forward), no replay and no learning. Side by side in one run:

Part A, one process (env steps/s, best of ``--repeats`` windows of ``--seconds``):

1. the bare env: ``gymnasium`` CartPole-v1 stepped with random actions;
2. one env and one forward per step (``net(obs[None]).argmax()``), a bare loop;
3. the floor: ``SyncVectorEnv`` x 32 (gymnasium's default autoreset) with one batched
   forward per step, a bare loop with no shoal in it; and the same over envpool x 32;
4. shoal's ``BatchActor`` plus its batch n-step writer (what the serial runner's collect
   does, less replay) at ``env.num_envs`` 1, 8, 32 on each engine (sync, async, envpool;
   async runs a process per env, so it is not one core's figure);
5. Stable-Baselines3: ``DummyVecEnv`` + ``DQN.predict(obs, deterministic=True)`` with the
   preset's hidden sizes at 1, 8, 32 envs.

Steps are transitions: a step that only resets an env (gymnasium's next-step autoreset,
envpool) is not counted. Each figure is printed as steps/s and as a ratio to the floor
(SyncVectorEnv x 32 + batched forward) measured in the same run.

Part B, whole runs of ``shoal.train("cartpole")`` that never learn (learning_starts past
the end, no evaluation or checkpoint until the end, epsilon fixed at 0.05): serial at 1
and 32 envs, threads at 32, processes 1 x 32 and 2 x 32, ray 2 actors x 32. The steady
rate is collection's: env steps from the run's first tick row to its last over the wall
time between them (Ray's start, ~7 s here, and the workers' spawn left out); the whole
run's env_steps / wall_seconds and the time around ``shoal.train`` are printed too. Ends
with the ratios, judged on the steady rates, and their targets: serial 32 envs / 1 env
>= 8x, serial 32 envs / floor >= 0.67, processes 2 x 32 / 1 x 32 >= 1.7x, ray 2 x 32 /
processes 2 x 32 >= 0.8x.

torch, shoal's training code and Stable-Baselines3 are imported inside the functions that
use them: spawned processes (the async engine's 32, the runners' workers) re-import this
module, and each would otherwise load torch. Timings depend on anything else the machine
runs; the load average is printed before and after. About 5 minutes on 2 cores.

Usage:
    python benchmarks/collection.py [--quick] [--json PATH] [--seconds 2.5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.config import VECTOR_ENGINES as ENGINES  # light: imports no torch

ENV_ID = "CartPole-v1"
EPSILON = 0.05
FLOOR_ENVS = 32
FLOOR = f"floor: SyncVectorEnv x {FLOOR_ENVS} + batched forward"
NO_LEARNING = [
    "run.learning_starts=1000000000",
    "run.eval_every=1000000000",
    "run.checkpoint_every=1000000000",
    "run.eval_episodes=1",
    "run.progress=false",
    "run.confirm_solve=false",
    "run.stop_return=none",
    f"explore.eps_start={EPSILON}",
    f"explore.eps_end={EPSILON}",
]
RAY = ["run.runner=ray", "ray.node_ip_address='127.0.0.2'"]


@dataclass
class Loop:
    """A collection loop: ``step()`` advances it once and returns (transitions, episodes
    finished); ``close()`` frees it."""

    step: Callable[[], tuple[int, int]]
    close: Callable[[], None]


@dataclass
class Rate:
    """One Part A figure."""

    name: str
    steps_per_s: float
    episode_len: float
    setup_s: float
    ratio: float = 0.0


@dataclass
class Run:
    """One Part B figure."""

    name: str
    env_steps: int
    wall_s: float
    outside_s: float
    steady_per_s: float
    """Collection's rate: :func:`steady_rate`."""

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.wall_s


# --- Part A: the loops ---------------------------------------------------------------------


def preset(overrides: tuple[str, ...] = ()) -> Any:
    """The ``cartpole`` preset with ``overrides``."""
    from shoal.config import load_config

    return load_config("cartpole", list(overrides))


def network() -> Any:
    """The preset's Q-network, seeded, inference only."""
    import torch

    from shoal.agent.builder import build_network
    from shoal.envs import probe_env

    cfg = preset()
    torch.manual_seed(0)
    return build_network(cfg, probe_env(cfg.env))


def greedy(net: Any) -> Callable[[np.ndarray], np.ndarray]:
    """Greedy actions of ``net`` for a batch of observations."""
    import torch

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return net(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()

    return act


def explore(actions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Epsilon-greedy on top of greedy ``actions`` (CartPole: 2 actions)."""
    mask = rng.random(len(actions)) < EPSILON
    actions[mask] = rng.integers(2, size=int(mask.sum()))
    return actions


def bare_env() -> Loop:
    env, actions = gym.make(ENV_ID), np.random.default_rng(0).integers(2, size=1 << 16)
    env.reset(seed=0)
    k = 0

    def step() -> tuple[int, int]:
        nonlocal k
        k = (k + 1) & 0xFFFF
        _, _, term, trunc, _ = env.step(int(actions[k]))
        if term or trunc:
            env.reset()
            return 1, 1
        return 1, 0

    return Loop(step, env.close)


def single_forward() -> Loop:
    env, act, rng = gym.make(ENV_ID), greedy(network()), np.random.default_rng(0)
    obs, _ = env.reset(seed=0)

    def step() -> tuple[int, int]:
        nonlocal obs
        a = int(rng.integers(2)) if rng.random() < EPSILON else int(act(obs[None])[0])
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            obs, _ = env.reset()
            return 1, 1
        return 1, 0

    return Loop(step, env.close)


def batched_forward(vec: Any, **reset: Any) -> Loop:
    """One batched forward and one step of an autoresetting vector env (gymnasium's
    next-step autoreset or envpool's), reset with ``reset``: the step after a done is a
    reset, not counted."""
    act, rng = greedy(network()), np.random.default_rng(0)
    obs, _ = vec.reset(**reset)
    resetting = np.zeros(len(obs), bool)

    def step() -> tuple[int, int]:
        nonlocal obs, resetting
        obs, _, term, trunc, _ = vec.step(explore(act(obs), rng))
        live = ~resetting
        resetting = (term | trunc) & live
        return int(live.sum()), int(resetting.sum())

    return Loop(step, vec.close)


def sync_floor(n: int) -> Loop:
    return batched_forward(gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID)] * n), seed=0)


def envpool_floor(n: int) -> Loop:
    import envpool

    return batched_forward(envpool.make(ENV_ID, env_type="gymnasium", num_envs=n, seed=0))


def batch_actor(engine: str, n: int) -> Loop:
    """shoal's BatchActor and its batch n-step writer, as the serial runner collects."""
    from shoal.agent.batch_actor import BatchActor
    from shoal.agent.builder import build_actor
    from shoal.envs import probe_env
    from shoal.envs.vector import make_vector_env
    from shoal.replay.nstep import BatchNStepWriter

    cfg = preset((f"env.num_envs={n}", f"env.vector={engine}"))
    spec = probe_env(cfg.env)
    actor = build_actor(cfg, spec, np.random.default_rng(0), network=network())
    acting = BatchActor(actor, make_vector_env(cfg.env, n, 0), (0, 0))
    acting.epsilons[:] = EPSILON
    writer = BatchNStepWriter(n, cfg.dqn.n_step, cfg.dqn.gamma)

    def step() -> tuple[int, int]:
        got = acting.step()
        got.write(writer)
        return got.count, len(got.finished)

    return Loop(step, acting.close)


def sb3(n: int) -> Loop:
    """Stable-Baselines3 DQN's greedy ``predict`` on a DummyVecEnv (autoreset in the step)."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.vec_env import DummyVecEnv

    vec = DummyVecEnv([lambda: gym.make(ENV_ID)] * n)
    hidden = list(preset().dqn.hidden)
    model = DQN("MlpPolicy", vec, policy_kwargs={"net_arch": hidden}, buffer_size=1000, seed=0)
    obs = vec.reset()

    def step() -> tuple[int, int]:
        nonlocal obs
        actions, _ = model.predict(obs, deterministic=True)
        obs, _, dones, _ = vec.step(actions)
        return n, int(dones.sum())

    return Loop(step, vec.close)


def part_a_cases(quick: bool) -> list[tuple[str, Callable[[], Loop]]]:
    sizes = (1, 8, FLOOR_ENVS)
    cases: list[tuple[str, Callable[[], Loop]]] = [
        (FLOOR, lambda: sync_floor(FLOOR_ENVS)),  # first: the ratios' denominator
        ("bare env, random actions", bare_env),
        ("1 env + 1 forward per step", single_forward),
        (f"envpool x {FLOOR_ENVS} + batched forward", lambda: envpool_floor(FLOOR_ENVS)),
    ]
    for engine in ENGINES:
        for n in sizes:
            if quick and engine == "async" and n > 8:
                continue  # 32 spawned processes: too slow to start for a smoke run
            cases.append(
                (f"shoal BatchActor {engine} x {n}", lambda e=engine, n=n: batch_actor(e, n))
            )
    cases += [(f"SB3 DummyVecEnv x {n} + predict", lambda n=n: sb3(n)) for n in sizes]
    return cases


def measure(loop: Loop, seconds: float, repeats: int) -> tuple[float, float]:
    """Best steps/s of ``repeats`` windows of ``seconds`` (after a short warm-up), and the
    mean episode length in that window."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min(0.3, seconds / 4):
        loop.step()
    best, length = 0.0, float("nan")
    for _ in range(repeats):
        steps = episodes = 0
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds:
            s, e = loop.step()
            steps, episodes = steps + s, episodes + e
        if steps / elapsed > best:
            best, length = steps / elapsed, steps / max(episodes, 1)
    return best, length


def run_case(name: str, make: Callable[[], Loop], seconds: float, repeats: int) -> Rate:
    t0 = time.perf_counter()
    loop = make()
    setup = time.perf_counter() - t0
    try:
        rate, length = measure(loop, seconds, repeats)
    finally:
        loop.close()
    return Rate(name, rate, length, setup)


def print_rate(r: Rate) -> None:
    print(
        f"{r.name:<46} {r.steps_per_s:>10,.0f} {1e6 / r.steps_per_s:>8.1f} {r.ratio:>7.2f}x "
        f"{r.episode_len:>7.1f} {r.setup_s:>8.2f}"
    )


def part_a(quick: bool, seconds: float, repeats: int) -> list[Rate]:
    """Every case, the floor first (each ratio is to it) and again last (load drifts: the
    ratios use the better of the two)."""
    print(
        f"\nPart A: one process, env steps/s, best of {repeats} x {seconds:g} s "
        f"(epsilon {EPSILON}; async: a process per env, not one core)"
    )
    head = ("steps/s", "us/step", "/ floor", "ep len", "setup s")
    print(f"{'case':<46} " + " ".join(f"{h:>{w}}" for h, w in zip(head, (10, 8, 8, 7, 8))))
    cases = part_a_cases(quick)
    floor = run_case(*cases[0], seconds, repeats)
    floor.ratio = 1.0
    print_rate(floor)
    rates = [floor]
    for name, make in cases[1:]:
        r = run_case(name, make, seconds, repeats)
        r.ratio = r.steps_per_s / floor.steps_per_s
        rates.append(r)
        print_rate(r)
    again = run_case(*cases[0], seconds, repeats)
    print(f"floor again: {again.steps_per_s:,.0f} steps/s", end="")
    if again.steps_per_s > floor.steps_per_s:
        print(f"; ratios rescaled to it ({floor.steps_per_s / again.steps_per_s:.3f}x)", end="")
        floor.steps_per_s = again.steps_per_s
        for r in rates:
            r.ratio = r.steps_per_s / floor.steps_per_s
    print()
    return rates


# --- Part B: whole runs --------------------------------------------------------------------


def part_b_cases(steps_1: int, steps_32: int) -> list[tuple[str, list[str]]]:
    envs = "env.num_envs=32"
    return [
        ("serial 1 env", [f"run.total_steps={steps_1}"]),
        ("serial 32 envs", [f"run.total_steps={steps_32}", envs]),
        ("threads 32 envs", [f"run.total_steps={steps_32}", envs, "run.runner=threads"]),
        (
            "processes 1 x 32 envs",
            [f"run.total_steps={steps_32}", envs, "run.runner=processes", "processes.workers=1"],
        ),
        (
            "processes 2 x 32 envs",
            [f"run.total_steps={steps_32}", envs, "run.runner=processes", "processes.workers=2"],
        ),
        ("ray 2 x 32 envs", [f"run.total_steps={steps_32}", envs, *RAY, "ray.actors=2"]),
    ]


def steady_rate(run_dir: Path) -> float:
    """Env steps per second from the run's first tick row to its last: start-up (Ray's,
    the workers' spawn) and the final evaluation, checkpoint and curve left out."""
    from shoal.run.metrics import read_metrics

    rows = [r for r in read_metrics(run_dir / "metrics.csv") if r["kind"] == "tick"]
    if len(rows) < 2:
        return float("nan")
    first, last = rows[0], rows[-1]
    steps = float(last["step"]) - float(first["step"])
    return steps / (float(last["wall_s"]) - float(first["wall_s"]))


def train_run(name: str, overrides: list[str], tmp: str) -> Run:
    import shoal

    run_dir = Path(tmp) / name.replace(" ", "-")
    t0 = time.perf_counter()
    result = shoal.train("cartpole", overrides=[*NO_LEARNING, *overrides], run_dir=run_dir)
    outside = time.perf_counter() - t0
    assert result.updates == 0, f"{name}: {result.updates} gradient steps ran"
    return Run(name, result.env_steps, result.wall_seconds, outside, steady_rate(run_dir))


def part_b(steps_1: int, steps_32: int) -> list[Run]:
    print(
        f"\nPart B: shoal.train('cartpole') without learning (epsilon {EPSILON}), "
        f"{steps_1:,} steps at 1 env, {steps_32:,} at 32"
    )
    head = ("env steps", "wall s", "steps/s", "us/step", "outside s", "steady/s")
    widths = (10, 8, 10, 8, 10, 10)
    print(f"{'runner':<24} " + " ".join(f"{h:>{w}}" for h, w in zip(head, widths)))
    runs = []
    with tempfile.TemporaryDirectory(prefix="shoal-collection-") as tmp:
        for name, overrides in part_b_cases(steps_1, steps_32):
            r = train_run(name, overrides, tmp)
            runs.append(r)
            print(
                f"{r.name:<24} {r.env_steps:>10,} {r.wall_s:>8.2f} {r.steps_per_s:>10,.0f} "
                f"{1e6 / r.steps_per_s:>8.1f} {r.outside_s:>10.2f} {r.steady_per_s:>10,.0f}"
            )
    return runs


TARGETS = (
    ("serial 32 envs / serial 1 env", "serial 32 envs", "serial 1 env", 8.0),
    ("serial 32 envs / floor", "serial 32 envs", FLOOR, 0.67),
    ("processes 2x32 / processes 1x32", "processes 2 x 32 envs", "processes 1 x 32 envs", 1.7),
    ("ray 2x32 / processes 2x32", "ray 2 x 32 envs", "processes 2 x 32 envs", 0.8),
)
"""The issue's ratios: (name, numerator, denominator, target)."""


def targets(rates: list[Rate], runs: list[Run]) -> list[dict[str, Any]]:
    """The issue's ratios against their targets, judged on the steady rates (collection,
    start-up excluded; the floor is Part A's), with the whole runs' env_steps /
    wall_seconds beside."""
    wall = {r.name: r.steps_per_s for r in rates} | {r.name: r.steps_per_s for r in runs}
    steady = {r.name: r.steps_per_s for r in rates} | {r.name: r.steady_per_s for r in runs}
    print("\nratios: steady rates (whole runs' env_steps / wall_seconds in brackets)")
    out = []
    for name, num, den, target in TARGETS:
        ratio, whole = steady[num] / steady[den], wall[num] / wall[den]
        ok = ratio >= target
        print(
            f"  {name:<34} {ratio:>6.2f}x ({whole:.2f}x)  target >= {target:g}x: "
            f"{'MET' if ok else 'MISSED'}"
        )
        out.append({"name": name, "ratio": ratio, "whole_run": whole, "target": target, "met": ok})
    return out


# --- main ----------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    # envpool's float64 space bounds, cast to float32, warn on a pool's first reset
    warnings.filterwarnings("ignore", message=".*precision lowered by casting")
    names = ("torch", "gymnasium", "envpool", "stable_baselines3", "ray", "numpy")
    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        **{n: version(n.replace("_", "-")) for n in names},
        "loadavg_before": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (< 1 minute)")
    parser.add_argument("--json", metavar="PATH", help="write the figures here")
    parser.add_argument("--seconds", type=float, default=2.5, help="Part A window")
    parser.add_argument("--repeats", type=int, default=3, help="Part A windows per case")
    parser.add_argument("--steps-1", type=int, default=50_000, help="Part B, 1-env runs")
    parser.add_argument("--steps-32", type=int, default=400_000, help="Part B, 32-env runs")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repeats, args.steps_1, args.steps_32 = 0.25, 1, 2_000, 10_000
    info = machine()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    t0 = time.perf_counter()
    rates = part_a(args.quick, args.seconds, args.repeats)
    runs = part_b(args.steps_1, args.steps_32)
    checks = targets(rates, runs)
    info["loadavg_after"] = os.getloadavg()
    print(f"\nload average before {info['loadavg_before']}, after {info['loadavg_after']}")
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.json:
        out = {
            "machine": info,
            "part_a": [asdict(r) for r in rates],
            "part_b": [{**asdict(r), "steps_per_s": r.steps_per_s} for r in runs],
            "targets": checks,
        }
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
