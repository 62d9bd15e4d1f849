"""The parallel Sudoku solver: worker processes learning into one shared Q-table.

The puzzles are split into contiguous chunks, one per worker process (spawned). Each
worker plays its puzzles in order, up to ``episodes_per_puzzle`` episodes each until the
first solve, and learns into the table with :class:`~shoal.tabular.sudoku_agent.SudokuQAgent`.
With the shared table (the default) every worker reads and updates one
:class:`~shoal.tabular.SharedQTable`, so what one worker learns helps all the others;
with ``independent=True`` each worker has a private table, for comparison.

A run writes a run directory the way ``shoal train`` does
(:class:`~shoal.run.directory.RunDir`, ``OUT/NAME-TIME/`` or an exact path that must not
exist): ``config.toml`` (the ``[sudoku]`` section; :func:`load_sudoku_config` reads it back
through the one config system) and ``metrics.csv`` (:class:`~shoal.run.metrics.MetricsWriter`,
mirrored to TensorBoard in ``tb/``) with one ``puzzle`` row per puzzle as the workers report
them: ``step`` is the episodes played so far by all workers, then ``puzzle`` (id), ``worker``,
``episodes`` (played on it), ``episodes_to_first_solve`` (empty if unsolved) and ``solved``
(0/1). Its own files sit beside them: ``puzzles.txt`` (the puzzles, in id order) and
``table.npz`` (or ``table-w{i}.npz``, one per worker, when independent). Files written
whole are written atomically; what was learned and logged is kept after Ctrl-C or a
failure.
"""

from __future__ import annotations

import queue as queue_mod
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shoal.agent.qlearning import make_alpha
from shoal.config import (
    INT64_MAX,
    MAX_COUNT,
    MAX_STEPS,
    load_section,
    param,
    save_config,
    validate_fields,
)
from shoal.envs.sudoku import SudokuEnv
from shoal.envs.sudoku_puzzles import format_puzzle, save_puzzles
from shoal.errors import ConfigError, ShoalError
from shoal.run.directory import RunDir
from shoal.run.metrics import MetricsWriter
from shoal.run.progress import TrainProgress
from shoal.run.seeding import derive_seed
from shoal.sync.workers import SPAWN, child_prologue, stop_processes
from shoal.tabular import LOCK_MODES, SharedQTable
from shoal.tabular.sudoku_agent import SudokuQAgent
from shoal.tabular.sudoku_features import ENCODERS, make_encoder

__all__ = [
    "PUZZLES_FILE",
    "SECTION",
    "TABLE_FILE",
    "PuzzleRow",
    "SudokuConfig",
    "SudokuResult",
    "load_sudoku_config",
    "solve_sudoku",
    "train_sudoku",
]

SECTION = "sudoku"
"""The config section: ``[sudoku]`` in TOML, ``--set sudoku.KEY=VALUE`` (or ``KEY=VALUE``)."""
PUZZLES_FILE = "puzzles.txt"
"""The run's puzzles, one per line in id order, inside the run directory."""
TABLE_FILE = "table.npz"
"""The learned shared table inside the run directory (``table-w{i}.npz`` when independent)."""

_STOP_GRACE_S = 10.0  # seconds workers get to finish after a stop, before they are killed


@dataclass
class SudokuConfig:
    """Settings of a parallel Sudoku run."""

    workers: int = param(2, gt=0, le=MAX_COUNT)
    """Worker processes; each gets one contiguous chunk of the puzzles."""
    episodes_per_puzzle: int = param(30, gt=0, le=MAX_STEPS)
    """Most episodes a worker spends on one puzzle (it moves on at the first solve)."""
    encoder: str = param("local", choices=tuple(ENCODERS))
    """Table key: 'local' (cell/digit constraint features, transfers across puzzles) or
    'exact' (whole board, cannot transfer)."""
    lock: str = param("striped", choices=LOCK_MODES)
    """Shared table locking: 'global', 'striped' or 'none' (Hogwild: loses updates)."""
    independent: bool = False
    """Give each worker a private table instead of the shared one (for comparison)."""
    capacity: int = param(2_000_000, gt=0, le=2**40)
    """State-action pairs the table can hold (the exact encoder needs many)."""
    gamma: float = param(0.5, ge=0.0, le=1.0)
    """Discount. A local key is shared by boards far apart in how much is left to solve,
    so a long horizon ranks a certain placement by what follows it (a board that then
    needs a guess) below a likely-wrong guess: at 0.99 some hidden singles learned -0.8
    and a two-way guess +0.3. At 0.5 the ranking stays about the placement itself."""
    alpha: str = param("harmonic", choices=("inverse", "harmonic", "constant"))
    """Step-size schedule: 1/n, c/(c+n) or constant."""
    alpha_value: float = param(10.0, gt=0.0, le=1e6)
    """c of the harmonic schedule, or the constant step size (<= 1); at most 1e6, where
    c/(c+n) stays about 1 for any count a run reaches."""
    epsilon: float = param(0.0, ge=0.0, le=1.0)
    """Probability of a random legal action while learning."""
    bonus: float = param(1.0, ge=0.0, le=1000.0)
    """Count-based exploration bonus beta / sqrt(N + 1); with a shared table the counts,
    and so the exploration left to do, are shared too (at most 1000: the rewards are within
    [-1, 1], and 1000 already drowns them)."""
    end_on_wrong: bool = True
    """End a training episode at the first placement that is not the puzzle's solution,
    rewarded as a dead end (:class:`~shoal.envs.sudoku.SudokuEnv`'s ``end_on_wrong``): the
    blame lands on the wrong guess instead of the forced move that finds it out. Training
    only (greedy solving never reads the answer); puzzles must have one solution."""
    seed: int = param(0, ge=0, le=INT64_MAX)
    """Seed of the workers' random choices."""
    worker_timeout: float = param(600.0, gt=0.0, le=86400.0)
    """Seconds without a report from any worker before the run is declared stuck."""
    progress: bool = True
    """Show a progress bar."""
    out: str = "runs"
    """Directory under which run directories are created."""
    name: str = "sudoku"
    """Run name; the run directory is OUT/NAME-TIME."""

    def validate(self) -> SudokuConfig:
        """Check every field; raise ConfigError naming the first bad one."""
        validate_fields(self, f"{SECTION}.")
        if self.alpha == "constant" and self.alpha_value > 1:
            raise ConfigError(
                f"config key '{SECTION}.alpha_value': {self.alpha_value} is out of range for "
                "a constant step size (alpha = 'constant'); allowed: <= 1"
            )
        return self


