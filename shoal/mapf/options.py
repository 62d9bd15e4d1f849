"""``shoal mapf eval``'s options, declared once: the parser, the command
(:func:`~shoal.mapf.evaluate.eval_command`) and ``benchmarks/mapf_learning.py`` read these
fields. A module of its own so the parser imports nothing of the evaluation."""

from __future__ import annotations

import dataclasses

from shoal.options import option, positive_int

__all__ = ["MapfEvalOptions"]


@dataclasses.dataclass
class MapfEvalOptions:
    """``shoal mapf eval``'s options: the parser, :func:`eval_command` and
    ``benchmarks/mapf_learning.py`` read these fields."""

    run_dir: str = option(metavar="RUN_DIR", positional=True)
    """A MAPF training run directory, or - for the shortest-path baseline alone."""
    agents: int = option(metavar="N", type=positive_int)
    """Agents in each instance."""
    map: str | None = option(None, metavar="FILE.map")
    """A MovingAI map (with --scen); or --generate."""
    scen: list[str] = option([], metavar="FILE.scen")
    """MovingAI scenarios, one instance each: its first N entries are the agents."""
    generate: bool = False
    """Generated maps (with --size); or --map."""
    size: int | None = option(None, metavar="S", type=positive_int)
    """Side of generated maps."""
    density: list[float] | None = option(None, metavar="D")
    """Obstacle density of generated maps, or a LO HI range (default 0.1 0.3)."""
    instances: int | None = option(None, metavar="N", type=positive_int)
    """Generated instances (default 100)."""
    max_steps: int = option(256, metavar="N", type=positive_int)
    """Step cap of every episode."""
    seed: int = 0
    """Seed of generated instances."""
    gif: str | None = option(None, metavar="FILE.gif|FILE.png")
    """Animate the first policy on the first instance (.png: a strip of frames)."""
    out: str | None = option(None, metavar="FILE.json")
    """Write the report as JSON."""
    no_baselines: bool = False
    """Only the run's policy (no ablation, no baseline)."""
    shield: str | None = option(None, choices=("pibt", "lacam"))
    """Also play every policy through a collision shield: pibt (each agent's ranking of
    its moves, from the policy's scores, as PIBT's preferences) or lacam (LaCAM's search
    with those PIBT steps, for completeness)."""
    shield_guide: float | None = option(None, metavar="W")
    """With --shield, the learned policies' Q-values minus W times the distance each move
    leaves to the goal rank the moves (W in reward per cell, DHC charges 0.075 a step;
    0: the Q-values alone; default: the run's mapf.shield_guide)."""
    checkpoint: str = option("best", choices=("best", "latest"))
    """The run's weights: best (picked by its evaluations) or latest."""
    epsilon: float = option(0.0, metavar="E")
    """Each agent's move is random with probability E, for every policy alike (breaks
    deterministic deadlocks; 0: greedy)."""
    unstick: int = option(0, metavar="N")
    """An agent off its goal that has stood still for N steps acts at random until it
    moves, for every policy alike (0: never)."""
