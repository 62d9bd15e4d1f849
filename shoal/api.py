"""The Python API over runs: train (or resume) one, evaluate one, plot one.

Example:
    >>> import shoal
    >>> result = shoal.train("cartpole", overrides=["run.total_steps=300", "run.progress=false",
    ...                                             "run.out='/tmp/shoal-doc'"])  # doctest: +SKIP
    >>> result.env_steps >= 300  # doctest: +SKIP
    True
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.config import Config, config_to_dict, load_config, load_run_config, save_config
from shoal.config.devices import CUDA_SETTINGS, cuda_refusal, needs_cuda
from shoal.config.opening import open_run
from shoal.errors import CheckpointError, ConfigError, RunDirError
from shoal.run.directory import RunDir
from shoal.run.imports import local_name
from shoal.run.loop import TrainResult
from shoal.run.runner import torch_threads

if TYPE_CHECKING:
    from shoal.runners.agents.epochs import EpochResult

__all__ = [
    "TrainResult",
    "evaluate_run",
    "evaluate_run_agents",
    "play_run",
    "plot",
    "train",
    "train_dqn",
]

CHECKPOINTS = ("best", "latest")
"""Which checkpoint ``evaluate_run`` reads: the best evaluation's weights or the latest."""


def _run(
    cfg: Config,
    run: RunDir | Callable[[], RunDir],
    resume: dict[str, Any] | None = None,
    on_eval: Callable[[int, float], bool] | None = None,
    evaluate_untrained: bool = False,
    probed: Any = None,
) -> TrainResult:
    """Build the configured runner (with what its preflight ``probed``) and drive it
    through :class:`~shoal.run.loop.RunLoop`.

    ``run`` is an existing run directory (resume; checked by the caller) or a function
    creating a new one: it is called only once the runner is built, the disk is checked,
    and the directory is removed again if the runner fails to start, so a failed start
    leaves nothing to block a retry.
    SIGTERM and SIGUSR1 stop the run as Ctrl-C does (:mod:`shoal.run.preemption`).
    """
    from shoal.run.checkpoint import checkpoint_fits
    from shoal.run.loop import RunLoop
    from shoal.run.preemption import preemption_signals
    from shoal.runners import runner_for
    from shoal.sync.segments import sweep_dead_segments

    sweep_dead_segments()
    with preemption_signals(), contextlib.ExitStack() as held:
        runner = build_runner(runner_for(cfg), cfg, probed)
        loop = None
        fresh = not isinstance(run, RunDir)
        try:
            if fresh:
                run = run()
                held.enter_context(run.lock())  # released after a failed start's removal
                save_config(cfg, run.config)
                run.check_writable(runner.checkpoint_bytes())
            with checkpoint_fits(run.checkpoint):
                loop = RunLoop(
                    runner,
                    run,
                    resume=resume,
                    title=_title(cfg),
                    on_eval=on_eval,
                    evaluate_untrained=evaluate_untrained,
                )
            if resume is not None:
                # Only once the checkpoint has loaded into this config (same shapes): a
                # failed resume leaves the run directory as it was.
                save_config(cfg, run.config)
            return loop.run()
        except BaseException as e:
            if fresh and isinstance(run, RunDir) and (loop is None or not loop.started):
                shutil.rmtree(run.path, ignore_errors=True)  # nothing trained: nothing kept
                e.run_dir = None  # type: ignore[attr-defined]  # the CLI's line: none saved
            raise
        finally:
            try:
                runner.stop()
            finally:
                runner.close()


def build_runner(cls: Any, cfg: Config, probed: Any = None) -> Any:
    """Runner class ``cls`` built on ``cfg`` (what training and ``shoal bench`` both run)
    with what its preflight probed of the env (None: it probes itself), or a one-line
    error when its parts do not fit in memory."""
    try:
        return cls(cfg) if probed is None else cls(cfg, probed)
    except MemoryError:
        raise ConfigError(
            "the run's parts do not fit in memory (config key 'replay.capacity' is "
            f"{cfg.replay.capacity}): lower it"
        ) from None


def _title(cfg: Config) -> str:
    return f"{cfg.env.id} ({cfg.run.runner})"


