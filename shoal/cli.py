"""The ``shoal`` command line: train, eval, plot.

Any bad input (config key, value, file, env id, checkpoint, run directory) prints one line
``shoal: error: ...`` and exits with code 2, having written nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shoal.config import describe_config, preset_names
from shoal.errors import ShoalError

__all__ = ["main"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shoal",
        description="Parallel and distributed reinforcement learning.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser(
        "train",
        help="train a DQN agent (a preset, a TOML config, or any gymnasium env id)",
        description=(
            "Train a DQN agent. CONFIG is a preset "
            f"({', '.join(preset_names())}) or a TOML file; without it the defaults below "
            "are used. Every config key can be set with --set SECTION.KEY=VALUE."
        ),
        epilog="config keys (defaults):\n" + describe_config(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("config", nargs="?", help="preset name or TOML config file")
    train.add_argument("--env", metavar="ID", help="gymnasium env id (sets env.id)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key (repeatable), e.g. --set dqn.lr=1e-3",
    )
    train.add_argument("--runner", help="training scheme (sets run.runner)")
    train.add_argument("--steps", type=_positive_int, help="env steps (sets run.total_steps)")
    train.add_argument("--seed", type=int, help="run seed (sets run.seed)")
    train.add_argument("--device", help="auto, cpu or cuda (sets run.device)")
    train.add_argument("--out", help="parent directory of run directories (sets run.out)")
    train.add_argument("--run-dir", help="exact run directory to create (must not exist)")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    ev = sub.add_parser("eval", help="evaluate a run's latest checkpoint greedily")
    ev.add_argument("run_dir", metavar="RUN_DIR")
    ev.add_argument("--episodes", type=_positive_int, default=20, help="episodes (default 20)")
    ev.add_argument("--seed", type=int, help="reset seed (default: run seed + 1)")

    pl = sub.add_parser("plot", help="redraw a run's curve.png from its metrics.csv")
    pl.add_argument("run_dir", metavar="RUN_DIR")
    return parser


def _train(args: argparse.Namespace) -> int:
    from shoal.runs import train

    overrides = list(args.overrides)
    shortcuts = {
        "env.id": args.env,
        "run.runner": args.runner,
        "run.total_steps": args.steps,
        "run.seed": args.seed,
        "run.device": args.device,
        "run.out": args.out,
    }
    # Shortcut flags go first so that an explicit --set wins.
    overrides = [
        f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"
        for k, v in shortcuts.items()
        if v is not None
    ] + overrides
    if args.no_progress:
        overrides.append("run.progress=false")
    if args.resume and (args.config or args.env or args.run_dir):
        raise ShoalError(
            "--resume continues a run with its own config; drop CONFIG/--env/--run-dir"
        )
    target = args.resume or args.run_dir
    try:
        if args.resume:
            result = train(resume=args.resume, overrides=overrides)
        else:
            result = train(args.config, overrides=overrides, run_dir=args.run_dir)
    except KeyboardInterrupt:
        where = f" in {target}" if target else ""
        print(
            f"shoal: interrupted; checkpoint saved{where}; continue with "
            "`shoal train --resume RUN_DIR`",
            file=sys.stderr,
        )
        return 130
    solved = (
        f", solved at step {result.solved_step} ({result.solved_wall_seconds:.1f} s)"
        if result.solved_step is not None
        else ""
    )
    print(
        f"run {result.run_dir}: eval return {result.eval_return:.1f}, "
        f"{result.env_steps} env steps, {result.updates} updates, "
        f"{result.wall_seconds:.1f} s{solved}"
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from shoal.runs import evaluate_run

    returns = evaluate_run(args.run_dir, args.episodes, args.seed)
    print(
        f"{len(returns)} episodes: mean {returns.mean():.2f}, std {returns.std():.2f}, "
        f"min {returns.min():.2f}, max {returns.max():.2f}"
    )
    return 0


def _plot(args: argparse.Namespace) -> int:
    from shoal.runs import plot

    print(plot(args.run_dir))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shoal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    handlers = {"train": _train, "eval": _eval, "plot": _plot}
    try:
        return handlers[args.command](args)
    except ShoalError as e:
        print(f"shoal: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
