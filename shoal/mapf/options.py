"""``shoal mapf eval``'s options, declared once: the parser, the command
(:func:`~shoal.mapf.evaluate.eval_command`) and ``benchmarks/mapf_learning.py`` read these
fields. A module of its own so the parser imports nothing of the evaluation."""

from __future__ import annotations

import dataclasses
import numbers

from shoal.errors import ConfigError
from shoal.options import option, positive_int

__all__ = [
    "MAX_AGENT_CELLS",
    "MAX_INSTANCES",
    "MAX_MAP_CELLS",
    "MAX_SIZE",
    "MIN_SIZE",
    "MapfEvalOptions",
    "check_generation",
]

# Bounds of generated instances, checked before anything is generated: without them
# ``--size 100000`` asks numpy for a 10**10-cell map (80 GB of random floats) and dies with
# a MemoryError or the OOM killer long after the command started. Each is generous for
# real use: learned MAPF policies are evaluated on generated maps of tens of cells a side
# (DHC: 40 and 80) and MovingAI's benchmark maps are at most a few hundred, with tens to
# a few thousand agents; the default is 100 instances.
MIN_SIZE = 2
"""Smallest side of a generated map (a 1 x 1 map has no room for a start and a goal)."""
MAX_SIZE = 1024
"""Largest side of a generated map: 2**20 cells; generating one takes about 2.5 s on one
core (its connected components are labelled cell by cell), and every episode's env labels
and searches it again."""
MAX_AGENT_CELLS = 2**27
"""Most agents x cells of a generated map. Every env holds one BFS distance map and four
heuristic maps per agent, about 18 bytes per agent and cell at their peak: 2**27 is about
2.4 GB (128 agents at size 1024, 2048 agents at size 256, 8192 at size 128)."""
MAX_INSTANCES = 10_000
"""Most generated instances (default 100); they are all built before the first is played."""
MAX_MAP_CELLS = 2**30
"""Most instances x cells: the instances' bool maps are all held at once, 1 byte a cell, so
at most 1 GiB (1024 instances at size 1024, the full 10000 up to size 327)."""


@dataclasses.dataclass
class MapfEvalOptions:
    """``shoal mapf eval``'s options: the parser, :func:`eval_command` and
    ``benchmarks/mapf_learning.py`` read these fields."""

    run_dir: str = option(metavar="RUN_DIR", positional=True)
    """A MAPF training run directory, or - for the shortest-path baseline alone."""
    agents: int = option(metavar="N", type=positive_int)
    """Agents in each instance (generated: at most one per cell, and agents x size x size
    at most 2**27)."""
    map: str | None = option(None, metavar="FILE.map")
    """A MovingAI map (with --scen); or --generate."""
    scen: list[str] = option([], metavar="FILE.scen")
    """MovingAI scenarios, one instance each: its first N entries are the agents."""
    generate: bool = False
    """Generated maps (with --size); or --map."""
    size: int | None = option(None, metavar="S", type=positive_int)
    """Side of generated maps, 2..1024."""
    density: list[float] | None = option(None, metavar="D")
    """Obstacle density of generated maps, or a LO HI range (default 0.1 0.3)."""
    instances: int | None = option(None, metavar="N", type=positive_int)
    """Generated instances, 1..10000 and instances x size x size at most 2**30 (default
    100)."""
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
    with those PIBT steps, for completeness); default: the run's mapf.shield."""
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
    trust_code: bool = False
    """Run code the run's config names (its env's modules, a network factory, a recipe);
    without it such a run is refused, as a received run should be."""


def _is_int(value: object) -> bool:
    """A whole number (numpy's too), not a bool (``True`` is an int to Python, never a
    size to us)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_generation(agents: int, size: int, instances: int) -> None:
    """Raise :class:`~shoal.errors.ConfigError` unless ``instances`` generated maps of
    ``size`` x ``size`` cells with ``agents`` agents each are within the bounds above
    (:data:`MIN_SIZE`..:data:`MAX_SIZE`, :data:`MAX_AGENT_CELLS`, :data:`MAX_INSTANCES`,
    :data:`MAX_MAP_CELLS`): a cheap check, before any map is generated, so that an
    impossible request fails at once with a message rather than exhausting memory."""
    for name, value in (("agents", agents), ("size", size), ("instances", instances)):
        if not _is_int(value):
            raise ConfigError(f"mapf {name}: {value!r} is not a whole number")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ConfigError(
            f"mapf size: {size} is out of range; allowed: {MIN_SIZE}..{MAX_SIZE} (the side of a"
            " generated square map)"
        )
    cells = size * size
    if not 1 <= agents <= cells:
        raise ConfigError(
            f"mapf agents: {agents} is out of range for {size} x {size} maps; allowed:"
            f" 1..{cells} (one cell each at most)"
        )
    if agents * cells > MAX_AGENT_CELLS:
        raise ConfigError(
            f"mapf agents: {agents} agents on {size} x {size} maps are {agents * cells} agent"
            f" cells of per-agent distance maps; allowed: agents x size x size <="
            f" {MAX_AGENT_CELLS} (at most {MAX_AGENT_CELLS // cells} agents at size {size})"
        )
    if not 1 <= instances <= MAX_INSTANCES:
        raise ConfigError(
            f"mapf instances: {instances} is out of range; allowed: 1..{MAX_INSTANCES}"
        )
    if instances * cells > MAX_MAP_CELLS:
        raise ConfigError(
            f"mapf instances: {instances} maps of {size} x {size} are {instances * cells}"
            f" cells held at once; allowed: instances x size x size <= {MAX_MAP_CELLS} (at"
            f" most {MAX_MAP_CELLS // cells} instances at size {size})"
        )
