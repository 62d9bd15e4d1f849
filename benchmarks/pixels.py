"""Atari from pixels: replay memory per 1M transitions, and training throughput against
Stable-Baselines3's DQN at the same settings.

Part A, replay memory. shoal's replay with ``env.frame_stack = 4`` keeps each 84 x 84
frame once (:class:`~shoal.replay.frames.FrameStorage`): filled with ``--transitions``
n-step transitions of synthetic episodes (random frames, so no two frames are alike and
nothing is saved by chance; episodes of ``--episode`` steps stacked as
``FrameStackObservation`` stacks them, from 8 envs interleaved), its resident memory is
measured (VmRSS before and after, this process). Beside it, at the same count: shoal's
whole-stack storage (what replay held before, the arrays' size), and SB3's
``ReplayBuffer`` with and without ``optimize_memory_usage``, measured resident after
filling ``--sb3-transitions`` and scaled (its arrays are preallocated, so resident grows
linearly as they fill). A sampled batch is checked against the stacks that went in.

Part B, throughput on ``--game`` (default ``ALE/Breakout-v5``), the atari preset's
settings (Nature encoder with 512 hidden, batch 32, 1-step DQN, target period
1000, one update per 4 env steps, 8 envs per actor, ``--capacity`` replay) with learning
from ``--learning-starts``: shoal's serial runner (sync and envpool engines), the threads
runner on envpool (2 learner threads), processes with 2 workers and ray with 2 actors,
each run for ``--steps`` env steps; and SB3's DQN with ``CnnPolicy`` (the same Nature
network) on 8 envs of the same preprocessing (``DummyVecEnv``, ``train_freq=4`` steps of
the 8 envs with ``gradient_steps=8``: the same updates per env step). Rates are steady:
shoal's from its first tick row after learning starts to its last; SB3's timed by a
callback from its first update to the end. Both learners use torch's default threads (the
atari preset's ``run.torch_threads = 0``), and shoal's runs are not double DQN here
(``dqn.double = false``), as SB3's DQN is not: the same forwards per update.
Ratios printed against SB3 and against shoal's serial runner, with the issue's targets:
processes and ray >= 1.5x SB3; threads on envpool >= serial.

Timings depend on anything else the machine runs: run it alone. About 15 minutes on 2
cores (Part A needs about 8 GB of memory free).

Usage:
    python benchmarks/pixels.py [--quick] [--json PATH] [--part a|b|both]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

STACK, SIDE = 4, 84
FRAME = SIDE * SIDE
GB = 1e9


def rss() -> int:
    """This process's resident memory in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


# --- Part A: replay memory -----------------------------------------------------------------


def synthetic_batches(transitions: int, episode: int, envs: int = 8, chunk: int = 4096):
    """Batches of 1-step transitions of ``envs`` interleaved streams of random frames:
    stacks padded with the first frame at episode starts, as FrameStackObservation does."""
    rng = np.random.default_rng(0)
    history = [[rng.integers(0, 256, FRAME, dtype=np.uint8)] * STACK for _ in range(envs)]
    steps = [0] * envs
    done = 0
    while done < transitions:
        n = min(chunk, transitions - done)
        obs = np.empty((n, STACK * FRAME), np.uint8)
        nxt = np.empty_like(obs)
        discount = np.full(n, 0.99, np.float32)
        fresh = rng.integers(0, 256, (n, FRAME), dtype=np.uint8)
        for i in range(n):
            e = i % envs
            obs[i] = np.concatenate(history[e])
            history[e] = [*history[e][1:], fresh[i]]
            nxt[i] = np.concatenate(history[e])
            steps[e] += 1
            if steps[e] == episode:  # the episode ends: the next starts from a new frame
                discount[i] = 0.0
                steps[e] = 0
                history[e] = [rng.integers(0, 256, FRAME, dtype=np.uint8)] * STACK
        yield {
            "obs": obs,
            "action": rng.integers(0, 4, n),
            "reward": np.zeros(n, np.float32),
            "next_obs": nxt,
            "discount": discount,
        }
        done += n


