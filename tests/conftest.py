"""Shared fixtures: tiny, fast configs for runner and CLI tests; shared-memory leak checks."""

from __future__ import annotations

import os

import pytest


def tiny_overrides(tmp_path, **extra: object) -> list[str]:
    """Overrides that make a CartPole run take a second or two."""
    values = {
        "dqn.hidden": "[32]",
        "dqn.batch_size": 16,
        "run.total_steps": 600,
        "run.learning_starts": 100,
        "run.train_freq": 4,  # the tiny runs' update count, whatever the default
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


def _shm_names() -> set[str]:
    """shoal's segments that this test run could have made: not those of another live
    process on the machine (a second test run, a user's training), whose creator's pid is
    in the name."""
    from shoal.sync.segments import pid_alive

    names = set()
    for name in os.listdir("/dev/shm"):
        pid = name.split("_")[-2] if name.startswith("shoal_") and name.count("_") >= 3 else ""
        if not pid.isdigit():
            continue
        if pid_alive(int(pid)) and not _descends_from_us(int(pid)):
            continue
        names.add(name)
    return names


def _descends_from_us(pid: int) -> bool:
    """Whether ``pid`` is this process or one it started (through any chain)."""
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            return False
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return False


@pytest.fixture
def shm_names():
    """A function returning the names of shoal's shared-memory segments right now."""
    return _shm_names


@pytest.fixture
def no_shm_leak():
    """This test leaves no shared-memory segment behind (modules that create segments use
    it on every test, so a leak fails the test that caused it)."""
    before = _shm_names()
    yield
    assert _shm_names() - before == set(), "a test leaked a shared-memory segment"


@pytest.fixture(scope="session", autouse=True)
def no_leaked_shared_memory():
    """No test may leave a shared-memory segment behind (checked once, at the end)."""
    before = _shm_names()
    yield
    leaked = _shm_names() - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray for a module's tests (starting one costs seconds; it is gone before
    other modules' timing-sensitive runs), on a loopback address other than 127.0.0.1 (Ray
    rewrites that one to the machine's network address); the ray runner joins it and
    leaves it running."""
    ray = pytest.importorskip("ray")
    from shoal.runners.ray.local import init_local_ray

    if not ray.is_initialized():
        init_local_ray(ray, num_cpus=4, node_ip_address="127.0.0.2")
    yield ray
    ray.shutdown()
