"""The Python API over runs: train (or resume) one, evaluate one, plot one.

Example:
    >>> import shoal
    >>> result = shoal.train("cartpole", overrides=["run.total_steps=300", "run.progress=false",
    ...                                             "run.out='/tmp/shoal-doc'"])  # doctest: +SKIP
    >>> result.env_steps >= 300  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.config import Config, config_to_dict, load_config, save_config
from shoal.errors import ConfigError
from shoal.run.directory import RunDir
from shoal.run.loop import TrainResult

if TYPE_CHECKING:
    from shoal.runners.agents.epochs import EpochResult

__all__ = ["TrainResult", "evaluate_run", "play_run", "plot", "train", "train_dqn"]

CHECKPOINTS = ("best", "latest")
"""Which checkpoint ``evaluate_run`` reads: the best evaluation's weights or the latest."""


def _run(cfg: Config, run: RunDir, resume: dict[str, Any] | None = None) -> TrainResult:
    """Build the configured runner and drive it through :class:`~shoal.run.loop.RunLoop`."""
    from shoal.run.loop import RunLoop
    from shoal.runners import runner_for

    runner = runner_for(cfg)(cfg)
    try:
        loop = RunLoop(runner, run, resume=resume, title=_title(cfg))
        if resume is not None:
            # Only once the checkpoint has loaded into this config (same shapes): a failed
            # resume leaves the run directory as it was.
            save_config(cfg, run.config)
        return loop.run()
    finally:
        try:
            runner.stop()
        finally:
            runner.close()


def _title(cfg: Config) -> str:
    return f"{cfg.env.id} ({cfg.run.runner})"


def train(
    config: Config | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
    resume: str | Path | None = None,
) -> TrainResult:
    """Train a DQN agent and return where it went and how it did.

    Args:
        config: a :class:`Config`, a preset name, a TOML path, or None for the defaults.
        overrides: ``SECTION.KEY=VALUE`` strings applied on top.
        run_dir: exact run directory to create (it must not exist); default
            ``run.out/NAME-TIME``.
        resume: an existing run directory to continue from its latest checkpoint; its saved
            config is used, with ``overrides`` on top (e.g. a larger ``run.total_steps``).

    Everything is validated (config, env, run directory) before any work starts.
    """
    from shoal.run.checkpoint import load_checkpoint
    from shoal.runners import runner_for

    if resume is not None:
        if config is not None:
            raise ConfigError("give either a config or resume=RUN_DIR, not both")
        run = RunDir.open(resume)
        saved = load_config(run.config)
        cfg = load_config(run.config, overrides)
        if cfg.run.runner != saved.run.runner:
            raise ConfigError(
                f"config key 'run.runner': {cfg.run.runner!r} cannot resume a run trained by "
                f"{saved.run.runner!r} (its checkpoint holds that runner's state)"
            )
        runner_for(cfg).preflight(cfg)
        state = load_checkpoint(run.checkpoint)
        return _run(cfg, run, resume=state)
    if isinstance(config, Config):
        cfg = load_config(None, overrides, values=config_to_dict(config))
    else:
        cfg = load_config(config, overrides)
    runner_for(cfg).preflight(cfg)
    run = RunDir.create(cfg.run.out, cfg.run.name or cfg.env.id.replace("/", "_"), run_dir)
    save_config(cfg, run.config)
    return _run(cfg, run)