def train(
    config: Config | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
    resume: str | Path | None = None,
    network: Callable[..., Any] | str | None = None,
    on_eval: Callable[[int, float], bool] | None = None,
    trust_code: bool = False,
    evaluate_untrained: bool = False,
) -> TrainResult:
    """Train a DQN agent and return where it went and how it did.

    Args:
        config: a :class:`Config`, a preset name, a TOML path, or None for the defaults.
        overrides: ``SECTION.KEY=VALUE`` strings applied on top.
        run_dir: exact run directory to create (it must not exist); default
            ``run.out/NAME-TIME``.
        resume: an existing run directory to continue from its latest checkpoint; its saved
            config is used, with ``overrides`` on top (e.g. a larger ``run.total_steps``).
        network: your own Q-network: a factory ``(observation_space, action_space) ->
            nn.Module`` giving Q-values ``(batch, n_actions)``, or its ``"module:factory"``
            path (``dqn.network``). The run's config records its path, so ``shoal eval``
            and ``resume`` rebuild it; a factory defined in the main script trains on the
            runners that spawn no processes only (serial, threads, agents), and resuming
            such a run takes ``network=`` again.
        on_eval: called with (env step, mean greedy return) after every evaluation;
            returning True ends the run at its next episode boundary, checkpointed and
            evaluated as at its end (``shoal tune`` prunes trials this way).
        trust_code: ``resume`` may run code its config names (its env's modules, a
            network factory, a recipe: see :mod:`shoal.run.consent`); without it, a run
            that names any stops with one line listing the modules.
        evaluate_untrained: a new run evaluates its untrained network first, at step 0
            (an eval row with updates 0, also given to ``on_eval``): the baseline
            ``shoal tune`` compares each trial's score with.

    Everything is validated (config, env, run directory) before any work starts.
    """
    from shoal.runners import runner_for
    from shoal.sync.workers import check_not_bootstrapping

    check_not_bootstrapping("shoal.train")
    if network is not None:
        path = network if isinstance(network, str) else local_name(network)
        overrides = [*overrides, f"dqn.network={json.dumps(path)}"]
    if resume is not None:
        if config is not None:
            raise ConfigError("give either a config or resume=RUN_DIR, not both")
        return _resume(resume, overrides, on_eval, trust_code=trust_code)
    if isinstance(config, Config):
        cfg = load_config(None, overrides, values=config_to_dict(config))
    else:
        cfg = load_config(config, overrides)
    probed = runner_for(cfg).preflight(cfg)
    check_device(cfg)
    name = cfg.run.name or cfg.env.id.replace("/", "_").replace(":", "_")
    create = functools.partial(RunDir.create, cfg.run.out, name, run_dir)
    return _run(cfg, create, on_eval=on_eval, evaluate_untrained=evaluate_untrained, probed=probed)


def _resume(
    resume: str | Path,
    overrides: Sequence[str],
    on_eval: Callable[[int, float], bool] | None = None,
    *,
    trust_code: bool = False,
) -> TrainResult:
    """Continue the run in ``resume`` from its latest checkpoint (its config, with
    ``overrides`` on top), after every check that would fail it; this process holds the
    run's lock from before it reads the run's state to the end."""
    from shoal.config import parse_override

    given = frozenset(".".join(parse_override(o)[:2]) for o in overrides)
    with open_run(resume, trust_code=trust_code, given=given, lock=True) as (run, saved):
        cfg, state, probed = _resume_checks(run, saved, overrides, given)
        return _run(cfg, run, resume=state, on_eval=on_eval, probed=probed)


