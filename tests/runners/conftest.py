"""Fixtures of the runner tests."""

import pytest


def on_ray(item: pytest.Item) -> bool:
    """A conformance case on the ray runner (its ``name`` parameter is ``ray`` or
    ``ray/...``)."""
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("name") if callspec is not None else None
    return isinstance(name, str) and name.split("/")[0] == "ray"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The conformance module's ray cases last in it: they share one local Ray (starting
    one per run cost ~5 s each), which then idles beside no other runner's runs."""
    conformance = [i for i in items if i.path.name == "test_conformance.py"]
    if not conformance:
        return
    first = items.index(conformance[0])
    ordered = [i for i in conformance if not on_ray(i)] + [i for i in conformance if on_ray(i)]
    rest = [i for i in items if i.path.name != "test_conformance.py"]
    items[:] = rest[:first] + ordered + rest[first:]


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
