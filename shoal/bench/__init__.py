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

from collections.abc import Callable, Sequence
from pathlib import Path

from shoal.bench.model import predict
from shoal.bench.parts import Parts, measure_parts
from shoal.bench.report import Report, verdict
from shoal.bench.windows import Window, measure_window
from shoal.config import Config, config_to_dict, load_config
from shoal.errors import ConfigError

__all__ = ["Report", "bench", "SCHEMES"]

SCHEMES = ("serial", "threads", "processes", "ray")
"""The schemes ``shoal bench`` weighs for a single-agent env, in this order."""

PARTS_SHARE = 0.3
"""Of ``seconds``, what timing the parts takes; the windows share the rest."""


def bench(
    config: Config | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    seconds: float = 120.0,
    schemes: Sequence[str] | None = None,
    on_stage: Callable[[str, float], None] | None = None,
) -> Report:
    """Time the parts on ``config`` (a preset, a TOML path or a Config, with
    ``overrides``), predict each scheme, run each for a measured window, and report.

    ``schemes``: which to weigh (default every one that applies to the env; one named
    that does not apply is an error). ``on_stage(name, seconds)`` is told each stage
    as it starts, with the seconds it is given (a progress view)."""
    from shoal.run.preemption import preemption_signals
    from shoal.sync.segments import sweep_dead_segments

    if not seconds > 0:
        raise ConfigError(f"--seconds {seconds}: give a positive number of seconds")
    cfg = _config(config, overrides)
    chosen = _schemes(cfg, schemes)
    tell = on_stage or (lambda name, s: None)
    sweep_dead_segments()
    with preemption_signals():
        tell("parts", seconds * PARTS_SHARE)
        parts = measure_parts(cfg, seconds * PARTS_SHARE)
        predictions = predict(parts, schemes=tuple(chosen), **_scheme_settings(cfg))
        window = seconds * (1 - PARTS_SHARE) / len(chosen)
        windows: list[Window] = []
        for scheme in chosen:
            tell(scheme, window)
            windows.append(measure_window(cfg, scheme, window, _scheme_overrides(cfg, scheme)))
    return verdict(cfg, parts, predictions, windows)


def _config(config: Config | str | Path | None, overrides: Sequence[str]) -> Config:
    if isinstance(config, Config):
        return load_config(None, overrides, values=config_to_dict(config))
    return load_config(config, overrides)


def _schemes(cfg: Config, asked: Sequence[str] | None) -> list[str]:
    """The schemes to weigh: those asked (each must apply), else every one that applies
    (Ray only where it is installed)."""
    from shoal.runners import runner_class

    if asked is not None:
        unknown = [s for s in asked if s not in SCHEMES]
        if unknown or not asked:
            raise ConfigError(
                f"--runners {','.join(asked)!r}: shoal bench weighs {', '.join(SCHEMES)}"
            )
    own = runner_class(cfg.run.runner)
    own.preflight(cfg)  # the env is made and checked here: its error, not a skip
    if own.multi_agent:
        raise ConfigError(
            f"env.id {cfg.env.id!r} is a multi-agent world, which trains on the "
            f"{cfg.run.runner!r} runner; shoal bench weighs single-agent schemes "
            f"({', '.join(SCHEMES)}) so far"
        )
    chosen: list[str] = []
    for scheme in asked or SCHEMES:
        if scheme == "ray" and asked is None and not _has_ray():
            continue
        trial = load_config(None, [f"run.runner='{scheme}'"], values=config_to_dict(cfg))
        try:
            runner_class(scheme).preflight(trial)
        except ConfigError as e:
            if asked is not None:
                raise ConfigError(f"--runners: {scheme!r} does not apply: {e}") from None
            continue
        chosen.append(scheme)
    if not chosen:
        raise ConfigError(f"env.id {cfg.env.id!r}: none of {', '.join(SCHEMES)} applies to it")
    return chosen


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _scheme_settings(cfg: Config) -> dict[str, int]:
    """The config's sizes of each scheme: learner threads, workers, actors."""
    from shoal.runners.processes import default_workers

    return {
        "learner_threads": cfg.threads.learner_threads,
        "workers": cfg.processes.workers or default_workers(),
        "publish_every": cfg.processes.publish_every,
        "actors": cfg.ray.actors,
    }


def _scheme_overrides(cfg: Config, scheme: str) -> list[str]:
    """What a window sets beyond the runner: Ray embedded and quiet."""
    return []


__all__ += ["Parts", "Window"]
