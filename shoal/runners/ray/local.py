"""The Ray a run or a study starts for itself (no cluster address given) or joins.

``ray.init`` starts Ray's daemons (GCS, raylet, and through the raylet every worker) as
children in the caller's process group. A scheduler or supervisor that stops the job by
signalling that group (``kill -TERM -PGID``; Slurm's and systemd's job-wide stops reach the
daemons anyway) then stops the daemons while the driver is still writing its checkpoint:
the replay actor's contents go with them, and a driver that asks the dying raylet for
anything is ended by Ray itself (exit 1, no checkpoint). :func:`init_local_ray` starts the
daemons in a process group of their own, as Ray does on Windows, so that a group's
SIGTERM reaches the driver alone; the driver checkpoints and then shuts its Ray down. Ray
still ties each daemon to the driver's life (Linux's parent-death signal), so a driver
killed outright takes them with it.

Ray puts the directory the driver was in when it started or joined Ray in front of
site-packages on every worker's module path (``JobConfig._py_driver_sys_path``), and a local
Ray's daemons and workers run in it. A run opened from inside a received run's folder (``cd
RUN && shoal train --resume .``) would then run any ``pynvml.py`` or ``timeit.py`` there in
every worker that imports such a module lazily (measured: Ray 2.60's workers import
``timeit`` mid-run). :func:`init_local_ray` and :func:`join_cluster` call ``ray.init`` from
an empty directory of this process's own; the modules a run's workers need come from
:func:`~shoal.run.imports.search_path`, appended after site-packages.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from shoal.runners.ray.address import local_auth_warning, local_node_ip

__all__ = ["init_local_ray", "join_cluster", "local_ray_options", "neutral_directory"]


def local_ray_options(
    num_cpus: int | None = None, node_ip_address: str | None = None, temp_dir: str | None = None
) -> dict[str, Any]:
    """``ray.init`` arguments of the local Ray a run starts: no dashboard (an HTTP server
    that takes jobs), a loopback node address unless one is given
    (:func:`~shoal.runners.ray.address.local_node_ip`), and workers at niceness 0, not
    Ray's 15, so the replay actor outranks the actors (which nice themselves to
    ``ray.actor_nice``): on 2 cores that cut the learner's wait for batches from 6-9% of its
    time to 1%. Ray's own log lines at start (``Started a local Ray instance``) are
    left out: a run's output is shoal's."""
    return {
        "address": "local",
        "logging_level": logging.WARNING,
        "num_cpus": num_cpus or os.cpu_count(),
        "include_dashboard": False,
        "log_to_driver": False,
        "_node_ip_address": node_ip_address or local_node_ip(),
        "_temp_dir": temp_dir,
        "_system_config": {"worker_niceness": 0},
    }


def init_local_ray(ray: Any, **options: Any) -> None:
    """Start a local Ray (:func:`local_ray_options` with ``options``) whose daemons are
    out of this process's group, saying first on stderr when Ray will ask for a token."""
    if warning := local_auth_warning():
        print(warning, file=sys.stderr)
    _quiet_token_notice()
    with _daemons_in_their_own_group(ray), neutral_directory():
        ray.init(**local_ray_options(**options))


def join_cluster(ray: Any, address: str) -> None:
    """Join the Ray cluster at ``address`` (a driver of it), from
    :func:`neutral_directory`: a worker on this machine puts nothing of the folder the run
    was started in on its module path."""
    with neutral_directory():
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)


_NEUTRAL: list[str] = []
"""This process's empty directory (made at the first Ray start, kept while Ray may run)."""
_CHDIR_LOCK = threading.Lock()


@contextlib.contextmanager
def neutral_directory() -> Iterator[str]:
    """Within the block the process's working directory is an empty one of its own (made
    by ``mkdtemp``: nobody else can write there), then the one before again: what Ray
    reads as the driver's directory at ``ray.init``. The directory stays while the process
    lives (a local Ray's workers run in it) and is removed at exit if still empty. The
    working directory is the process's: another thread that opens a relative path during
    ``ray.init`` (a few seconds) would look in the empty one."""
    with _CHDIR_LOCK:
        if not _NEUTRAL or not os.path.isdir(_NEUTRAL[0]):
            _NEUTRAL[:] = [tempfile.mkdtemp(prefix="shoal-ray-")]
            atexit.register(_remove_if_empty, _NEUTRAL[0])
        here = os.getcwd()
        os.chdir(_NEUTRAL[0])
        try:
            yield _NEUTRAL[0]
        finally:
            os.chdir(here)


def _remove_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Where Ray logs, at every local start, whether its token is on."""


class _NoTokenNotice(logging.Filter):
    """Drops Ray's "Token authentication is enabled/disabled" line: on, it is the default
    this runner relies on (README, scheme 5); off, :func:`local_auth_warning` says it in
    shoal's words. Setting ``RAY_AUTH_MODE`` instead changes Ray's behaviour once Ray is
    imported (its core keeps the mode it read first; measured: the GCS then refused the
    driver's calls)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is ")


def _quiet_token_notice() -> None:
    """Install :class:`_NoTokenNotice` once on Ray's token logger."""
    logger = logging.getLogger(_TOKEN_LOGGER)
    if not any(isinstance(f, _NoTokenNotice) for f in logger.filters):
        logger.addFilter(_NoTokenNotice())


@contextlib.contextmanager
def _daemons_in_their_own_group(ray: Any) -> Iterator[None]:
    """While active, each process Ray starts from this one leads a new process group.

    Only where the kernel ties Ray's daemons to the driver's life: without that Ray cleans
    up through a reaper that kills the driver's group, which needs the daemons in it. Ray
    starts them through one ``Popen`` subclass; a Ray without it is left as it is."""
    private = getattr(ray, "_private", None)
    services = getattr(private, "services", None)
    original = getattr(services, "ConsolePopen", None)
    tied = getattr(getattr(private, "utils", None), "detect_fate_sharing_support", None)
    if original is None or tied is None or sys.platform == "win32" or not tied():
        yield
        return

    class OwnGroupPopen(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            before = kwargs.get("preexec_fn")

            def preexec() -> None:
                os.setpgid(0, 0)
                if before is not None:
                    before()

            kwargs["preexec_fn"] = preexec
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen
    try:
        yield
    finally:
        services.ConsolePopen = original
