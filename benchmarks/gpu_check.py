"""The GPU checks of issue 53 in one script that fits a short slot on a GPU machine (under
8 minutes with the default budget), so it can run and be rerun once.

Three parts, each printed as it finishes and written to ``--out`` as JSON:

``update``: on the cartpole, minatar-breakout, atari, iqn and r2d2 presets' networks and
batch sizes, side by side in one process: shoal's update with ``run.compile = "auto"``,
shoal's eager update (``"off"``), and the floor: a plain-PyTorch update of the same network
and batch captured as one CUDA graph (module forward, double-DQN target, Huber loss,
backward, clip, ``torch.optim.Adam(fused=True, capturable=True)``, replayed). IQN's and
R2D2's floor is their own loss body captured by a bare ``torch.cuda.graph`` (no shoal
machinery around it), since a plain-PyTorch quantile or sequence loss is not written here.
Target: auto within 1.5x of the floor.

``stacked``: K = 32 agents of the cartpole network, each update as a per-agent loop of
eager learners, the stacked learner eager, and the stacked learner captured.

``profile`` (only when named in ``--parts``): the profiler's top operators over the
``--profile`` preset's update as ``auto`` runs it and over its floor, to find a gap's cause.

``e2e``: Atari Breakout at SB3's settings (Nature network, batch 32, not double, one update
per 4 env steps, replay 100k, learner on the GPU), steady env steps/s after learning
starts, each measured for ``--window`` seconds in this one run: SB3's DQN, then shoal's
serial, processes (default workers) and ray (local, default actors) runners through
``shoal bench``'s window (:func:`shoal.bench.windows.measure_window`). Learning starts
after 2,000 steps in every case (the ratio is what is compared, not the warm-up).

Usage (on the GPU machine; shoal from the repository root):
    PYTHONPATH=. python benchmarks/gpu_check.py --out $OUT [--parts update,stacked,e2e]

The GPU machine has torch but not gymnasium, ale-py or SB3: ``benchmarks/gpu_wheels.sh``
downloads their wheels here into ``.whl`` (carried along), and the command installs them
there first (see that script). Ray's wheel is larger than what a call may carry, so the
ray line reports it missing unless Ray is installed there. ``--device cpu`` runs every part
that does not need CUDA (a check of the script itself on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

PRESETS = ("cartpole", "minatar-breakout", "atari", "iqn", "r2d2")
BREAKOUT = [
    "env.id='ALE/Breakout-v5'",
    "dqn.double=false",
    "dqn.batch_size=32",
    "run.train_freq=4",
    "run.gradient_steps=1",
    "replay.capacity=100000",
    "run.learning_starts=2000",
    "explore.eps_start=0.01",
]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def per_call(fn: Callable[[], Any], device: torch.device, seconds: float) -> float:
    """Seconds per call of ``fn``, back to back for about ``seconds`` after 20 warm-ups."""
    for _ in range(20):
        fn()
    sync(device)
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(20):
            fn()
        n += 20
        sync(device)
        if time.perf_counter() - t0 >= seconds:
            return (time.perf_counter() - t0) / n


# --- the update ---------------------------------------------------------------------------------
def spec_and_config(preset: str, device: str, mode: str) -> tuple[Any, Any]:
    """The preset's config on ``device`` with ``run.compile = mode``, and its env's spec,
    written out (no env is made: the GPU machine need not have it)."""
    from shoal.config import load_config
    from shoal.envs import EnvSpec

    cfg = load_config(preset, [f"run.device='{device}'", f"run.compile='{mode}'"])
    specs = {
        "cartpole": EnvSpec(4, 2),
        "iqn": EnvSpec(4, 2),
        "r2d2": EnvSpec(2, 2),
        "minatar-breakout": EnvSpec(400, 3, image=(4, 10, 10)),
        "atari": EnvSpec(4 * 84 * 84, 4, image=(4, 84, 84), image_high=255.0),
    }
    return cfg, specs[preset]


def synthetic_sample(fields: dict[str, Any], batch: int, n_actions: int) -> dict[str, Any]:
    """A replay sample of random values with the recipe's fields."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for name, (shape, dtype) in fields.items():
        size = (batch, *shape)
        dtype = np.dtype(dtype)
        if dtype == np.uint8:
            out[name] = rng.integers(0, 256, size, dtype=np.uint8)
        elif dtype == np.bool_:
            out[name] = np.ones(size, bool)
        elif np.issubdtype(dtype, np.integer):
            out[name] = rng.integers(0, n_actions, size).astype(dtype)
        elif name == "discount":
            out[name] = np.full(size, 0.97, dtype)
        else:
            out[name] = rng.normal(size=size).astype(dtype)
    out["weights"] = np.ones(batch, np.float32)
    out["indices"] = np.arange(batch)
    return out


