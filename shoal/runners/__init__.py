"""Runners and their registry.

A runner wires the same parts (actor, learner, replay, weight store) with its own
transport, and supplies only how experience is collected and how learning is scheduled;
:class:`~shoal.run.loop.RunLoop` does the rest. The serial runner is the oracle the others
are tested against. Adding a runner is its own module plus one line in
:data:`shoal.registry.RUNNERS` (or a :func:`register_runner` call); a runner owns its
config section (its ``section`` class attribute) and its ``--help`` text (its docstring's
first line).

Importing this package imports no runner: they load on first use, from the one registry
(:mod:`shoal.registry`, which keeps their config sections too); a runner module still
imports its optional backends (Ray, say) where it uses them, never at the top.
"""

from __future__ import annotations

from shoal.registry import (
    RUNNERS,
    SECTIONS,
    config_sections,
    register_runner,
    runner_class,
    runner_for,
    runner_names,
)

__all__ = [
    "RUNNERS",
    "SECTIONS",
    "config_sections",
    "describe_runners",
    "register_runner",
    "runner_class",
    "runner_for",
    "runner_names",
]


def describe_runners() -> str:
    """One line per runner: its name, config section and summary (for ``--help``)."""
    lines = []
    for name in RUNNERS:
        cls = runner_class(name)
        doc = (cls.__doc__ or "").strip().splitlines()
        section = getattr(cls, "section", None)
        where = f" [{section[0]}]" if section else ""
        lines.append(f"  {name}{where}: {doc[0] if doc else ''}")
    return "\n".join(lines)
