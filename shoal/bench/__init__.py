"""``shoal bench``: which scheme pays for this env and config on this machine, and why.

It times the parts a run is made of on the user's own env and network
(:mod:`shoal.bench.parts`), predicts from them what each scheme can reach
(:mod:`shoal.bench.model`), then runs each scheme for a short window
(:mod:`shoal.bench.windows`) and reports predicted against measured, the fastest, and the
reason in one line (:mod:`shoal.bench.report`). Nothing is written: no run directory, no
checkpoint.

Example:
    >>> import shoal.bench
    >>> report = shoal.bench.bench("cartpole", seconds=30)  # doctest: +SKIP
    >>> report.winner  # doctest: +SKIP
    'serial'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shoal.bench.model import Prediction, predict, predict_world, ray_from_modes
from shoal.bench.parts import Parts, bench_starts, measure_parts
from shoal.bench.plan import (
    Sizes,
    estimate_startup,
    scheme_overrides,
    scheme_sizes,
    time_env_step,
)
from shoal.bench.report import MARGIN, Report, partial_lines, verdict
from shoal.bench.windows import Window, measure_window
from shoal.bench.worlds import WORLD_SCHEMES, measure_world_parts
from shoal.config import Config, config_to_dict, load_config
from shoal.errors import ConfigError

__all__ = [
    "BENCH_EPSILON",
    "MAX_SECONDS",
    "SCHEMES",
    "Parts",
    "Report",
    "Window",
    "at_end_epsilon",
    "bench",
    "check_seconds",
]

SCHEMES = ("serial", "threads", "processes", "ray")
"""The schemes ``shoal bench`` weighs for a single-agent env, in this order (a
multi-agent world's: :data:`~shoal.bench.worlds.WORLD_SCHEMES`)."""

PARTS_SHARE = 0.3
"""Of ``seconds``, what timing the parts takes; the windows share the rest."""

MAX_SECONDS = 86_400.0
"""The largest measuring budget (``--seconds``): a day. The default is 120 s and a few
minutes settle every scheme; a longer one only keeps a machine busy for nothing."""

BENCH_EPSILON = 0.05
"""The least epsilon a bench times at (:func:`at_end_epsilon`)."""

FIRST_SHARE = 0.75
"""Of the windows' seconds, what the first window of every scheme takes; the rest times
a second window of the one-thread scheme and of the fastest other, so a close call is
weighed on two windows each (one window's noise flipped a verdict: RESULTS)."""

RAY_MODES_SHARE = 0.4
"""Of the ray scheme's window, what timing its own modes takes (before the window, on
the same runner: Ray starts once)."""


def check_seconds(seconds: float) -> None:
    """ConfigError, on one line naming ``--seconds``, the value and the allowed range,
    unless ``0 < seconds <= MAX_SECONDS``."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ConfigError(f"--seconds {seconds!r}: expected a number of seconds")
    if not 0 < seconds <= MAX_SECONDS:  # nan fails both
        raise ConfigError(
            f"--seconds {seconds} is out of range; allowed: 0 < seconds <= {MAX_SECONDS:.0f}"
            " (a day)"
        )


def bench(
    config: Config | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    seconds: float = 120.0,
    schemes: Sequence[str] | None = None,
    on_stage: Callable[[str, float], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Report:
    """Time the parts on ``config`` (a preset, a TOML path or a Config, with
    ``overrides``), predict each scheme, run each for a measured window (the close call
    twice), and report.

    ``schemes``: which to weigh (default every one that applies to the env; one named
    that does not apply is an error). ``on_stage(name, seconds)`` is told each stage
    as it starts, with the seconds it is given (a progress view); ``on_note(line)`` is
    told, before any timing, how long the start-ups will add to ``seconds``."""
    from shoal.api import check_device
    from shoal.run.preemption import preemption_signals
    from shoal.run.runner import torch_threads
    from shoal.sync.segments import sweep_dead_segments
    from shoal.sync.workers import check_not_bootstrapping

    check_not_bootstrapping("shoal.bench")
    check_seconds(seconds)
    cfg = _config(config, overrides)
    check_device(cfg)
    world = _is_world(cfg)
    chosen = _schemes(cfg, schemes, WORLD_SCHEMES if world else SCHEMES)
    tell = on_stage or (lambda name, s: None)
    sweep_dead_segments()
    got = _Measured(sizes=None if world else scheme_sizes(cfg), started=time.perf_counter())
    # a world's turn is not one env's step: its start-ups are estimated without the fill
    env_step = 0.0 if world else time_env_step(cfg)
    estimate = estimate_startup(cfg, chosen, got.sizes or Sizes(1, 1, ""), env_step)
    got.estimate = estimate.seconds
    (on_note or (lambda line: None))(estimate.line(seconds))
    try:
        with preemption_signals(), torch_threads(cfg.run.torch_threads):
            _measure(cfg, chosen, seconds, world, tell, got)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: the caller prints what was measured
        e.partial = got.lines(cfg)  # type: ignore[attr-defined]
        raise
    assert got.parts is not None
    notes = got.notes(seconds)
    return verdict(cfg, got.parts, got.predictions, got.windows, got.repeats, notes)


@dataclass
class _Measured:
    """What a bench has measured so far (a stopped one reports it)."""

    sizes: Sizes | None = None
    """The parallel schemes' sizes (None: a world's schemes)."""
    started: float = 0.0
    """When the bench started (``time.perf_counter()``)."""
    estimate: float = 0.0
    """The start-ups' estimated seconds, said before any timing."""
    parts: Parts | None = None
    predictions: list[Prediction] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    repeats: list[Window] = field(default_factory=list)

    def lines(self, cfg: Config) -> list[str]:
        ratio = self.parts.ratio if self.parts is not None else 0.0
        predictions = _with_modes(self.predictions, self.windows, ratio)
        return partial_lines(cfg, self.parts, predictions, self.windows)

    def notes(self, seconds: float) -> list[str]:
        """How it was measured: the sizes, and the start-ups against their estimate."""
        took = time.perf_counter() - self.started
        sizes = [self.sizes.line()] if self.sizes is not None else []
        return [
            *sizes,
            f"  the bench took {took:.0f} s: --seconds {seconds:g} of measuring and "
            f"{max(took - seconds, 0.0):.0f} s of start-ups (estimated beforehand: about "
            f"{self.estimate:.0f} s)",
        ]