@dataclass(frozen=True)
class PuzzleRow:
    """One puzzle's outcome in training."""

    puzzle: int
    worker: int
    episodes: int | None
    """Episodes to the first solve (None: not solved within episodes_per_puzzle)."""
    solved: bool


@dataclass(frozen=True)
class SudokuResult:
    """What a parallel Sudoku run reports."""

    run_dir: str
    rows: list[PuzzleRow]
    wall_seconds: float
    table_size: int
    """State-action pairs in the shared table (sum over workers when independent)."""

    @property
    def solve_rate(self) -> float:
        """Fraction of puzzles solved during training."""
        return sum(r.solved for r in self.rows) / max(len(self.rows), 1)

    def mean_episodes(self, cap: int) -> float:
        """Mean episodes to first solve, counting an unsolved puzzle as ``cap``."""
        return float(np.mean([r.episodes if r.solved else cap for r in self.rows]))


def _make_agent(table: Any, cfg: SudokuConfig) -> SudokuQAgent:
    return SudokuQAgent(
        table,
        make_encoder(cfg.encoder),
        gamma=cfg.gamma,
        alpha=make_alpha(cfg.alpha, cfg.alpha_value),
        epsilon=cfg.epsilon,
        bonus=cfg.bonus,
    )


def _worker(
    worker: int,
    chunk: list[tuple[int, str]],
    cfg: SudokuConfig,
    handle: Any,
    run_dir: str,
    reports: Any,
    stop: Any,
) -> None:
    """One worker process: play its chunk, report each puzzle, then 'done'. Once ``stop``
    (an Event) is set, it abandons the puzzle at hand, saves its private table if it has
    one, and reports 'done'."""
    # The parent stops the workers through ``stop`` (Ctrl-C is ignored here), so each
    # still saves what it learned.
    parent_alive = child_prologue(torch_threads=None)

    def stopped() -> bool:  # a parent killed with SIGKILL cannot set ``stop``
        return stop.is_set() or not parent_alive()

    try:
        if handle is not None:
            table = SharedQTable.attach(handle)
        else:
            table = SharedQTable(cfg.capacity, lock="none")  # private: nobody else touches it
        agent = _make_agent(table, cfg)
        rng = np.random.default_rng(derive_seed(cfg.seed, worker))
        size = 4 if len(chunk[0][1]) == 16 else 9
        env = SudokuEnv(size=size, end_on_wrong=cfg.end_on_wrong)
        for pid, text in chunk:
            first = None
            for episode in range(1, cfg.episodes_per_puzzle + 1):
                if stopped():
                    break
                if agent.run_episode(env, text, rng).solved:
                    first = episode
                    break
            if stopped():
                break
            reports.put(("puzzle", pid, worker, first))
        if handle is None:
            table.save(_table_path(run_dir, worker))
        table.close()
        reports.put(("done", worker, None, None))
    except BaseException as e:  # report, so the parent stops at once instead of waiting
        reports.put(("error", worker, repr(e), None))
        raise