def shoal_learner(preset: str, device: str, mode: str) -> tuple[Any, Any, Any]:
    """The preset's learner with ``run.compile = mode``, a batch on the device, and the
    host sample it came from."""
    from shoal.registry import recipe_for

    cfg, spec = spec_and_config(preset, device, mode)
    recipe = recipe_for(cfg)
    torch.manual_seed(0)
    learner = recipe.make_learner(cfg, spec)
    learner.set_compile(mode)
    sample = synthetic_sample(recipe.replay_fields(cfg, spec), cfg.dqn.batch_size, spec.n_actions)
    return learner, learner.make_batch(sample), sample


def shoal_update_time(preset: str, device: torch.device, mode: str, seconds: float) -> dict:
    """Seconds per shoal update as the serial runner takes it (the TD errors copied out for
    one-update-late priorities), on a batch already on the device and with a fresh copy of
    the host sample each update."""
    from shoal.agent.late_priorities import LatePriorities

    learner, batch, sample = shoal_learner(preset, str(device), mode)
    late = LatePriorities.for_device(lambda key, td: None, device)

    def step(b: Any) -> None:
        pending = learner.update(b)
        late.push(None, pending.td_errors)

    on_device = per_call(lambda: step(batch), device, seconds / 2)
    with_copy = per_call(lambda: step(learner.make_batch(sample)), device, seconds / 2)
    late.flush()
    return {
        "update_s": on_device,
        "update_with_copy_s": with_copy,
        "line": learner.update_line,
        "notes": list(learner.notes),
    }


def plain_dqn_floor(preset: str, device: torch.device, seconds: float) -> float:
    """Seconds per replay of a plain-PyTorch double-DQN update of the preset's network and
    batch, captured as one CUDA graph (eager where there is no CUDA)."""
    learner, batch, _ = shoal_learner(preset, str(device), "off")
    online = learner.online
    target = copy.deepcopy(online).requires_grad_(False)
    cfg = learner.cfg
    cuda = device.type == "cuda"
    opt = torch.optim.Adam(
        online.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True, capturable=cuda
    )

    def update() -> torch.Tensor:
        q = online(batch.obs).gather(1, batch.action[:, None]).squeeze(1)
        with torch.no_grad():
            pick = online(batch.next_obs).argmax(1, keepdim=True)
            value = target(batch.next_obs).gather(1, pick).squeeze(1)
            y = batch.reward + batch.discount * value
        loss = F.huber_loss(q, y, delta=cfg.huber_delta)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), cfg.max_grad_norm)
        opt.step()
        return loss.detach()

    if not cuda:
        return per_call(lambda: (opt.zero_grad(set_to_none=True), update()), device, seconds)
    return per_call(
        capture(lambda: update(), lambda: opt.zero_grad(set_to_none=True)), device, seconds
    )