def _measure(
    cfg: Config,
    chosen: list[str],
    seconds: float,
    world: bool,
    tell: Callable[[str, float], None],
    got: _Measured,
) -> None:
    """Time the parts, predict, then each scheme's window, into ``got`` as each is done."""
    tell("parts", seconds * PARTS_SHARE)
    if world:
        parts, epoch_turns = measure_world_parts(cfg, seconds * PARTS_SHARE)
        got.predictions = predict_world(parts, epoch_turns, tuple(chosen))
    else:
        share = seconds * PARTS_SHARE
        threads = share * 0.25 if "threads" in chosen else 0.0
        parts = measure_parts(cfg, share - threads, threads=threads)
        assert got.sizes is not None
        settings = _scheme_settings(cfg, got.sizes)
        got.predictions = predict(parts, schemes=tuple(chosen), **settings)
    got.parts = parts
    spread = seconds * (1 - PARTS_SHARE)
    repeat = len(chosen) > 1
    window = spread * (FIRST_SHARE if repeat else 1.0) / len(chosen)
    for scheme in chosen:
        tell(scheme, window)
        got.windows.append(_window(cfg, scheme, window, got.sizes, parts, modes=True))
    got.predictions = _with_modes(got.predictions, got.windows, parts.ratio)
    if repeat:  # the close calls again, in alternation: the fastest others, then the base
        close = _close_others(got.windows)
        again = spread * (1 - FIRST_SHARE) / (len(close) + 1)
        for scheme in (*close, chosen[0]):
            tell(f"{scheme} again", again)
            got.repeats.append(_window(cfg, scheme, again, got.sizes, parts, modes=False))


def _close_others(windows: list[Window]) -> list[str]:
    """The schemes besides the one-thread one whose call is closest: the fastest, and the
    runner-up where it is within the verdict's margin of it (the verdict then weighs the
    simpler of them), in their order."""
    ranked = sorted(windows[1:], key=lambda w: w.pace, reverse=True)[:2]
    close = {w.scheme for w in ranked if w.pace * MARGIN >= ranked[0].pace}
    return [w.scheme for w in windows[1:] if w.scheme in close]


def _window(
    cfg: Config, scheme: str, seconds: float, sizes: Sizes | None, parts: Parts, modes: bool
) -> Window:
    """One measured window of ``scheme`` (the ray scheme's own modes timed in it where
    ``modes``), at the bench's sizes."""
    runner, extra = _runner_of(scheme)
    extra = [*extra, *scheme_overrides(cfg, scheme, sizes, parts)]
    timed = seconds * RAY_MODES_SHARE if scheme == "ray" and modes else 0.0
    return measure_window(cfg, scheme, runner, extra, seconds, timed)


