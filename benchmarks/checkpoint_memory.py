"""Checkpoint memory: the resident-memory peak and the time of writing and reading a
checkpoint that holds a full replay buffer, the old way against the new (issue 32).

The replay is shoal's own :class:`~shoal.replay.buffer.ReplayBuffer` with the DQN runner's
fields (``build_replay`` of ``transition_fields``: obs, action, reward, next_obs, discount)
for the ``cartpole`` preset's env (``probe_env``; obs 4 floats, 48 bytes a transition),
filled with ``--transitions`` (1M) random transitions; ``--obs-dim`` widens the obs. A
second case, ``--wide-obs-dim`` (1000 floats, image-like) at ``--wide-transitions``
(50k), shows the same on larger items (``--wide-obs-dim 0`` skips it). The state saved is
what the run loop writes, less the small parts: ``{"config", "loop", "replay":
buffer.state_dict()}``, built inside the measured call as the run loop builds it.

- old: ``torch.save({"format": "shoal-checkpoint-v2", **state}, f)`` through
  ``atomic_write`` (the code before v3): the numpy arrays are pickled, each copied into a
  bytes object and then into the pickle stream, which torch builds whole in memory before
  writing it (and at torch's pickle protocol 2 a bytes object goes as a latin-1 string:
  random bytes take about 1.5x in the stream and the file); read back with
  ``torch.load(weights_only=False)``.
- new: ``shoal.run.checkpoint.save_checkpoint`` (``to_plain`` turns the arrays into tagged
  tensors sharing their memory, which ``torch.save`` writes from storage); read back with
  ``load_checkpoint`` (``weights_only=True``, layout check, arrays again).
- ``buffer.state_dict()`` alone: the copy of the valid items both ways make first.

Every measurement is a fresh subprocess, so that no peak of one shows in another: it fills
the replay (in chunks of 64 MiB, so filling leaves no peak above the buffer), collects
garbage, resets the process's peak resident size (``VmHWM``, by writing 5 to
``/proc/self/clear_refs``), reads ``VmRSS``, runs the one call, and reports ``VmHWM`` less
that ``VmRSS``: the extra peak above what the process held before, also as a ratio to the
replay's size. A load's peak includes the loaded state itself (1x). Files go to a
temporary directory (``--dir``), removed at the end; their sizes are reported. Old and new
run one after another in the same run, so the old / new ratios are side by side; seconds
include the fsync and depend on the disk and on other work. About 1.5 minutes on 2 cores;
the wide case's old save peaks at about 3.5 GiB resident (buffer included), the rest at
under 1 GiB.

Usage:
    python benchmarks/checkpoint_memory.py [--transitions 1000000] [--obs-dim D]
        [--wide-obs-dim 1000] [--wide-transitions 50000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from shoal.config import Config
    from shoal.replay.buffer import ReplayBuffer

MIB = 2**20
OLD_FORMAT = "shoal-checkpoint-v2"
FILL_CHUNK_BYTES = 64 * MIB
PHASES = ("state-dict", "save-old", "load-old", "save-new", "load-new")


@dataclasses.dataclass(frozen=True)
class Case:
    """One replay to checkpoint: its label, obs width (None: the env's) and item count."""

    label: str
    obs_dim: int | None
    transitions: int


# --- measuring, in the child process -------------------------------------------------------


def proc_status(key: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current ``VmRSS``; False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def measure(call: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
    """Run ``call`` once: seconds, and its peak resident memory above what was held before
    (``peak_reset`` False: ``VmHWM`` could not be reset, the peak may be an earlier one);
    and what it returned."""
    gc.collect()
    reset = reset_peak()
    before = proc_status("VmRSS")
    t0 = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - t0
    peak = proc_status("VmHWM")
    figures = {"extra": peak - before, "seconds": seconds, "held": before, "peak_reset": reset}
    return figures, result


def build_filled(obs_dim: int | None, transitions: int) -> tuple[Config, ReplayBuffer]:
    """The cartpole preset's config and its DQN replay (capacity ``transitions``, obs
    ``obs_dim`` floats or the env's), filled with random transitions."""
    from shoal.agent.builder import build_replay
    from shoal.config import load_config
    from shoal.envs import probe_env

    cfg = load_config("cartpole", overrides=[f"replay.capacity={transitions}"])
    spec = probe_env(cfg.env)
    if obs_dim is not None:
        spec = dataclasses.replace(spec, obs_dim=obs_dim)
    buffer = build_replay(cfg, spec)
    rng = np.random.default_rng(0)
    chunk = max(1, FILL_CHUNK_BYTES // item_bytes(buffer.specs))
    for start in range(0, transitions, chunk):
        k = min(chunk, transitions - start)
        batch = {}
        for name, (shape, dtype) in buffer.specs.items():
            if np.issubdtype(dtype, np.floating):
                batch[name] = rng.standard_normal((k, *shape), dtype=np.float32).astype(dtype)
            else:
                batch[name] = rng.integers(0, spec.n_actions, (k, *shape)).astype(dtype)
        buffer.add_batch(batch)
        del batch
    assert len(buffer) == transitions
    return cfg, buffer


def item_bytes(specs: dict[str, tuple[tuple[int, ...], np.dtype]]) -> int:
    """Bytes of one stored item over all fields."""
    return sum(
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize for shape, dt in specs.values()
    )


def run_phase(phase: str, path: Path, obs_dim: int | None, transitions: int) -> dict[str, Any]:
    """One measurement (``PHASES``), in this (fresh) process."""
    import torch

    from shoal.config import config_to_dict
    from shoal.run.checkpoint import load_checkpoint, save_checkpoint
    from shoal.run.files import atomic_write

    if phase.startswith("load"):
        if phase == "load-old":
            out, state = measure(lambda: torch.load(path, map_location="cpu", weights_only=False))
        else:
            out, state = measure(lambda: load_checkpoint(path))
        obs = state["replay"]["storage"]["fields"]["obs"]  # both ways give numpy arrays back
        assert isinstance(obs, np.ndarray) and obs.shape[0] == transitions, type(obs)
        return out

    cfg, buffer = build_filled(obs_dim, transitions)

    def state() -> dict[str, Any]:
        return {
            "config": config_to_dict(cfg),
            "loop": {"step": transitions},
            "replay": buffer.state_dict(),
        }

    def save_old() -> None:
        atomic_write(path, lambda f: torch.save({"format": OLD_FORMAT, **state()}, f))

    calls: dict[str, Callable[[], Any]] = {
        "state-dict": buffer.state_dict,
        "save-old": save_old,
        "save-new": lambda: save_checkpoint(path, state()),
    }
    out, _ = measure(calls[phase])
    out["replay_bytes"] = item_bytes(buffer.specs) * transitions
    if phase != "state-dict":
        out["file_bytes"] = path.stat().st_size
    return out


# --- the parent: one subprocess per measurement, the table ---------------------------------


def child(phase: str, path: Path, case: Case) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; its figures (the last line it prints)."""
    cmd = [sys.executable, __file__, "--phase", phase, "--path", str(path)]
    cmd += ["--transitions", str(case.transitions)]
    if case.obs_dim is not None:
        cmd += ["--obs-dim", str(case.obs_dim)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_case(case: Case, tmp: Path) -> dict[str, dict[str, Any]]:
    """All phases of one case, old and new one after another, files removed after use."""
    results: dict[str, dict[str, Any]] = {}
    for phase in PHASES:
        way = phase.split("-")[1]
        path = tmp / f"{way}.pt"
        results[phase] = child(phase, path, case)
        if phase.startswith("load"):
            path.unlink()
        print(f"  {case.label}: {phase} done", file=sys.stderr, flush=True)
    return results


def machine() -> str:
    """Cores, total memory and versions."""
    import torch

    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    return (
        f"{os.cpu_count()} CPUs (os.cpu_count), {total / 2**30:.1f} GiB memory (MemTotal), "
        f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"numpy {np.__version__}"
    )


def report(cases: list[Case], results: list[dict[str, dict[str, Any]]]) -> None:
    """The table, the side-by-side ratios and the machine."""
    head = (
        "| case | way | replay MiB | save peak extra MiB | x replay | save s "
        "| load peak extra MiB | x replay | load s | file MiB |"
    )
    print(head)
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ways = (
        ("old: torch.save, numpy pickled", "save-old", "load-old"),
        ("new: save_checkpoint, tensors", "save-new", "load-new"),
        ("replay.state_dict() alone", "state-dict", None),
    )
    for case, res in zip(cases, results, strict=True):
        replay = res["save-new"]["replay_bytes"]
        for name, save, load in ways:
            s = res[save]
            cells = [
                case.label,
                name,
                f"{replay / MIB:,.1f}",
                f"{s['extra'] / MIB:,.1f}",
                f"{s['extra'] / replay:.2f}",
                f"{s['seconds']:.2f}",
            ]
            if load is None:
                cells += ["", "", "", ""]
            else:
                ld = res[load]
                cells += [
                    f"{ld['extra'] / MIB:,.1f}",
                    f"{ld['extra'] / replay:.2f}",
                    f"{ld['seconds']:.2f}",
                    f"{s['file_bytes'] / MIB:,.1f}",
                ]
            print("| " + " | ".join(cells) + " |")
    print()
    for case, res in zip(cases, results, strict=True):
        old, new = res["save-old"], res["save-new"]
        lo, ln = res["load-old"], res["load-new"]
        print(
            f"{case.label}: replay {res['save-new']['replay_bytes']:,} bytes; save peak old / new "
            f"{old['extra'] / new['extra']:.2f}x, save time old / new "
            f"{old['seconds'] / new['seconds']:.2f}x; load peak old / new "
            f"{lo['extra'] / ln['extra']:.2f}x, load time old / new "
            f"{lo['seconds'] / ln['seconds']:.2f}x"
        )
    resets = {r["peak_reset"] for res in results for r in res.values()}
    how = "VmHWM reset before each call" if resets == {True} else "VmHWM NOT reset (no clear_refs)"
    print(f"machine: {machine()}; peaks: {how}, one fresh process per call")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transitions", type=int, default=1_000_000, help="items in the replay")
    p.add_argument("--obs-dim", type=int, default=None, help="obs floats (default: the env's)")
    p.add_argument("--wide-obs-dim", type=int, default=1000, help="second case's obs; 0 skips")
    p.add_argument("--wide-transitions", type=int, default=50_000, help="second case's items")
    p.add_argument("--dir", type=Path, default=None, help="where the files go (a temp dir in it)")
    p.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    p.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:  # a child: one measurement
        out = run_phase(args.phase, args.path, args.obs_dim, args.transitions)
        print(json.dumps(out))
        return

    if args.obs_dim is None:
        from shoal.config import load_config
        from shoal.envs import probe_env

        obs = f"CartPole, obs {probe_env(load_config('cartpole').env).obs_dim}"
    else:
        obs = f"obs {args.obs_dim}"
    cases = [Case(f"{obs}, {args.transitions:,} items", args.obs_dim, args.transitions)]
    if args.wide_obs_dim > 0:
        label = f"obs {args.wide_obs_dim}, {args.wide_transitions:,} items"
        cases.append(Case(label, args.wide_obs_dim, args.wide_transitions))
    tmp = Path(tempfile.mkdtemp(prefix="shoal-ckpt-mem-", dir=args.dir))
    try:
        results = [run_case(case, tmp) for case in cases]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(cases, results)


if __name__ == "__main__":
    main()
