"""``shoal bench``'s answer: the parts, each scheme predicted against measured, the
scheme to use, and why, as text for a person and as JSON for a script."""

from __future__ import annotations

import dataclasses
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shoal.bench.model import Prediction, learner_share, pays_at, serial
from shoal.bench.parts import Parts
from shoal.bench.windows import Window
from shoal.config import Config

__all__ = ["MARGIN", "Report", "partial_lines", "parts_lines", "verdict"]

MARGIN = 1.1
"""A scheme beside the one-thread one is named only where its window is this much
faster: short windows on a shared machine move by about 10%, and a gain within that does
not pay for more processes (RESULTS: Ray's window 1.04x serial, its full run 0.78x)."""


@dataclass(frozen=True)
class Report:
    """What ``shoal bench`` found."""

    env_id: str
    parts: Parts
    predictions: list[Prediction]
    windows: list[Window]
    winner: str
    """The scheme to use: the one that measured fastest, or the one-thread scheme where
    none beat it by :data:`MARGIN`."""
    reason: str
    """Why, in one line."""
    repeats: list[Window] = dataclasses.field(default_factory=list)
    """Second windows of the one-thread scheme and of the fastest other, timed after the
    first of every scheme: the verdict weighs both of each."""
    notes: list[str] = dataclasses.field(default_factory=list)
    """Lines on how it was measured (the schemes' sizes, the start-ups)."""

    def paces(self, scheme: str) -> list[float]:
        """Every window's pace of ``scheme`` (first, then its repeat)."""
        return [w.pace for w in (*self.windows, *self.repeats) if w.scheme == scheme]

    def pace(self, scheme: str) -> float:
        """``scheme``'s pace over its windows (their mean)."""
        return statistics.fmean(self.paces(scheme))

    def to_json(self) -> dict[str, Any]:
        """Plain data: every figure, for scripts."""
        return {
            "env_id": self.env_id,
            "machine": {"cores": self.parts.cores, "gpu": self.parts.gpu, **_machine()},
            "parts": dataclasses.asdict(self.parts),
            "schemes": [
                {
                    **dataclasses.asdict(p),
                    "updates_per_s": p.steps_per_s * self.parts.ratio,
                    "measured": {**dataclasses.asdict(w), "pace": w.pace},
                    "paces": self.paces(p.scheme),
                    "pace": self.pace(p.scheme),
                }
                for p in self.predictions
                for w in self.windows
                if w.scheme == p.scheme
            ],
            "winner": self.winner,
            "reason": self.reason,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        """The report as text: the parts, a table of schemes, the verdict."""
        out = [
            *parts_lines(self.env_id, self.parts),
            *_mode_lines(self.windows),
            *self.notes,
            "",
            "| scheme | size | predicted steps/s | updates/s | bound | measured steps/s | "
            "env steps/s | updates/s | start-up s |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        p, measured = self.parts, {w.scheme: w for w in self.windows}
        for pred in self.predictions:
            w = measured.get(pred.scheme)
            paces = (
                f"{self._pace_cell(pred.scheme)} | {w.steps_per_s:,.0f} | "
                f"{w.updates_per_s:,.0f} | {w.startup:.1f}"
                if w is not None
                else "not measured | | |"
            )
            out.append(
                f"| {pred.scheme} | {pred.workers or ''} | {pred.steps_per_s:,.0f} | "
                f"{pred.steps_per_s * p.ratio:,.0f} | {pred.bound} | {paces} |"
            )
        out += [
            "(measured steps/s: env steps with their updates done, the lower of env steps/s "
            "and updates/s over the ratio; two windows: their mean, each in brackets)",
            "",
            f"use: {self.winner} ({self.reason})",
        ]
        return out

    def _pace_cell(self, scheme: str) -> str:
        """A scheme's measured pace: one window's, or the mean of two and each."""
        paces = self.paces(scheme)
        if len(paces) == 1:
            return f"{paces[0]:,.0f}"
        return f"{self.pace(scheme):,.0f} ({' / '.join(f'{x:,.0f}' for x in paces)})"


def parts_lines(env_id: str, p: Parts) -> list[str]:
    """The parts as text: the machine, acting, the update, transport, the GPU's share."""
    device = f"learner on {p.gpu}" if p.gpu else "learner on CPU"
    return [
        f"{env_id}: {p.cores} CPU cores, {device}; {p.num_envs} envs per actor, "
        f"batch {p.batch_size}, {p.ratio:g} updates per env step",
        f"  env step {_us(p.env_step)}, batched forward {_us(p.forward)} "
        f"({_us(p.forward / p.num_envs)} an env), writing and resets {_us(p.write)} "
        f"an env step; acting and writing between updates {_us(p.serial_acting)} an "
        "env step",
        f"  update {_us(p.update)} ({p.update_mode}); {_threads_part(p)}, beside busy "
        f"processes {_us(p.update_beside_processes)}; replay add {_us(p.add)} an env step",
        f"  weights {p.weight_bytes / 1e6:.2f} MB: publish {_us(p.publish)}, pull "
        f"{_us(p.pull)}; a worker's message {_us(p.message)} an env step",
        f"  one-thread step {_us(p.serial_step)}: the updates are {learner_share(p):.0%} of it",
        *_capture_lines(p),
        *_gpu_lines(p),
    ]


def partial_lines(
    cfg: Config,
    parts: Parts | None,
    predictions: list[Prediction],
    windows: list[Window],
) -> list[str]:
    """What a bench stopped early (Ctrl-C, SIGTERM) had measured: the parts, and the
    report over the schemes whose windows were timed."""
    if parts is None:
        return ["shoal bench: stopped while timing the parts; nothing measured yet"]
    if not windows:
        return ["shoal bench: stopped; measured the parts only", *parts_lines(cfg.env.id, parts)]
    done = ", ".join(w.scheme for w in windows)
    report = verdict(cfg, parts, predictions, windows)
    return [f"shoal bench: stopped; measured the parts and {done}", *report.lines()]


def verdict(
    cfg: Config,
    parts: Parts,
    predictions: list[Prediction],
    windows: list[Window],
    repeats: Sequence[Window] = (),
    notes: Sequence[str] = (),
) -> Report:
    """The report: the fastest measured scheme, and the reason from the parts. The first
    window is the one-thread scheme (serial, or a world's ``agents``) the others are
    measured against; another is named only where its pace beats it by :data:`MARGIN` and
    every window of it beat every window of the one-thread scheme (``repeats``: their
    second windows), and of those the simplest (the first in ``windows``' order: fewer
    threads, fewer processes) within :data:`MARGIN` of the fastest: a faster scheme pays for
    its extra processes only past the windows' noise, as against serial. A lead short of
    that is too close to call: the one-thread scheme is the safe choice, and the margin is
    said."""
    report = Report(cfg.env.id, parts, predictions, windows, "", "", list(repeats), list(notes))
    base = windows[0].scheme
    others = [w.scheme for w in windows[1:]]  # simplest first: fewer threads, processes

    def gain(scheme: str) -> float:
        return report.pace(scheme) / max(report.pace(base), 1e-9)

    share = learner_share(parts)
    cleared = [
        o for o in others if gain(o) >= MARGIN and min(report.paces(o)) > max(report.paces(base))
    ]
    if cleared:  # the simplest within the windows' noise of the fastest that cleared
        top = max(cleared, key=gain)
        named = next(o for o in cleared if gain(o) * MARGIN >= gain(top))
        reason = _lead_reason(named, base, gain(named), share, predictions)
        if named != top:
            reason += (
                f"; {top} ({gain(top) / gain(named):.2f}x it) is within the {MARGIN - 1:.0%} "
                f"windows move by, and {named} is the simpler scheme"
            )
        return dataclasses.replace(report, winner=named, reason=reason)
    best = max(others, key=gain, default=None)
    if best is not None and gain(best) >= 1 / MARGIN:
        reason = _too_close(report, base, best, gain(best))
    else:
        reason = _one_thread_reason(parts, share, cfg.processes.publish_every, report)
    return dataclasses.replace(report, winner=base, reason=reason)


def _lead_reason(
    best: str, base: str, gain: float, share: float, predictions: list[Prediction]
) -> str:
    """Why a scheme beside the one-thread one is named."""
    pred = next(p for p in predictions if p.scheme == best)
    if best in ("processes", "ray", "agents-process"):
        what = {"processes": "worker", "ray": "actor"}.get(best, "collector process")
        size = f"{pred.workers} {what}{'s' if pred.workers != 1 else ''}"
        reason = (
            f"acting moved off the learner: {size} give{'s' if pred.workers == 1 else ''} "
            f"{gain:.1f}x {base} (the updates are {share:.0%} of its step)"
        )
    else:
        reason = (
            f"acting and updates overlap in one process: {gain:.1f}x {base} (the "
            f"updates are {share:.0%} of its step)"
        )
    if pred.bound == "learner":
        reason += "; the learner's updates are the limit now"
    return reason


def _too_close(report: Report, base: str, other: str, ratio: float) -> str:
    """A lead within what windows move by: the safe choice, and the margin."""
    ours, theirs = report.paces(base), report.paces(other)
    low, high = min(theirs) / max(ours), max(theirs) / min(ours)
    windows = f"{len(theirs)} window{'s' * (len(theirs) != 1)} each"
    return (
        f"too close to call: {base} is the safe choice ({other} {ratio:.2f}x {base} over "
        f"{windows}, {low:.2f}-{high:.2f}x window to window; a scheme is named at "
        f"{MARGIN:.1f}x with every window ahead)"
    )


def _one_thread_reason(parts: Parts, share: float, publish_every: int, report: Report) -> str:
    """Why nothing came near the one-thread scheme (``report.windows[0]``): the learner,
    or too few cores for acting; what the others measured against it."""
    windows = report.windows
    base = windows[0]
    ours = report.pace(base.scheme)
    others = ", ".join(f"{w.scheme} {report.pace(w.scheme) / ours:.2f}x" for w in windows[1:])
    measured = f" ({others})" if others else ""
    if base.scheme == "agents":
        where = "overlapping acting and learning saves at most the smaller side"
    else:
        cores = pays_at(parts, publish_every)
        weighed = any(w.scheme == "processes" for w in windows)
        if cores is None:
            crowded = parts.ratio * parts.update_beside_processes / parts.serial_step
            where = (
                "no number of cores pays: beside busy workers the learner's updates alone "
                f"take {crowded:.0%} of a serial step"
            )
        elif cores > parts.cores:
            where = f"processes would pay at >= {cores} cores"
        elif weighed:
            where = "processes' bound is above serial's here, but its transport ate the gain"
        else:
            where = f"processes would pay on these {parts.cores} cores, if weighed"
    side = "learner-bound: the updates are" if share >= 0.5 else "acting is"
    part = share if share >= 0.5 else 1 - share
    return f"{side} {part:.0%} of a {base.scheme} step; {where}{measured}"


def _gpu_lines(p: Parts) -> list[str]:
    """What the GPU changes, where the learner ran on one: the update against the CPU's,
    and the serial pace each would give."""
    if p.update_cpu is None:
        return []
    on_cpu = dataclasses.replace(p, update=p.update_cpu)
    return [
        f"  the GPU: an update {_us(p.update)} against {_us(p.update_cpu)} on the CPU "
        f"({p.update_cpu / p.update:.1f}x); serial {serial(p).steps_per_s:,.0f} steps/s "
        f"against {serial(on_cpu).steps_per_s:,.0f} with the learner on the CPU"
    ]


def _capture_lines(p: Parts) -> list[str]:
    """The timed update against the same update run eagerly, where it was not."""
    if p.update_eager is None:
        return []
    return [
        f"  the update as {p.update_mode}: {_us(p.update)} against {_us(p.update_eager)} "
        f"eager ({p.update_eager / p.update:.1f}x)"
    ]


def _threads_part(p: Parts) -> str:
    """The threads scheme's part: its own runner's loop where timed, else the update
    beside an acting thread."""
    if p.threads_step > 0:
        return f"the threads runner's loop {_us(p.threads_step)} an env step"
    return (
        f"beside an acting thread {_us(p.update_beside_acting)} (and acting "
        f"{_us(p.acting_beside_update)} an env step)"
    )


def _mode_lines(windows: list[Window]) -> list[str]:
    """A runner's own modes, where they were timed (the ray scheme's)."""
    out = []
    for w in windows:
        if w.modes:
            (acting, _), (_, learning), (steps, updates) = w.modes
            out.append(
                f"  {w.scheme} on its own runner: actors alone {acting:,.0f} env steps/s, "
                f"learner alone {learning:,.0f} updates/s, its own loop {steps:,.0f} env "
                f"steps/s and {updates:,.0f} updates/s"
            )
    return out


def _us(seconds: float) -> str:
    """A short time, in the unit that reads best."""
    if seconds >= 0.1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def _machine() -> dict[str, str]:
    return {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()}
