"""MAPF learning: the trained communicating agents against shortest-path agents and against
themselves with communication off, on held-out generated instances.

Trains the ``mapf`` preset (Ape-X on Ray, DHC's curriculum) for ``--minutes`` of wall
clock on this machine, or takes an existing run (``--run-dir``), then plays the same
held-out instances (generated maps, obstacle density drawn from [0.1, 0.3], instance seeds
training never uses) with three policies: the run's best weights, the same weights with
communication masked off, and independent shortest-path agents that wait on conflicts.
The baselines PIBT and LaCAM play too, and with ``--shield pibt|lacam`` every policy also
plays shielded (``--shield-guide W``: the learned policies' Q-values minus W times the
distance rank their moves); ``--maps`` adds the MovingAI maps of ``benchmarks/data/movingai``
at 8, 16, 32 and 64 agents. Each shielded learned policy is also set against PIBT alone:
instances each solved, and the mean sum of costs of both on the instances both solved.
Prints, per target (4 agents on 10x10, 8 on 20x20, and 16 on 40x40 for
generalisation), solved counts, success rates, makespan and sum of costs over the
instances all solved, the ratios of success rates, the training's wall time and steps, and
the machine.

Usage::

    python benchmarks/mapf_learning.py                        # train 60 minutes, evaluate
    python benchmarks/mapf_learning.py --run-dir runs/mapf-X  # evaluate a finished run
    python benchmarks/mapf_learning.py --minutes 10 --set run.runner=serial
    python benchmarks/mapf_learning.py --run-dir runs/mapf-X --shield pibt --maps
    python benchmarks/mapf_learning.py --run-dir runs/mapf-X --shield pibt --shield-guide 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import shoal
from shoal.config import load_config
from shoal.mapf.evaluate import EvalReport, eval_command
from shoal.mapf.options import MapfEvalOptions
from shoal.options import add_options, parse_options
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

TARGETS = ((4, 10), (8, 20), (16, 40))
"""(agents, map side) of the held-out evaluations; the last one is generalisation."""
MAPS = Path(__file__).parent / "data" / "movingai"
BENCHMARK_MAPS = ("random-32-32-10", "random-32-32-20", "room-32-32-4", "maze-32-32-2")
"""MovingAI maps played with ``--maps`` (each with its first scenario)."""
MAP_AGENTS = (8, 16, 32, 64)
SHARED = (
    "instances",
    "seed",
    "checkpoint",
    "epsilon",
    "unstick",
    "density",
    "max_steps",
    "shield",
    "shield_guide",
)
"""``shoal mapf eval``'s options this benchmark takes, with the same meaning."""


def train(minutes: float, overrides: list[str], out: Path) -> Path:
    """Train the preset for ``minutes`` into ``out``; returns the run directory."""
    run_dir = out / "mapf-bench"
    over = [f"run.max_minutes={minutes}", "run.progress=false", *overrides]
    shoal.train("mapf", overrides=over, run_dir=run_dir)
    return run_dir


def run_facts(run_dir: Path) -> dict[str, Any]:
    """Training wall time, env steps, updates and the curriculum's stages at the end."""
    state = load_checkpoint(RunDir.open(run_dir).checkpoint)
    loop = state["loop"]
    return {
        "wall_minutes": round(loop["wall"] / 60, 1),
        "world_steps": loop["step"],
        "updates": state["learner"]["updates"],
        "stages": [tuple(s) for s in state["curriculum"]["stages"]],
        "runner": load_config(RunDir.open(run_dir).config).run.runner,
    }


def compare(opts: MapfEvalOptions, run_dir: Path, agents: int, size: int) -> EvalReport:
    """The three policies on the same held-out generated instances of one target, as
    ``shoal mapf eval RUN_DIR --generate`` plays them with the same options."""
    return eval_command(
        dataclasses.replace(opts, run_dir=str(run_dir), agents=agents, size=size, generate=True)
    )


def on_map(opts: MapfEvalOptions, run_dir: Path, name: str, agents: int) -> EvalReport:
    """Every policy on one MovingAI map with the first ``agents`` of its first scenario."""
    scen = [str(MAPS / f"{name}-random-1.scen")]
    return eval_command(
        dataclasses.replace(
            opts,
            run_dir=str(run_dir),
            agents=agents,
            map=str(MAPS / f"{name}.map"),
            scen=scen,
            generate=False,
            instances=None,
            density=None,
        )
    )