def capture(
    body: Callable[[], Any], before: Callable[[], Any] = lambda: None
) -> Callable[[], None]:
    """``body`` warmed up on a side stream and captured as one CUDA graph: its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            before()
            body()
    torch.cuda.current_stream().wait_stream(stream)
    before()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph.replay


def bare_graph_floor(preset: str, device: torch.device, seconds: float) -> float:
    """Seconds per replay of the preset learner's own update body captured by a bare
    ``torch.cuda.graph`` (eager where there is no CUDA): IQN's and R2D2's floor."""
    from shoal.agent.update_steps import UpdateInput

    learner, batch, _ = shoal_learner(preset, str(device), "off")
    inputs = UpdateInput(batch, learner.draw_noise())
    body = lambda: learner.update_body(inputs)  # noqa: E731
    if device.type != "cuda":
        return per_call(body, device, seconds)
    return per_call(capture(body), device, seconds)


def check_update(device: torch.device, seconds: float) -> list[dict]:
    rows = []
    for preset in PRESETS:
        auto = shoal_update_time(preset, device, "auto", seconds)
        eager = shoal_update_time(preset, device, "off", seconds)
        dqn = preset in ("cartpole", "minatar-breakout", "atari")
        try:
            floor = (plain_dqn_floor if dqn else bare_graph_floor)(preset, device, seconds)
        except Exception as e:  # not capturable as it stands: the other figures still count
            print(f"update {preset}: floor failed: {type(e).__name__}: {e}", flush=True)
            floor = float("nan")
        row = {
            "preset": preset,
            "auto": auto,
            "eager_s": eager["update_s"],
            "floor_s": floor,
            "floor": ("plain PyTorch" if dqn else "its own body")
            + (", one CUDA graph" if device.type == "cuda" else ", eager (no CUDA here)"),
            "auto_over_floor": auto["update_s"] / floor,
            "eager_over_auto": eager["update_s"] / auto["update_s"],
        }
        print(
            f"update {preset}: auto ({auto['line']}) {auto['update_s'] * 1e3:.3f} ms "
            f"[{auto['update_with_copy_s'] * 1e3:.3f} ms with the batch's copy], eager "
            f"{eager['update_s'] * 1e3:.3f} ms, floor ({row['floor']}) {floor * 1e3:.3f} ms: "
            f"auto / floor {row['auto_over_floor']:.2f}x (target <= 1.5x), eager / auto "
            f"{row['eager_over_auto']:.1f}x {auto['notes'] or ''}",
            flush=True,
        )
        rows.append(row)
    return rows


# --- the stacked agents ---------------------------------------------------------------------------
def check_stacked(device: torch.device, seconds: float, k: int = 32) -> dict:
    from shoal.agent.stacked import StackedLearner, stack_batches

    learners, batches = [], []
    for i in range(k):
        torch.manual_seed(i)
        learner, batch, _ = shoal_learner("cartpole", str(device), "off")
        learners.append(learner)
        batches.append(batch)
    stacked_batch = stack_batches(batches)

    def loop() -> None:
        for le, b in zip(learners, batches):
            le.update(b)

    per_agent = per_call(loop, device, seconds / 3)
    stacked = StackedLearner(learners)
    eager = per_call(lambda: stacked.update(stacked_batch), device, seconds / 3)
    stacked.set_compile("auto")
    auto = per_call(lambda: stacked.update(stacked_batch), device, seconds / 3)
    row = {
        "k": k,
        "per_agent_loop_s": per_agent,
        "stacked_eager_s": eager,
        "stacked_auto_s": auto,
        "mode": stacked.compile_mode,
        "notes": list(stacked.notes),
    }
    print(
        f"stacked K={k}: per-agent loop {per_agent * 1e3:.2f} ms, stacked eager "
        f"{eager * 1e3:.2f} ms ({per_agent / eager:.1f}x), stacked {stacked.compile_mode} "
        f"{auto * 1e3:.3f} ms ({per_agent / auto:.1f}x the loop) {stacked.notes or ''}",
        flush=True,
    )
    return row


# --- end to end -----------------------------------------------------------------------------------
def sb3_pace(window: float, device: str) -> dict:
    """SB3 DQN on Breakout at its Atari settings, env steps/s over ``window`` seconds
    after learning starts."""
    try:
        import gymnasium as gym
        from stable_baselines3 import DQN
        from stable_baselines3.common.atari_wrappers import AtariWrapper
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack
    except ImportError as e:
        return {"missing": str(e)}
    import ale_py

    gym.register_envs(ale_py)
    # frameskip 1: AtariWrapper skips 4 frames itself (the v5 id's own 4 would make 16);
    # sticky actions 0.25, the v5 id's, as shoal's preprocessing keeps them
    make = lambda: AtariWrapper(  # noqa: E731
        gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.25)
    )
    env = VecFrameStack(DummyVecEnv([make]), 4)

    class Pace(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start: tuple[float, int] | None = None
            self.pace = 0.0

        def _on_step(self) -> bool:
            if self.num_timesteps < 2_000:
                return True
            now = (time.perf_counter(), self.num_timesteps)
            if self.start is None:
                self.start = now
                return True
            elapsed = now[0] - self.start[0]
            self.pace = (now[1] - self.start[1]) / max(elapsed, 1e-9)
            return elapsed < window

    model = DQN(
        "CnnPolicy",
        env,
        buffer_size=100_000,
        learning_rate=1e-4,
        batch_size=32,
        learning_starts=2_000,
        target_update_interval=1000,
        train_freq=4,
        gradient_steps=1,
        exploration_fraction=0.0,
        exploration_initial_eps=0.01,
        exploration_final_eps=0.01,
        optimize_memory_usage=False,
        device=device,
        verbose=0,
    )
    pace = Pace()
    model.learn(total_timesteps=10_000_000, callback=pace)
    return {"steps_per_s": pace.pace}


def shoal_pace(runner: str, window: float, device: str) -> dict:
    """shoal's ``runner`` on the same settings: ``shoal bench``'s measured window."""
    from shoal.bench.windows import measure_window
    from shoal.config import load_config

    if runner == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            return {"missing": "ray is not installed on this machine"}
    cfg = load_config("atari", [*BREAKOUT, f"run.device='{device}'"])
    w = measure_window(cfg, runner, runner, [], window, 0.0)
    return {"steps_per_s": w.pace, "updates_per_s": w.updates_per_s, "startup_s": w.startup}


def check_e2e(window: float, device: str) -> dict:
    rows = {"sb3": sb3_pace(window, device)}
    print(f"e2e sb3 DQN: {rows['sb3']}", flush=True)
    base = rows["sb3"].get("steps_per_s")
    for runner, target in (("serial", 1.0), ("processes", 4.0), ("ray", 3.0)):
        try:
            rows[runner] = shoal_pace(runner, window, device)
        except Exception as e:  # one scheme's failure must not lose the others' figures
            rows[runner] = {"failed": f"{type(e).__name__}: {e}"}
        got = rows[runner].get("steps_per_s")
        ratio = f"{got / base:.2f}x SB3 (target >= {target}x)" if got and base else "n/a"
        print(f"e2e shoal {runner}: {rows[runner]}: {ratio}", flush=True)
    return rows


# --- where one preset's update spends its time -------------------------------------------------
def check_profile(device: torch.device, preset: str, updates: int = 50) -> dict:
    """The profiler's top operators (host and device time) over ``updates`` of the preset's
    update as ``auto`` runs it, and over as many replays of its floor: where a gap to the
    floor comes from."""
    from torch.profiler import ProfilerActivity, profile

    learner, batch, _ = shoal_learner(preset, str(device), "auto")
    from shoal.agent.late_priorities import LatePriorities

    late = LatePriorities.for_device(lambda key, td: None, device)
    dqn = preset in ("cartpole", "minatar-breakout", "atari")
    floor = _floor_call(preset, device, dqn)
    runs = {
        "auto": lambda: late.push(None, learner.update(batch).td_errors),
        "floor": floor,
    }
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out: dict[str, Any] = {"preset": preset, "updates": updates}
    for name, fn in runs.items():
        for _ in range(30):
            fn()
        sync(device)
        with profile(activities=activities) as prof:
            for _ in range(updates):
                fn()
            sync(device)
        key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        for sort in ("cpu_time_total", key):
            table = prof.key_averages().table(sort_by=sort, row_limit=18, max_name_column_width=60)
            print(f"profile {preset} {name}, by {sort}:\n{table}", flush=True)
            out[f"{name}_{sort}"] = table
    late.flush()
    return out


def _floor_call(preset: str, device: torch.device, dqn: bool) -> Callable[[], Any]:
    """One call of the preset's floor (see :func:`plain_dqn_floor`, :func:`bare_graph_floor`),
    built the same way, for the profiler."""
    from shoal.agent.update_steps import UpdateInput

    learner, batch, _ = shoal_learner(preset, str(device), "off")
    if dqn:
        raise ValueError("profile: the DQN presets' floor is timed by the update part")
    inputs = UpdateInput(batch, learner.draw_noise())
    body = lambda: learner.update_body(inputs)  # noqa: E731
    return capture(body) if device.type == "cuda" else body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--parts", default="update,stacked,e2e")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seconds", type=float, default=3.0, help="per update timing")
    ap.add_argument("--window", type=float, default=45.0, help="per end-to-end scheme")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--profile", default="iqn", help="preset of the 'profile' part (iqn, r2d2)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    print(
        f"gpu_check: {name}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
        f"python {platform.python_version()}",
        flush=True,
    )
    result: dict[str, Any] = {"device": name, "cores": os.cpu_count(), "torch": torch.__version__}
    parts = args.parts.split(",")
    t0 = time.perf_counter()
    checks = {
        "update": lambda: check_update(device, args.seconds),
        "stacked": lambda: check_stacked(device, args.seconds),
        "e2e": lambda: check_e2e(args.window, args.device),
        "profile": lambda: check_profile(device, args.profile),
    }
    for name in parts:
        try:
            result[name] = checks[name]()
        except Exception as e:  # keep going: the slot is short and the other parts count
            result[name] = {"failed": f"{type(e).__name__}: {e}"}
            print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
        save(result, args.out)
    result["wall_s"] = time.perf_counter() - t0
    save(result, args.out)
    print(f"gpu_check: {result['wall_s']:.0f} s", flush=True)
    return 0


def save(result: dict, out: str) -> None:
    """What has been measured so far, as JSON in ``out`` (after each part: a later part's
    failure or the slot's end keeps the earlier ones)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "gpu_check.json").write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