def shoal_replay_memory(transitions: int, episode: int) -> dict[str, Any]:
    from shoal.replay import ReplayBuffer

    specs = {
        "obs": ((STACK * FRAME,), np.uint8),
        "action": ((), np.int64),
        "reward": ((), np.float32),
        "next_obs": ((STACK * FRAME,), np.uint8),
        "discount": ((), np.float32),
    }
    gc.collect()
    before = rss()
    buffer = ReplayBuffer.from_specs(transitions, specs, frame_stack=STACK, seed=0)
    t0 = time.perf_counter()
    last = None
    for batch in synthetic_batches(transitions, episode):
        buffer.add_batch(batch)
        last = {k: v[-32:].copy() for k, v in batch.items()}
        del batch  # resident memory is the buffer's, not the generator's
    fill_s = time.perf_counter() - t0
    gc.collect()
    grown = rss() - before
    # the newest items come back as they went in
    n = len(last["obs"])
    got = buffer.storage.get(np.arange(transitions - n, transitions))
    assert np.array_equal(got["obs"], last["obs"]) and np.array_equal(
        got["next_obs"], last["next_obs"]
    )
    t0 = time.perf_counter()
    for _ in range(200):
        buffer.sample(32)
    sample_ms = (time.perf_counter() - t0) / 200 * 1e3
    out = {
        "transitions": transitions,
        "frames_held": buffer.storage.frames_held,
        "resident_bytes": grown,
        "fill_s": fill_s,
        "sample_ms_batch32": sample_ms,
    }
    del buffer
    gc.collect()
    return out


def sb3_replay_memory(transitions: int, optimize: bool) -> int:
    """Resident bytes SB3's buffer takes once ``transitions`` are in it."""
    import gymnasium as gym
    from stable_baselines3.common.buffers import ReplayBuffer

    space = gym.spaces.Box(0, 255, (STACK, SIDE, SIDE), np.uint8)
    gc.collect()
    before = rss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        buf = ReplayBuffer(
            transitions,
            space,
            gym.spaces.Discrete(4),
            optimize_memory_usage=optimize,
            handle_timeout_termination=not optimize,
        )
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (1, STACK, SIDE, SIDE), dtype=np.uint8)
    for _ in range(transitions):
        buf.add(obs, obs, np.array([1]), np.array([0.0]), np.array([False]), [{}])
    grown = rss() - before
    del buf
    gc.collect()
    return grown


def part_a(transitions: int, sb3_transitions: int, episode: int) -> dict[str, Any]:
    print(f"\nPart A: replay memory, {transitions:,} transitions of 4 x 84 x 84 stacks")
    ours = shoal_replay_memory(transitions, episode)
    per_m = 1e6 / transitions
    whole = 2 * STACK * FRAME * transitions  # obs and next_obs stored whole
    sb3 = {
        opt: sb3_replay_memory(sb3_transitions, opt) * 1e6 / sb3_transitions
        for opt in (False, True)
    }
    rows = [
        ("shoal, frames once (measured)", ours["resident_bytes"] * per_m),
        ("shoal, whole stacks (array size)", whole * per_m),
        ("SB3 ReplayBuffer", sb3[False]),
        ("SB3 optimize_memory_usage", sb3[True]),
    ]
    for name, b in rows:
        print(f"  {name:<36} {b / GB:>7.2f} GB per 1M transitions")
    print(
        f"  shoal held {ours['frames_held']:,} distinct frames; filled in {ours['fill_s']:.0f} s;"
        f" a batch of 32 sampled in {ours['sample_ms_batch32']:.2f} ms;"
        f" SB3 measured at {sb3_transitions:,} and scaled"
    )
    print(
        f"  ratio SB3 / shoal {sb3[False] / rows[0][1]:.1f}x,"
        f" SB3 optimized / shoal {sb3[True] / rows[0][1]:.1f}x;"
        f" target shoal <= 8 GB per 1M: {'met' if rows[0][1] <= 8e9 else 'MISSED'}"
    )
    return {"shoal": ours, "per_1m_bytes": {name: b for name, b in rows}}


