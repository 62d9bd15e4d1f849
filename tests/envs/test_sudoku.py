"""SudokuEnv: rewards and episode ends, masks and candidates, reset options, errors, API."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from shoal.envs.sudoku import SudokuEnv
from shoal.envs.sudoku_puzzles import (
    SIZES,
    SudokuError,
    bundled_puzzles,
    candidates,
    parse_puzzle,
    solve,
)

# A solved 4x4 and puzzles made from it:
#   1 2 | 3 4
#   3 4 | 1 2
#   ----+----
#   2 1 | 4 3
#   4 3 | 2 1
SOLVED4 = "1234341221434321"
ONE_BLANK = "0234341221434321"  # only r1c1 blank (solution 1)
# r1c4 sees 1, 2 in its row and 3 in its column: placing 4 at r2c4 (valid) leaves it none.
DEAD_END = "12.........3...."


def act(row: int, col: int, digit: int, n: int = 4) -> int:
    """Action for placing ``digit`` at 0-based (row, col)."""
    return (row * n + col) * n + digit - 1


def test_valid_placement_continues_and_updates_everything():
    env = SudokuEnv("12..34..........")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(act(0, 2, 3))
    assert reward == pytest.approx(0.1)
    assert (terminated, truncated) == (False, False)
    assert obs.dtype == np.int8 and obs.shape == (16,)
    assert obs[:4].tolist() == [1, 2, 3, 0]
    assert env.board[0].tolist() == [1, 2, 3, 0]
    assert np.array_equal(info["candidates"], candidates(env.board))
    assert not info["action_mask"][act(0, 2, 1) : act(0, 2, 4) + 1].any()


def test_conflict_terminates_and_shows_the_digit():
    env = SudokuEnv("12..34..........")
    env.reset()
    # 2 already in row 1.
    obs, reward, terminated, truncated, _ = env.step(act(0, 3, 2))
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert obs[3] == 2
    # Column and box conflicts too.
    for action in (act(2, 0, 3), act(1, 2, 4)):
        env.reset()
        _, reward, terminated, _, _ = env.step(action)
        assert (reward, terminated) == (-1.0, True)


def test_dead_end_terminates():
    env = SudokuEnv(DEAD_END, reward_dead_end=-0.5)
    env.reset()
    _, reward, terminated, _, info = env.step(act(1, 3, 4))
    assert (reward, terminated) == (-0.5, True)
    assert not info["candidates"][3].any() and env.board[0, 3] == 0
    # The same placement is fine while r1c4 still has a candidate.
    env.reset(options={"puzzle": "12.............."})
    _, reward, terminated, _, _ = env.step(act(1, 3, 4))
    assert (reward, terminated) == (pytest.approx(0.1), False)


def test_solving_placement_gets_reward_solved():
    env = SudokuEnv(ONE_BLANK, reward_solved=5.0)
    env.reset()
    obs, reward, terminated, truncated, info = env.step(act(0, 0, 1))
    assert (reward, terminated, truncated) == (5.0, True, False)
    assert obs.tolist() == [int(c) for c in SOLVED4]
    assert not info["action_mask"].any() and not info["candidates"].any()


def test_wrong_digit_on_last_blank_is_a_conflict_not_solved():
    env = SudokuEnv(ONE_BLANK)
    env.reset()
    _, reward, terminated, _, _ = env.step(act(0, 0, 4))
    assert (reward, terminated) == (-1.0, True)


def test_end_on_wrong_ends_at_a_valid_digit_that_is_not_the_solution():
    # SOLVED4 with eight blanks: unique, and r1c1 = 3 (its answer is 1) is valid and leaves
    # every blank a candidate, so without end_on_wrong nothing ends yet.
    puzzle = "...4.41..14343.1"
    assert solve(puzzle)[0] == 1
    env = SudokuEnv(puzzle, end_on_wrong=True, reward_dead_end=-0.5)
    env.reset()
    assert env.step(act(0, 0, 1))[1:3] == (pytest.approx(0.1), False)
    env.reset()
    # r1c1 = 3 conflicts with nothing yet (3 is a candidate there) but is not the answer.
    _, reward, terminated, _, info = env.step(act(0, 0, 3))
    assert (reward, terminated, info["wrong"]) == (-0.5, True, True)
    # Without it the same digit is a valid placement that carries on.
    plain = SudokuEnv(puzzle)
    plain.reset()
    _, reward, terminated, _, info = plain.step(act(0, 0, 3))
    assert (reward, terminated) == (pytest.approx(0.1), False) and "wrong" not in info


def test_end_on_wrong_with_several_solutions_searches_after_each_digit():
    # Two grids complete this one: no digit is wrong while one of them still fits.
    puzzle = "...4...2..434321"
    assert solve(puzzle)[0] == 2
    env = SudokuEnv(puzzle, end_on_wrong=True, reward_dead_end=-0.5)
    env.reset()
    _, reward, terminated, _, info = env.step(act(0, 0, 1))
    assert (reward, terminated, info["wrong"]) == (pytest.approx(0.1), False, False)
    # r2c2 = 1 is a candidate and leaves every blank one, but no grid completes the board.
    env.reset()
    _, reward, terminated, _, info = env.step(act(1, 1, 1))
    assert (reward, terminated, info["wrong"]) == (-0.5, True, True)
    assert solve(env.board)[0] == 0
    plain = SudokuEnv(puzzle)
    plain.reset()
    assert plain.step(act(1, 1, 1))[1:3] == (pytest.approx(0.1), False)


def test_end_on_wrong_refuses_a_puzzle_with_no_solution():
    # Valid givens (no conflict) that no grid completes: r1c4 needs 3 or 4 in row 1, but
    # column 4 already has 3 and 4.
    env = SudokuEnv("12.....3.......4", end_on_wrong=True)
    with pytest.raises(SudokuError, match="no solution"):
        env.reset()


def test_following_the_solution_solves_a_9x9():
    puzzle = bundled_puzzles("medium9")[0]
    _, solution = solve(puzzle)
    env = SudokuEnv(puzzle)
    env.reset()
    blanks = np.flatnonzero(puzzle.reshape(-1) == 0)
    rewards = []
    for cell in blanks:
        r, c = divmod(int(cell), 9)
        _, reward, terminated, truncated, _ = env.step(act(r, c, int(solution[r, c]), n=9))
        rewards.append(reward)
        assert terminated == (len(rewards) == len(blanks)) and not truncated
    assert rewards[:-1] == [pytest.approx(0.1)] * (len(blanks) - 1)
    assert rewards[-1] == 1.0
    assert np.array_equal(env.board, solution)


def expected_step(board: np.ndarray, cell: int, digit: int) -> tuple[str, bool]:
    """Slow reference for the outcome of one placement."""
    n = board.shape[0]
    conflict = not candidates(board)[cell, digit - 1]
    after = board.copy()
    after.flat[cell] = digit
    if conflict:
        return "conflict", True
    if not (after == 0).any():
        return "solved", True
    blanks = np.flatnonzero(after.reshape(-1) == 0)
    cand = candidates(after)
    if any(not cand[b].any() for b in blanks):
        return "dead_end", True
    assert n in SIZES
    return "valid", False


@pytest.mark.parametrize("name", ["easy4", "easy9"])
def test_random_masked_play_matches_reference(name):
    rewards = {"valid": 0.25, "conflict": -2.0, "dead_end": -3.0, "solved": 7.0}
    rng = np.random.default_rng(0)
    puzzles = bundled_puzzles(name)[:20]
    for puzzle in puzzles:
        env = SudokuEnv(puzzle, **{f"reward_{k}": v for k, v in rewards.items()})
        _, info = env.reset()
        terminated = False
        while not terminated:
            # Prefer candidate digits so episodes run long enough to reach dead ends.
            pool = info["candidates"].reshape(-1) if rng.random() < 0.9 else info["action_mask"]
            if not pool.any():
                pool = info["action_mask"]
            action = int(rng.choice(np.flatnonzero(pool)))
            n = env.size
            before = env.board
            kind, end = expected_step(before, action // n, action % n + 1)
            _, reward, terminated, _, info = env.step(action)
            assert (reward, terminated) == (rewards[kind], end)
            assert np.array_equal(info["candidates"], candidates(env.board))
            assert np.array_equal(info["action_mask"], np.repeat(env.board.reshape(-1) == 0, n))


def test_action_mask_covers_every_digit_of_every_blank():
    env = SudokuEnv("12..34..........")
    _, info = env.reset()
    mask = info["action_mask"]
    assert mask.dtype == bool and mask.shape == (64,)
    blank = env.board.reshape(-1) == 0
    assert np.array_equal(mask.reshape(16, 4), np.repeat(blank[:, None], 4, axis=1))
    # Conflicting digits are not masked: r1c3 may take 3 or 4, but 1 and 2 stay allowed.
    assert mask[act(0, 2, 1)] and mask[act(0, 2, 2)]
    assert info["candidates"][2].tolist() == [False, False, True, True]


def test_info_arrays_are_fresh_copies():
    env = SudokuEnv("12..34..........")
    _, info = env.reset()
    info["candidates"][:] = False
    info["action_mask"][:] = False
    _, reward, _, _, info2 = env.step(act(0, 2, 3))
    assert reward == pytest.approx(0.1)  # the env's own candidates were not touched
    assert info2["candidates"] is not info["candidates"]


def test_reset_with_options_and_back_to_constructor_puzzle():
    env = SudokuEnv("12..34..........")
    other = "...............4"
    obs, _ = env.reset(options={"puzzle": other})
    assert obs.tolist() == [0] * 15 + [4]
    assert np.array_equal(env.puzzle, parse_puzzle(other))
    array = parse_puzzle(SOLVED4)
    array[0, 0] = 0
    obs, _ = env.reset(options={"puzzle": array})  # an array works as well as a string
    assert obs.tolist() == [0] + [int(c) for c in SOLVED4[1:]]
    obs, _ = env.reset()
    assert obs[:4].tolist() == [1, 2, 0, 0]
    obs, _ = env.reset(options={})
    assert obs[:4].tolist() == [1, 2, 0, 0]


def test_reset_errors():
    with pytest.raises(SudokuError, match="no puzzle"):
        SudokuEnv().reset()
    env = SudokuEnv(size=4)
    with pytest.raises(SudokuError, match=r'options\["puzzle"\] is 9x9 but this env is 4x4'):
        env.reset(options={"puzzle": "." * 81})
    with pytest.raises(SudokuError, match="no blank cell"):
        env.reset(options={"puzzle": SOLVED4})
    with pytest.raises(SudokuError, match="appears twice"):
        env.reset(options={"puzzle": "11.............."})


def test_filled_cell_is_an_illegal_action():
    env = SudokuEnv("12..34..........")
    env.reset()
    with pytest.raises(
        SudokuError, match=r"action 1 places digit 2 in r1c1, which already holds 1"
    ):
        env.step(act(0, 0, 2))
    # The failed step changed nothing: the episode goes on.
    _, reward, terminated, _, _ = env.step(act(0, 2, 3))
    assert (reward, terminated) == (pytest.approx(0.1), False)
    with pytest.raises(SudokuError, match=r"action 64 is outside 0\.\.63"):
        env.step(64)
    with pytest.raises(SudokuError, match="outside"):
        env.step(-1)


def test_step_before_reset_and_after_the_end():
    env = SudokuEnv(ONE_BLANK)
    with pytest.raises(SudokuError, match="call reset"):
        env.step(0)
    env.reset()
    env.step(act(0, 0, 1))
    with pytest.raises(SudokuError, match="episode has ended"):
        env.step(act(0, 0, 1))


def test_spaces_size_and_properties():
    env9 = SudokuEnv()
    assert env9.size == 9 and env9.puzzle is None
    assert env9.action_space.n == 729
    assert env9.observation_space.shape == (81,) and env9.observation_space.dtype == np.int8
    env = SudokuEnv("12..34..........")
    assert env.size == 4 and env.action_space.n == 64
    assert env.observation_space.high.max() == 4
    with pytest.raises(SudokuError, match="call reset"):
        _ = env.board
    obs, _ = env.reset()
    assert obs in env.observation_space
    board = env.board
    board[0, 2] = 3  # a copy: the env is unaffected
    assert env.board[0, 2] == 0
    assert env.puzzle.dtype == np.int8 and env.puzzle.shape == (4, 4)


def test_constructor_errors():
    with pytest.raises(SudokuError, match="size must be 9 or 4"):
        SudokuEnv(size=5)
    with pytest.raises(SudokuError, match="puzzle is 4x4 but size=9"):
        SudokuEnv("." * 16, size=9)
    with pytest.raises(SudokuError, match="render_mode"):
        SudokuEnv(size=4, render_mode="human")
    with pytest.raises(SudokuError, match="characters"):
        SudokuEnv("123")


def test_render_ansi():
    env = SudokuEnv("12..34.........1", render_mode="ansi")
    env.reset()
    assert env.render() == "1 2 | . .\n3 4 | . .\n----+----\n. . | . .\n. . | . 1\n"
    env9 = SudokuEnv(bundled_puzzles("easy9")[0], render_mode="ansi")
    env9.reset()
    lines = env9.render().splitlines()
    assert len(lines) == 11 and lines[3] == "------+-------+------"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert SudokuEnv(size=4).render() is None


@pytest.mark.parametrize("n", [4, 9])
def test_passes_gymnasium_env_checker(n):
    # check_env steps with unmasked random actions, which must not hit a filled cell, so
    # it runs on an all-blank board.
    env = SudokuEnv("0" * (n * n))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    assert not caught, [str(w.message) for w in caught]


def test_step_is_fast():
    puzzle = bundled_puzzles("easy9")[0]
    _, solution = solve(puzzle)
    blanks = np.flatnonzero(puzzle.reshape(-1) == 0)
    actions = [int(c) * 9 + int(solution.flat[c]) - 1 for c in blanks]
    env = SudokuEnv(puzzle)
    steps, start = 0, time.perf_counter()
    for _ in range(20):
        env.reset()
        for a in actions:
            env.step(a)
        steps += len(actions)
    per_step = (time.perf_counter() - start) / steps
    # Measured ~12 us with candidates; loose so a busy CI machine does not fail it.
    assert per_step < 500e-6