def train_dqn(
    n_episodes: int,
    num_workers: int | None = None,
    episodes_per_batch: int = 4,
    learning_steps_per_batch: int | None = None,
    batch_size: int = 64,
    device: str | None = None,
    *,
    config: Config | str | Path | None = "cartpole",
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
) -> TrainResult:
    """Rollout worker processes + one central learner, with the user's original API.

    Args:
        n_episodes: episodes to collect in total.
        num_workers: rollout worker processes; None means ``cpu_count() - 2`` (at least 1).
        episodes_per_batch: whole episodes each worker collects per learner batch.
        learning_steps_per_batch: gradient steps per batch; None means
            ``num_workers * episodes_per_batch``.
        batch_size: transitions per gradient step.
        device: 'cpu', 'cuda' or None (CUDA when present).
        config: the base config (preset, TOML path or Config); ``overrides`` go on top.
    """
    from shoal.runners.processes import default_workers

    workers = default_workers() if num_workers is None else num_workers
    steps = (
        workers * episodes_per_batch
        if learning_steps_per_batch is None
        else learning_steps_per_batch
    )
    values = [
        "run.runner=processes",
        f"processes.workers={workers}",
        f"processes.episodes_per_batch={episodes_per_batch}",
        f"processes.learning_steps_per_batch={steps}",
        f"processes.max_episodes={n_episodes}",
        f"dqn.batch_size={batch_size}",
        "run.total_steps=1000000000",
        "run.stop_return=none",
        f"run.device={device or 'auto'}",
    ]
    return train(config, overrides=[*values, *overrides], run_dir=run_dir)


def _open_checkpoint(
    run_dir: str | Path, episodes: int, checkpoint: str
) -> tuple[Config, dict[str, Any]]:
    """A finished or stopped run's config and its ``best`` or ``latest`` checkpoint."""
    from shoal.run.checkpoint import load_checkpoint

    if episodes <= 0:
        raise ConfigError(f"episodes: {episodes} is out of range; allowed: > 0")
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint: {checkpoint!r} is not one of 'best', 'latest'")
    run = RunDir.open(run_dir)
    cfg = load_config(run.config)
    path = run.best if checkpoint == "best" else run.checkpoint
    if checkpoint == "best" and not path.is_file():
        path = run.checkpoint  # a run stopped before its first evaluation has only latest
    return cfg, load_checkpoint(path)


def _multi_agent(cfg: Config) -> bool:
    from shoal.runners import runner_for

    return bool(getattr(runner_for(cfg), "multi_agent", False))


def evaluate_run(
    run_dir: str | Path,
    episodes: int = 20,
    seed: int | None = None,
    checkpoint: str = "best",
) -> np.ndarray:
    """Greedy returns of a run's ``best`` (default) or ``latest`` checkpoint over
    ``episodes`` fresh episodes (a multi-agent run: the collective return of each), as
    the run's runner evaluates its checkpoints. The default ``seed`` (the run's + 1) gives
    starts the training-time evaluations never saw."""
    from shoal.runners import runner_for

    cfg, state = _open_checkpoint(run_dir, episodes, checkpoint)
    seed = cfg.run.seed + 1 if seed is None else seed
    return runner_for(cfg).evaluate_checkpoint(cfg, state, episodes, seed, Path(run_dir))


def play_run(
    run_dir: str | Path,
    episodes: int = 20,
    seed: int | None = None,
    checkpoint: str = "best",
    *,
    epsilon: float = 0.0,
) -> list[EpochResult]:
    """Episodes of a multi-agent run's agents (its ``best`` or ``latest`` weights), greedy
    unless ``epsilon`` says otherwise: every agent's return, the turns and the social
    outcomes of each (:class:`~shoal.runners.agents.epochs.EpochResult`). Episode k resets with a
    seed derived from ``seed`` (default: the run's seed + 1, starts its evaluations never
    saw) and k, so two runs, or trained and random agents (``epsilon=1``), meet the same
    worlds."""
    from shoal.runners.agents.epochs import play_checkpoint

    cfg, state = _open_checkpoint(run_dir, episodes, checkpoint)
    if not _multi_agent(cfg):
        raise ConfigError(
            f"run.runner {cfg.run.runner!r}: play_run needs a multi-agent run "
            "(e.g. run.runner = 'agents'); evaluate_run plays single-agent runs"
        )
    base = cfg.run.seed + 1 if seed is None else seed
    return play_checkpoint(cfg, state["learner"], episodes, base, epsilon=epsilon)


def plot(run_dir: str | Path) -> Path:
    """(Re)draw a run's ``curve.png`` from its ``metrics.csv``."""
    from shoal.run.curve import plot_run

    run = RunDir.open(run_dir)
    if not run.metrics.is_file():
        raise ConfigError(f"run directory '{run.path}' has no metrics.csv yet")
    return plot_run(run.metrics, run.curve, title=_title(load_config(run.config)))
