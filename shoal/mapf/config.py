"""The ``[mapf]`` config section: the worlds a MAPF run trains in (curriculum), its
network and its sequences. The learner's settings (gamma, n-step, lr, batch, target) are
``[dqn]``'s, replay's are ``[replay]``'s, as for every run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from shoal.config import MAX_COUNT, MAX_STEPS, param
from shoal.errors import ConfigError

__all__ = ["MAPF_ID", "MapfConfig", "mapf_of"]

MAPF_ID = "shoal/Mapf-v0"
"""``env.id`` of multi-agent path finding (:class:`~shoal.envs.mapf.MapfEnv`)."""
MAX_SIDE = 4096
"""Largest map side (or view): 4x MovingAI's largest benchmark maps (1024 x 1024)."""


@dataclass
class MapfConfig:
    """Multi-agent path finding: curriculum, network and sequences (env.id shoal/Mapf-v0)."""

    CHANGED_DEFAULTS: ClassVar[dict[str, tuple[int, Any]]] = {"shield_guide": (2, 0.0)}
    """Defaults changed since runs were first saved: key -> (the
    :data:`~shoal.config.CONFIG_VERSION` that changed it, the old default). A run saved
    before with the old default is read with today's (:func:`~shoal.config.load_run_config`)."""

    agents: int = param(1, gt=0, le=MAX_COUNT)
    """Agents of the curriculum's first stage."""
    size: int = param(10, ge=2, le=MAX_SIDE)
    """Map side of the first stage."""
    max_agents: int = param(8, gt=0, le=MAX_COUNT)
    """Most agents any stage has (replay items are padded to this many)."""
    max_size: int = param(20, ge=2, le=MAX_SIDE)
    """Largest map side any stage has."""
    size_step: int = param(5, gt=0, le=MAX_SIDE)
    """How much a promoted stage's map grows."""
    promote_episodes: int = param(200, gt=0, le=MAX_STEPS)
    """Episodes of a stage before it may be promoted (its success is over the last this many)."""
    promote_success: float = param(0.9, gt=0.0, le=1.0)
    """Success rate over those episodes that promotes a stage: it adds a stage with one
    agent more and one with a map ``size_step`` larger (DHC's curriculum)."""
    frontier: float = param(0.0, ge=0.0, le=1.0)
    """Share of episodes drawn among the open stages not yet promoted (the rest uniformly
    among all open stages; 0: DHC's uniform draws)."""
    density: float | None = param(None, ge=0.0, lt=1.0)
    """Obstacle density of training maps (none: drawn per episode from triangular(0, 0.33,
    0.5), as DHC trains)."""
    fov: int = param(9, gt=0, le=MAX_SIDE)
    """Side of each agent's square view (odd)."""
    k_comm: int = param(3, gt=0, le=MAX_COUNT)
    """Most agents, self included, each agent talks to."""
    stay_off_goal: float = param(-0.075, le=0.0)
    """Reward of an agent's step off its goal without a move (DHC: -0.075, the same as a
    move). Lower makes idling cost more than moving (PRIMAL's rewards do): with equal
    costs, a greedy agent far from its goal loses almost nothing by waiting one more
    step, so errors of a few hundredths in Q freeze whole teams."""
    max_steps: int = param(256, gt=0, le=MAX_STEPS)
    """Steps before an episode is cut (success is all agents on goal before it)."""
    shield: str = param("none", choices=("none", "pibt"))
    """Actors and evaluations act through the PIBT shield (:mod:`shoal.mapf.pibt`): each
    agent's Q-values rank its moves (an exploring agent's at random) and one PIBT step picks
    the joint move, so replay holds the states shielded play visits. none: each agent its
    own argmax (or random move)."""
    shield_guide: float = param(3.0, ge=0.0, le=1000.0)
    """With the shield, each agent's Q-values minus this weight times the distance each move
    leaves to its goal rank its moves (:mod:`shoal.mapf.guide`; in reward per cell, DHC
    charges 0.075 a step): the distance settles what the Q-values get badly wrong, the
    Q-values order moves of equal distance. 3 was chosen on a development set
    (benchmarks/RESULTS.md, "MAPF"); 0: the Q-values alone; at most 1000, where the distance
    alone ranks the moves already."""
    envs: int = param(16, gt=0, le=MAX_COUNT)
    """Worlds each player steps together (one batched forward for all their agents)."""
    channels: int = param(16, gt=0, le=MAX_COUNT)
    """Convolution channels of the encoder."""
    blocks: int = param(1, ge=0, le=MAX_COUNT)
    """Residual blocks of the encoder."""
    hidden: int = param(64, gt=0, le=MAX_COUNT)
    """Memory (GRU) and message size."""
    heads: int = param(4, gt=0, le=MAX_COUNT)
    """Attention heads (divide hidden)."""
    rounds: int = param(2, ge=0, le=MAX_COUNT)
    """Communication rounds per step."""
    eval_agents: list[int] = param([4, 8], gt=0, le=MAX_COUNT)
    """Agents of each evaluation target (held-out generated maps)."""
    eval_sizes: list[int] = param([10, 20], ge=2, le=MAX_SIDE)
    """Map side of each evaluation target."""
    eval_density: list[float] = param([0.1, 0.3], ge=0.0, lt=1.0)
    """Range of the evaluation maps' obstacle densities (drawn uniformly per instance)."""

    def check(self, cfg: Any) -> None:
        """Reject settings that cannot work together, before any work starts (only in a
        MAPF run: other runs ignore the section)."""
        if cfg.env.id != MAPF_ID:
            return
        rules = [
            ("mapf.fov", self.fov, self.fov % 2 == 1, "an odd number"),
            ("mapf.max_agents", self.max_agents, self.max_agents >= self.agents, ">= mapf.agents"),
            ("mapf.max_size", self.max_size, self.max_size >= self.size, ">= mapf.size"),
            ("mapf.hidden", self.hidden, self.hidden % self.heads == 0, "a multiple of heads"),
            (
                "mapf.eval_sizes",
                self.eval_sizes,
                len(self.eval_sizes) == len(self.eval_agents),
                "one size per entry of mapf.eval_agents",
            ),
            (
                "mapf.eval_density",
                self.eval_density,
                len(self.eval_density) == 2 and self.eval_density[0] <= self.eval_density[1],
                "[low, high]",
            ),
        ]
        for key, value, ok, allowed in rules:
            if not ok:
                raise ConfigError(
                    f"config key '{key}': {value!r} is not allowed; it must be {allowed}"
                )


def mapf_of(cfg: Any) -> MapfConfig:
    """The config's ``[mapf]`` section, typed (the registry keeps plug-in sections in
    ``cfg.extra``, which a type checker cannot see into)."""
    section = cfg.extra["mapf"]
    assert isinstance(section, MapfConfig)
    return section
