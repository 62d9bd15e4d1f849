"""The agents runner's greedy evaluation during training: episodes of the world played side
by side in worlds of its own, every agent of every world in one forward per turn
(:func:`~shoal.runners.agents.epochs.greedy_agent_returns`); each agent's mean return is
kept for the eval row beside the collective one."""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.agent.stacked import StackedActor
from shoal.config import Config
from shoal.envs.parallel import MultiAgentSpec, make_parallel_env
from shoal.errors import ConfigError
from shoal.run.seeding import SeedStream, derive_seed
from shoal.runners.agents.epochs import greedy_agent_returns

__all__ = ["EVAL_WORLDS", "WorldsEvaluation"]

EVAL_WORLDS = 32
"""Most worlds an evaluation plays side by side."""


class WorldsEvaluation:
    """Collective greedy returns of ``run.eval_episodes`` episodes (by default
    ceil(20 / agents), at least 2: each gives every agent a return).

    Args:
        cfg: the run's config (the world, its agents and turns, the episodes).
        spec: the world's agents and shapes.
    """

    @staticmethod
    def check(cfg: Config) -> None:
        """Refuse an exploring evaluation: the agents are evaluated greedily."""
        if cfg.run.eval_epsilon > 0:
            raise ConfigError(
                f"config key 'run.eval_epsilon': {cfg.run.eval_epsilon}; the agents runner"
                " evaluates its agents greedily (leave it 0; shoal.play_run takes an epsilon)"
            )

    def __init__(self, cfg: Config, spec: MultiAgentSpec) -> None:
        self.cfg = cfg
        self.spec = spec
        self.envs: list[Any] | None = None
        """The worlds, made at the first evaluation (a run may never evaluate)."""
        self.agent_means: dict[str, float] = {}
        """The latest evaluation's mean return of each agent (``eval_return_AGENT``)."""

    def evaluate(self, actor: StackedActor, seed: int) -> np.ndarray:
        """One collective return per episode, greedy, episode i reset with a seed derived
        from ``seed`` and i."""
        episodes = self.cfg.run.episodes_per_eval(len(self.spec.agents))
        if self.envs is None:
            a = self.cfg.agents
            self.envs = [
                make_parallel_env(self.cfg.env, num_agents=a.agents, max_turns=a.max_turns)
                for _ in range(min(episodes, EVAL_WORLDS))
            ]
        seeds = [derive_seed(seed, SeedStream.EVAL, i) for i in range(episodes)]
        returns = greedy_agent_returns(self.cfg, self.envs, self.spec, actor, seeds)
        means = returns.mean(axis=0)
        self.agent_means = {f"eval_return_{a}": float(m) for a, m in zip(self.spec.agents, means)}
        return returns.sum(axis=1)

    def close(self) -> None:
        """Close the worlds; safe to call twice."""
        for env in self.envs or ():
            env.close()
        self.envs = None