# --- Part B: throughput --------------------------------------------------------------------


def settings(game: str, steps: int, capacity: int, learning_starts: int) -> list[str]:
    return [
        f"env.id='{game}'",
        f"replay.capacity={capacity}",
        f"run.learning_starts={learning_starts}",
        "run.eval_every=100000000",
        "run.eval_episodes=1",
        "run.checkpoint_every=100000000",
        "run.log_every=1000",
        "run.progress=false",
        "env.max_episode_steps=2000",
        f"explore.eps_decay_steps={max(1, steps // 10)}",  # as SB3's exploration_fraction 0.1
        "dqn.double=false",  # SB3's DQN is not double: one target forward per update, as here
    ]


SHOAL_CASES = (
    ("shoal serial", []),
    ("shoal serial envpool", ["env.vector='envpool'"]),
    (
        "shoal threads envpool",
        ["run.runner='threads'", "env.vector='envpool'", "threads.learner_threads=2"],
    ),
    ("shoal processes 2", ["run.runner='processes'", "processes.workers=2"]),
    # the preset learns each batch alone on the cores; this overlaps learning and playing
    (
        "shoal processes 2 overlap",
        ["run.runner='processes'", "processes.workers=2", "processes.publish_every=32"],
    ),
    ("shoal ray 2", ["run.runner='ray'", "ray.actors=2"]),
)


def shoal_run(name: str, overrides: list[str], steps: int, tmp: str, learning_starts: int) -> dict:
    import shoal
    from shoal.run.metrics import read_metrics

    run_dir = Path(tmp) / name.replace(" ", "-")
    result = shoal.train(
        "atari", overrides=[*overrides, f"run.total_steps={steps}"], run_dir=run_dir
    )
    ticks = [r for r in read_metrics(run_dir / "metrics.csv") if r["kind"] == "tick"]
    learning = [r for r in ticks if float(r["step"]) >= learning_starts]
    # after learning starts only: the steps before it run without updates, many times
    # faster (a run whose batches leave fewer than two ticks there has no steady rate)
    steady = _rate(learning) if len(learning) >= 2 else float("nan")
    updates = _rate(learning, "updates") if len(learning) >= 2 else float("nan")
    return {
        "name": name,
        "env_steps": result.env_steps,
        "updates": result.updates,
        "steps_per_s": steady,
        "updates_per_s": updates,
    }


def _rate(rows: list[dict], key: str = "step") -> float:
    first, last = rows[0], rows[-1]
    return (float(last[key]) - float(first[key])) / (float(last["wall_s"]) - float(first["wall_s"]))