def train_sudoku(
    puzzles: list[np.ndarray], cfg: SudokuConfig, run_dir: str | Path | None = None
) -> SudokuResult:
    """Train on ``puzzles`` with ``cfg.workers`` processes and write a run directory:
    ``run_dir`` exactly (it must not exist), or a new ``cfg.out/cfg.name-TIME``."""
    cfg.validate()
    if not puzzles:
        raise ShoalError("no puzzles to train on")
    if len({p.shape for p in puzzles}) != 1:
        raise ShoalError("puzzles of different sizes cannot share one run")
    workers = min(cfg.workers, len(puzzles))
    run = RunDir.create(cfg.out, cfg.name, run_dir, resumable=False)
    save_config(cfg, run.config, section=SECTION)
    save_puzzles(run.path / PUZZLES_FILE, puzzles)
    texts = [format_puzzle(p) for p in puzzles]
    chunks = [
        [(int(i), texts[i]) for i in idx] for idx in np.array_split(np.arange(len(texts)), workers)
    ]
    table = None if cfg.independent else SharedQTable(cfg.capacity, lock=cfg.lock)
    reports, stop = SPAWN.Queue(), SPAWN.Event()
    handle = None if table is None else table.handle
    procs = [
        SPAWN.Process(
            target=_worker,
            args=(w, chunks[w], cfg, handle, str(run.path), reports, stop),
            daemon=True,
        )
        for w in range(workers)
    ]
    rows: dict[int, PuzzleRow] = {}
    metrics = MetricsWriter(run.metrics, run.tensorboard)
    t0 = time.perf_counter()
    try:
        for p in procs:
            p.start()
        with TrainProgress(len(puzzles), enabled=cfg.progress, description="sudoku") as bar:
            _gather(reports, workers, cfg, rows, metrics, bar, t0)
    finally:
        stop.set()  # each worker saves its private table and leaves no table lock held
        killed = stop_processes(procs, _STOP_GRACE_S)
        # Whatever was learned and recorded so far is kept, also after Ctrl-C or a failure.
        metrics.close()
        size = 0
        if table is not None:
            # A killed worker may never release a lock it held: then read without them.
            table.save(_table_path(run.path), locked=not killed)
            size = len(table)
            table.close()
    if table is None:
        size = sum(len(SharedQTable.read(_table_path(run.path, w))["keys"]) for w in range(workers))
    return SudokuResult(
        run_dir=str(run.path),
        rows=[rows[k] for k in sorted(rows)],
        wall_seconds=time.perf_counter() - t0,
        table_size=size,
    )


def _gather(
    reports: Any,
    workers: int,
    cfg: SudokuConfig,
    rows: dict[int, PuzzleRow],
    metrics: MetricsWriter,
    bar: TrainProgress,
    t0: float,
) -> None:
    """Read the workers' reports until all are done: one metrics row per puzzle; a
    worker's error or a silence of ``worker_timeout`` stops the run."""
    done = episodes = 0
    while done < workers:
        try:
            kind, a, b, c = reports.get(timeout=cfg.worker_timeout)
        except queue_mod.Empty:
            raise ShoalError(
                f"no worker reported for {cfg.worker_timeout} s; stopping the run"
            ) from None
        if kind == "error":
            raise ShoalError(f"sudoku worker {a} failed: {b}")
        if kind == "done":
            done += 1
            continue
        row = PuzzleRow(puzzle=a, worker=b, episodes=c, solved=c is not None)
        rows[a] = row
        played = c if row.solved else cfg.episodes_per_puzzle
        episodes += played
        metrics.log(
            "puzzle",
            episodes,
            wall_s=time.perf_counter() - t0,
            puzzle=row.puzzle,
            worker=row.worker,
            episodes=played,
            episodes_to_first_solve="" if c is None else c,
            solved=int(row.solved),
        )
        solved = sum(r.solved for r in rows.values())
        bar.update(len(rows), solved=f"{solved}/{len(rows)}")


def _table_path(run_dir: str | Path, worker: int | None = None) -> Path:
    """The shared table of a run, or worker ``worker``'s private one."""
    name = TABLE_FILE if worker is None else TABLE_FILE.replace(".npz", f"-w{worker}.npz")
    return Path(run_dir) / name


def load_sudoku_config(run_dir: str | Path) -> SudokuConfig:
    """The config a Sudoku run saved: its ``config.toml``, read (and validated) by the one
    config system, so an unknown section or key is an error here as everywhere."""
    return load_section(SudokuConfig, SECTION, RunDir.open(run_dir).config)


def solve_sudoku(puzzles: list[np.ndarray], table: str | Path, *, seed: int = 0) -> list[bool]:
    """Play each puzzle once with the greedy policy of a learned table; True = solved.

    ``table`` is a run directory (its ``table.npz``, or worker 0's table when the run was
    independent) or a ``.npz`` file inside one (the encoder comes from its config.toml).
    """
    path = Path(table)
    run_dir = path if path.is_dir() else path.parent
    cfg = load_sudoku_config(run_dir)
    if path.is_dir():
        path = _table_path(path, 0 if cfg.independent else None)
    data = SharedQTable.read(path)
    with SharedQTable(max(len(data["keys"]), 1), lock="none") as learned:
        learned.load_arrays(data)
        agent = _make_agent(learned, cfg)
        rng = np.random.default_rng(seed)
        results = []
        envs: dict[int, SudokuEnv] = {}
        for p in puzzles:
            env = envs.setdefault(p.shape[0], SudokuEnv(size=p.shape[0]))
            results.append(agent.run_episode(env, p, rng, learn=False).solved)
    return results
