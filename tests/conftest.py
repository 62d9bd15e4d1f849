"""Shared fixtures: tiny, fast configs for runner and CLI tests."""

from __future__ import annotations

import pytest


def tiny_overrides(tmp_path, **extra: object) -> list[str]:
    """Overrides that make a CartPole run take a second or two."""
    values = {
        "dqn.hidden": "[32]",
        "dqn.batch_size": 16,
        "run.total_steps": 600,
        "run.learning_starts": 100,
        "run.eval_every": 300,
        "run.eval_episodes": 2,
        "run.checkpoint_every": 200,
        "run.log_every": 100,
        "run.progress": "false",
        "run.stop_return": "none",
        "run.out": f"'{tmp_path}'",
        "env.max_episode_steps": 100,
    }
    values.update({k.replace("__", "."): v for k, v in extra.items()})
    return [f"{k}={v}" for k, v in values.items()]


@pytest.fixture
def tiny(tmp_path):
    """Factory for tiny-run overrides rooted at this test's tmp_path."""

    def make(**extra: object) -> list[str]:
        return tiny_overrides(tmp_path, **extra)

    return make


@pytest.fixture(scope="session", autouse=True)
def no_leaked_shared_memory():
    """No test may leave a shared-memory segment behind (checked once, at the end)."""
    import os

    def names() -> set[str]:
        return {n for n in os.listdir("/dev/shm") if n.startswith("shoal_")}

    before = names()
    yield
    leaked = names() - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
