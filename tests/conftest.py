"""Shared fixtures: tiny, fast configs for runner and CLI tests; shared-memory leak checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
        # One torch thread whatever the preset (mapf's is 2): beside the other test worker
        # more threads oversubscribe the 2 cores (a serial MAPF test: 43 s beside two busy
        # processes at 2 threads, 25 s at 1; up to 226 s in a whole-suite run).
        "run.torch_threads": 1,
    }
    values.update({k.replace("__", "."): v for k, v in extra.items()})
    return [f"{k}={v}" for k, v in values.items()]


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in every test process: two test workers share the 2 cores, and a
    network's intra-op threads beside the other worker oversubscribe them (torch's
    default is every core). Runs set their own (``run.torch_threads``) and so do tests of
    thread settings.

    The repository root on ``sys.path``: a test module's functions run in spawned children
    (``tests.sync.test_workers._stubborn``), which import the module by that name; without
    it they imported only after some earlier test had put the working directory there."""
    import torch

    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)

    torch.set_num_threads(1)


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


RAY_MODULES_WITHOUT_SESSION = ("test_ray_address.py", "test_ray_cluster.py")
"""Modules that start (or refuse) Rays of their own: they run before the shared one
starts."""


def on_ray(item: pytest.Item) -> bool:
    """A case on the ray runner (its ``name`` or ``runner`` parameter is ``ray`` or
    ``ray/...``)."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    name = params.get("name", params.get("runner"))
    return isinstance(name, str) and name.split("/")[0] == "ray"


def uses_shared_ray(item: pytest.Item) -> bool:
    """A test that joins the session's one local Ray (``ray_session``)."""
    fixtures = getattr(item, "fixturenames", ())
    return "ray_session" in fixtures or (
        on_ray(item) and item.path.name not in RAY_MODULES_WITHOUT_SESSION
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses Ray runs in one xdist group, those that start Rays of their own
    before those that share one local Ray (starting one costs seconds). Run alone, they
    run last; on xdist's workers (``make test``), first, so that the group, the longest
    unit of work, starts at once on one worker while the others share out the rest. The
    shared Ray ends with the group (``pytest_runtest_teardown``)."""
    own = [i for i in items if i.path.name in RAY_MODULES_WITHOUT_SESSION]
    shared = [i for i in items if i not in own and uses_shared_ray(i)]
    ray = set(own + shared)
    for item in own + shared:
        item.add_marker(pytest.mark.xdist_group("ray"))
    rest = [i for i in items if i not in ray]
    on_workers = hasattr(config, "workerinput")  # an xdist worker (its "dist" reads "no")
    items[:] = own + shared + rest if on_workers else rest + own + shared


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The shared local Ray ends with the last test that shares it, so no other test runs
    beside it (nor forks a process that holds its threads)."""
    if uses_shared_ray(item) and (nextitem is None or not uses_shared_ray(nextitem)):
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="session")
def _local_ray():
    """Ray, for the session's local Ray (started by the first test that asks, ended by the
    last, and at the latest with the session)."""
    ray = pytest.importorskip("ray")
    yield ray
    ray.shutdown()


@pytest.fixture
def ray_session(_local_ray):
    """The session's one local Ray (see ``pytest_collection_modifyitems``), on a loopback
    address other than 127.0.0.1 (Ray rewrites that one to the machine's network address);
    a ray runner's run joins it and leaves it running."""
    from shoal.runners.ray.local import init_local_ray

    if not _local_ray.is_initialized():
        init_local_ray(_local_ray, num_cpus=4, node_ip_address="127.0.0.2")
    return _local_ray


@pytest.fixture(autouse=True)
def share_ray(request):
    """A ray runner's case joins the session's local Ray instead of embedding one of its
    own (an embedded Ray, started and shut down by the run itself, is
    test_ray_cluster's)."""
    if uses_shared_ray(request.node):
        request.getfixturevalue("ray_session")