def show(title: str, report: EvalReport) -> dict[str, Any]:
    """Print one target's lines; returns them as a dict."""
    rows = {s.name: s for s in report.summaries}
    ours, blind, path = rows["shoal"], rows["no-comm"], rows["shortest-path"]
    print(f"\n{title}, {ours.instances} held-out instances")
    for s in report.summaries:
        print(
            f"  {s.name:14s} solved {s.solved:3d}/{s.instances}  success {s.success_rate:6.1%}"
            f"  makespan/SoC on all-solved {_fmt(s.common_makespan)}/{_fmt(s.common_sum_of_costs)}"
            f"  ({len(report.common)} instances)  stalled {s.stalled:3d}  {s.wall_seconds:6.1f} s"
        )
    ratios = {
        "vs_shortest_path": _ratio(ours.success_rate, path.success_rate),
        "vs_no_comm": _ratio(ours.success_rate, blind.success_rate),
        "vs_pibt": _ratio(ours.success_rate, rows["pibt"].success_rate),
    }
    print(
        f"  success ratio: shoal / shortest-path = {_fmt(ratios['vs_shortest_path'])}, "
        f"shoal / no-comm = {_fmt(ratios['vs_no_comm'])}, shoal / pibt = {_fmt(ratios['vs_pibt'])}"
    )
    # the shielded copies (NAME+pibt, NAME+lacam): only the learned policies get one
    against = {name: against_pibt(report, name) for name in rows if "+" in name}
    for name, pair in against.items():
        print(
            f"  {name} vs pibt: solved {pair['solved']} vs {pair['pibt_solved']}; sum of costs"
            f" on the {pair['both']} both solve {_fmt(pair['soc'])} vs {_fmt(pair['pibt_soc'])}"
            f" (ratio {_fmt(pair['soc_ratio'])})"
        )
    return {
        "target": title,
        "policies": {s.name: s.__dict__ for s in report.summaries},
        "ratios": ratios,
        "against_pibt": against,
    }


def against_pibt(report: EvalReport, name: str) -> dict[str, Any]:
    """A shielded policy against PIBT: instances each solved, and the mean sum of costs of
    each on the instances both solved (the issue's sum-of-costs must-show)."""
    ours, pibt = report.episodes[name], report.episodes["pibt"]
    both = [i for i, (a, b) in enumerate(zip(ours, pibt)) if a.success and b.success]
    soc = sum(ours[i].sum_of_costs or 0 for i in both) / len(both) if both else None
    pibt_soc = sum(pibt[i].sum_of_costs or 0 for i in both) / len(both) if both else None
    return {
        "solved": sum(e.success for e in ours),
        "pibt_solved": sum(e.success for e in pibt),
        "both": len(both),
        "soc": soc,
        "pibt_soc": pibt_soc,
        "soc_ratio": None if not both or not pibt_soc else soc / pibt_soc,
    }


def _ratio(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    """Train (or open) a run, evaluate it on every target, print and optionally save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="evaluate this run instead of training")
    parser.add_argument("--minutes", type=float, default=60.0, help="training budget")
    parser.add_argument("--set", action="append", default=[], help="config overrides")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--maps", action="store_true", help="also the MovingAI maps (benchmarks/data/movingai)"
    )
    add_options(parser, MapfEvalOptions, only=SHARED, defaults={"instances": 100})
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}")
    run_dir = args.run_dir
    if run_dir is None:
        run_dir = train(args.minutes, args.set, Path(tempfile.mkdtemp(prefix="shoal-mapf-")))
    facts = run_facts(run_dir)
    print(f"run {run_dir}: {facts}")
    print(
        f"weights: {args.checkpoint}; random moves per agent and step: {args.epsilon:g};"
        f" unstick after {args.unstick} still steps (0: never)"
    )
    opts = parse_options(MapfEvalOptions, args, run_dir=str(run_dir), agents=1)
    noise = {"epsilon": opts.epsilon, "unstick": opts.unstick}
    results = [show(f"{a} agents on {s}x{s}", compare(opts, run_dir, a, s)) for a, s in TARGETS]
    if args.maps:
        for name in BENCHMARK_MAPS:
            for n in MAP_AGENTS:
                results.append(show(f"{name}, {n} agents", on_map(opts, run_dir, name, n)))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "run": facts,
                    "checkpoint": args.checkpoint,
                    **noise,
                    "targets": results,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