def _with_modes(
    predictions: list[Prediction], windows: list[Window], ratio: float
) -> list[Prediction]:
    """The predictions, the ray scheme's from its own modes where they were timed."""
    modes = {w.scheme: w.modes for w in windows if w.modes}
    return [
        ray_from_modes(list(modes["ray"]), ratio, p.workers)
        if p.scheme == "ray" and "ray" in modes
        else p
        for p in predictions
    ]


def _runner_of(scheme: str) -> tuple[str, list[str]]:
    """The runner a scheme trains on, and the overrides that make it that scheme."""
    if scheme in WORLD_SCHEMES:
        return "agents", WORLD_SCHEMES[scheme]
    return scheme, []


def _is_world(cfg: Config) -> bool:
    """Whether the config's env is a multi-agent world (its runner trains one), after the
    checks of its own runner: the env is made there, and its error is the one to see."""
    from shoal.runners import runner_class

    own = runner_class(cfg.run.runner)
    own.preflight(cfg)
    return bool(own.multi_agent)


def _config(config: Config | str | Path | None, overrides: Sequence[str]) -> Config:
    """The config to time: the user's, with epsilon at its end value once the bench's
    learning starts (:func:`at_end_epsilon`).

    Acting skips the network on a random action, so a run's first, exploring steps go
    faster than the rest (a Ray run on CartPole: 15% from 4k to 12k env steps, flat with
    epsilon at its end from the start), and a budget of a few seconds a scheme would time
    them: every scheme is timed as most of a run's steps go, past epsilon's decay."""
    if isinstance(config, Config):
        cfg = load_config(None, overrides, values=config_to_dict(config))
    else:
        cfg = load_config(config, overrides)
    return load_config(None, at_end_epsilon(cfg), values=config_to_dict(cfg))


def at_end_epsilon(cfg: Config) -> list[str]:
    """The overrides that put ``cfg``'s epsilon at its end value (at least
    :data:`BENCH_EPSILON`) from the bench's learning start on
    (:func:`~shoal.bench.parts.bench_starts`), as ``shoal bench`` times every scheme (a
    check against full runs gives them the same): random before it, so the replay the
    first update needs fills at once.

    An untrained network's greedy policy is often one action over and over; in Breakout
    that is never FIRE, so at epsilon 0.01 from the first step no life ended, and rollout
    workers, which send whole episodes, sent nothing for 90 s of a 60 s bench. A learning
    agent's episodes end; at 0.05 random actions end the untrained one's too, and a batched
    forward still runs at every step of 8 envs (skipped only where every env explores)."""
    e = cfg.explore
    if e.noisy:  # noise explores, epsilon is 0
        return [f"explore.eps_start={e.eps_end!r}"]
    end = max(e.eps_end, min(BENCH_EPSILON, e.eps_start))
    return [
        f"explore.eps_end={end!r}",
        f"explore.eps_decay_steps={max(1, bench_starts(cfg))}",
    ]


def _schemes(cfg: Config, asked: Sequence[str] | None, known: Sequence[str]) -> list[str]:
    """The schemes to weigh among ``known``, in its order: those asked (each must apply)
    and always the first, the one-thread scheme the others are measured against; else
    every one that applies (Ray only where it is installed)."""
    from shoal.runners import runner_class

    if asked is not None and (not asked or any(s not in known for s in asked)):
        raise ConfigError(
            f"--runners {','.join(asked)!r}: for env.id {cfg.env.id!r} shoal bench weighs "
            f"{', '.join(known)}"
        )
    chosen: list[str] = []
    for scheme in known:
        if asked is not None and scheme not in asked and scheme != known[0]:
            continue
        if scheme == "ray" and asked is None and not _has_ray():
            continue
        runner, extra = _runner_of(scheme)
        overrides = [f"run.runner='{runner}'", *extra]
        trial = load_config(None, overrides, values=config_to_dict(cfg))
        try:
            runner_class(runner).preflight(trial)
        except ConfigError as e:
            if asked is not None and scheme in asked:
                raise ConfigError(f"--runners: {scheme!r} does not apply: {e}") from None
            continue
        chosen.append(scheme)
    if not chosen:
        raise ConfigError(f"env.id {cfg.env.id!r}: none of {', '.join(known)} applies to it")
    return chosen


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _scheme_settings(cfg: Config, sizes: Sizes) -> dict[str, int]:
    """Each scheme's settings as the bench runs it: the config's learner threads and
    publish rates, the bench's workers and actors."""
    return {
        "learner_threads": cfg.threads.learner_threads,
        "workers": sizes.workers,
        "publish_every": cfg.processes.publish_every,
        "actors": sizes.actors,
        "ray_publish_every": cfg.ray.publish_every,
        "ray_pull_every": cfg.ray.pull_every,
    }