def _resume_checks(
    run: RunDir, saved: Config, overrides: Sequence[str], given: frozenset[str]
) -> tuple[Config, dict[str, Any], Any]:
    """The resumed run's config, checkpoint and what the preflight probed, once every check
    has passed (consent to its code was asked when it was opened): the same runner and env,
    a local Ray unless an address is given again, room for a checkpoint, a checkpoint to
    continue."""
    from shoal.run.checkpoint import load_checkpoint
    from shoal.runners import runner_for

    cfg = load_run_config(run.config, overrides)
    if cfg.run.runner != saved.run.runner:
        raise ConfigError(
            f"config key 'run.runner': {cfg.run.runner!r} cannot resume a run trained by "
            f"{saved.run.runner!r} (its checkpoint holds that runner's state)"
        )
    if cfg.env.id != saved.env.id:
        raise ConfigError(
            f"config key 'env.id': {cfg.env.id!r} cannot resume a run trained on "
            f"{saved.env.id!r} (its networks and replay are that env's)"
        )
    from shoal.runners.ray.address import local_unless_given

    local_unless_given(cfg, "run", given=given)  # never dial the cluster a received run names
    on_this_machine(cfg, f"run '{run.path}'", given)
    probed = runner_for(cfg).preflight(cfg)
    check_device(cfg)
    # Room for a checkpoint the size of the last one, before loading it.
    run.check_writable(run.checkpoint.stat().st_size if run.checkpoint.is_file() else 0)
    run.sweep()
    if not run.checkpoint.is_file() and run.error_checkpoint.is_file():
        raise CheckpointError(
            f"run '{run.path}' has no checkpoints/latest.pt, only error.pt, written when "
            "it failed; to continue from that state, rename it to latest.pt"
        )
    state = load_checkpoint(run.checkpoint)
    _check_unfinished(cfg, state, run)
    return cfg, state, probed


def on_this_machine(cfg: Config, where: str, given: frozenset[str] = frozenset()) -> None:
    """A saved run made on a GPU opens on a machine without one: each key of
    :data:`~shoal.config.devices.CUDA_SETTINGS` that names CUDA and that the user did not
    give again (``given``) takes ``'auto'`` (the CPU here), said in one line. A key the
    user gave is left for :func:`check_device` to refuse."""
    import torch

    if torch.cuda.is_available():
        return
    moved = []
    for key in CUDA_SETTINGS:
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if key not in given and needs_cuda(key, value):
            setattr(getattr(cfg, section), name, "auto")  # each key's CPU choice
            moved.append(f"{key} = {value!r}")
    if moved:
        print(
            f"shoal: {where} was made on a GPU ({', '.join(moved)}); this machine has no "
            "CUDA device, so it runs on the CPU",
            file=sys.stderr,
        )


def check_device(cfg: Config) -> None:
    """``run.device``, ``run.compile`` and ``run.acting_device`` name what this machine has
    (before any work)."""
    import torch

    here = torch.cuda.is_available()
    for key in CUDA_SETTINGS:
        section, name = key.split(".")
        refusal = cuda_refusal(key, getattr(getattr(cfg, section), name), cuda_here=here)
        if refusal:
            raise ConfigError(refusal)


def _check_unfinished(cfg: Config, state: dict[str, Any], run: RunDir) -> None:
    """A resume that would train nothing says so, and how to train on."""
    loop = state["loop"]
    if loop["step"] >= cfg.run.total_steps:
        raise ConfigError(
            f"run '{run.path}' already reached run.total_steps = {cfg.run.total_steps} "
            f"(step {loop['step']}); to train on, resume with --set run.total_steps=MORE"
        )
    if cfg.run.stop_return is not None and loop.get("solved_step") is not None:
        raise ConfigError(
            f"run '{run.path}' was solved at step {loop['solved_step']} (run.stop_return = "
            f"{cfg.run.stop_return}); to train on, resume with --set run.stop_return=none"
        )


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


@contextlib.contextmanager
def open_run_checkpoint(
    run_dir: str | Path, episodes: int, checkpoint: str, *, trust_code: bool = False
) -> Iterator[tuple[Config, dict[str, Any], Path]]:
    """A finished or stopped run's config, its ``best`` or ``latest`` checkpoint and that
    checkpoint's path (``episodes``, what the caller will play, is checked first), for the
    block's length: the run is open as :func:`~shoal.config.opening.open_run` opens it (one
    line if its config names code of its own, unless ``trust_code``)."""
    from shoal.run.checkpoint import load_checkpoint

    if episodes <= 0:
        raise ConfigError(f"episodes: {episodes} is out of range; allowed: > 0")
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint: {checkpoint!r} is not one of 'best', 'latest'")
    with open_run(run_dir, trust_code=trust_code) as (run, cfg):
        on_this_machine(cfg, f"run '{run.path}'")
        path = run.best if checkpoint == "best" else run.checkpoint
        if checkpoint == "best" and not path.is_file():
            path = run.checkpoint  # a run stopped before its first evaluation has only latest
        yield cfg, load_checkpoint(path, best=path == run.best), path


