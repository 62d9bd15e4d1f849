"""Fixtures of the runner tests."""

import pytest


@pytest.fixture
def harvest(tiny):
    """Overrides for a small harvest run of the agents runner: 3 agents, 60-turn epochs,
    600 turns; keyword arguments as for ``tiny``."""

    def make(**extra: object) -> list[str]:
        return [
            "run.runner=agents",
            "env.id='shoal/Harvest-v0'",
            "agents.agents=3",
            "agents.max_turns=60",
            *tiny(**{"run__total_steps": 600, "run__learning_starts": 120, **extra}),
        ]

    return make
