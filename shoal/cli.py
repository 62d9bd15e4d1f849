"""The ``shoal`` command line: train, eval, plot.

Any bad input (config key, value, file, env id, checkpoint, run directory) prints one line
``shoal: error: ...`` and exits with code 2, having written nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from shoal.config import MAX_BATCH, describe_config, preset_names
from shoal.errors import ShoalError
from shoal.mapf.options import MapfEvalOptions
from shoal.options import (
    add_options,
    count_up_to,
    finite_float,
    non_negative_int,
    parse_options,
    positive_int,
)
from shoal.runners import runner_names

if TYPE_CHECKING:
    from shoal.run.loop import TrainResult

__all__ = ["main"]

MAX_TRIALS = 10**6
"""Most trials a study may ask for (each one is a training run)."""
MAX_PUZZLES = 10**6
"""Most puzzles ``shoal sudoku train --generate`` makes (all before the first is played)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose epilog may be computed when help is shown: listing every
    runner's config keys loads the runners, which only ``--help`` should pay for."""

    def format_help(self) -> str:
        factory = getattr(self, "epilog_factory", None)
        if factory is not None:
            self.epilog = factory()
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        """A bad argument is one line, as any other bad input (argparse prints the usage
        first); ``--help`` shows the usage."""
        line = " ".join(message.split())
        print(f"shoal: error: {line} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _train_epilog() -> str:
    from shoal.runners import describe_runners

    return f"runners:\n{describe_runners()}\n\nconfig keys (defaults):\n{describe_config()}"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="shoal",
        description="Parallel and distributed reinforcement learning.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    _train_parser(sub)
    _tune_parser(sub)
    _bench_parser(sub)
    _eval_parser(sub)
    pl = sub.add_parser("plot", help="redraw a run's curve.png from its metrics.csv")
    pl.add_argument("run_dir", metavar="RUN_DIR")
    up = sub.add_parser(
        "upgrade",
        help="convert a trusted run's checkpoints from an older shoal to the safe format",
        description=(
            "Checkpoints of shoal before shoal-checkpoint-v3 pickled numpy arrays and\n"
            "objects, so reading them can run code; shoal now reads checkpoints with\n"
            "torch.load(weights_only=True) and refuses them. If you trust the run (you made\n"
            "it), this rewrites each checkpoint in the safe format, atomically."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.add_argument("run_dir", metavar="RUN_DIR")
    up.add_argument(
        "--trust",
        action="store_true",
        help="required: reading the old files runs whatever they hold",
    )
    _sudoku_parser(sub)
    _mapf_parser(sub)
    return parser


def _add_run_arguments(
    p: argparse.ArgumentParser,
    example: str,
    metavar: str,
    *,
    run_dir: bool = True,
    out: bool = True,
) -> None:
    """--set, --out, --run-dir and --no-progress, shared by every training command."""
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar=metavar,
        help=f"override a config key (repeatable), e.g. --set {example}",
    )
    if out:
        p.add_argument("--out", help="parent directory of run directories")
    if run_dir:
        p.add_argument("--run-dir", help="exact run directory to create (must not exist)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _train_parser(sub: argparse._SubParsersAction) -> None:
    train = _config_command(
        sub,
        "train",
        "train a DQN agent (a preset, a TOML config, or any gymnasium env id)",
        "Train a DQN agent. CONFIG is a preset "
        f"({', '.join(preset_names())}) or a TOML file; without it the defaults below "
        "are used. Every config key can be set with --set SECTION.KEY=VALUE.",
        "preset name or TOML config file",
        ray_address=True,
    )
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint")
    _add_trust_code(train, "--resume: the run")


def _config_command(
    sub: argparse._SubParsersAction,
    name: str,
    help: str,
    description: str,
    config_help: str,
    *,
    ray_address: bool,
    writes: bool = True,
) -> argparse.ArgumentParser:
    """A command that builds a run's config (train, tune, bench): CONFIG, the flags that
    set config keys, and the runners and keys listed under --help. ``writes``: the command
    trains runs to their end and writes them (not bench: no --out, no --steps)."""
    p = sub.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.epilog_factory = _train_epilog  # type: ignore[attr-defined]
    p.add_argument("config", nargs="?", help=config_help)
    _add_config_flags(p, ray_address=ray_address, writes=writes)
    return p


def _add_config_flags(
    train: argparse.ArgumentParser, *, ray_address: bool, writes: bool = True
) -> None:
    """The flags that set config keys (shared by train, tune and bench)."""
    _add_user_code_arguments(train)
    _add_run_arguments(train, "dqn.lr=1e-3", "SECTION.KEY=VALUE", run_dir=ray_address, out=writes)
    train.add_argument(
        "--runner",
        help=f"training scheme: {', '.join(runner_names())} (sets run.runner; see below)",
    )
    train.add_argument(
        "--learner-threads",
        type=positive_int,
        metavar="K",
        help="learner threads of the threads runner (sets threads.learner_threads)",
    )
    train.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="rollout worker processes of the processes runner, or actors of the ray "
        "runner: sets the key of the runner the run resolves to, however it was chosen "
        "(processes.workers or ray.actors)",
    )
    if ray_address:
        train.add_argument(
            "--ray-address",
            metavar="HOST:PORT",
            help="a running Ray cluster for the ray runner to join (sets ray.address; "
            "default: RAY_ADDRESS, else a local Ray for the run)",
        )
    train.add_argument(
        "--agents",
        type=positive_int,
        metavar="K",
        help="agents in the world of the agents runner (sets agents.agents)",
    )
    train.add_argument(
        "--num-envs",
        type=positive_int,
        metavar="N",
        help="envs each actor steps side by side, one batched forward (sets env.num_envs)",
    )
    train.add_argument(
        "--vector",
        metavar="ENGINE",
        help="how an actor's envs are stepped: sync, async or envpool (sets env.vector)",
    )
    if writes:
        train.add_argument("--steps", type=positive_int, help="env steps (sets run.total_steps)")
    train.add_argument("--seed", type=non_negative_int, help="run seed (sets run.seed)")
    train.add_argument("--device", help="auto, cpu or cuda (sets run.device)")


def _tune_parser(sub: argparse._SubParsersAction) -> None:
    tune = _config_command(
        sub,
        "tune",
        "search hyperparameters for an env and runner (Optuna), best config as TOML",
        "Search hyperparameters with Optuna: its TPE sampler proposes configs, each\n"
        "trial is a shoal run (CONFIG and the flags below give the base config), trials\n"
        "that evaluate below the median of the others are pruned, and each finished\n"
        "trial is scored by its best.pt on --eval-episodes fresh greedy episodes.\n"
        "The study directory holds the trials' runs, trials.csv and best.toml (train\n"
        "it with `shoal train STUDY/best.toml`); --resume continues a stopped study.\n"
        "The default space (dqn.lr, gamma, batch_size, hidden, n_step, target_period,\n"
        "run.replay_ratio, explore.eps_end, eps_decay_steps) comes from the recipe;\n"
        "--space FILE adds or replaces keys ([space.SECTION] tables of {low, high,\n"
        "log} or {choices}) and keep = [...] leaves default keys at the config's value;\n"
        "keys given with --set are not searched.",
        "preset name or TOML config file (the base)",
        ray_address=False,
    )
    tune.add_argument("--space", metavar="FILE", help="search-space TOML file")
    tune.add_argument(
        "--trials", type=count_up_to(MAX_TRIALS), help="trials in the study in all (default 50)"
    )
    tune.add_argument(
        "--hours",
        type=finite_float,
        help="wall-clock hours of the study; no trial starts after them (default: none)",
    )
    tune.add_argument(
        "--parallel", type=count_up_to(1024), help="trials side by side (default 1, at most 1024)"
    )
    tune.add_argument(
        "--eval-episodes",
        type=count_up_to(MAX_BATCH),
        default=20,
        help="episodes scoring best.pt (default 20)",
    )
    tune.add_argument("--study-dir", metavar="DIR", help="the study's directory (must not exist)")
    tune.add_argument("--resume", dest="study_resume", metavar="DIR", help="continue a study")
    _add_trust_code(tune, "--resume: the study")
    tune.add_argument(
        "--ray",
        action="store_true",
        help="run trials as Ray tasks (on a local Ray, or at --ray-address); without it, "
        "trials are local processes",
    )
    tune.add_argument(
        "--ray-address",
        dest="tune_ray_address",
        metavar="HOST:PORT",
        help="the Ray cluster for the trials (implies --ray; default: RAY_ADDRESS)",
    )


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    bench = _config_command(
        sub,
        "bench",
        "which training scheme pays for this env and config on this machine, and why",
        "Time the parts a run is made of on this env and config (env step, batched\n"
        "forward, update, replay, weight publish and pull, a worker's message), predict\n"
        "from them each scheme's env steps/s at the config's replay ratio, then run each\n"
        "scheme for a short measured window and print predicted against measured, the\n"
        "scheme to use, and why. processes and ray are weighed at one size (from the\n"
        "cores, --workers N, or as the config sets). Serial and the fastest others get a\n"
        "second window each; a lead short of 1.1x, or not ahead on every window, is too\n"
        "close to call (serial, the safe choice), and of two that clear it within 1.1x\n"
        "of each other the simpler is named. Epsilon is at its end value throughout, as\n"
        "most of a run's steps go. Writes nothing (no run directory).",
        "preset name or TOML config file",
        ray_address=False,
        writes=False,
    )
    bench.add_argument(
        "--seconds",
        type=float,
        default=120.0,
        help="the measuring budget in seconds (default 120, at most 86400: a day); the "
        "runners' start-ups come on top, and the bench says first about how long",
    )
    bench.add_argument(
        "--runners",
        metavar="LIST",
        help="schemes to weigh, comma-separated: serial, threads, processes, ray; for a "
        "multi-agent world agents, agents-thread, agents-process (default: every one "
        "that applies)",
    )
    bench.add_argument("--json", action="store_true", help="print the report as JSON")


def _eval_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("eval", help="evaluate a run's best (or latest) checkpoint greedily")
    ev.add_argument("run_dir", metavar="RUN_DIR")
    ev.add_argument(
        "--checkpoint",
        choices=("best", "latest"),
        default="best",
        help="best: the weights of the best evaluation during training (default); "
        "latest: the last checkpoint",
    )
    ev.add_argument(
        "--episodes", type=count_up_to(MAX_BATCH), default=20, help="episodes (default 20)"
    )
    ev.add_argument("--seed", type=non_negative_int, help="reset seed (default: run seed + 1)")
    _add_trust_code(ev, "the run")
    ex = sub.add_parser(
        "export",
        help="write a run's trained network weights (a state_dict) for your own code",
        description="Writes the network's state_dict of a single-agent run's best (or latest)\n"
        "checkpoint with torch.save; load it into your network with\n"
        "net.load_state_dict(torch.load(FILE, weights_only=True)), or use\n"
        "shoal.load_policy(RUN_DIR) in Python.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("run_dir", metavar="RUN_DIR")
    ex.add_argument("--checkpoint", choices=("best", "latest"), default="best")
    ex.add_argument("--out", required=True, metavar="FILE", help="where to write the weights")
    _add_trust_code(ex, "the run")


def _add_trust_code(p: argparse.ArgumentParser, what: str) -> None:
    """``--trust-code``: the opt-in to run code a received run names (shoal.run.consent)."""
    p.add_argument(
        "--trust-code",
        action="store_true",
        help=f"{what} may run code its config names (its env's modules, a network factory, "
        "a recipe); without it such a run stops, naming the modules",
    )


def _sudoku_parser(sub: argparse._SubParsersAction) -> None:
    sudoku = sub.add_parser("sudoku", help="tabular Q-learning on Sudoku with a shared Q-table")
    sub2 = sudoku.add_subparsers(dest="sudoku_command", required=True, metavar="COMMAND")
    _sudoku_train_parser(sub2)
    so = sub2.add_parser("solve", help="solve puzzles greedily with a learned table")
    what = so.add_mutually_exclusive_group(required=True)
    what.add_argument("puzzle", nargs="?", help="one puzzle as 81 (or 16) characters")
    what.add_argument("--file", help="puzzle file, or a bundled set name")
    so.add_argument(
        "--table",
        required=True,
        metavar="RUN_DIR",
        help="a `sudoku train` run directory (or a table .npz inside one)",
    )
    so.add_argument(
        "--seed", type=non_negative_int, default=0, help="tie-breaking seed (default 0)"
    )


def _sudoku_train_parser(sub2: argparse._SubParsersAction) -> None:
    tr = sub2.add_parser(
        "train",
        help="learn on many puzzles with worker processes sharing one Q-table",
        description=(
            "Split the puzzles into one chunk per worker process; all workers learn into\n"
            "one shared-memory Q-table (or private ones with --independent). CONFIG is a\n"
            "TOML file with a [sudoku] table; every key below can also be set with\n"
            "--set KEY=VALUE (or sudoku.KEY=VALUE). The run directory is OUT/NAME-TIME\n"
            "(or --run-dir) with config.toml, metrics.csv (one row per puzzle),\n"
            "puzzles.txt and table.npz."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Computed when help is shown: describing the keys imports the Sudoku runner (numpy,
    # gymnasium), which other commands should not pay for at start-up.
    tr.epilog_factory = lambda: (  # type: ignore[attr-defined]
        "config keys (defaults):\n" + _describe(None)
    )
    tr.add_argument("config", nargs="?", help="TOML config file with a [sudoku] table")
    src = tr.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--puzzles",
        metavar="FILE",
        help="puzzle file, or a bundled set name (easy9, medium9, easy4)",
    )
    src.add_argument(
        "--generate",
        type=count_up_to(MAX_PUZZLES),
        metavar="K",
        help=f"generate K puzzles (at most {MAX_PUZZLES:,})",
    )
    tr.add_argument(
        "--givens",
        type=count_up_to(81),
        default=45,
        help="givens of generated puzzles (default 45)",
    )
    tr.add_argument(
        "--size", type=int, choices=(4, 9), default=9, help="size of generated puzzles (default 9)"
    )
    tr.add_argument("--workers", type=positive_int, help="worker processes (sets sudoku.workers)")
    tr.add_argument(
        "--episodes-per-puzzle",
        type=positive_int,
        help="most episodes per puzzle (sets sudoku.episodes_per_puzzle)",
    )
    tr.add_argument("--encoder", help="table key: local or exact (sets sudoku.encoder)")
    tr.add_argument("--lock", help="global, striped or none (sets sudoku.lock)")
    tr.add_argument("--independent", action="store_true", help="one private table per worker")
    tr.add_argument("--seed", type=non_negative_int, help="seed (sets sudoku.seed)")
    _add_run_arguments(tr, "bonus=0.5 or sudoku.bonus=0.5", "KEY=VALUE")


def _mapf_parser(sub: argparse._SubParsersAction) -> None:
    mapf = sub.add_parser("mapf", help="multi-agent path finding: evaluate against baselines")
    sub2 = mapf.add_subparsers(dest="mapf_command", required=True, metavar="COMMAND")
    ev = sub2.add_parser(
        "eval",
        help="compare a run's policy, it without communication, and shortest-path agents",
        description=(
            "Play the same MAPF instances with a run's policy, the same network with\n"
            "communication off, and independent shortest-path agents (each follows its own\n"
            "BFS path and waits on conflicts); print success rate, makespan and sum of\n"
            "costs, also over the instances every policy solved (the fair comparison)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(ev, MapfEvalOptions)


def _describe(obj: object) -> str:
    """The ``[sudoku]`` keys with their values (defaults for None) and docstrings."""
    from shoal.config import describe_section
    from shoal.tabular.sudoku_training import SECTION, SudokuConfig

    return describe_section(obj if obj is not None else SudokuConfig(), SECTION)


def _add_user_code_arguments(train: argparse.ArgumentParser) -> None:
    """--env, --import and --network: the env (maybe the user's own package's) and the
    user's own network."""
    train.add_argument("--env", metavar="ID", help="gymnasium env id (sets env.id)")
    train.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="a module to import first, here and in every worker: one that registers your "
        "env or world (repeatable; sets env.imports; the working directory is searched)",
    )
    train.add_argument(
        "--network",
        metavar="MODULE:FACTORY",
        help="your own Q-network: a factory (observation_space, action_space) -> nn.Module "
        "giving Q-values (batch, n_actions) (sets dqn.network)",
    )


def _run_overrides(args: argparse.Namespace) -> list[str]:
    """The config overrides a training command's flags say: shortcut flags first, so that
    an explicit --set wins."""
    shortcuts = {
        "env.id": args.env,
        "run.runner": args.runner,
        "run.total_steps": getattr(args, "steps", None),
        "run.seed": args.seed,
        "run.device": args.device,
        "run.out": getattr(args, "out", None),
        "threads.learner_threads": args.learner_threads,
        "ray.address": getattr(args, "ray_address", None),
        "agents.agents": args.agents,
        "env.num_envs": args.num_envs,
        "env.vector": args.vector,
        "env.imports": args.imports,
        "dqn.network": args.network,
    }
    overrides = [
        f"{k}={json.dumps(v)}" if isinstance(v, (str, list)) else f"{k}={v}"  # TOML text
        for k, v in shortcuts.items()
        if v is not None
    ] + list(args.overrides)
    if args.no_progress:
        overrides.append("run.progress=false")
    if args.workers is not None:
        overrides.append(_workers_override(args, overrides))
    return overrides


def _train(args: argparse.Namespace) -> int:
    from shoal.api import train

    if args.resume and (args.config or args.env or args.run_dir):
        raise ShoalError(
            "--resume continues a run with its own config; drop CONFIG/--env/--run-dir"
        )
    overrides = _run_overrides(args)
    try:
        if args.resume:
            result = train(resume=args.resume, overrides=overrides, trust_code=args.trust_code)
        else:
            result = train(args.config, overrides=overrides, run_dir=args.run_dir)
    except KeyboardInterrupt as e:
        return _interrupted(e, args.resume)
    solved = (
        f", solved at step {result.solved_step} ({result.solved_wall_seconds:.1f} s)"
        if result.solved_step is not None
        else ""
    )
    print(
        f"run {result.run_dir}: eval return {_shown(result.eval_return)}{_best(result)}, "
        f"{result.env_steps} env steps, {result.updates} updates, "
        f"{result.wall_seconds:.1f} s{solved}"
    )
    return 0


def _best(result: TrainResult) -> str:
    """The best evaluation (what ``best.pt`` holds) beside the last, where they differ:
    ``shoal eval`` scores best.pt, so the last evaluation alone misleads."""
    best = result.best_eval_return
    if best is None or best == result.eval_return:
        return ""
    return f" (best {_shown(best)}, in best.pt)"


def _shown(value: float) -> str:
    """A return as the final line shows it: one decimal from 10 up, two below (a return
    of 0.87 is not 0.9)."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _tune(args: argparse.Namespace) -> int:
    from shoal.tune import study as tuning

    tuning._optuna()  # without Optuna: one line, before any config is read
    try:
        if args.study_resume:
            if args.config or args.env or args.overrides or args.space or args.study_dir:
                raise ShoalError(
                    "--resume continues a study with its own config and space; drop "
                    "CONFIG/--env/--set/--space/--study-dir"
                )
            result = tuning.resume_study(
                args.study_resume,
                trials=args.trials,
                hours=args.hours,
                parallel=args.parallel,
                progress=not args.no_progress,
                trust_code=args.trust_code,
                ray_address=args.tune_ray_address,
            )
        else:
            result = _new_study(args, tuning)
    except KeyboardInterrupt as e:
        where = getattr(e, "study_dir", None) or args.study_resume or args.study_dir
        saved = (
            f"the study is saved in {where} (trials cut short run again); continue with "
            f"`shoal tune --resume {where}`"
        )
        return _stopped(e, None if where is None else saved, "before the study started")
    return _tune_said(result)


def _tune_said(result: Any) -> int:
    """The end of a study (a ``TuneResult``) as lines: the best trial, or none; a warning
    where the best trial may not have learned, and one where no trial did, with what to
    raise. The exit code: 1 where every trial failed, else 0."""
    counts = ", ".join(f"{n} {state}" for state, n in sorted(result.trials.items()))
    if result.failed:
        print(f"shoal: error: study {result.study_dir}: {result.failed}", file=sys.stderr)
        return 1
    if result.best_value is None:
        print(f"study {result.study_dir}: no trial finished ({counts})")
        return 0
    print(
        f"study {result.study_dir}: best {result.best_value:.2f} (trial "
        f"{result.best_trial}; {counts}); train it with `shoal train {result.best_config}`"
    )
    if result.warning:
        hint = "" if result.none_learned else " (give trials more env steps: --steps)"
        print(
            f"shoal: warning: trial {result.best_trial} may not have learned: "
            f"{result.warning}; its score says little of its settings{hint}",
            file=sys.stderr,
        )
    if result.none_learned:
        print(f"shoal: warning: {result.none_learned}", file=sys.stderr)
    return 0


def _new_study(args: argparse.Namespace, tuning: Any) -> Any:
    """A new study from the command line's base config, space and settings."""
    from shoal.config import load_config, parse_override
    from shoal.run.directory import RunDir
    from shoal.runners import runner_for
    from shoal.tune.space import SearchSpace, read_space_file

    overrides = _run_overrides(args)
    base = load_config(args.config, overrides)
    runner_for(base).preflight(base)
    fixed = [".".join(parse_override(o)[:2]) for o in args.overrides]
    space_file = read_space_file(args.space) if args.space else None
    space = SearchSpace.build(base, space_file, fixed)
    # best.toml trains to the config's own budget, not the trials' (--steps, run.total_steps)
    budget = {("run", "total_steps"), ("run", "max_minutes")}
    own = load_config(args.config, [o for o in overrides if parse_override(o)[:2] not in budget])
    settings = tuning.TuneSettings(
        eval_episodes=args.eval_episodes,
        seed=base.run.seed,
        ray=bool(args.ray or args.tune_ray_address),
        ray_address=args.tune_ray_address or "",
        train_steps=own.run.total_steps,
        train_minutes=own.run.max_minutes,
    )
    for name in ("trials", "hours", "parallel"):
        if getattr(args, name) is not None:
            setattr(settings, name, getattr(args, name))
    settings.check()
    study_dir = args.study_dir
    if study_dir is None:  # a new, empty directory, named as runs are
        name = base.run.name or base.env.id.replace("/", "_").replace(":", "_")
        study_dir = RunDir.create(args.out or "studies", name, resumable=False).path
    return tuning.tune(base, space, settings, study_dir, progress=not args.no_progress)


def _interrupted(e: KeyboardInterrupt, resumed: str | None) -> int:
    """The line after Ctrl-C, SIGTERM or SIGUSR1 stopped a run (its checkpoint written):
    where it is and how to go on. ``e.run_dir`` is the run's directory, None where a run
    cut before training began was removed; a resumed run's stays."""
    run_dir = getattr(e, "run_dir", resumed)
    saved = f"checkpoint saved in {run_dir}; continue with `shoal train --resume {run_dir}`"
    # Cut before the run directory existed: nothing to resume.
    return _stopped(
        e, None if run_dir is None else saved, "before training started; nothing was saved"
    )


def _stopped(e: KeyboardInterrupt, saved: str | None, unsaved: str) -> int:
    """Print why the command stopped and what was kept (``saved``, else ``unsaved``);
    the exit code: 130 for Ctrl-C, 128 + the signal for SIGTERM or SIGUSR1."""
    from shoal.run.preemption import Preempted

    why = f"stopped by {e.args[0]}" if isinstance(e, Preempted) else "interrupted"
    print(f"shoal: {why}{'; ' + saved if saved else ' ' + unsaved}", file=sys.stderr)
    return e.exit_code if isinstance(e, Preempted) else 130


def _workers_override(args: argparse.Namespace, overrides: list[str]) -> str:
    """``--workers`` as the key of the runner the run resolves to, wherever the runner
    was chosen (``--runner``, a preset, a TOML file, ``--set`` or the resumed run)."""
    from shoal.config import load_config, load_run_config
    from shoal.run.directory import RunDir
    from shoal.runners import runner_class, runner_for, runner_names

    resume = getattr(args, "resume", None)
    if resume:  # a run's config is read as data (shoal.run.consent)
        cfg = load_run_config(RunDir.open(resume).config, overrides)
    else:
        cfg = load_config(args.config, overrides)
    key = runner_for(cfg).workers_key
    if key is None:
        takes = [n for n in runner_names() if runner_class(n).workers_key]
        raise ShoalError(
            f"--workers: run.runner {cfg.run.runner!r} has no workers (it goes with "
            f"{', '.join(map(repr, takes))})"
        )
    return f"{key}={args.workers}"


def _export(args: argparse.Namespace) -> int:
    import torch

    from shoal.policy import load_policy
    from shoal.run.files import atomic_write

    out = Path(args.out)
    if out.is_dir():
        raise ShoalError(f"--out '{out}' is a directory; name a file (e.g. {out}/policy.pt)")
    policy = load_policy(args.run_dir, args.checkpoint, trust_code=args.trust_code)
    state = policy.network.state_dict()
    try:
        atomic_write(out, lambda f: torch.save(state, f))
    except OSError as e:
        raise ShoalError(f"--out '{out}': cannot write it ({e.strerror or e})") from None
    network = policy.config.dqn.network or "shoal's network (dqn.hidden, dqn.dueling, ...)"
    print(f"wrote {out}: {len(state)} tensors of {network}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    """A run's greedy returns; a multi-agent run's are the team's (every agent's summed),
    with each agent's own mean after them."""
    from shoal.api import evaluate_run_agents

    returns, agents = evaluate_run_agents(
        args.run_dir, args.episodes, args.seed, args.checkpoint, trust_code=args.trust_code
    )
    each = ", ".join(f"{a} {m:.2f}" for a, m in agents.items())
    print(
        f"{len(returns)} episodes: mean {returns.mean():.2f}, std {returns.std():.2f}, "
        f"min {returns.min():.2f}, max {returns.max():.2f}"
        + (f"; each agent's mean: {each}" if agents else "")
    )
    return 0


def _plot(args: argparse.Namespace) -> int:
    from shoal.api import plot

    print(f"wrote {plot(args.run_dir)}")
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    from shoal.run.checkpoint import upgrade_checkpoint
    from shoal.run.directory import RunDir

    if not args.trust:
        raise ShoalError(
            "upgrade reads checkpoints with the unsafe loader, which runs any code they hold: "
            "add --trust if you trust the run"
        )
    run = RunDir.open(args.run_dir)
    paths = sorted(run.checkpoint.parent.glob("*.pt"))
    if not paths:
        raise ShoalError(f"run directory '{run.path}' has no checkpoints")
    with run.lock():  # a run training now rewrites them too: one writer at a time
        for path in paths:
            done = upgrade_checkpoint(path)
            print(f"{path}: {'upgraded' if done else 'already safe'}")
    return 0


def _puzzle_source(name: str) -> list:
    from pathlib import Path

    from shoal.envs.sudoku_puzzles import bundled_names, bundled_puzzles, load_puzzles

    if not Path(name).exists() and name in bundled_names():
        return bundled_puzzles(name)
    return load_puzzles(name)


def _train_sudoku(args: argparse.Namespace, cfg: Any) -> Any:
    """The puzzles (a file or generated) and their training, SIGTERM and SIGUSR1 taken as
    Ctrl-C (the workers stop, the shared table is saved); a stop says whether training
    had begun (``e.training``)."""
    import numpy as np

    from shoal.run.preemption import preemption_signals
    from shoal.tabular.sudoku_training import train_sudoku

    training = False
    try:
        with preemption_signals():
            if args.puzzles:
                puzzles = _puzzle_source(args.puzzles)
            else:
                from shoal.envs.sudoku_puzzles import generate

                rng = np.random.default_rng(cfg.seed)
                puzzles = [
                    generate(args.givens, size=args.size, rng=rng) for _ in range(args.generate)
                ]
            training = True
            return train_sudoku(puzzles, cfg, args.run_dir)
    except KeyboardInterrupt as e:
        e.training = training  # type: ignore[attr-defined]
        raise


def _sudoku(args: argparse.Namespace) -> int:
    from shoal.config import load_section
    from shoal.tabular.sudoku_training import SECTION, SudokuConfig, solve_sudoku

    if args.sudoku_command == "solve":
        from shoal.envs.sudoku_puzzles import format_puzzle, parse_puzzle

        puzzles = [parse_puzzle(args.puzzle)] if args.puzzle else _puzzle_source(args.file)
        solved = solve_sudoku(puzzles, args.table, seed=args.seed)
        for i, (p, ok) in enumerate(zip(puzzles, solved)):
            print(f"{i}\t{format_puzzle(p)}\t{'solved' if ok else 'not solved'}")
        print(f"solved {sum(solved)} of {len(solved)} ({100 * sum(solved) / len(solved):.1f}%)")
        return 0
    shortcuts = {
        "workers": args.workers,
        "episodes_per_puzzle": args.episodes_per_puzzle,
        "encoder": args.encoder,
        "lock": args.lock,
        "seed": args.seed,
        "out": args.out,
        "independent": True if args.independent else None,
        "progress": False if args.no_progress else None,
    }
    # Shortcut flags come before --set, so that an explicit --set wins (as in `shoal train`).
    cfg = load_section(
        SudokuConfig,
        SECTION,
        args.config,
        overrides=args.overrides,
        values={k: v for k, v in shortcuts.items() if v is not None},
    )
    try:
        result = _train_sudoku(args, cfg)
    except KeyboardInterrupt as e:
        where = f" in {args.run_dir}" if args.run_dir else " in its run directory"
        began = getattr(e, "training", False)
        saved = f"the table and metrics so far are saved{where}" if began else None
        return _stopped(e, saved, "before training started; nothing was saved")
    print(
        f"{len(result.rows)} puzzles, {cfg.workers} workers "
        f"({'independent tables' if cfg.independent else f'shared table, {cfg.lock} lock'}): "
        f"solved {100 * result.solve_rate:.1f}%, mean episodes to first solve "
        f"{result.mean_episodes(cfg.episodes_per_puzzle):.2f}, table {result.table_size} pairs, "
        f"{result.wall_seconds:.1f} s -> {result.run_dir}"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from shoal.bench import bench, check_seconds
    from shoal.run.progress import TrainProgress

    check_seconds(args.seconds)  # before anything starts: no bar, no timing

    schemes = None if args.runners is None else [s.strip() for s in args.runners.split(",")]
    size, args.workers = args.workers, None
    overrides = _run_overrides(args)
    if size is not None:  # the one size the bench weighs processes and ray at
        overrides += [f"processes.workers={size}", f"ray.actors={size}"]
    shown = not (args.no_progress or args.json)
    spent = [0.0]  # the budget's seconds handed to stages so far: the bar's position

    def stage(name: str, seconds: float) -> None:
        bar.update(round(spent[0]), timing=name)
        spent[0] += seconds

    try:
        total = max(1, round(args.seconds))
        with TrainProgress(total, enabled=shown, description="bench (s)") as bar:
            report = bench(
                args.config,
                overrides=overrides,
                seconds=args.seconds,
                schemes=schemes,
                on_stage=stage,
                on_note=lambda line: bar.line(line) if shown else _note(line),
            )
            bar.update(total)
    except KeyboardInterrupt as e:
        # what was measured before the stop, as text (a JSON report needs every scheme)
        print("\n".join(getattr(e, "partial", [])), flush=True)
        return _stopped(e, None, "(shoal bench writes nothing)")
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0


def _note(line: str) -> None:
    """A line for the person at the terminal, beside a report read by a script."""
    print(line, file=sys.stderr, flush=True)


def _mapf(args: argparse.Namespace) -> int:
    from shoal.mapf.evaluate import eval_command

    eval_command(parse_options(MapfEvalOptions, args))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shoal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    handlers = {
        "train": _train,
        "tune": _tune,
        "bench": _bench,
        "eval": _eval,
        "export": _export,
        "plot": _plot,
        "upgrade": _upgrade,
        "sudoku": _sudoku,
        "mapf": _mapf,
    }
    try:
        return handlers[args.command](args)
    except ShoalError as e:
        print(f"shoal: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