def _multi_agent(cfg: Config) -> bool:
    from shoal.runners import runner_for

    return bool(getattr(runner_for(cfg), "multi_agent", False))


def evaluate_run(
    run_dir: str | Path,
    episodes: int = 20,
    seed: int | None = None,
    checkpoint: str = "best",
    *,
    trust_code: bool = False,
) -> np.ndarray:
    """Greedy returns of a run's ``best`` (default) or ``latest`` checkpoint over
    ``episodes`` fresh episodes (a multi-agent run: the collective return of each), as
    the run's runner evaluates its checkpoints. The default ``seed`` (the run's + 1) gives
    starts the training-time evaluations never saw. ``trust_code``: the run may run code
    its config names (see :func:`train`)."""
    return evaluate_run_agents(run_dir, episodes, seed, checkpoint, trust_code=trust_code)[0]


def evaluate_run_agents(
    run_dir: str | Path,
    episodes: int = 20,
    seed: int | None = None,
    checkpoint: str = "best",
    *,
    trust_code: bool = False,
) -> tuple[np.ndarray, dict[str, float]]:
    """:func:`evaluate_run` 's returns, and each agent's mean return in those episodes by
    name (a multi-agent run; empty for a single-agent one): the run is opened once."""
    from shoal.run.checkpoint import checkpoint_fits
    from shoal.runners import runner_for

    with open_run_checkpoint(run_dir, episodes, checkpoint, trust_code=trust_code) as opened:
        cfg, state, path = opened
        seed = cfg.run.seed + 1 if seed is None else seed
        with checkpoint_fits(path, "the run's config"), torch_threads(cfg.run.torch_threads):
            runner = runner_for(cfg)
            return runner.evaluate_checkpoint_agents(cfg, state, episodes, seed, Path(run_dir))


def play_run(
    run_dir: str | Path,
    episodes: int = 20,
    seed: int | None = None,
    checkpoint: str = "best",
    *,
    epsilon: float = 0.0,
    trust_code: bool = False,
) -> list[EpochResult]:
    """Episodes of a multi-agent run's agents (its ``best`` or ``latest`` weights), greedy
    unless ``epsilon`` says otherwise: every agent's return, the turns and the social
    outcomes of each (:class:`~shoal.runners.agents.epochs.EpochResult`). Episode k resets with a
    seed derived from ``seed`` (default: the run's seed + 1, starts its evaluations never
    saw) and k, so two runs, or trained and random agents (``epsilon=1``), meet the same
    worlds. ``trust_code``: the run may run code its config names (see :func:`train`)."""
    from shoal.run.checkpoint import checkpoint_fits
    from shoal.runners.agents.epochs import play_checkpoint

    with open_run_checkpoint(run_dir, episodes, checkpoint, trust_code=trust_code) as opened:
        cfg, state, path = opened
        if not _multi_agent(cfg):
            raise ConfigError(
                f"run.runner {cfg.run.runner!r}: play_run needs a multi-agent run "
                "(e.g. run.runner = 'agents'); evaluate_run plays single-agent runs"
            )
        base = cfg.run.seed + 1 if seed is None else seed
        with checkpoint_fits(path, "the run's config"), torch_threads(cfg.run.torch_threads):
            return play_checkpoint(cfg, state["learner"], episodes, base, epsilon=epsilon)


def plot(run_dir: str | Path) -> Path:
    """(Re)draw a run's ``curve.png`` from its ``metrics.csv``."""
    from shoal.run.curve import plot_run

    run = RunDir.open(run_dir)
    if not run.metrics.is_file():
        raise ConfigError(f"run directory '{run.path}' has no metrics.csv yet")
    title = _title(load_run_config(run.config))
    try:
        return plot_run(run.metrics, run.curve, title=title)
    except OSError as e:  # a run on a read-only disk, a full one
        raise RunDirError(
            f"run directory '{run.path}': cannot write {run.curve.name} "
            f"({e.strerror or type(e).__name__})"
        ) from None
