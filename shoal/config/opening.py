"""The one door to a run someone may have sent: :func:`open_run`.

A run directory is data from elsewhere until the user says otherwise. Every command and
function that opens one (``shoal eval``, ``--resume``, ``shoal.load_policy``,
``shoal.play_run``, MAPF's policy) goes through :func:`open_run`, which reads its config
as data, asks for consent to any code it names (:mod:`shoal.run.consent`) and, for as long
as the run is open, refuses to import any module outside shoal unless the user trusts it
(:func:`~shoal.run.imports.refusing_user_code`): neither step can be forgotten by a new
opener.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from shoal.config.loading import load_run_config
from shoal.config.schema import Config
from shoal.run.consent import check_consent
from shoal.run.directory import RunDir
from shoal.run.imports import refusing_user_code

__all__ = ["OpenRun", "open_run"]


class OpenRun(NamedTuple):
    """An opened run: its directory and its saved config (as saved, no overrides)."""

    run: RunDir
    cfg: Config


@contextlib.contextmanager
def open_run(
    path: str | Path,
    *,
    trust_code: bool = False,
    given: frozenset[str] = frozenset(),
    lock: bool = False,
) -> Iterator[OpenRun]:
    """Open the run directory ``path``: its config read as data, one line (an
    :class:`~shoal.errors.UntrustedCodeError`) if it names code the user did not give
    (``given``: the keys the user sets again) unless ``trust_code``, and within the block no
    module outside shoal imported by a config's name unless ``trust_code``. ``lock``: this
    process holds the run's lock from before its config is read to the block's end (a
    resume, which writes to it)."""
    run = RunDir.open(path)
    with run.lock() if lock else contextlib.nullcontext():
        cfg = load_run_config(run.config)
        where = f"run '{run.path}'"
        check_consent(cfg, where, trust_code=trust_code, user_keys=given)
        with refusing_user_code(where, refuse=not trust_code):
            yield OpenRun(run, cfg)
