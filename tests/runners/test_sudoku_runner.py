"""The parallel Sudoku solver: agreement with the serial oracle, files, learning, errors."""

import numpy as np
import pytest

from shoal.agent.qlearning import make_alpha
from shoal.cli import main
from shoal.envs.sudoku import SudokuEnv
from shoal.envs.sudoku_puzzles import bundled_puzzles
from shoal.errors import RunDirError, ShoalError
from shoal.run.seeding import derive_seed
from shoal.runners.sudoku import SudokuConfig, solve_sudoku, train_sudoku
from shoal.tabular import LocalQTable, SharedQTable
from shoal.tabular.sudoku_agent import SudokuQAgent
from shoal.tabular.sudoku_features import make_encoder

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_shm_leak")]


@pytest.mark.parametrize("encoder", ["local", "exact"])
def test_one_worker_equals_serial_oracle(tmp_path, encoder):
    """A worker process on the shared table computes exactly what a plain in-process loop
    over a dict table computes: same keys, same counts, same Q-values."""
    puzzles = bundled_puzzles("easy4")[:12]
    cfg = SudokuConfig(
        workers=1,
        encoder=encoder,
        episodes_per_puzzle=20,
        progress=False,
        epsilon=0.05,
        bonus=0.2,
        seed=3,
    )
    result = train_sudoku(puzzles, cfg, tmp_path / "run")
    oracle = LocalQTable()
    agent = SudokuQAgent(
        oracle,
        make_encoder(encoder),
        gamma=cfg.gamma,
        alpha=make_alpha(cfg.alpha, cfg.alpha_value),
        epsilon=cfg.epsilon,
        bonus=cfg.bonus,
    )
    rng = np.random.default_rng(derive_seed(cfg.seed, 0))
    env = SudokuEnv(size=4)
    episodes = []
    for p in puzzles:
        first = None
        for e in range(1, cfg.episodes_per_puzzle + 1):
            if agent.run_episode(env, p, rng).solved:
                first = e
                break
        episodes.append(first)
    assert [r.episodes for r in result.rows] == episodes
    saved = SharedQTable.read(tmp_path / "run" / "table.npz")
    mine = oracle.snapshot()
    a, b = np.argsort(saved["keys"]), np.argsort(mine["keys"])
    assert np.array_equal(saved["keys"][a], mine["keys"][b])
    assert np.array_equal(saved["n"][a], mine["n"][b])
    assert np.array_equal(saved["q"][a], mine["q"][b])


def test_two_workers_shared_and_independent_files(tmp_path):
    puzzles = bundled_puzzles("easy4")[:20]
    shared = train_sudoku(puzzles, SudokuConfig(workers=2, progress=False), tmp_path / "s")
    assert {r.worker for r in shared.rows} == {0, 1}
    assert [r.puzzle for r in shared.rows] == list(range(20))
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "config.toml",
        "puzzles.csv",
        "puzzles.txt",
        "table.npz",
    ]
    lines = (tmp_path / "s" / "puzzles.csv").read_text().splitlines()
    assert lines[0] == "puzzle,worker,episodes_to_first_solve,solved" and len(lines) == 21
    indep = train_sudoku(
        puzzles, SudokuConfig(workers=2, independent=True, progress=False), tmp_path / "i"
    )
    assert (tmp_path / "i" / "table-w0.npz").is_file()
    assert (tmp_path / "i" / "table-w1.npz").is_file()
    assert indep.solve_rate == 1.0
    assert all(solve_sudoku(puzzles[:5], tmp_path / "i"))


@pytest.mark.slow
def test_learned_policy_solves_held_out_easy_puzzles(tmp_path):
    easy = bundled_puzzles("easy9")
    train_sudoku(easy[:60], SudokuConfig(workers=2, progress=False), tmp_path / "run")
    solved = solve_sudoku(easy[100:150], tmp_path / "run")
    assert np.mean(solved) >= 0.9


def test_existing_output_and_mixed_sizes_rejected(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(RunDirError, match="already exists"):
        train_sudoku(bundled_puzzles("easy4")[:2], SudokuConfig(progress=False), tmp_path / "run")
    mixed = [bundled_puzzles("easy4")[0], bundled_puzzles("easy9")[0]]
    with pytest.raises(ShoalError, match="different sizes"):
        train_sudoku(mixed, SudokuConfig(progress=False), tmp_path / "other")


def test_worker_failure_surfaces_and_stops_the_run(tmp_path):
    """A worker that fails (here: its table fills up) stops the run with its error; no
    orphan processes, no leaked shared memory, and what was learned is still saved."""
    cfg = SudokuConfig(workers=2, encoder="exact", capacity=50, progress=False)
    with pytest.raises(ShoalError, match="TableFullError"):
        train_sudoku(bundled_puzzles("easy4")[:10], cfg, tmp_path / "run")
    assert (tmp_path / "run" / "table.npz").is_file()
    import multiprocessing as mp

    assert mp.active_children() == []


def test_cli_train_solve_and_bad_input(tmp_path, capsys):
    puzzles = tmp_path / "p.txt"
    puzzles.write_text(
        "# four\n"
        + "\n".join("".join(map(str, p.reshape(-1))) for p in bundled_puzzles("easy4")[:8])
        + "\n"
    )
    out = tmp_path / "run"
    code = main(
        [
            "sudoku",
            "train",
            "--puzzles",
            str(puzzles),
            "--workers",
            "2",
            "--episodes-per-puzzle",
            "10",
            "--out",
            str(out),
            "--no-progress",
            "--set",
            "bonus=0.5",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert "shared table, striped lock" in capsys.readouterr().out
    first = "".join(map(str, bundled_puzzles("easy4")[9].reshape(-1)))
    assert main(["sudoku", "solve", first, "--table", str(out)]) == 0
    assert "solved" in capsys.readouterr().out.splitlines()[-1]
    cases = [
        (["sudoku", "solve", "123", "--table", str(out)], "3 characters"),
        (["sudoku", "solve", "1" * 16, "--table", str(out)], "twice"),
        (
            ["sudoku", "train", "--puzzles", str(puzzles), "--out", str(out), "--no-progress"],
            "already exists",
        ),
        (
            [
                "sudoku",
                "train",
                "--puzzles",
                str(puzzles),
                "--out",
                str(tmp_path / "x"),
                "--set",
                "nope=1",
            ],
            "nope",
        ),
        (
            [
                "sudoku",
                "train",
                "--puzzles",
                str(puzzles),
                "--out",
                str(tmp_path / "y"),
                "--set",
                "gamma=2",
            ],
            "sudoku.gamma",
        ),
        (
            [
                "sudoku",
                "train",
                "--puzzles",
                str(tmp_path / "missing.txt"),
                "--out",
                str(tmp_path / "z"),
            ],
            "missing.txt",
        ),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    (out / "table.npz").write_bytes(b"junk")
    assert main(["sudoku", "solve", first, "--table", str(out)]) == 2
    assert "corrupt" in capsys.readouterr().err