def sb3_run(game: str, steps: int, capacity: int, learning_starts: int) -> dict:
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from shoal.envs.atari import AtariSettings, atari_env

    def make() -> Any:
        return atari_env(game, AtariSettings(frame_stack=STACK), max_episode_steps=2000)

    class Clock(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start: tuple[float, int, int] | None = None

        def _on_step(self) -> bool:
            if self.start is None and self.model.num_timesteps >= learning_starts:
                self.start = (time.perf_counter(), self.model.num_timesteps, self.model._n_updates)
            return True

    envs = DummyVecEnv([make] * 8)
    model = DQN(
        "CnnPolicy",
        envs,
        learning_rate=1e-4,
        buffer_size=capacity,
        learning_starts=learning_starts,
        batch_size=32,
        gamma=0.99,
        train_freq=4,
        gradient_steps=8,
        target_update_interval=1000,
        exploration_fraction=0.1,
        exploration_final_eps=0.01,
        max_grad_norm=10,
        device="cpu",
        seed=0,
    )
    clock = Clock()
    model.learn(steps, callback=clock)
    t1 = time.perf_counter()
    assert clock.start is not None
    t0, s0, u0 = clock.start
    envs.close()
    return {
        "name": "SB3 DQN",
        "env_steps": model.num_timesteps,
        "updates": model._n_updates,
        "steps_per_s": (model.num_timesteps - s0) / (t1 - t0),
        "updates_per_s": (model._n_updates - u0) / (t1 - t0),
    }


def part_b(
    game: str, steps: int, capacity: int, learning_starts: int, cases: list[str] | None
) -> list[dict]:
    print(
        f"\nPart B: {game}, {steps:,} env steps a run, learning from {learning_starts:,},"
        f" replay {capacity:,}"
    )
    print(f"{'case':<24} {'env steps':>10} {'updates':>9} {'steps/s':>9} {'updates/s':>10}")
    runs = []
    base = settings(game, steps, capacity, learning_starts)
    with tempfile.TemporaryDirectory(prefix="shoal-pixels-") as tmp:
        for name, extra in SHOAL_CASES:
            if cases and name not in cases:
                continue
            runs.append(shoal_run(name, [*base, *extra], steps, tmp, learning_starts))
            _print_run(runs[-1])
    if not cases or "SB3 DQN" in cases:
        runs.append(sb3_run(game, steps, capacity, learning_starts))
        _print_run(runs[-1])
    return runs


def _print_run(r: dict) -> None:
    print(
        f"{r['name']:<24} {r['env_steps']:>10,} {r['updates']:>9,} {r['steps_per_s']:>9,.0f}"
        f" {r['updates_per_s']:>10,.1f}",
        flush=True,
    )


TARGETS = (
    ("processes 2 / SB3", "shoal processes 2", "SB3 DQN", 1.5),
    ("ray 2 / SB3", "shoal ray 2", "SB3 DQN", 1.5),
    ("threads envpool / serial", "shoal threads envpool", "shoal serial", 1.0),
    ("serial / SB3", "shoal serial", "SB3 DQN", None),
    ("serial envpool / serial", "shoal serial envpool", "shoal serial", None),
)


def ratios(runs: list[dict]) -> list[dict]:
    rate = {r["name"]: r["steps_per_s"] for r in runs}
    out = []
    print("\nratios of steady env steps/s:")
    for name, num, den, target in TARGETS:
        if num not in rate or den not in rate:
            continue
        ratio = rate[num] / rate[den]
        verdict = (
            ""
            if target is None
            else (" met" if ratio >= target else " MISSED") + f" (target >= {target}x)"
        )
        print(f"  {name:<28} {ratio:>5.2f}x{verdict}")
        out.append({"ratio": name, "value": ratio, "target": target})
    return out


def machine() -> dict[str, Any]:
    names = ("torch", "gymnasium", "ale_py", "envpool", "stable_baselines3", "ray", "numpy")
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        **{n: version(n.replace("_", "-")) for n in names},
        "loadavg_before": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (a minute or two)")
    parser.add_argument("--json", metavar="PATH", help="write the figures here")
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    parser.add_argument("--transitions", type=int, default=1_000_000, help="Part A, shoal")
    parser.add_argument("--sb3-transitions", type=int, default=100_000, help="Part A, SB3")
    parser.add_argument("--episode", type=int, default=1000, help="Part A episode length")
    parser.add_argument("--game", default="ALE/Breakout-v5")
    parser.add_argument("--steps", type=int, default=12_000, help="Part B env steps a run")
    parser.add_argument("--capacity", type=int, default=100_000, help="Part B replay")
    parser.add_argument("--learning-starts", type=int, default=4_000)
    parser.add_argument("--cases", nargs="*", help="Part B cases to run (default: all)")
    args = parser.parse_args()
    if args.quick:
        args.transitions, args.sb3_transitions, args.steps, args.learning_starts = (
            20_000,
            5_000,
            3_000,
            1_000,
        )
    warnings.filterwarnings("ignore", message=".*precision lowered by casting")
    info = machine()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    out: dict[str, Any] = {"machine": info, "args": vars(args)}
    if args.part in ("a", "both"):
        out["memory"] = part_a(args.transitions, args.sb3_transitions, args.episode)
    if args.part in ("b", "both"):
        out["runs"] = part_b(args.game, args.steps, args.capacity, args.learning_starts, args.cases)
        out["ratios"] = ratios(out["runs"])
    out["machine"]["loadavg_after"] = os.getloadavg()
    print(f"load average after: {out['machine']['loadavg_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
